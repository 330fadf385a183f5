"""``campaign bench LAUNCH --shape SHAPE --concurrency C``: one benchmark row, measured on the box."""

from __future__ import annotations

import argparse
from typing import Any

from console.cli.common import CliError
from console.cli.measure import add_wait_options, run_and_wait
from console.service import Service


def _show(row: dict[str, Any]) -> None:
    marks = [m for m, on in (("CLIENT-BOUND", row["client_bound"]), ("DIAGNOSTIC ONLY", row["diagnostic_only"]),
                             ("QUEUEING", row["queueing"])) if on]  # fmt: skip
    print(f"{row['arm']}  {row['shape']} C{row['concurrency']}  {' '.join(marks)}".rstrip())
    print(f"  out {row['out_tok_per_s'] or 0:,.0f} tok/s  in {row['in_tok_per_s'] or 0:,.0f} tok/s  "
          f"{row['req_per_s'] or 0:.2f} req/s  ({row['requests']} requests, {row['failed']} failed)")  # fmt: skip
    print(f"  TTFT p50/p99 {row['ttft_ms_p50']}/{row['ttft_ms_p99']} ms  TPOT {row['tpot_ms_p50']}/"
          f"{row['tpot_ms_p99']} ms  E2E {row['e2e_ms_p50']}/{row['e2e_ms_p99']} ms")  # fmt: skip
    print(f"  kernel: {row['kernel_line'] or 'none reported'}")
    limit = f"{row['power_limit_w']:.0f} W" if row["power_limit_w"] is not None else "no GPU limit recorded"
    print(f"  power limit: {limit}   tripwire: {'not run' if row['tripwire_id'] is None else '#' + str(row['tripwire_id'])}")


def _run(args: argparse.Namespace) -> int:
    if args.concurrency < 1:
        raise CliError("--concurrency must be 1 or more")

    def start(service: Service) -> Any:
        return service.bench(args.launch, args.shape, args.concurrency, args.prompts, args.seed)

    return run_and_wait(args, "bench", start, _show)


def register(sub: argparse._SubParsersAction, help_text: str) -> None:
    p = sub.add_parser("bench", help=help_text, description=help_text)
    add_wait_options(p, default_timeout_s=3600)
    p.add_argument("--shape", required=True, help="a workload shape from recipes/shapes.toml (router, judge, ...)")
    p.add_argument("--concurrency", "-c", type=int, required=True, metavar="C")
    p.add_argument("--prompts", type=int, metavar="N", help="prompts to send (default: several times C)")
    p.add_argument("--seed", type=int, default=0, help="the run's seed (recorded with the row)")
    p.set_defaults(func=_run)
