"""``campaign tripwire LAUNCH``: the corruption tripwire against a serving launch, with its vendor profile.

An arm that fails it has its throughput rows marked diagnostic-only in every view and export. Exit status:
0 passed, 1 failed (as ``campaign check``), 2 bad input, 3 the box could not be reached.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

from console.cli.common import max_tokens_arg, print_json
from console.cli.measure import add_wait_options, start_and_wait, ticker
from console.readmodel import TripwireRun
from console.service import Service


def show(run: TripwireRun) -> None:
    print(f"{run.arm}  tripwire {run.verdict.text}")
    print(f"  {run.served}")
    for item in run.items:
        if item.verdict != "ok" or item.reasoning_leak:
            reasons = "; ".join(item.reasons) or "reasoning leaked into the answer"
            print(f"  {item.verdict.upper():10} {item.id}: {reasons[:100]}")
    if not run.verdict.passed:
        print("  this arm's throughput rows are now marked diagnostic-only")


def _run(args: argparse.Namespace) -> int:
    def start(service: Service) -> Any:
        return service.tripwire(args.launch, args.max_tokens)

    def result(service: Service, box: str, run_id: str) -> Any:
        return service.tripwire_result(box, run_id, args.timeout, ticker(run_id))

    run = start_and_wait(args, "tripwire", start, result)
    if run is None:
        return 0
    if args.json:
        print_json(asdict(run))
    else:
        show(run)
    return 0 if run.verdict.passed else 1


def register(sub: argparse._SubParsersAction[Any], help_text: str) -> None:
    p = sub.add_parser("tripwire", help=help_text, description=help_text)
    p.add_argument(
        "launch", metavar="LAUNCH", help="a serving launch id (see `campaign box connect` / the Arms view)"
    )
    add_wait_options(p, default_timeout_s=1800)
    p.add_argument(
        "--max-tokens", type=max_tokens_arg, metavar="N", help="cap each answer (default: the tripwire's own)"
    )
    p.set_defaults(func=_run)
