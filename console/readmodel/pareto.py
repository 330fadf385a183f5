"""The Pareto frontier of output throughput per GPU against interactivity, on medians with their spreads.

A frontier drawn through single numbers promotes noise: two arms a few per cent apart on a quiet box swap
places from one night to the next, and a plot that keeps a point because it ties another on y (vLLM's
``plot_pareto``, vllm#55561) calls a dominated configuration a winner. So every point here is a repeat
group (a lone run is a group of one, with no spread), each axis is its runs' median with their min-max,
and a point is dominated only when another beats it beyond both spreads.

Axes (maximise both):

- x, interactivity in tok/s/user: ``tpot`` (default) is 1000 / TPOT p50 of each run (InferenceX's
  definition); ``per-slot`` is output tok/s / concurrency (vLLM ``plot_pareto``'s).
- y, output tok/s per GPU: a run's output tok/s over the GPUs of the launches it measured
  (``energy.measured_gpus``: bench_replicas -> launches.gpus, the GPUs its energy sums). When those are not
  known (an imported row, a CPU arm) y is per replica (the row's ``replicas``) and the point says so. A
  per-replica number is not a per-GPU one, so such points get their own frontier (per shape and
  denominator), labelled "per replica", never mixed into the per-GPU one; a group with neither is shown
  and left off with the reason.

Dominance, on each group's min-max (a group of one: its single value for both): Q dominates P when
``Q.x.low > P.x.high and Q.y.low >= P.y.high``, or ``Q.y.low > P.y.high and Q.x.low >= P.x.high``.
Better on one axis beyond the spreads and no worse on the other beyond them. The relation is a strict
partial order (irreflexive because low <= high, transitive through the chained bounds), so every dominated
point is dominated by some frontier point, which is the one named as its dominator.

The frontier is the set of non-dominated eligible points, sorted by median x (the throughput end first).
Ranks count along it; consecutive frontier points whose spreads overlap on both axes are a tie and share a
rank (a point that overlaps any point of the current rank joins it). Rows marked DIAGNOSTIC-ONLY (a failed
tripwire) or CLIENT-BOUND (the load generator was the bottleneck) are shown with their mark and never on
the frontier; neither do they dominate anything. So is a group with a run the curve validity rules judge
invalid (console/readmodel/curve_validity.py: a power limit changed, samples missing, clocks slowed by
heat, a concurrency not achieved, failed requests), shown with its first reason.

Worked example (x, y as median [min-max]):

- A: x 20 [19-21], y 900 [880-920]
- B: x 40 [38-42], y 600 [590-610]
- C: x 41 [39-43], y 605 [595-615]: overlaps B on both axes; B and C tie and share a rank
- D: x 30 [30-30], y 600 [600-600], one run: B's x low 38 > 30 and B's y low 590 >= 600? no;
  C's x low 39 > 30 and 595 >= 600? no; A's y low 880 > 600 and A's x low 19 >= 30? no. D is on the frontier
  (rank 2, between A and B/C by median x; its spreads touch neither, so it is its own rank and B/C are 3).
- E: x 20 [20-20], y 600 [600-600], one run: B's x low 38 > 20 and 590 >= 600? no; D's x low 30 > 20 and
  D's y low 600 >= 600: yes. E is "dominated by D", the equal-y, lower-x case vllm#55561 keeps.

Cost beside each point (``curve_cost.py``): $/M output and total tokens at the median output and total
tok/s of its runs and the box's price per hour; blank, with the reason, where the box has no price.

Only reads.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal, NamedTuple

from console.readmodel.compare import repeat_groups
from console.readmodel.curve_cost import BoxPrice, box_price, usd_per_m
from console.readmodel.curve_validity import run_validity
from console.readmodel.energy import measured_gpus
from console.readmodel.records import RepeatGroup, ResultRow
from console.readmodel.results import bench_rows
from console.store import Store

Interactivity = Literal["tpot", "per-slot"]
INTERACTIVITIES: tuple[Interactivity, ...] = ("tpot", "per-slot")
X_DEFINITIONS: dict[Interactivity, str] = {
    "tpot": "interactivity = 1000 / TPOT p50 (tok/s/user; InferenceX)",
    "per-slot": "interactivity = output tok/s / concurrency (tok/s/user; vLLM plot_pareto)",
}
Per = Literal["GPU", "replica"]
Y_DEFINITIONS: dict[Per, str] = {
    "GPU": "output tok/s per GPU = output tok/s / GPUs of the launches the run measured",
    "replica": "output tok/s per replica = output tok/s / serving replicas (the GPUs are not recorded)",
}
EXCLUDING_MARKS = ("DIAGNOSTIC-ONLY", "CLIENT-BOUND")
"""Marks that keep a group off the frontier: its number is not the server's."""


@dataclass(frozen=True)
class Spread:
    """A median with its runs' min-max; a single run has low == median == high and ``n`` 1 (no spread)."""

    median: float
    low: float
    high: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread | None:
        if not values:
            return None
        return cls(statistics.median(values), min(values), max(values), len(values))

    def overlaps(self, other: Spread) -> bool:
        return self.low <= other.high and other.low <= self.high

    def text(self) -> str:
        if self.n < 2:
            return f"{self.median:,.1f} (one run)"
        return f"{self.median:,.1f} [{self.low:,.1f}-{self.high:,.1f}]"

    def summary(self) -> dict[str, float | int]:
        return {"median": self.median, "min": self.low, "max": self.high, "n": self.n}


Box2 = tuple[Spread, Spread]
"""A point as (x, y) spreads."""


def dominates(q: Box2, p: Box2) -> bool:
    """Whether ``q`` beats ``p`` beyond both spreads: better on one axis (its low over ``p``'s high), and no
    worse on the other (its low at least ``p``'s high). See the module docstring."""
    (qx, qy), (px, py) = q, p
    return (qx.low > px.high and qy.low >= py.high) or (qy.low > py.high and qx.low >= px.high)


class Place(NamedTuple):
    """Where one point lands: its frontier rank, or the index of a frontier point that dominates it."""

    rank: int | None
    dominated_by: int | None


def places(points: Sequence[Box2]) -> list[Place]:
    """The frontier of ``points`` (all eligible): ranks along it by median x, ties sharing a rank, and for
    every other point the first frontier point (in frontier order) that dominates it."""
    on = [i for i, p in enumerate(points) if not any(dominates(q, p) for q in points)]
    on.sort(key=lambda i: (points[i][0].median, -points[i][1].median))
    out = [Place(None, None)] * len(points)
    rank, current = 0, list[int]()
    for i in on:
        if not any(all(points[i][k].overlaps(points[j][k]) for k in (0, 1)) for j in current):
            rank, current = rank + 1, []
        current.append(i)
        out[i] = Place(rank, None)
    for i, p in enumerate(points):
        if out[i].rank is None:
            out[i] = Place(None, next(j for j in on if dominates(points[j], p)))
    return out


@dataclass(frozen=True)
class ParetoPoint:
    """One repeat group on the plane: its spreads, the denominator of its y, and where it landed.

    ``left_off`` says why a group is never on the frontier (a mark, or a figure it lacks); ``rank`` is its
    frontier rank; ``dominated_by`` the frontier point that beats it beyond the spreads.
    """

    group: RepeatGroup
    x: Spread | None
    y: Spread | None
    per: Per | None
    left_off: str | None
    price: BoxPrice | None = None
    rank: int | None = None
    dominated_by: ParetoPoint | None = None

    @property
    def name(self) -> str:
        return f"{self.group.arm} C{self.group.concurrency}"

    def _usd_per_m(self, field: str) -> float | None:
        values = [getattr(r, field) for r in self.group.rows if getattr(r, field) is not None]
        price = None if self.price is None else self.price.per_hour
        return usd_per_m(price, statistics.median(values)) if values else None

    @property
    def usd_per_m_out(self) -> float | None:
        """USD per million output tokens at the runs' median output tok/s and the box's price."""
        return self._usd_per_m("out_tok_per_s")

    @property
    def usd_per_m_total(self) -> float | None:
        """USD per million input and output tokens at the runs' median total tok/s and the box's price."""
        return self._usd_per_m("total_tok_per_s")

    @property
    def standing(self) -> str:
        """The word the table shows: ``rank 2``, ``dominated by A C64``, or why it is left off."""
        if self.rank is not None:
            return f"rank {self.rank}"
        if self.dominated_by is not None:
            return f"dominated by {self.dominated_by.name}"
        return f"off: {self.left_off}" if self.left_off else "off"

    def summary(self) -> dict[str, object]:
        return {
            "arm": self.group.arm,
            "box": self.group.box,
            "shape": self.group.shape,
            "concurrency": self.group.concurrency,
            "repeat_group": self.group.id,
            "row_ids": [r.id for r in self.group.rows],
            "x": None if self.x is None else self.x.summary(),
            "y": None if self.y is None else self.y.summary(),
            "per": self.per,
            "rank": self.rank,
            "dominated_by": None if self.dominated_by is None else self.dominated_by.name,
            "left_off": self.left_off,
            "marks": self.group.marks,
            "standing": self.standing,
            "usd_per_m_out": self.usd_per_m_out,
            "usd_per_m_total": self.usd_per_m_total,
            "no_price": None if self.price is None else self.price.why_not,
        }


@dataclass(frozen=True)
class Frontier:
    """The points of one shape whose y has one denominator, and the frontier among them."""

    shape: str
    per: Per | None  # None: the groups with no denominator at all (shown, never ranked)
    interactivity: Interactivity
    points: tuple[ParetoPoint, ...]

    @property
    def frontier(self) -> tuple[ParetoPoint, ...]:
        ranked = [p for p in self.points if p.rank is not None]
        return tuple(sorted(ranked, key=lambda p: (p.x.median if p.x else 0.0, p.rank or 0)))

    @property
    def x_label(self) -> str:
        return X_DEFINITIONS[self.interactivity]

    @property
    def y_label(self) -> str:
        return Y_DEFINITIONS[self.per] if self.per else "output tok/s: no GPUs or replicas recorded"

    def summary(self) -> dict[str, object]:
        return {
            "shape": self.shape,
            "per": self.per,
            "x": self.x_label,
            "y": self.y_label,
            "points": [p.summary() for p in self.points],
            "frontier": [p.name for p in self.frontier],
        }


def _x(row: ResultRow, interactivity: Interactivity) -> float | None:
    return row.per_tpot_p50 if interactivity == "tpot" else row.per_slot


def _denominators(store: Store, group: RepeatGroup) -> tuple[Per | None, list[int]]:
    """Per GPU when every run's GPUs are known, else per replica when every run records its replicas."""
    gpus = [len(keys) if keys else 0 for keys in (measured_gpus(store, r) for r in group.rows)]
    if all(gpus):
        return "GPU", gpus
    replicas = [r.replicas or 0 for r in group.rows]
    if all(replicas):
        return "replica", replicas
    return None, []


def _point(store: Store, group: RepeatGroup, interactivity: Interactivity) -> ParetoPoint:
    per, counts = _denominators(store, group)
    xs = [x for x in (_x(r, interactivity) for r in group.rows) if x is not None]
    ys = (
        [r.out_tok_per_s / n for r, n in zip(group.rows, counts, strict=True) if r.out_tok_per_s is not None]
        if counts
        else []  # no denominator: no y, and the point is left off with the reason below
    )
    x, y = Spread.of(xs), Spread.of(ys)
    marks = [m for m in EXCLUDING_MARKS if m in group.marks.split()]
    judged = [run_validity(store, r, paced=r.request_rate is not None) for r in group.rows]
    invalid = [f"invalid: {reason}" for v in judged for reason in v.reasons[:1]]  # curve_validity.py's rules
    reasons = (
        marks
        + (invalid[:1] if not marks else [])
        + [
            why
            for why, missing in (
                ("no TPOT p50" if interactivity == "tpot" else "no output tok/s", x is None),
                ("no output tok/s", y is None and per is not None),
                ("GPUs and replicas not recorded", per is None),
            )
            if missing
        ]
    )
    return ParetoPoint(
        group, x, y, per, ", ".join(dict.fromkeys(reasons)) or None, box_price(store, group.box)
    )


def _ranked(points: Sequence[ParetoPoint]) -> list[ParetoPoint]:
    """``points`` with their places: the eligible ones ranked or dominated, the rest as they were."""
    eligible = [p for p in points if p.left_off is None and p.x is not None and p.y is not None]
    boxes = [(p.x, p.y) for p in eligible if p.x is not None and p.y is not None]
    found = places(boxes)
    ranked = [replace(p, rank=pl.rank) for p, pl in zip(eligible, found, strict=True)]
    done = {
        id(p): replace(r, dominated_by=None if pl.dominated_by is None else ranked[pl.dominated_by])
        for p, r, pl in zip(eligible, ranked, found, strict=True)
    }
    return [done.get(id(p), p) for p in points]


def _groups(rows: Sequence[ResultRow]) -> list[RepeatGroup]:
    """The repeat groups of ``rows`` and each ungrouped run as a group of one, in row order."""
    lone = [RepeatGroup(None, r.arm, r.box, r.shape, r.concurrency, (r,)) for r in rows if not r.repeat_group]
    return repeat_groups(rows) + lone


def pareto(
    store: Store,
    shape: str | None = None,
    box: str | None = None,
    interactivity: Interactivity = "tpot",
) -> list[Frontier]:
    """``campaign pareto``: a frontier per shape and y denominator over measured and imported rows."""
    rows = [r for r in bench_rows(store) if shape in (None, r.shape) and box in (None, r.box)]
    points = [_point(store, g, interactivity) for g in _groups(rows)]
    by_key: dict[tuple[str, str], list[ParetoPoint]] = {}
    for p in points:
        by_key.setdefault((p.group.shape, p.per or "~"), []).append(p)
    out = []
    for (shp, _), mine in sorted(by_key.items()):
        ordered = sorted(mine, key=lambda p: (p.group.arm, p.group.box or "", p.group.concurrency))
        out.append(Frontier(shp, ordered[0].per, interactivity, tuple(_ranked(ordered))))
    return out
