"""Curves whose points are chosen as they are measured: ``--workload-iters N`` and the ``--slo`` search.

Why planners and not a list: the interesting concurrencies of an arm (where it saturates, where a latency
limit starts to bite) are not known before measuring it. Each planner here is a pure function of the points
measured so far (concurrency -> pooled figures) that says the next concurrency to probe, or that the search
is done; so a curve interrupted mid-search re-plans from its stored points and goes on, never restarts
(console/service/curves.py walks them, console/store/curves.py stores the plan and the points).

Workload (after ``vllm bench sweep serve_workload``, /work/shared/research/sweeps.md): a serial anchor at C=1,
then a saturated anchor at ``maximum`` (vLLM's batch anchor is ``max_concurrency = num_prompts``, every
request in flight at once; here the largest concurrency the operator allows, ``--max-concurrency``, default
``DEFAULT_MAXIMUM``), then N levels spaced linearly between the concurrencies the two anchors actually
achieved by Little's law (throughput x mean E2E latency, as serve_workload converts its anchors), the serial
one rounded up and the saturated one down, each level rounded, those equal to an anchor or to each other dropped.

SLO: doubling from C=1 until a probe's pooled p99s miss a limit (or ``maximum`` is reached), then bisection
between the largest meeting and the smallest missing concurrency until they are adjacent. The answer is the
largest C that meets, beside the probe that missed. "Meets" is the empirical p99 over every request of the
point's repeats (a failed request counts as over every limit) within every limit; vLLM's old SLA search
averaged per-run p99s instead, which the research notes warn against.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from console import bounds
from console.readmodel.request_figures import METRICS, SLO_PERCENTILE, slo_figures
from console.readmodel.requests import RequestTiming
from console.tails import tail

DEFAULT_MAXIMUM = 256
"""The saturated anchor of a workload curve, and the ceiling of an SLO search, when no --max-concurrency is given."""


def checked_maximum(maximum: int) -> int:
    return bounds.CONCURRENCY.check(maximum, "--max-concurrency")


def littles_concurrency(rows: Sequence[RequestTiming]) -> float | None:
    """The concurrency one run achieved by Little's law: the sum of its requests' E2E latencies over the span
    from the first request sent to the last one answered; None without a timed request."""
    timed = [r for r in rows if r.start_ms is not None and r.e2e_ms is not None]
    if not timed:
        return None
    first = min(r.start_ms for r in timed if r.start_ms is not None)
    last = max(r.start_ms + r.e2e_ms for r in timed if r.start_ms is not None and r.e2e_ms is not None)
    if last <= first:
        return None
    return sum(r.e2e_ms for r in timed if r.e2e_ms is not None) / (last - first)


def workload_levels(serial: float, saturated: float, iters: int, maximum: int) -> list[int]:
    """The N levels between the anchors: ``iters`` concurrencies spaced linearly between the serial anchor's
    achieved concurrency (rounded up) and the saturated anchor's (rounded down), each rounded, ascending,
    strictly between 1 and ``maximum`` (the anchors are measured already) and none twice."""
    low = max(1, math.ceil(serial))
    high = min(maximum, max(low, math.floor(saturated)))
    levels = {round(low + (high - low) * i / (iters + 1)) for i in range(1, iters + 1)}
    return sorted(c for c in levels if 1 < c < maximum)


def workload_next(achieved: Mapping[int, float | None], iters: int, maximum: int) -> int | None:
    """The next concurrency of a workload curve given ``achieved`` (each measured C -> the concurrency it
    achieved, ``littles_concurrency``; None where unknown, taken as C itself), or None when done."""
    if 1 not in achieved:
        return 1
    if maximum not in achieved:
        return maximum
    serial = achieved[1] or 1.0
    saturated = achieved[maximum] or float(maximum)
    todo = [c for c in workload_levels(serial, saturated, iters, maximum) if c not in achieved]
    return todo[0] if todo else None


@dataclass(frozen=True)
class SloBracket:
    """Where an SLO search stands: the largest C that met every limit below the smallest that missed one."""

    meeting: int | None
    """The largest concurrency meeting every limit (below ``missing``); None: not even C=1 meets."""
    missing: int | None
    """The smallest concurrency missing a limit; None: none measured misses (the search reached its maximum)."""


def slo_bracket(meets: Mapping[int, bool]) -> SloBracket:
    """The bracket of the measured points (C -> every pooled p99 within its limit). A meeting point above the
    smallest missing one (noise on a real server) is ignored: the answer stays below every miss."""
    missing = min((c for c, ok in meets.items() if not ok), default=None)
    meeting = max((c for c, ok in meets.items() if ok and (missing is None or c < missing)), default=None)
    return SloBracket(meeting, missing)


def slo_next(meets: Mapping[int, bool], maximum: int) -> int | None:
    """The next concurrency an SLO search probes, or None when done: doubling from 1 while every probe meets
    (capped at ``maximum``), then the midpoint between the bracket's ends until they are adjacent. Never a C
    measured already: nothing measured lies strictly inside the bracket (``slo_bracket``)."""
    b = slo_bracket(meets)
    if b.missing is None:
        if b.meeting is None:
            return 1
        if b.meeting >= maximum:
            return None
        return min(2 * b.meeting, maximum)
    low = b.meeting or 0
    if b.missing - low <= 1:
        return None
    return (low + b.missing) // 2


@dataclass(frozen=True)
class MetricP99:
    """One limit of an SLO against one point's pooled requests: the empirical p99 (failed requests counted
    as infinitely late), LoadGen's early-stopping estimate beside it (None: too few requests to claim a p99)
    and the verdict that rests on that estimate (console/tails.py slo_verdict: meets, misses or too-few)."""

    metric: str
    limit_ms: float
    p99_ms: float | None
    estimate_ms: float | None
    verdict: str
    n: int

    @property
    def meets(self) -> bool:
        return self.p99_ms is not None and self.p99_ms <= self.limit_ms


def pooled_p99s(rows: Sequence[RequestTiming], limits: Mapping[str, float]) -> tuple[MetricP99, ...]:
    """Each limit's pooled p99 over ``rows``, every request of a point's repeats together."""
    fields = dict(METRICS)
    verdicts = dict(slo_figures(rows, dict(limits), None).verdicts)
    out = []
    for key, limit in limits.items():
        failed = [math.inf] * sum(1 for r in rows if not r.ok)
        values = [float(v) for r in rows if r.ok and (v := getattr(r, fields[key])) is not None] + failed
        t = tail(values, SLO_PERCENTILE)
        out.append(MetricP99(key, limit, t.empirical, t.estimate, verdicts[key].verdict, t.n))
    return tuple(out)
