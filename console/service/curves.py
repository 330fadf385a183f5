"""Curve intents: one arm measured at a list of concurrencies, point by point, through the bench.

Why a curve and not a point: one concurrency says nothing of the trade the operator buys, throughput against
the speed each user sees; a curve does. Each point is exactly a ``campaign bench`` (``Service.bench``: the
same node, the same checks, the same rows, a repeat group with ``--repeat N``), so a curve's points are
bench rows like any other and ``campaign compare``/``requests`` read them as such. A rate curve's points are
request rates instead (open-loop arrivals, Poisson or gamma, under one cap C); each is still one bench. The
curve's record
(``store.curves``) links them and says which are stored, so running the same command again after an
interruption measures only the points not yet stored.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from console import bounds
from console.errors import ConsoleError, InputError
from console.readmodel.curve_validity import point_validity
from console.readmodel.requests import RequestTiming, bench_requests
from console.service import curve_search
from console.service.curve_search import MetricP99
from console.service.runs import DEFAULT_BENCH_TIMEOUT_S, PROMPTS_PER_STREAM, RunIntents, check_pacing
from console.store.curves import CurvePoint, CurveRow

MAX_POINTS = 64
"""A curve's points at most: a list longer than this is a typo, not a measurement plan."""

_LADDER = re.compile(r"\s*([^:]+):([^:]+):[xX]([^:]+)\s*")


def ladder(text: str) -> list[int]:
    """``START:END:xF`` as the concurrencies START, START*F, ... up to END, END included even when it is not a
    power of F. START and END are concurrencies (console/bounds.py), F a whole factor of 2 or more; any
    other text is refused in one line (an ``InputError``, also a ``ValueError`` where a bound refused it)."""
    match = _LADDER.fullmatch(text)
    if match is None:
        raise InputError(
            f"--ladder {bounds.shown(text)}: expected START:END:xFACTOR", "e.g. --ladder 1:64:x2"
        )
    start = bounds.CONCURRENCY.parse(match.group(1))
    end = bounds.CONCURRENCY.parse(match.group(2))
    factor_text = match.group(3).strip()
    if not re.fullmatch(r"[0-9]{1,3}", factor_text, re.ASCII) or int(factor_text) < 2:
        raise InputError(
            f"--ladder {bounds.shown(text)}: the factor must be a whole number of 2 or more", "e.g. x2"
        )
    if end < start:
        raise InputError(f"--ladder {bounds.shown(text)}: END {end} is below START {start}")
    factor = int(factor_text)
    points = []
    c = start
    while c < end:
        points.append(c)
        c *= factor
    points.append(end)
    return points


def concurrency_list(text: str) -> list[int]:
    """``1,2,4,8`` as a curve's concurrencies: each a concurrency (console/bounds.py), none twice, at most
    MAX_POINTS; sorted ascending, since a curve is read along its concurrency."""
    return checked_levels([bounds.CONCURRENCY.parse(p) for p in _points_of(text, "--concurrency", "1,2,4,8")])


def _points_of(text: str, flag: str, example: str) -> list[str]:
    """A curve's comma-separated points as typed, each stripped: none empty, at most MAX_POINTS."""
    parts = [p.strip() for p in text.split(",")]
    if not text.strip() or any(not p for p in parts):
        raise InputError(f"{flag} {bounds.shown(text)}: expected a comma-separated list, e.g. {example}")
    if len(parts) > MAX_POINTS:
        raise InputError(f"{flag}: {len(parts)} values", f"give at most {MAX_POINTS}")
    return parts


def checked_levels(levels: list[int]) -> list[int]:
    """The concurrencies as the service accepts them (any adapter's): bounded, none twice, ascending."""
    if not levels:
        raise InputError("a curve needs at least one concurrency", "give --concurrency 1,2,4,8")
    if len(levels) > MAX_POINTS:
        raise InputError(f"a curve of {len(levels)} points", f"give at most {MAX_POINTS}")
    for c in levels:
        bounds.CONCURRENCY.check(c, "concurrency")
    twice = sorted({c for c in levels if levels.count(c) > 1})
    if twice:
        raise InputError(f"concurrency {twice[0]} is given twice", "name each concurrency once")
    return sorted(levels)


def rate_list(text: str) -> list[float]:
    """``0.5,1.5,4`` as a rate curve's request rates (req/s, floats): each a request rate (console/bounds.py),
    none twice, at most MAX_POINTS; sorted ascending, since a curve is read along its load."""
    return checked_rates([bounds.REQUEST_RATE.parse(p) for p in _points_of(text, "--rate", "0.5,1.5,4")])


def checked_rates(rates: list[float]) -> list[float]:
    """The rates as the service accepts them (any adapter's): bounded, none twice, ascending."""
    if not rates:
        raise InputError("a rate curve needs at least one rate", "give --rate 0.5,1,2")
    if len(rates) > MAX_POINTS:
        raise InputError(f"a curve of {len(rates)} points", f"give at most {MAX_POINTS}")
    for r in rates:
        bounds.REQUEST_RATE.check(r, "--rate")
    twice = sorted({r for r in rates if rates.count(r) > 1})
    if twice:
        raise InputError(f"rate {twice[0]:g} is given twice", "name each rate once")
    return sorted(rates)


def rate_requests(prompts_per_slot: int | None, rate: float) -> int:
    """The measured requests of a rate point: K per started request/s of its rate (K x ceil(R), K the curve's
    prompts per slot, default the bench's 8), so about K seconds of arrivals from 1 req/s up and K requests
    below it (a 0.5 req/s point lasts 2K seconds)."""
    return (prompts_per_slot or PROMPTS_PER_STREAM) * math.ceil(rate)


@dataclass(frozen=True)
class CurvePlan:
    """What ``open_curve`` settled: the curve to walk and whether it is one resumed."""

    curve: CurveRow
    resumed: bool
    target: str
    given_box: str | None

    @property
    def prompts_per_slot(self) -> int | None:
        return self.curve.prompts_per_slot


@dataclass(frozen=True)
class CurveWalk:
    """What one walk of a curve did: the concurrencies it measured now (none when it was stored already)."""

    curve_id: int
    measured: tuple[int, ...]
    measured_rates: tuple[float, ...] = ()
    """A rate curve's: the rates of the points it measured now (``measured`` holds their caps)."""


@dataclass(frozen=True)
class SloPoint:
    """One stored point of an SLO curve: its concurrency and each limit's pooled p99 (``curve_search``)."""

    concurrency: int
    p99s: tuple[MetricP99, ...]

    @property
    def meets(self) -> bool:
        return all(m.meets for m in self.p99s)


@dataclass(frozen=True)
class SearchWalk:
    """What a walk of a planned curve (``--workload-iters`` or ``--slo``) did, and for ``--slo`` its answer."""

    curve_id: int
    mode: str
    measured: tuple[int, ...]
    """The concurrencies measured now, in the order probed (none when the curve was done already)."""
    maximum: int
    limits: dict[str, float] | None
    points: tuple[SloPoint, ...]
    """An SLO curve's stored points, ascending C, each with its pooled p99s; empty for a workload curve."""
    meeting: int | None
    """The largest C meeting every limit below ``missing``; None: not even C=1 (or not an SLO curve)."""
    missing: int | None
    """The probe above it that missed a limit; None: none missed up to ``maximum``."""


class CurveIntents(RunIntents):
    def open_curve(
        self,
        target: str,
        box: str | None,
        shape: str,
        concurrency: list[int],
        repeat: int = 1,
        prompts_per_slot: int | None = None,
        *,
        new: bool = False,
        rate: list[float] | None = None,
        burstiness: float | None = None,
    ) -> CurvePlan:
        """The curve this command walks: the newest one of the same identity (arm, box, shape, concurrency list,
        repeat; a rate curve's rates and burstiness too), which measures only its points not yet stored (none,
        when it is done), else (or with ``new``) a new one. Every point is checked as the bench would
        check it before anything is stored, so a refusal stores nothing.

        ``rate``: one point per rate (ascending), its requests paced open-loop (``burstiness`` the gamma shape,
        default 1: Poisson); ``concurrency`` is then the cap, one value or none (each point uncapped: every one
        of its requests, ``rate_requests``, may be in flight at once)."""
        if rate is not None:
            return self._open_rate_curve(
                target, box, shape, concurrency, rate, burstiness, repeat, prompts_per_slot, new
            )
        check_pacing(None, burstiness)
        levels = checked_levels(list(concurrency))
        bounds.REPEAT.check(repeat, "--repeat")
        node = self.bench_node(target, box)
        existing = None if new else self.store.curves.latest(node.arm, node.box, shape, levels, repeat)
        if existing is not None and prompts_per_slot not in (None, existing.prompts_per_slot):
            raise InputError(
                f"curve #{existing.id} was started with --prompts-per-slot {existing.prompts_per_slot or 'default'}",
                "resume it without --prompts-per-slot, or give --new to start another curve",
            )
        per_slot = existing.prompts_per_slot if existing is not None else prompts_per_slot
        for c in levels:
            prompts = (
                None if per_slot is None else bounds.PROMPTS.check(per_slot * c, f"--prompts-per-slot x C{c}")
            )
            if c < len(node.replicas):
                raise InputError(
                    f"concurrency {c} is below the {len(node.replicas)} replicas of {node.arm} on {node.box}",
                    f"give every replica a stream: start the curve at {len(node.replicas)} or more",
                )
            self.check_bench_size(node.box, shape, c, prompts)
        if existing is not None:
            return CurvePlan(existing, True, target, box)
        created = self.store.curves.create(node.arm, node.box, shape, levels, repeat, prompts_per_slot)
        return CurvePlan(created, False, target, box)

    def _open_rate_curve(
        self,
        target: str,
        box: str | None,
        shape: str,
        cap: list[int],
        rate: list[float],
        burstiness: float | None,
        repeat: int,
        prompts_per_slot: int | None,
        new: bool,
    ) -> CurvePlan:
        """``open_curve`` of a rate curve: the same resume and checks, each point a (cap, rate)."""
        rates = checked_rates(list(rate))
        if len(cap) > 1:
            raise InputError(
                f"--concurrency {','.join(map(str, cap))} with --rate: the concurrency of a rate curve is its cap",
                "give one value (the most requests in flight at every rate), or none for no cap",
            )
        for c in cap:
            bounds.CONCURRENCY.check(c, "--concurrency")
        shape_k = 1.0 if burstiness is None else bounds.BURSTINESS.check(burstiness, "--burstiness")
        bounds.REPEAT.check(repeat, "--repeat")
        node = self.bench_node(target, box)
        existing = (
            None
            if new
            else self.store.curves.latest(node.arm, node.box, shape, list(cap), repeat, rates, shape_k)
        )
        if existing is not None and prompts_per_slot not in (None, existing.prompts_per_slot):
            raise InputError(
                f"curve #{existing.id} was started with --prompts-per-slot {existing.prompts_per_slot or 'default'}",
                "resume it without --prompts-per-slot, or give --new to start another curve",
            )
        per_slot = existing.prompts_per_slot if existing is not None else prompts_per_slot
        points = []
        for r in rates:
            prompts = bounds.PROMPTS.check(rate_requests(per_slot, r), f"--prompts-per-slot x {r:g} req/s")
            c = cap[0] if cap else min(prompts, bounds.CONCURRENCY.high)
            if c < len(node.replicas):
                raise InputError(
                    f"--concurrency {c} is below the {len(node.replicas)} replicas of {node.arm} on {node.box}",
                    f"give every replica a stream: a cap of {len(node.replicas)} or more",
                )
            self.check_bench_size(node.box, shape, c, prompts)
            points.append((c, r))
        if existing is not None:
            return CurvePlan(existing, True, target, box)
        created = self.store.curves.create(
            node.arm, node.box, shape, list(cap), repeat, prompts_per_slot, rates, shape_k, points
        )
        return CurvePlan(created, False, target, box)

    def open_search_curve(
        self,
        target: str,
        box: str | None,
        shape: str,
        *,
        iters: int | None = None,
        limits: dict[str, float] | None = None,
        maximum: int | None = None,
        repeat: int = 1,
        prompts_per_slot: int | None = None,
        new: bool = False,
    ) -> CurvePlan:
        """A curve whose points are chosen as measured (console/service/curve_search.py): ``iters`` levels
        between a serial and a saturated anchor, or with ``limits`` the largest C whose pooled p99s meet them,
        up to ``maximum`` (default ``curve_search.DEFAULT_MAXIMUM``). The newest curve of the same arm, box,
        shape, repeat and plan is resumed (re-planned from its stored points), else (or with ``new``) a new one.
        The largest point is checked as the bench would check it before anything is stored."""
        if (iters is None) == (limits is None):
            raise InputError("a planned curve takes either --workload-iters or --slo", "give one of them")
        top = curve_search.checked_maximum(curve_search.DEFAULT_MAXIMUM if maximum is None else maximum)
        planned: dict[str, Any] = (
            {"mode": "workload", "iters": bounds.WORKLOAD_ITERS.check(iters, "--workload-iters"), "max": top}
            if iters is not None
            else {"mode": "slo", "limits": dict(limits or {}), "max": top}
        )
        if iters is not None and top < 2:
            raise InputError(f"--max-concurrency {top}: a workload curve needs a saturated anchor above C=1")
        bounds.REPEAT.check(repeat, "--repeat")
        node = self.bench_node(target, box)
        if len(node.replicas) > 1:
            raise InputError(
                f"{node.arm} on {node.box} has {len(node.replicas)} replicas: a planned curve starts at C=1",
                "give the points with --concurrency instead",
            )
        same = [
            c
            for c in self.store.curves.all()
            if (c.arm, c.box, c.shape, c.repeat, c.plan, c.source)
            == (node.arm, node.box, shape, repeat, planned, "console")
        ]
        existing = None if new or not same else same[-1]
        if existing is not None and prompts_per_slot not in (None, existing.prompts_per_slot):
            raise InputError(
                f"curve #{existing.id} was started with --prompts-per-slot {existing.prompts_per_slot or 'default'}",
                "resume it without --prompts-per-slot, or give --new to start another curve",
            )
        per_slot = existing.prompts_per_slot if existing is not None else prompts_per_slot
        prompts = (
            None if per_slot is None else bounds.PROMPTS.check(per_slot * top, f"--prompts-per-slot x C{top}")
        )
        self.check_bench_size(node.box, shape, top, prompts)
        if existing is not None:
            return CurvePlan(existing, True, target, box)
        created = self.store.curves.create(
            node.arm, node.box, shape, [], repeat, prompts_per_slot, plan=planned
        )
        return CurvePlan(created, False, target, box)

    def _pooled(self, point: CurvePoint) -> list[RequestTiming]:
        return [r for run_id in point.bench_run_ids for r in bench_requests(self.store, run_id)]

    def _slo_points(self, curve_id: int, limits: dict[str, float]) -> tuple[SloPoint, ...]:
        done = sorted(
            (p for p in self.store.curves.points(curve_id) if p.state == "done"), key=lambda p: p.concurrency
        )
        return tuple(SloPoint(p.concurrency, curve_search.pooled_p99s(self._pooled(p), limits)) for p in done)

    def _next_planned(self, curve: CurveRow) -> int | None:
        plan = curve.plan or {}
        top = int(plan["max"])
        if plan["mode"] == "slo":
            meets = {p.concurrency: p.meets for p in self._slo_points(curve.id, plan["limits"])}
            return curve_search.slo_next(meets, top)
        achieved: dict[int, float | None] = {}
        for p in self.store.curves.points(curve.id):
            if p.state == "done":
                runs = [
                    curve_search.littles_concurrency(bench_requests(self.store, i)) for i in p.bench_run_ids
                ]
                known = [a for a in runs if a is not None]
                achieved[p.concurrency] = sum(known) / len(known) if known else None
        return curve_search.workload_next(achieved, int(plan["iters"]), top)

    async def walk_search(
        self,
        plan: CurvePlan,
        *,
        timeout_s: float = DEFAULT_BENCH_TIMEOUT_S,
        tick: Callable[[float], None] | None = None,
        said: Callable[[str], None] | None = None,
    ) -> SearchWalk:
        """Measure a planned curve: first any stored point not done (an interrupted probe), then each point its
        planner asks for, added as it is chosen (``store.curves.add_point``) and stored at once, until the
        planner is done. Interrupted, the same command re-plans from the stored points and goes on."""
        curve = plan.curve
        say = said or (lambda _: None)
        mode = str((curve.plan or {})["mode"])
        measured: list[int] = []
        with self.store.curves.walking(curve.id):
            while True:
                pending = [p for p in self.store.curves.points(curve.id) if p.state != "done"]
                if pending:
                    point = pending[0]
                else:
                    nxt = self._next_planned(curve)
                    if nxt is None:
                        break
                    point = self.store.curves.add_point(curve.id, nxt)
                await self._measure_point(
                    plan, point, f"{mode} probe {point.position + 1}", timeout_s, tick, say
                )
                measured.append(point.concurrency)
            self.store.curves.set_state(curve.id, "done")
        top = int((curve.plan or {})["max"])
        if mode != "slo":
            return SearchWalk(curve.id, mode, tuple(measured), top, None, (), None, None)
        limits = {str(k): float(v) for k, v in (curve.plan or {})["limits"].items()}
        points = self._slo_points(curve.id, limits)
        b = curve_search.slo_bracket({p.concurrency: p.meets for p in points})
        return SearchWalk(curve.id, mode, tuple(measured), top, limits, points, b.meeting, b.missing)

    def reopen_invalid(self, plan: CurvePlan, said: Callable[[str], None] | None = None) -> tuple[int, ...]:
        """Put the curve's stored points judged invalid (``readmodel.curve_validity``) back to pending, their rows
        kept but unlinked, so the walk measures only them again; the positions reopened, in order. Valid points
        and points not yet stored are left as they are."""
        reopened = []
        for point in self.store.curves.points(plan.curve.id):
            if point.state != "done":
                continue
            judged = point_validity(self.store, point.bench_run_ids, paced=point.rate is not None)
            if judged is None or judged.valid:
                continue
            why = "; ".join(judged.reasons)
            self.store.curves.reopen_point(plan.curve.id, point.position, f"measured again: invalid ({why})")
            reopened.append(point.position)
            if said:
                said(f"curve #{plan.curve.id}: C{point.concurrency} is invalid, measured again: {why}")
        if said and not reopened:
            said(f"curve #{plan.curve.id}: no stored point is invalid")
        return tuple(reopened)

    async def walk_curve(
        self,
        plan: CurvePlan,
        *,
        timeout_s: float = DEFAULT_BENCH_TIMEOUT_S,
        tick: Callable[[float], None] | None = None,
        said: Callable[[str], None] | None = None,
        rerun_invalid: bool = False,
    ) -> CurveWalk:
        """Measure every point of the curve not yet stored, in order, each through ``bench``; each stored point
        is committed at once. A failed bench marks its point failed and stops the curve (the error raised);
        an interruption (Ctrl-C, cancellation) puts the running point back to pending, the curve interrupted.
        ``rerun_invalid``: first reopen the stored points judged invalid (``reopen_invalid``), so they are
        measured again. The curve is held for the walk (``store.curves.walking``): a second console is refused."""
        with self.store.curves.walking(plan.curve.id):
            if rerun_invalid:
                self.reopen_invalid(plan, said)
            return await self._walk_points(plan, timeout_s, tick, said)

    async def _walk_points(
        self,
        plan: CurvePlan,
        timeout_s: float,
        tick: Callable[[float], None] | None,
        said: Callable[[str], None] | None,
    ) -> CurveWalk:
        curve = plan.curve
        say = said or (lambda _: None)
        todo = [p for p in self.store.curves.points(curve.id) if p.state != "done"]
        total = len(curve.concurrency if curve.rate is None else curve.rate)
        measured: list[int] = []
        rates: list[float] = []
        for point in todo:
            await self._measure_point(plan, point, f"{point.position + 1}/{total}", timeout_s, tick, say)
            measured.append(point.concurrency)
            if point.rate is not None:
                rates.append(point.rate)
        self.store.curves.set_state(curve.id, "done")
        return CurveWalk(curve.id, tuple(measured), tuple(rates))

    async def _measure_point(
        self,
        plan: CurvePlan,
        point: CurvePoint,
        where: str,
        timeout_s: float,
        tick: Callable[[float], None] | None,
        say: Callable[[str], None],
    ) -> None:
        """Measure one point through ``bench`` and store it, committed at once; a failed bench marks it failed
        (the error raised), an interruption puts it back to pending. ``where``: its place, for the progress line."""
        curve = plan.curve
        c = point.concurrency
        name = f"C{c}" if point.rate is None else f"{point.rate:g} req/s (cap C{c})"
        say(f"curve #{curve.id}: {name} ({where}) measuring, {curve.repeat} run(s)")
        self.store.curves.start_point(curve.id, point.position)
        if point.rate is not None:
            prompts: int | None = rate_requests(curve.prompts_per_slot, point.rate)
        else:
            prompts = None if curve.prompts_per_slot is None else curve.prompts_per_slot * c
        try:
            outcome = await self.bench(
                plan.target,
                plan.given_box,
                curve.shape,
                c,
                prompts,
                None,
                curve.repeat,
                timeout_s=timeout_s,
                tick=tick,
                rate=point.rate,
                burstiness=None if point.rate is None else curve.burstiness,
            )
        except ConsoleError as exc:
            self.store.curves.fail_point(curve.id, point.position, str(exc))
            say(f"curve #{curve.id}: {name} failed: {exc}")
            raise
        except (asyncio.CancelledError, KeyboardInterrupt):
            self.store.curves.interrupt_point(
                curve.id, point.position, "interrupted while it was measured; measured again on resume"
            )
            raise
        group = outcome.group.id if outcome.group else None
        self.store.curves.finish_point(curve.id, point.position, group, [r.id for r in outcome.rows])
        best = outcome.group.median if outcome.group else outcome.rows[0].out_tok_per_s
        say(
            f"curve #{curve.id}: {name} stored: out {best or 0:,.1f} tok/s (rows {', '.join(str(r.id) for r in outcome.rows)})"
        )
