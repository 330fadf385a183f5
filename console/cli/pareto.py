"""``campaign pareto [--shape SHAPE] [--box NAME] [--interactivity tpot|per-slot] [--json]``: the frontier of
output throughput per GPU against interactivity, across arms, on medians with the repeats' spread.

One point per repeat group (a lone run is a group of one, with no spread) of measured and imported rows.
A point is dominated only when another beats it beyond both spreads (better on one axis, no worse on the
other, min against max); points on the frontier whose spreads overlap share a rank. DIAGNOSTIC-ONLY and
CLIENT-BOUND groups are shown with their mark, never on the frontier. Where a run's GPUs are not recorded
(imported rows, CPU arms) y is per replica, labelled so, on a frontier of its own. The rule with a worked
example: console/readmodel/pareto.py. Where a box has a price, $/M output and total tokens at its rental
price (console/readmodel/curve_cost.py) stand beside each point. Only reads.
"""

from __future__ import annotations

import argparse
from typing import Any

from console.cli.common import Column, open_store, print_json, print_table
from console.readmodel.curve_cost import COST_DEFINITIONS
from console.readmodel.pareto import INTERACTIVITIES, Frontier, ParetoPoint, pareto

CHART_WIDTH = 72
CHART_HEIGHT = 16
LINE_STEPS = 24
"""Marks per frontier segment: enough for the line to read as one across a 72-cell chart."""
LEGEND = "*: on the frontier  o: dominated  x: left off (a mark or a missing figure)  .: the frontier"


def _spread(p: ParetoPoint, axis: str) -> str:
    s = p.x if axis == "x" else p.y
    return "-" if s is None else s.text()


def _money(value: float | None) -> str:
    return "-" if value is None else f"{value:,.3f}"


def _table(f: Frontier) -> None:
    priced = any(p.usd_per_m_out is not None for p in f.points)
    money: list[str | Column] = (
        [Column("usd_out", "$/M OUT", right=True), Column("usd_total", "$/M TOTAL", right=True)]
        if priced
        else []
    )
    print_table(
        [
            {
                "arm": p.group.arm,
                "box": p.group.box or "-",
                "c": p.group.concurrency,
                "x": _spread(p, "x"),
                "y": _spread(p, "y"),
                "standing": p.standing,
                "marks": p.group.marks,
                "usd_out": _money(p.usd_per_m_out),
                "usd_total": _money(p.usd_per_m_total),
            }
            for p in sorted(f.points, key=lambda p: (p.rank is None, p.x.median if p.x else 0.0))
        ],
        [
            "arm",
            "box",
            Column("c", "C", right=True),
            Column("x", "X (INTERACTIVITY)", right=True),
            Column("y", f"Y (OUT TOK/S PER {(f.per or 'row').upper()})", right=True),
            *money,
            Column("standing", "FRONTIER"),
            "marks",
        ],
        indent=2,
    )


def _chart(f: Frontier) -> list[str]:
    """y against x: the frontier's medians joined by a dotted line, each point marked by where it landed."""
    from console.charts import PlotPoint, scatter

    line = f.frontier
    points = [
        PlotPoint(
            a.x.median + (b.x.median - a.x.median) * k / LINE_STEPS,
            a.y.median + (b.y.median - a.y.median) * k / LINE_STEPS,
            ".",
        )
        for a, b in zip(line, line[1:], strict=False)
        if a.x and a.y and b.x and b.y
        for k in range(LINE_STEPS + 1)
    ]
    for p in sorted(f.points, key=lambda p: p.rank is not None):
        if p.x is not None and p.y is not None:
            mark = "*" if p.rank is not None else "o" if p.dominated_by is not None else "x"
            points.append(PlotPoint(p.x.median, p.y.median, mark))
    if not points:
        return []
    return scatter(points, CHART_WIDTH, CHART_HEIGHT, lambda v: f"{v:,.0f}", lambda v: f"{v:,.0f}")


def _show(f: Frontier) -> None:
    print(f"shape {f.shape}, y per {f.per or '(none recorded)'}:")
    print(f"  x: {f.x_label}")
    print(f"  y: {f.y_label}")
    _table(f)
    unpriced = sorted({p.price.why_not for p in f.points if p.price is not None and p.price.why_not})
    for why in unpriced:
        print(f"  no $/M: {why}")
    frontier = ", ".join(f"{p.name} ({p.standing})" for p in f.frontier) or "none"
    print(f"  frontier by x: {frontier}")
    rows = _chart(f)
    if rows:
        print(f"  {f.y_label.split(' = ')[0]} against {f.x_label.split(' = ')[0]} ({LEGEND})")
        for row in rows:
            print(f"  {row}")
    print()


def _run(args: argparse.Namespace) -> int:
    with open_store(args, read_only=True) as store:
        frontiers = pareto(store, args.shape, args.box, args.interactivity)
    if args.json:
        print_json(
            {
                "interactivity": args.interactivity,
                "frontiers": [f.summary() for f in frontiers],
                "definitions": {
                    "dominated": "another point's min > this one's max on one axis and its min >= this "
                    "one's max on the other (min-max of the repeats; one run: its value)",
                    "rank": "frontier points sorted by median x; consecutive ones overlapping on both axes tie",
                    "left_off": "DIAGNOSTIC-ONLY or CLIENT-BOUND groups, or groups missing a figure",
                    **{k: COST_DEFINITIONS[k] for k in ("$/M out", "$/M total")},
                },
            }
        )
        return 0
    if not frontiers:
        print("no bench rows" + (" at that shape or box" if args.shape or args.box else ""))
        return 0
    for f in frontiers:
        _show(f)
    return 0


def register(sub: argparse._SubParsersAction[Any], help_text: str) -> None:
    p = sub.add_parser(
        "pareto", help=help_text, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--shape", help="only this shape (default: a frontier per shape)")
    p.add_argument("--box", metavar="NAME", help="only rows benched on this box")
    p.add_argument(
        "--interactivity",
        choices=INTERACTIVITIES,
        default="tpot",
        help="x: tpot = 1000 / TPOT p50 (InferenceX, the default); per-slot = output tok/s / C (vLLM)",
    )
    p.add_argument("--json", action="store_true", help="points, frontier and definitions as JSON on stdout")
    p.set_defaults(func=_run)
