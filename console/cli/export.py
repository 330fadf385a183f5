"""``campaign export summary|kernels|economics|costbases|kldiff|curves``: the campaign's figures as TSV (default), CSV
or JSON.

``summary`` is the write-up's summary_all.tsv plus the kernel line, tripwire verdict, power limit,
client_bound and diagnostic-only mark; ``kernels`` is kernels_by_server.tsv; ``economics`` prices every
configuration on its box and against API prices (``--api-price MODEL=IN/OUT[/CACHED]``, USD per million
tokens) and marks the quality/cost frontier, on a named cost basis (``--basis``; ``--per-hour``: an hour of
output bought from an API); ``costbases`` is the cost-basis table and the break-even; ``kldiff`` is every logit-level divergence row with its
control's figures and verdict; ``curves`` is every curve, one line per run of each point (JSON: the curves,
their points and each run as ``vllm bench serve --save-result`` names its fields, which ``campaign import
vllm-bench`` reads back). ``-o FILE`` writes atomically.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from console.cli.common import open_store, utilisation_arg
from console.economics import (
    COST_BASES,
    DEFAULT_SHAPES,
    DEFAULT_UTILISATION,
    Pricing,
    check_utilisation,
    default_cost_model,
    economics_table,
    frontier_chart,
    parse_api_price,
    per_hour_table,
)
from console.errors import InputError
from console.readmodel import bench_rows, economics_inputs, kldiff_runs, launches, model_index
from ops.export import (
    COSTBASE_COLUMNS,
    CURVE_COLUMNS,
    ECONOMICS_COLUMNS,
    FORMATS,
    KERNEL_COLUMNS,
    KLDIFF_COLUMNS,
    PER_HOUR_COLUMNS,
    SUMMARY_COLUMNS,
    costbase_rows,
    curve_rows,
    curves_json,
    economics_rows,
    kernel_rows,
    kldiff_rows,
    per_hour_rows,
    read_curves,
    render,
    summary_rows,
    write_atomic,
)


def _write(text: str, output: str | None, what: str) -> int:
    write_atomic(text, output)
    if output not in (None, "-"):
        print(f"wrote {what} to {output}", file=sys.stderr)
    return 0


def _emit(args: argparse.Namespace, rows: list[dict[str, Any]], columns: tuple[str, ...]) -> int:
    return _write(render(rows, columns, args.format), args.output, f"{len(rows)} rows")


def _summary(args: argparse.Namespace) -> int:
    with open_store(args, read_only=True) as store:
        rows = summary_rows(bench_rows(store), model_index(store))
    return _emit(args, rows, SUMMARY_COLUMNS)


def _kernels(args: argparse.Namespace) -> int:
    with open_store(args, read_only=True) as store:
        rows = kernel_rows(launches(store, None, with_kernels=True))
    return _emit(args, rows, KERNEL_COLUMNS)


def _kldiff(args: argparse.Namespace) -> int:
    with open_store(args, read_only=True) as store:
        rows = kldiff_rows(kldiff_runs(store))
    return _emit(args, rows, KLDIFF_COLUMNS)


def _curves(args: argparse.Namespace) -> int:
    with open_store(args, read_only=True) as store:
        exported = read_curves(store)
    if args.format == "json":
        return _write(curves_json(exported), args.output, f"{len(exported)} curves")
    return _emit(args, curve_rows(exported), CURVE_COLUMNS)


def _economics(args: argparse.Namespace) -> int:
    prices = [parse_api_price(text) for text in args.api_price]
    utilisation = check_utilisation(args.utilisation)
    shapes = tuple(s.strip() for s in args.shapes.split(",") if s.strip())
    if args.chart and args.per_hour:
        raise InputError("--chart and --per-hour are two outputs", "give one of them")
    cost = default_cost_model()
    with open_store(args, read_only=True) as store:
        inputs = economics_inputs(store)
    print(f"node cost basis: {cost.basis_text(args.basis, utilisation)}", file=sys.stderr)
    if args.per_hour:
        pricing = Pricing(args.basis, utilisation, shapes, tuple(prices), cost)
        hours, skipped = per_hour_table(inputs, pricing)
        for reason in skipped:
            print(f"left out: {reason}", file=sys.stderr)
        return _emit(args, per_hour_rows(hours), PER_HOUR_COLUMNS)
    table, skipped = economics_table(
        inputs, utilisation=utilisation, extra_prices=prices, shapes=shapes, basis=args.basis, cost=cost
    )
    if args.chart:
        return _write(frontier_chart(table), args.output, "the frontier chart")
    for reason in skipped:
        print(f"left out: {reason}", file=sys.stderr)
    return _emit(args, economics_rows(table), ECONOMICS_COLUMNS)


def _costbases(args: argparse.Namespace) -> int:
    return _emit(args, costbase_rows(default_cost_model()), COSTBASE_COLUMNS)


def register(sub: argparse._SubParsersAction[Any], help_text: str) -> None:
    p = sub.add_parser(
        "export", help=help_text, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    kinds = p.add_subparsers(dest="what", metavar="WHAT", required=True)
    for name, func, text in (
        ("summary", _summary, "one row per (arm, shape, concurrency) run: summary_all.tsv"),
        ("kernels", _kernels, "the kernel line each server selected: kernels_by_server.tsv"),
        ("economics", _economics, "cost per million tokens on the node and from APIs; the frontier"),
        ("costbases", _costbases, "the node's cost bases (GBP and USD an active hour) and the break-even"),
        ("kldiff", _kldiff, "logit-level divergence rows, each with its control and verdict"),
        (
            "curves",
            _curves,
            "every curve: a line per run of each point; JSON: vllm bench serve's field names",
        ),
    ):
        k = kinds.add_parser(name, help=text, description=text)
        k.add_argument("--format", choices=FORMATS, default="tsv", help="output format (default tsv)")
        k.add_argument("-o", "--output", metavar="FILE", help="write to FILE atomically (default: stdout)")
        k.set_defaults(func=func)
        if name == "economics":
            k.add_argument(
                "--api-price",
                action="append",
                default=[],
                metavar="MODEL=IN/OUT[/CACHED]",
                help="an API price in USD per million tokens, replacing the stored ones for MODEL "
                "(repeatable), e.g. GLM-5.3-Flash=0.15/0.50/0.03",
            )
            k.add_argument(
                "--utilisation",
                type=utilisation_arg,
                default=DEFAULT_UTILISATION,
                metavar="U",
                help="share of the paid hours the node works, 0-1 (default 0.7)",
            )
            k.add_argument(
                "--shapes",
                default=",".join(DEFAULT_SHAPES),
                metavar="S1,S2",
                help="the shapes averaged per request (default router,promptopt)",
            )
            k.add_argument(
                "--chart",
                action="store_true",
                help="draw the quality/cost frontier as a text chart instead of the table",
            )
            k.add_argument(
                "--basis",
                choices=COST_BASES,
                default="list",
                help="the cost basis of boxes bought on the cost model (default list: Scan list); rented and "
                "own-priced boxes keep their price",
            )
            k.add_argument(
                "--per-hour",
                action="store_true",
                help="an hour of each configuration's output at each shape, bought from each API price",
            )
