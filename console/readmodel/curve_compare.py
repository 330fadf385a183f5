"""Two arms' curves compared at one operating point: an interactivity, an SLO, or an average GPU power.

``campaign compare A B --at-interactivity X`` asks which arm serves more at the interactivity a product
needs. Neither arm was measured exactly at X, so each arm's own curve is read at X:

- Which curve: ``#N`` is curve N; an arm name is that arm's newest curve in state ``done`` (on ``--box``
  and at ``--shape`` when given; an arm with done curves on several boxes or shapes is refused until they
  are given, as ``campaign compare`` refuses an arm benched at several workloads).
- Which points: the curve's done points that are valid (``curve_validity``: an invalid point's number is
  not the server's) and have the figure on the x axis. x is the point's median over its repeats
  (``readmodel/curves.py``); its spread in x is not carried (the y spread is).
- Not monotone (noise): a point another point beats on both medians (at least as good an x, at least as
  much throughput, one of them strictly; an exact duplicate counts once) is dropped, and said so. What is
  left is the curve's upper envelope, the arm's own frontier, on which throughput falls strictly as
  interactivity rises (rises strictly with power), so no value is read off a dip the arm never needs to run.
- At x: plain piecewise-linear interpolation between the two envelope points around x, on the median and,
  the same way, on the repeats' min and max. Linear is monotone by construction and claims nothing the
  two measured neighbours do not: the value always lies between theirs (a hypothesis test says so). A
  monotone cubic would be smoother and would invent curvature between points the curve never measured.
- Outside the measured range of x (the envelope's lowest to highest x) there is no value: a refusal
  (InputError naming the range and what to do), never an extrapolation.

Ratio and verdict: throughput B / A, per GPU when both curves know their GPUs (else per node, said so),
with its spread from the bounds (B min / A max to B max / A min). ``tie`` when the two interpolated
spreads overlap, or when the difference (faster over slower, minus one) is within the noise floor
``campaign compare`` uses: the widest control pair (``readmodel/compare.py``) at the curves' shape on one
of their boxes, at a concurrency of the points x lies between (never a pair made of the points compared:
two curves of one arm). The two curves must be of one shape. ``no-verdict`` when a neighbour point has
one run (no spread), as ``campaign compare`` says of a lone run.

``--at-slo ttft:MS,...``: each arm's point with the most output tok/s among its valid points whose pooled
p99s (every request of its repeats together, ``request_figures``' verdict) meet every limit, and its
goodput there. No interpolation across a verdict: between a point that meets and one that misses, nothing
says where the SLO breaks. ``--at-power W``: x is the measured GPUs' average power together over the run
(``energy.py``), lower being better; a curve with a valid point without that figure (a CPU box, an
imported row, a sample gap) is refused with the point's reason.

Cost at the point (``curve_cost.py``): $/M output and total tokens at the box's price, interpolated
throughput; at an SLO also at goodput. Each side carries the kernel lines, power limits, tripwire verdicts
and marks of the runs it was read from (``ArmAt.conditions``). Only reads.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from console import bounds
from console.errors import InputError
from console.readmodel.compare import REPEATS_HINT, control_pairs, repeat_groups
from console.readmodel.curve_cost import BoxPrice, Goodput, box_price, goodput, usd_per_m
from console.readmodel.curves import CurvePointView, CurveView, curve
from console.readmodel.energy import energy_note, run_energy
from console.readmodel.pareto import Spread
from console.readmodel.records import CompareVerdict, ControlPair, ResultRow
from console.readmodel.results import bench_row, bench_rows
from console.store import Store

Axis = Literal["tpot", "per-slot", "power"]
AXES: dict[Axis, str] = {
    "tpot": "interactivity = 1000 / TPOT p50 (tok/s/user; InferenceX)",
    "per-slot": "interactivity = output tok/s / concurrency (tok/s/user; vLLM plot_pareto)",
    "power": "average power of the measured GPUs together over the run (W)",
}
UNITS: dict[Axis, str] = {"tpot": "tok/s/user", "per-slot": "tok/s/user", "power": "W"}
NAMES: dict[Axis, str] = {"tpot": "1000/TPOT", "per-slot": "out tok/s / C", "power": "average GPU power"}
NO_ENERGY = "no GPU power samples over its runs (a CPU box, or an imported row)"


@dataclass(frozen=True)
class Knot:
    """One valid point of a curve on the compared axes: x (median of the repeats) and the node's output
    tok/s (median with min-max), its total tok/s median, and its runs' rows (what travels with a number)."""

    point: CurvePointView
    x: float
    out: Spread
    total: float | None
    rows: tuple[ResultRow, ...]

    @property
    def name(self) -> str:
        return f"C{self.point.concurrency}"


@dataclass(frozen=True)
class ArmAt:
    """One side read at the operating point: its curve, the envelope's measured range of x, the points it
    was read from (two around x, one at an exact x or at an SLO), the node's throughput there with its
    spread, the box's price and, at an SLO, the goodput of the chosen point."""

    curve: CurveView
    measured: tuple[float, float]
    neighbours: tuple[Knot, ...]
    out: Spread
    total: float | None
    price: BoxPrice
    dropped: tuple[str, ...]  # points not used, each with why
    goodput: Goodput | None = None

    @property
    def gpus(self) -> int | None:
        counts = {k.point.gpus for k in self.neighbours}
        return counts.pop() if len(counts) == 1 else None

    @property
    def runs(self) -> int:
        return min(k.out.n for k in self.neighbours)

    @property
    def label(self) -> str:
        return f"{self.curve.arm} (curve #{self.curve.id}, {self.curve.box}, {self.curve.shape})"

    @property
    def rows(self) -> tuple[ResultRow, ...]:
        return tuple(r for k in self.neighbours for r in k.rows)

    @property
    def conditions(self) -> str:
        """What travels with the throughput (DESIGN.md's invariant): the kernel lines, power limits and
        tripwire verdicts of the runs it was read from, each distinct one once, and their marks."""
        rows = self.rows
        kernels = dict.fromkeys(r.kernel_line or "none reported" for r in rows)
        limits = dict.fromkeys(
            "no GPU limit recorded" if r.power_limit_w is None else f"{r.power_limit_w:.0f} W" for r in rows
        )
        tripwires = dict.fromkeys(r.tripwire.text for r in rows)
        marks = " ".join(dict.fromkeys(w for r in rows for w in r.marks.split()))
        return (
            f"kernel: {', '.join(kernels)}; power limit: {', '.join(limits)}; "
            f"tripwire: {', '.join(tripwires)}" + (f"; {marks}" if marks else "")
        )

    @property
    def usd_per_m_out(self) -> float | None:
        return usd_per_m(self.price.per_hour, self.out.median)

    @property
    def usd_per_m_total(self) -> float | None:
        return usd_per_m(self.price.per_hour, self.total)

    @property
    def usd_per_m_good_out(self) -> float | None:
        return None if self.goodput is None else usd_per_m(self.price.per_hour, self.goodput.out_tok_per_s)

    @property
    def usd_per_m_good_total(self) -> float | None:
        return None if self.goodput is None else usd_per_m(self.price.per_hour, self.goodput.total_tok_per_s)

    def per(self, gpus: bool) -> Spread:
        """The throughput compared: per GPU when ``gpus`` (both sides know theirs), else the node's."""
        n = self.gpus if gpus else None
        if not n:
            return self.out
        return Spread(self.out.median / n, self.out.low / n, self.out.high / n, self.out.n)

    def summary(self) -> dict[str, object]:
        slo = None if self.goodput is None else self.goodput.slo
        return {
            "arm": self.curve.arm,
            "curve_id": self.curve.id,
            "box": self.curve.box,
            "shape": self.curve.shape,
            "measured_range": list(self.measured),
            "points": [{"concurrency": k.point.concurrency, "x": k.x} for k in self.neighbours],
            "out_tok_per_s": self.out.summary(),
            "total_tok_per_s": self.total,
            "gpus": self.gpus,
            "price_per_hour": self.price.per_hour,
            "no_price": self.price.why_not,
            "usd_per_m_out": self.usd_per_m_out,
            "usd_per_m_total": self.usd_per_m_total,
            "usd_per_m_good_out": self.usd_per_m_good_out,
            "usd_per_m_good_total": self.usd_per_m_good_total,
            "good_out_tok_per_s": None if self.goodput is None else self.goodput.out_tok_per_s,
            "attainment": None if slo is None else slo.attainment,
            "goodput_req_per_s": None if slo is None else slo.goodput_req_per_s,
            "dropped": list(self.dropped),
            "bench_run_ids": [r.id for r in self.rows],
            "conditions": self.conditions,
        }


@dataclass(frozen=True)
class CurveComparison:
    """B against A at one operating point: the ratio of their throughputs with its spread, and the verdict
    (``faster``, ``tie``, ``no-verdict``: ``readmodel/compare.py``'s words)."""

    at: str
    axis: Axis  # the x the measured ranges are in (an SLO's points: tpot)
    per_gpu: bool
    a: ArmAt
    b: ArmAt
    ratio: Spread  # B / A: median, with (B min / A max) to (B max / A min)
    verdict: CompareVerdict
    winner: Literal["a", "b"] | None
    floor: ControlPair | None
    text: str

    @property
    def per(self) -> str:
        return "GPU" if self.per_gpu else "node"

    def summary(self) -> dict[str, object]:
        return {
            "at": self.at,
            "x": AXES[self.axis],
            "per": self.per,
            "a": self.a.summary(),
            "b": self.b.summary(),
            "ratio_b_over_a": self.ratio.summary(),
            "verdict": self.verdict,
            "winner": self.winner,
            "noise_floor": None if self.floor is None else self.floor.floor,
            "text": self.text,
        }


# -- interpolation --------------------------------------------------------------------------------------


def interpolate(xs: Sequence[float], ys: Sequence[float], x: float) -> float:
    """``ys`` read at ``x`` piecewise-linearly; ``xs`` strictly increasing and ``x`` within them (the caller
    refuses anything else). The value lies between its two neighbours' by construction."""
    if not xs[0] <= x <= xs[-1]:
        raise ValueError(f"{x} is outside [{xs[0]}, {xs[-1]}]")
    for i in range(len(xs) - 1):
        if xs[i] <= x <= xs[i + 1]:
            t = (x - xs[i]) / (xs[i + 1] - xs[i])
            return ys[i] + t * (ys[i + 1] - ys[i])
    return ys[-1]  # one point: x is it


def envelope(knots: Sequence[Knot], lower_x_better: bool) -> tuple[list[Knot], list[str]]:
    """The knots no other beats on both medians, sorted by x, and each dropped one with why."""
    sign = -1.0 if lower_x_better else 1.0

    def beats(q: Knot, p: Knot) -> bool:
        no_worse = sign * q.x >= sign * p.x and q.out.median >= p.out.median
        return no_worse and (q.x != p.x or q.out.median != p.out.median)

    kept: list[Knot] = []
    dropped: list[str] = []
    for p in knots:
        by = next((q for q in knots if beats(q, p)), None)
        if by is not None:
            dropped.append(f"{p.name}: below the curve's envelope (beaten by {by.name} on both medians)")
        elif any(k.x == p.x and k.out.median == p.out.median for k in kept):
            dropped.append(f"{p.name}: the same medians as a point already used")
        else:
            kept.append(p)
    return sorted(kept, key=lambda k: k.x), dropped


def _at(knots: Sequence[Knot], x: float) -> tuple[tuple[Knot, ...], Spread, float | None]:
    """The neighbours of ``x`` and the node's throughput there (median, min, max; total), interpolated."""
    xs = [k.x for k in knots]
    below = max(i for i, v in enumerate(xs) if v <= x)
    pair = tuple(knots[below : below + 2]) if xs[below] < x else (knots[below],)

    def read(f: Callable[[Knot], float]) -> float:
        return interpolate([k.x for k in pair], [f(k) for k in pair], x)

    out = Spread(
        read(lambda k: k.out.median),
        read(lambda k: k.out.low),
        read(lambda k: k.out.high),
        min(k.out.n for k in pair),
    )
    totals = [k.total for k in pair]
    total = None if None in totals else read(lambda k: k.total or 0.0)
    return pair, out, total


# -- reading a curve ------------------------------------------------------------------------------------


def resolve_curve(store: Store, spec: str, box: str | None = None, shape: str | None = None) -> CurveView:
    """``#N`` (curve N), or an arm's newest done curve on ``box`` at ``shape``."""
    if spec.startswith("#"):
        return curve(store, bounds.ROW_ID.parse(spec[1:]))
    mine = [
        c
        for c in store.curves.all()
        if c.arm == spec and c.state == "done" and box in (None, c.box) and shape in (None, c.shape)
    ]
    if not mine:
        where = "".join(w for w in (box and f" on {box}", shape and f" at {shape}") if w)
        raise InputError(
            f"{spec!r} is no arm with a done curve{where} in {store.path}",
            "`campaign curves` lists the stored curves: give an arm of theirs, or a curve id as #N",
        )
    places = sorted({(c.box, c.shape) for c in mine})
    if len(places) > 1:
        listed = ", ".join(f"{b} at {s}" for b, s in places)
        raise InputError(
            f"arm {spec} has done curves on {listed}", "choose one with --box and --shape, or #N"
        )
    return curve(store, max(mine, key=lambda c: (c.created_ms, c.id)).id)


def _median(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _power(store: Store, view: CurveView, p: CurvePointView, rows: Sequence[ResultRow]) -> float:
    """The point's median average GPU power; a refusal naming the point when a run has no energy figure."""
    watts = []
    for bench in rows:
        energy = run_energy(store, bench)
        if energy is None:
            why = energy_note(store, bench) or NO_ENERGY
            raise InputError(
                f"curve #{view.id} ({view.arm}) C{p.concurrency} has no average GPU power: {why}",
                "compare it with --at-interactivity or --at-slo instead",
            )
        watts.append(energy.avg_power_w)
    return statistics.median(watts)


def _x(
    store: Store, view: CurveView, p: CurvePointView, rows: Sequence[ResultRow], axis: Axis
) -> float | None:
    if axis == "power":
        return _power(store, view, p, rows)
    return p.interactivity_tpot if axis == "tpot" else p.interactivity_per_slot


def knots(store: Store, view: CurveView, axis: Axis) -> tuple[list[Knot], list[str]]:
    """The curve's usable points on ``axis``, and each left out with why (not done, invalid, no x)."""
    out: list[Knot] = []
    left: list[str] = []
    for p in view.points:
        name = f"C{p.concurrency}"
        y = Spread.of([r.out_tok_per_s for r in p.runs if r.out_tok_per_s is not None])
        if p.state != "done" or y is None:
            left.append(f"{name}: {p.state_text if p.state != 'done' else 'no output tok/s'}")
            continue
        if p.validity is not None and not p.validity.valid:
            left.append(f"{name}: {p.state_text}")
            continue
        rows = tuple(bench_row(store, str(r.row_id)) for r in p.runs)
        x = _x(store, view, p, rows, axis)
        if x is None:
            left.append(f"{name}: no {UNITS[axis]} figure")
            continue
        out.append(Knot(p, x, y, _median([r.total_tok_per_s for r in rows]), rows))
    return out, left


def arm_at(store: Store, view: CurveView, axis: Axis, x: float) -> ArmAt:
    """``view`` read at ``x`` on ``axis``; outside its envelope's measured range, a refusal."""
    usable, left = knots(store, view, axis)
    kept, dropped = envelope(usable, lower_x_better=axis == "power")
    unit = UNITS[axis]
    if not kept:
        raise InputError(
            f"curve #{view.id} ({view.arm}) has no valid point with a {unit} figure"
            + (f" ({'; '.join(left)})" if left else ""),
            "measure it (`campaign curve`), or rerun its invalid points with --rerun-invalid",
        )
    low, high = kept[0].x, kept[-1].x
    if not low <= x <= high:
        raise InputError(
            f"{x:g} {unit} is outside curve #{view.id} ({view.arm})'s measured range {low:,.1f}-{high:,.1f} "
            f"{unit}: no value is extrapolated",
            f"compare at a {unit} inside both arms' ranges, or measure more points (`campaign curve`)",
        )
    pair, out, total = _at(kept, x)
    return ArmAt(view, (low, high), pair, out, total, box_price(store, view.box), tuple(left + dropped))


def arm_at_slo(store: Store, view: CurveView, limits: dict[str, float], slo_text: str) -> ArmAt:
    """``view``'s valid point with the most output tok/s among those whose pooled p99s meet ``limits``."""
    usable, left = knots(store, view, "tpot")
    meeting: list[tuple[Knot, Goodput]] = []
    for k in usable:
        g = goodput(store, [r.row_id for r in k.point.runs], limits)
        if g is None:
            left.append(f"{k.name}: no request timings to judge an SLO by")
        elif g.slo.verdict != "meets":
            left.append(f"{k.name}: {g.slo.verdict} {slo_text}")
        else:
            meeting.append((k, g))
    if not meeting:
        raise InputError(
            f"no valid point of curve #{view.id} ({view.arm}) meets {slo_text} at p99"
            + (f" ({'; '.join(left)})" if left else ""),
            "loosen the SLO, or measure lower concurrencies or rates (`campaign curve`)",
        )
    best, g = max(meeting, key=lambda kg: kg[0].out.median)
    xs = [k.x for k in usable]
    return ArmAt(
        view, (min(xs), max(xs)), (best,), best.out, best.total, box_price(store, view.box), tuple(left), g
    )


# -- the verdict ----------------------------------------------------------------------------------------


def _groups(side: ArmAt) -> set[str | None]:
    return {k.point.repeat_group for k in side.neighbours}


def _floor(store: Store, a: ArmAt, b: ArmAt) -> ControlPair | None:
    """The widest control pair at the curves' shape on one of their boxes, at a concurrency of a point either
    side was read from: the noise floor ``campaign compare`` would use there. As there, a pair made of the
    points being compared (two curves of one arm) is not their floor: compared with itself, always a tie."""
    levels = {k.point.concurrency for side in (a, b) for k in side.neighbours}
    ga, gb = _groups(a), _groups(b)
    fitting = [
        p
        for p in control_pairs(repeat_groups(bench_rows(store)))
        if p.a.shape == a.curve.shape
        and p.a.box in (a.curve.box, b.curve.box)
        and p.a.concurrency in levels
        and not ({p.a.id, p.b.id} & ga and {p.a.id, p.b.id} & gb)
    ]
    return max(fitting, key=lambda p: p.floor, default=None)


def _curves(store: Store, a: str, b: str, box: str | None, shape: str | None) -> tuple[CurveView, CurveView]:
    """The curves ``a`` and ``b`` name, when they ran one workload; a refusal otherwise, as ``campaign
    compare`` refuses groups of two workloads."""
    ca, cb = resolve_curve(store, a, box, shape), resolve_curve(store, b, box, shape)
    if ca.shape != cb.shape:
        raise InputError(
            f"curve #{ca.id} ({ca.arm}) ran shape {ca.shape} and curve #{cb.id} ({cb.arm}) shape {cb.shape}",
            "compare curves of one shape: pass --shape, or #N of two curves at it",
        )
    return ca, cb


def verdict(at: str, axis: Axis, a: ArmAt, b: ArmAt, floor: ControlPair | None) -> CurveComparison:
    """B against A at ``at``: the ratio with its spread, tie inside the spreads or the noise floor."""
    per_gpu = bool(a.gpus and b.gpus)
    ya, yb = a.per(per_gpu), b.per(per_gpu)
    ratio = Spread(
        yb.median / ya.median if ya.median else float("inf"),
        yb.low / ya.high if ya.high else float("inf"),
        yb.high / ya.low if ya.low else float("inf"),
        min(ya.n, yb.n),
    )

    def made(word: CompareVerdict, winner: Literal["a", "b"] | None, text: str) -> CurveComparison:
        return CurveComparison(at, axis, per_gpu, a, b, ratio, word, winner, floor, text)

    lone = next((s for s in (a, b) if s.runs < 2), None)
    if lone is not None:
        return made("no-verdict", None, f"no verdict: {lone.label} has one run at {at}; {REPEATS_HINT}")
    winner: Literal["a", "b"] = "b" if yb.median > ya.median else "a"
    fast, slow = (yb, ya) if winner == "b" else (ya, yb)
    percent = (fast.median / slow.median - 1) * 100 if slow.median > 0 else float("inf")
    if ya.overlaps(yb):
        return made("tie", None, f"tie at {at}: the difference ({percent:.1f}%) is inside the spreads")
    if floor is not None and percent <= floor.floor * 100:
        return made(
            "tie",
            None,
            f"tie at {at}: the difference ({percent:.1f}%) is inside the noise floor of {floor.floor:.1%} "
            f"between {floor.a.label} and {floor.b.label}",
        )
    side = a if winner == "a" else b
    beyond = f" and the noise floor of {floor.floor:.1%}" if floor is not None else ""
    return made(
        "faster",
        winner,
        f"{winner.upper()} ({side.curve.arm}) {percent:.1f}% more output tok/s per {'GPU' if per_gpu else 'node'} "
        f"at {at} (outside the spreads{beyond})",
    )


def compare_at(
    store: Store,
    a: str,
    b: str,
    axis: Axis,
    x: float,
    box: str | None = None,
    shape: str | None = None,
) -> CurveComparison:
    """``campaign compare A B --at-interactivity X`` (``axis`` tpot or per-slot) or ``--at-power W``."""
    sa, sb = (arm_at(store, c, axis, x) for c in _curves(store, a, b, box, shape))
    return verdict(f"{x:g} {UNITS[axis]} ({NAMES[axis]})", axis, sa, sb, _floor(store, sa, sb))


def compare_at_slo(
    store: Store,
    a: str,
    b: str,
    limits: dict[str, float],
    slo_text: str,
    box: str | None = None,
    shape: str | None = None,
) -> CurveComparison:
    """``campaign compare A B --at-slo ttft:MS,...``: each arm's best point meeting the SLO at p99."""
    sa, sb = (arm_at_slo(store, c, limits, slo_text) for c in _curves(store, a, b, box, shape))
    return verdict(f"SLO {slo_text} (p99)", "tpot", sa, sb, _floor(store, sa, sb))
