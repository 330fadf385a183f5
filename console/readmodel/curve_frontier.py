"""A shape's curves as points on the Pareto plane: out tok/s (per GPU when every run knows its GPUs, else per
node) against interactivity, each a spread over its repeats, and which of them stand on the frontier
(console/readmodel/pareto.py ``places``). The Curves view and the report's Curves section both read it, so
they mark the same frontier.
"""

from __future__ import annotations

from dataclasses import dataclass

from console.readmodel.curves import CurvePointView, CurveView
from console.readmodel.pareto import Interactivity, Spread, places


@dataclass(frozen=True)
class ChartPoint:
    curve: CurveView
    point: CurvePointView
    x: Spread
    y: Spread


def per_gpu(c: CurveView) -> bool:
    """Out tok/s is divided per GPU only when every measured run knows its GPUs; else it is per node."""
    runs = [r for p in c.points for r in p.runs]
    return bool(runs) and all(r.gpus for r in runs)


def chart_points(
    shape_curves: list[CurveView], interactivity: Interactivity
) -> tuple[list[ChartPoint], bool]:
    """The measured points of one shape's curves as (interactivity, out tok/s) spreads over their repeats."""
    gpu = all(per_gpu(c) for c in shape_curves)
    out = []
    for c in shape_curves:
        for p in c.points:
            xs = [
                v
                for r in p.runs
                if (v := r.interactivity_tpot if interactivity == "tpot" else r.interactivity_per_slot)
                is not None
            ]
            ys = [
                r.out_tok_per_s / (r.gpus or 1 if gpu else 1) for r in p.runs if r.out_tok_per_s is not None
            ]
            x, y = Spread.of(xs), Spread.of(ys)
            if x is not None and y is not None:
                out.append(ChartPoint(c, p, x, y))
    return out, gpu


def ranked(p: ChartPoint) -> bool:
    """Whether the point may stand on the frontier: an invalid point (console/readmodel/curve_validity.py) is
    drawn and listed with its reasons but never ranked, as pareto.py never ranks a DIAGNOSTIC-ONLY row: a
    frontier is what an operator would buy, and a point measured under a changed cap or a starved client is
    not on sale."""
    return p.point.validity is None or p.point.validity.valid


def frontier(points: list[ChartPoint]) -> set[int]:
    """Indexes of the points on the Pareto frontier among the ranked ones (pareto.py ``places``: rank set,
    not dominated)."""
    kept = [i for i, p in enumerate(points) if ranked(p)]
    placed = places([(points[i].x, points[i].y) for i in kept])
    return {i for i, pl in zip(kept, placed, strict=True) if pl.rank is not None}
