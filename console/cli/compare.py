"""``campaign compare A B [--shape S -c C] [--box B] [--json]``: is A faster than B, or is it a tie?

A and B are bench rows (id or run id), repeat groups (``group-...``) or arms (their newest group at the
shape and concurrency). The answer reads the difference of the medians against both measured spreads
and, when a control pair (the same arm launched twice, benched alike) exists, its noise floor. A side
with one run has no spread: no verdict (exit 1). Only reads the store.

``campaign compare A B --at-interactivity X [--interactivity tpot|per-slot] | --at-slo ttft:MS,... |
--at-power W [--box B] [--shape S] [--json]``: A and B are curves (``#N``, or an arm: its newest done curve
on --box at --shape). Each curve is read at the operating point (interpolated linearly between its two
measured points around X, on its upper envelope; at an SLO its best point meeting it; never extrapolated:
outside the measured range, a refusal), with the throughput's spread, $/M tokens at the box's price (and at
goodput with --at-slo), the ratio B/A and the verdict. The rules: console/readmodel/curve_compare.py.
"""

from __future__ import annotations

import argparse
from typing import Any

from console import bounds
from console.cli.common import Column, argument, concurrency_arg, open_store, print_json, print_table
from console.errors import InputError
from console.readmodel import compare
from console.readmodel.curve_compare import (
    AXES,
    UNITS,
    ArmAt,
    Axis,
    CurveComparison,
    compare_at,
    compare_at_slo,
)
from console.readmodel.curve_cost import COST_DEFINITIONS
from console.readmodel.published import PublishedComparison, published_comparison
from console.recipes import load_catalog
from console.tails import parse_slo


def _money(value: float | None) -> str:
    return "-" if value is None else f"{value:,.3f}"


def _side_row(name: str, s: ArmAt, per_gpu: bool) -> dict[str, object]:
    y = s.per(per_gpu)
    low, high = s.measured
    return {
        "side": name,
        "arm": s.curve.arm,
        "curve": f"#{s.curve.id}",
        "range": f"{low:,.1f}-{high:,.1f}",
        "from": "+".join(k.name for k in s.neighbours),
        "y": f"{y.median:,.1f} [{y.low:,.1f}-{y.high:,.1f}]",
        "out": _money(s.usd_per_m_out),
        "total": _money(s.usd_per_m_total),
        "good": _money(s.usd_per_m_good_out),
    }


def _show_curves(r: CurveComparison, slo: bool) -> None:
    print(f"at {r.at}")
    print(f"  x: {AXES[r.axis]}")
    columns: list[str | Column] = [
        "side",
        "arm",
        "curve",
        Column("range", f"MEASURED X ({UNITS[r.axis]})", right=True),
        Column("from", "POINTS"),
        Column("y", f"OUT TOK/S PER {r.per.upper()} [MIN-MAX]", right=True),
        Column("out", "$/M OUT", right=True),
        Column("total", "$/M TOTAL", right=True),
    ]
    if slo:
        columns.append(Column("good", "$/M GOOD OUT", right=True))
    print_table([_side_row(n, s, r.per_gpu) for n, s in (("A", r.a), ("B", r.b))], columns, indent=2)
    for name, s in (("A", r.a), ("B", r.b)):
        print(f"  {name}: {s.conditions}")
        if s.price.why_not:
            print(f"  {name}: no cost: {s.price.why_not}")
        for why in s.dropped:
            print(f"  {name}: not used: {why}")
    q = r.ratio
    print(f"B/A: {q.median:.3f} [{q.low:.3f}-{q.high:.3f}]")
    print(r.text)


def _curves(args: argparse.Namespace) -> int:
    if args.concurrency is not None:
        raise InputError(
            "-c does not apply to --at-interactivity, --at-slo or --at-power: a curve spans concurrencies",
            "leave -c out; --box and --shape choose an arm's curve",
        )
    slo_text = args.at_slo
    with open_store(args, read_only=True) as store:
        if slo_text is not None:
            try:
                limits = parse_slo(slo_text)
            except ValueError as exc:
                raise InputError(
                    f"--at-slo {slo_text!r}: {exc}", "write it as ttft:300,tpot:50,e2el:2000 (ms)"
                ) from exc
            result = compare_at_slo(store, args.a, args.b, limits, slo_text, args.box, args.shape)
        elif args.at_power is not None:
            result = compare_at(store, args.a, args.b, "power", args.at_power, args.box, args.shape)
        else:
            axis: Axis = args.interactivity or "tpot"
            result = compare_at(store, args.a, args.b, axis, args.at_interactivity, args.box, args.shape)
    if args.json:
        print_json({**result.summary(), "definitions": {**COST_DEFINITIONS, **AXES}})
    else:
        _show_curves(result, slo_text is not None)
    return 1 if result.verdict == "no-verdict" else 0


def _show_published(r: PublishedComparison, as_json: bool) -> int:
    """Two imported configurations: every published reading pair, A over B, with each table's note."""
    if as_json:
        print_json(
            {
                "verdict": "published readings",
                "a": r.a,
                "b": r.b,
                "readings": [
                    {"shape": p.shape, "ratio": p.ratio, "a": p.a.text, "b": p.b.text, "text": p.text}
                    for p in r.pairs
                ],
                "notes": list(r.notes),
            }
        )
        return 0
    print(f"A {r.a}, B {r.b}: imported rows only, no repeats to judge; the published readings, A over B:")
    for p in r.pairs:
        print(f"  {p.text}")
    for note in r.notes:
        print(f"  note: {note}")
    if not r.pairs:
        print("  no shape was printed for both")
    return 0


def _run(args: argparse.Namespace) -> int:
    if args.interactivity is not None and args.at_interactivity is None:
        raise InputError(
            "--interactivity says how --at-interactivity's X is defined; it was given without it",
            "add --at-interactivity X, or leave --interactivity out",
        )
    if args.at_interactivity is not None or args.at_slo is not None or args.at_power is not None:
        return _curves(args)
    with open_store(args, read_only=True) as store:
        published = None
        if args.shape is None and args.concurrency is None:
            published = published_comparison(store, args.a, args.b, args.box)
        if published is not None:
            return _show_published(published, args.json)
        result = compare(store, args.a, args.b, args.shape, args.concurrency, args.box, load_catalog())
    if args.json:
        floor = result.floor
        print_json(
            {
                "verdict": result.verdict,
                "percent": result.percent,
                "winner": result.winner,
                "text": result.text,
                "a": result.a.summary(),
                "b": result.b.summary(),
                "noise_floor": None
                if floor is None
                else {"floor": floor.floor, "pair": [floor.a.summary(), floor.b.summary()]},
            }
        )
    else:
        for name, side in (("A", result.a), ("B", result.b)):
            print(f"{name}: {side.label}: {side.spread_text}  {side.marks}".rstrip())
            for row in side.rows:  # a drafter's acceptance (per position too) beside the throughput it bought
                if row.speculation:
                    print(f"  {name} run {row.id} speculation: {row.speculation}")
        print(result.text)
    return 1 if result.verdict == "no-verdict" else 0


def register(sub: argparse._SubParsersAction[Any], help_text: str) -> None:
    p = sub.add_parser(
        "compare", help=help_text, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("a", metavar="A", help="a bench row id or run id, a repeat group id, or an arm")
    p.add_argument("b", metavar="B", help="the same kinds as A")
    p.add_argument("--shape", help="the shape an arm's group is taken at")
    p.add_argument(
        "--concurrency",
        "-c",
        type=concurrency_arg,
        metavar="C",
        help="the concurrency an arm's group is taken at",
    )
    p.add_argument("--box", metavar="NAME", help="only an arm's rows (or curves) on this box")
    at = p.add_mutually_exclusive_group()
    at.add_argument(
        "--at-interactivity",
        type=argument(bounds.INTERACTIVITY.parse),
        metavar="X",
        help="compare A's and B's curves at X tok/s/user (interpolated; refused outside a measured range)",
    )
    at.add_argument(
        "--at-slo",
        metavar="SLO",
        help="compare each curve's best point whose pooled p99s meet ttft:MS,tpot:MS,e2el:MS; $/M at goodput",
    )
    at.add_argument(
        "--at-power",
        type=argument(bounds.AVG_POWER_W.parse),
        metavar="W",
        help="compare the curves at W of the measured GPUs' average power together",
    )
    p.add_argument(
        "--interactivity",
        choices=("tpot", "per-slot"),
        help="x of --at-interactivity: tpot = 1000 / TPOT p50 (the default); per-slot = output tok/s / C",
    )
    p.add_argument("--json", action="store_true", help="the verdict and both sides as JSON on stdout")
    p.set_defaults(func=_run)
