"""``campaign bench ARM_OR_LAUNCH [--box B] --shape S -c C [--rate R [--burstiness K]] [--repeat N]``: the node,
measured on the box.

Every serving replica of the arm's launch on the box is benchmarked at once (one load-generator run, the C
streams dealt round-robin over them) and stored as one node row, with each replica's share as detail.
Each run gets its own seed unless ``--seed`` is given; ``--repeat N`` stores N runs as one group with its
median, min-max and coefficient of variation, which ``campaign compare`` reads. With ``--json`` stdout
is the stored row (``per_replica`` added), or for ``--repeat`` above 1 ``{"group": ..., "rows": [...]}``.
``--rate R`` releases the requests open-loop at R a second (a float; Poisson, or gamma of shape K with
``--burstiness K``), ``-c C`` then the most in flight at once; without it the C streams run back to back.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

from console import bounds
from console.cli.common import (
    argument,
    concurrency_arg,
    ms,
    print_json,
    prompts_arg,
    repeat_arg,
    run,
    say,
    seed_arg,
    store_and_service,
)
from console.cli.measure import add_wait_options, progress_line, ticker
from console.readmodel import RepeatGroup, ReplicaResult, ResultRow, replica_results


def _caching(value: bool | None) -> str:
    return "not known" if value is None else "on" if value else "off"


def show(row: ResultRow, replicas: list[ReplicaResult]) -> None:
    node = (
        f"{row.replicas} replica{'' if row.replicas == 1 else 's'}"
        if row.replicas
        else "replicas not recorded"
    )
    paced = (
        f" paced at {row.request_rate:g} req/s (burstiness {row.burstiness or 1:g})"
        if row.request_rate is not None
        else ""
    )
    print(f"{row.arm}  {row.shape} C{row.concurrency}{paced}  {node}  {row.marks}".rstrip())
    print(
        f"  out {row.out_tok_per_s or 0:,.0f} tok/s  in {row.in_tok_per_s or 0:,.0f} tok/s  "
        f"{row.req_per_s or 0:.2f} req/s  ({row.requests} requests, {row.failed} failed)"
    )
    if row.speculation:  # a drafter row: its acceptance beside the throughput it bought
        print(f"  speculation: {row.speculation}")
    print(
        f"  TTFT p50/p99 {ms(row.ttft_ms_p50)} / {ms(row.ttft_ms_p99)}  TPOT {ms(row.tpot_ms_p50)} / "
        f"{ms(row.tpot_ms_p99)}  E2E {ms(row.e2e_ms_p50)} / {ms(row.e2e_ms_p99)}"
    )
    print(f"  kernel: {row.kernel_line or 'none reported'}")
    for fallback in row.fallbacks:
        print(f"  KERNEL-FALLBACK {fallback.text}")
    limit = f"{row.power_limit_w:.0f} W" if row.power_limit_w is not None else "no GPU limit recorded"
    print(f"  power limit: {limit}   tripwire: {row.tripwire.text}")
    admits = f", a replica admits {row.admitted} streams" if row.admitted is not None else ""
    print(f"  seed {row.seed}, {row.prompts} prompts, prefix caching {_caching(row.prefix_caching)}{admits}")
    print(f"  {row.served}")
    print(f"  row {row.id}: `campaign requests {row.id} --slo ttft:MS,tpot:MS` reads its requests")
    for r in replicas if len(replicas) > 1 else []:
        print(
            f"    replica {r.replica} {r.launch_id}: {r.streams} streams, {r.requests} requests, "
            f"out {r.out_tok_per_s or 0:,.0f} tok/s, TTFT p50 {ms(r.ttft_ms_p50)}"
        )


def show_group(group: RepeatGroup) -> None:
    print(f"group {group.id}: {group.n} runs, {group.spread_text}  {group.marks}".rstrip())


def _row_json(row: ResultRow, replicas: list[ReplicaResult]) -> dict[str, Any]:
    return {**asdict(row), "per_replica": [asdict(r) for r in replicas]}


def _run(args: argparse.Namespace) -> int:
    with store_and_service(args) as (store, service):
        with progress_line():
            outcome = run(
                service,
                lambda: service.bench(
                    args.target,
                    args.box,
                    args.shape,
                    args.concurrency,
                    args.prompts,
                    args.seed,
                    args.repeat,
                    wait=not args.no_wait,
                    timeout_s=args.timeout,
                    tick=ticker("bench"),
                    rate=args.rate,
                    burstiness=args.burstiness,
                ),
            )
        if not outcome.rows:
            say(
                f"started bench {outcome.run_ids[0]}; its row lands at the next `campaign box connect {outcome.box}`"
            )
            return 0
        details = [replica_results(store, row.id) for row in outcome.rows]
    if args.json:
        rows = [_row_json(row, d) for row, d in zip(outcome.rows, details, strict=True)]
        print_json({"group": outcome.group.summary(), "rows": rows} if outcome.group else rows[0])
        return 0
    for row, detail in zip(outcome.rows, details, strict=True):
        show(row, detail)
    if outcome.group:
        show_group(outcome.group)
    return 0


def register(sub: argparse._SubParsersAction[Any], help_text: str) -> None:
    p = sub.add_parser(
        "bench", help=help_text, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "target",
        metavar="ARM_OR_LAUNCH",
        help="an arm (every serving replica of its live launch on --box) or a launch id (every replica "
        "that launch started)",
    )
    p.add_argument("--box", metavar="NAME", help="the box (required for an arm; a launch id names its own)")
    add_wait_options(p, default_timeout_s=3600)
    p.add_argument(
        "--shape", required=True, help="a workload shape from recipes/shapes.toml (router, judge, ...)"
    )
    p.add_argument(
        "--concurrency",
        "-c",
        type=concurrency_arg,
        required=True,
        metavar="C",
        help="streams in flight on the node, dealt round-robin over its replicas",
    )
    p.add_argument(
        "--rate",
        type=argument(bounds.REQUEST_RATE.parse),
        metavar="R",
        help="release the requests at R a second (open loop, e.g. 0.5), -c C the most in flight",
    )
    p.add_argument(
        "--burstiness",
        type=argument(bounds.BURSTINESS.parse),
        metavar="K",
        help="with --rate: the gamma shape of the arrival intervals (default 1, Poisson; below 1 burstier)",
    )
    p.add_argument("--prompts", type=prompts_arg, metavar="N", help="measured requests (default 8 x C)")
    p.add_argument(
        "--seed",
        type=seed_arg,
        metavar="S",
        help="replay this prompt seed (default: a new seed for every run, recorded with the row)",
    )
    p.add_argument(
        "--repeat",
        type=repeat_arg,
        default=1,
        metavar="N",
        help="N runs one after another, stored as one group with its spread (default 1)",
    )
    p.set_defaults(func=_run)
