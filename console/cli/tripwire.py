"""``campaign tripwire LAUNCH``: the corruption tripwire against a serving launch, with its vendor profile.

An arm that fails it has its throughput rows marked diagnostic-only in every view and export.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from console.cli.measure import add_wait_options, run_and_wait
from console.service import Service
from console.store.results import tripwire_verdict


def _show(row: dict[str, Any]) -> None:
    verdict = tripwire_verdict(row["ok"], row["degenerate"], row["wrong"], row["total"], row["passed"],
                               row["reasoning_leak"])  # fmt: skip
    print(f"{row['arm']}  tripwire {verdict}")
    for item in json.loads(row["items"] or "[]"):
        if item.get("verdict") != "ok" or item.get("reasoning_leak"):
            reasons = "; ".join(item.get("reasons") or []) or "reasoning leaked into the answer"
            print(f"  {item['verdict'].upper():10} {item['id']}: {reasons[:100]}")
    if not row["passed"]:
        print("  this arm's throughput rows are now marked diagnostic-only")


def _run(args: argparse.Namespace) -> int:
    def start(service: Service) -> Any:
        return service.tripwire(args.launch, args.max_tokens)

    return run_and_wait(args, "tripwire", start, _show)


def register(sub: argparse._SubParsersAction, help_text: str) -> None:
    p = sub.add_parser("tripwire", help=help_text, description=help_text)
    add_wait_options(p, default_timeout_s=1800)
    p.add_argument("--max-tokens", type=int, metavar="N", help="cap each answer (default: the tripwire's own)")
    p.set_defaults(func=_run)
