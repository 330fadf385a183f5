"""``campaign bench LAUNCH --shape SHAPE --concurrency C``: one benchmark row, measured on the box."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

from console.cli.common import ms, print_json
from console.cli.measure import add_wait_options, start_and_wait, ticker
from console.readmodel import ResultRow
from console.service import Service


def show(row: ResultRow) -> None:
    print(f"{row.arm}  {row.shape} C{row.concurrency}  {row.marks}".rstrip())
    print(f"  out {row.out_tok_per_s or 0:,.0f} tok/s  in {row.in_tok_per_s or 0:,.0f} tok/s  "
          f"{row.req_per_s or 0:.2f} req/s  ({row.requests} requests, {row.failed} failed)")  # fmt: skip
    print(f"  TTFT p50/p99 {ms(row.ttft_ms_p50)} / {ms(row.ttft_ms_p99)}  TPOT {ms(row.tpot_ms_p50)} / "
          f"{ms(row.tpot_ms_p99)}  E2E {ms(row.e2e_ms_p50)} / {ms(row.e2e_ms_p99)}")  # fmt: skip
    print(f"  kernel: {row.kernel_line or 'none reported'}")
    limit = f"{row.power_limit_w:.0f} W" if row.power_limit_w is not None else "no GPU limit recorded"
    print(f"  power limit: {limit}   tripwire: {row.tripwire.text}")
    print(f"  {row.served}")


def _run(args: argparse.Namespace) -> int:
    def start(service: Service) -> Any:
        return service.bench(args.launch, args.shape, args.concurrency, args.prompts, args.seed)

    def result(service: Service, box: str, run_id: str) -> Any:
        return service.bench_result(box, run_id, args.timeout, ticker(run_id))

    row = start_and_wait(args, "bench", start, result)
    if row is None:
        return 0
    if args.json:
        print_json(asdict(row))
    else:
        show(row)
    return 0


def register(sub: argparse._SubParsersAction[Any], help_text: str) -> None:
    p = sub.add_parser("bench", help=help_text, description=help_text)
    add_wait_options(p, default_timeout_s=3600)
    p.add_argument("--shape", required=True, help="a workload shape from recipes/shapes.toml (router, judge, ...)")
    p.add_argument("--concurrency", "-c", type=int, required=True, metavar="C")
    p.add_argument("--prompts", type=int, metavar="N", help="prompts to send (default: several times C)")
    p.add_argument("--seed", type=int, default=0, help="the run's seed (recorded with the row)")
    p.set_defaults(func=_run)
