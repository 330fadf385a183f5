"""Honest tail latencies and SLO verdicts for one benchmark point.

A p99 read off 300 requests is the third-highest value or an interpolation near it: one slow request moves
it, and nothing says how far the true p99 may lie above it. MLPerf LoadGen answers this with "early
stopping": a binomial bound that says how many requests a percentile needs before any estimate exists, and
which order statistic may be claimed as the percentile with 99% confidence. This module ports LoadGen's
code exactly (mlcommons-loadgen 6.0.17: ``early_stopping.cc`` and ``results.cc``
``PerformanceSummary::EarlyStopping``), down to its cache-guided search bounds, so a console number equals
the one LoadGen would print for the same latencies; tests/test_tails.py checks it against a table captured
from the C++ itself (tests/fixtures/loadgen/).

It imports no other part of the console (the read model, reports and the bench can all import it), and its
plain percentile is the load generator's own (``agents.loadgen.metrics.percentile``), so the "empirical"
figure beside an estimate is the p99 the bench reported.
"""

from __future__ import annotations

import bisect
import math
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from agents.loadgen.metrics import percentile

__all__ = [
    "SLO_KEYS",
    "SloVerdict",
    "TailEstimate",
    "min_passing",
    "min_queries",
    "parse_slo",
    "slo_verdict",
    "tail",
    "wilson",
]

# The confidence LoadGen's PerformanceSummary::EarlyStopping hard-codes.
CONFIDENCE = 0.99

# --- LoadGen's early_stopping.cc, line for line -----------------------------------------------------------
# Each expression keeps the C++ order of operations and its int64 -> double conversions, so the floating
# point results (and hence every binary-search decision) are the same as LoadGen's.


def _lbeta(x: int, y: int) -> float:
    """log Beta(x, y) through lgamma, as LoadGen's ``lbeta``."""
    return math.lgamma(x) + math.lgamma(y) - math.lgamma(x + y)


def _hypergeometric_2f1_a1(b: int, c: int, x: float) -> float:
    """Gauss's 2F1(1, b; c; x) by its series (LoadGen's ``hypergeometric_2F1_A1``).

    b is -t here, so the series is a polynomial: its terms reach exactly 0 after at most t + 1 steps, and
    usually fall under the tolerance long before (about sqrt(t) steps near the answer)."""
    tolerance = 1.0 / (1 << 33)
    term = 1.0
    result = 1.0
    i = 0
    while abs(term) > tolerance:
        term *= (b + i) * x / (c + i)
        result += term
        i += 1
    return result


def _exp(x: float) -> float:
    """std::exp: infinity on overflow, where Python's math.exp raises."""
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def _beta_regularized(x: float, a: int, b: int) -> float:
    """The regularized incomplete beta I_x(a, b) (LoadGen's ``beta_regularized``, via DLMF 15.8.E1)."""
    return (
        _exp(a * math.log(x) + (b - 1) * math.log(1 - x) - _lbeta(a, b))
        / a
        * _hypergeometric_2f1_a1(1 - b, 1 + a, x / (x - 1))
    )


def _odds(h: int, t: int, p: float, d: float) -> float:
    """The chance of t or fewer over-latency requests among h + t, when each is over with chance 1 - p + d:
    the binomial CDF, which is I_{p-d}(h, 1 + t)."""
    return _beta_regularized(p - d, h, 1 + t)


def _find_min_passing(min_h: int, max_h: int, t: int, p: float, d: float, c: float) -> int:
    """LoadGen's binary search for the least h in [min_h, max_h] with odds below 1 - c.

    It never evaluates max_h itself: when nothing below passes it returns max_h, which is why the bounds
    the caller picks (and so the finder's cache) could in principle change a result."""
    count = max_h - min_h
    while count > 0:
        step = count // 2
        h = min_h + step
        if _odds(h, t, p, d) < 1 - c:
            count = step
        else:
            min_h = h + 1
            count -= step + 1
    return min_h


class _Finder:
    """LoadGen's ``MinPassingQueriesFinder``: the least h such that h + t requests with at most t over the
    latency bound show, with confidence c, that the p-th percentile is within it.

    It memoizes every answer per (p, d, c) and bounds the next search by the two cached t just below:
    the lower bound by the asymptotic slope p/(1-p), the upper one by LoadGen's ``(y1 - y0) * (x1 - x0)``
    (a product where a quotient may have been meant; ported as written). So an instance must be asked in
    the same order as LoadGen asks its own for results to be identical: a fresh one per Server verdict,
    and t = 1, 2, 3, ... for the single-stream rule (see ``_sequence``)."""

    def __init__(self) -> None:
        self._caches: dict[tuple[float, float, float], tuple[list[int], dict[int, int]]] = {}

    def __call__(self, t: int, p: float, d: float, c: float) -> int:
        keys, cache = self._caches.setdefault((p, d, c), ([], {}))
        if t in cache:
            return cache[t]
        below = bisect.bisect_left(keys, t)  # cache.lower_bound(t), as a position among the sorted keys
        x0, y0 = -1, 0
        x1, y1 = 0, math.ceil(math.log(1 - c) / math.log(p - d))
        if below >= 1:
            x1, y1 = keys[below - 1], cache[keys[below - 1]]
        if below >= 2:
            x0, y0 = keys[below - 2], cache[keys[below - 2]]
        min_slope = (p - d) / (1 - p + d)
        max_slope = float((y1 - y0) * (x1 - x0))
        min_h = int((t - x1) * min_slope + y1)
        max_h = int((t - x1) * max_slope + y1 + 1)
        h = _find_min_passing(min_h, max_h, t, p, d, c)
        bisect.insort(keys, t)
        cache[t] = h
        return h


def _check(p: float, d: float, c: float) -> None:
    """Refuse arguments outside LoadGen's domain, where its logarithms would be of 0 or negatives."""
    if not (0.0 < p - d < 1.0 and 0.0 < p < 1.0):
        raise ValueError(
            f"percentile {p!r} (tolerance {d!r}): write a fraction strictly between 0 and 1, e.g. 0.99"
        )
    if not 0.0 < c < 1.0:
        raise ValueError(f"confidence {c!r}: write a fraction strictly between 0 and 1, e.g. 0.99")


def min_passing(t: int, p: float, d: float = 0.0, c: float = CONFIDENCE) -> int:
    """The least number of requests within the bound that, beside t over it, pass the p-th percentile with
    confidence c: LoadGen's finder asked once, as its Server scenario does (a fresh finder per run)."""
    _check(p, d, c)
    if t < 0:
        raise ValueError(f"over-latency count {t}: write a count of 0 or more")
    return _Finder()(t, p, d, c)


# The single-stream rule asks a fresh finder t = 1, 2, 3, ... in order on every call; asking one finder in
# that order once and remembering its answers gives the same numbers without redoing them per point.
# The lock keeps two threads from appending the same t twice.
_SEQUENCES: dict[tuple[float, float, float], tuple[_Finder, list[int]]] = {}
_SEQUENCES_LOCK = threading.Lock()


def _sequence(t: int, p: float, d: float, c: float) -> int:
    """h(t) as LoadGen's single-stream loop computes it: by a finder that was asked 1, 2, ..., t - 1 first."""
    with _SEQUENCES_LOCK:
        finder, hs = _SEQUENCES.setdefault((p, d, c), (_Finder(), [0]))  # hs[0] is a placeholder: t >= 1
        while len(hs) <= t:
            hs.append(finder(len(hs), p, d, c))
        return hs[t]


def min_queries(p: float, c: float = CONFIDENCE) -> int:
    """The least number of requests for which any p-th percentile estimate exists (LoadGen's h_min + 1):
    662 for a p99, 64 for a p90 at 99% confidence. Fewer, and even the maximum bounds nothing."""
    _check(p, 0.0, c)
    return _sequence(1, p, 0.0, c) + 1


def _overlatency_allowance(n: int, p: float, c: float) -> int:
    """The t of LoadGen's single-stream loop for n >= min_queries: the last t with n >= h(t) + t, found as
    LoadGen finds it (the first i >= 2 with n < h(i) + i, less one), so the estimate discards t - 1."""
    for i in range(2, n + 1):
        if n < _sequence(i, p, 0.0, c) + i:
            return i - 1
    return 1


def _label(p: float) -> str:
    """p99 for 0.99, p99.9 for 0.999: how the console names a percentile."""
    return f"p{p * 100:g}"


@dataclass(frozen=True)
class TailEstimate:
    """A percentile of one point's latencies, read two ways: ``empirical`` as the bench reports it, and
    ``estimate`` as LoadGen's early stopping allows claiming it with 99% confidence (after discarding the
    ``discarded`` highest values). ``estimate`` is None, and ``needed`` says how many requests it takes,
    when there are too few requests for any bound."""

    percentile: float
    n: int
    empirical: float | None
    estimate: float | None
    discarded: int
    needed: int | None

    @property
    def words(self) -> str:
        """One line for a table cell or a report: the estimate, or why there is none."""
        if self.estimate is None:
            return f"too few: {self.n} requests, a {_label(self.percentile)} needs at least {self.needed}"
        return (
            f"{_label(self.percentile)} <= {self.estimate:g} with 99% confidence "
            f"({self.n} requests, {self.discarded} highest discarded)"
        )


def tail(values: Sequence[float], p: float, c: float = CONFIDENCE) -> TailEstimate:
    """The p-th percentile of ``values`` with LoadGen's single-stream early-stopping estimate beside it:
    the values sorted ascending, ``sorted[n - t]`` for the t its loop finds.

    The loop asks h(2), h(3), ... up to t ~ n(1 - p), each a short search: a p99 of 100,000 requests takes
    ~40 ms, a p50 of them ~3 s the first time (the answers are kept per process, so later points are fast)."""
    _check(p, 0.0, c)
    ordered = sorted(values)
    n = len(ordered)
    empirical = percentile(ordered, p * 100)
    least = min_queries(p, c)
    if n < least:
        return TailEstimate(p, n, empirical, None, 0, least)
    t = _overlatency_allowance(n, p, c)
    return TailEstimate(p, n, empirical, ordered[n - t], t - 1, None)


# --- SLO verdicts ------------------------------------------------------------------------------------------

Verdict = Literal["meets", "misses", "too-few"]


@dataclass(frozen=True)
class SloVerdict:
    """Whether one point's p-th percentile meets a latency limit, by LoadGen's Server-scenario rule.

    ``meets``: LoadGen would call the run successful (n >= h + t for the t requests over the limit).
    ``misses``: not successful, and the percentile the bench reports is already over the limit: the
    requests measured so far say the point fails, and only requests unlike them could change that.
    ``too-few``: not successful, yet the reported percentile is within the limit: the point looks fine but
    the requests do not prove it; ``needed_more`` more, every one within the limit, would (LoadGen's
    "would need at least h + t - n more queries").

    LoadGen's two rules differ by one order statistic, and so do these: "meets" with t over the limit needs
    n >= h(t) + t, while the single-stream estimate (``tail``) reads sorted[n - t'] for the last t' with
    n >= h(t') + t', counting the estimate's own request as over. So an estimate within the limit implies
    "meets", but "meets" can stand beside an estimate just over it (63 requests at 1 ms and one at 5 ms meet
    a 2 ms p90, whose estimate is 5 ms); what "meets" does imply is that the value below the estimate,
    sorted[n - t' - 1], is within the limit."""

    limit: float
    percentile: float
    n: int
    over: int
    verdict: Verdict
    needed_more: int


def slo_verdict(values: Sequence[float], limit: float, p: float, c: float = CONFIDENCE) -> SloVerdict:
    """Judge ``values`` against ``limit`` at the p-th percentile (see SloVerdict for the three answers).

    A value counts as over when strictly greater than the limit, as in LoadGen. "misses" and "too-few"
    split LoadGen's one "unsuccessful" by the bench's own percentile, so the verdict never contradicts the
    number printed beside it: over the limit is "misses"; within it, "too-few"."""
    _check(p, 0.0, c)
    n = len(values)
    over = sum(1 for v in values if v > limit)
    h = _Finder()(over, p, 0.0, c)
    if n >= h + over:
        return SloVerdict(limit, p, n, over, "meets", 0)
    empirical = percentile(sorted(values), p * 100)
    if empirical is not None and empirical > limit:
        return SloVerdict(limit, p, n, over, "misses", 0)
    return SloVerdict(limit, p, n, over, "too-few", h + over - n)


# --- Proportions -------------------------------------------------------------------------------------------


def wilson(successes: int, n: int, z: float = 1.959963984540054) -> tuple[float, float] | None:
    """The Wilson score interval (95% by default) for a share such as SLO attainment or an accuracy.

    Unlike the normal approximation it stays within [0, 1] and is not zero-width at 0 or n successes, which
    is where attainment usually sits. None for n == 0: no requests, no share."""
    if n < 0 or not 0 <= successes <= n:
        raise ValueError(f"{successes} successes of {n}: write 0 <= successes <= n")
    if not (math.isfinite(z) and z > 0):
        raise ValueError(f"z {z!r}: write a positive finite quantile, e.g. 1.96")
    if n == 0:
        return None
    share = successes / n
    z2 = z * z
    scale = 1 + z2 / n
    centre = (share + z2 / (2 * n)) / scale
    half = z / scale * math.sqrt(share * (1 - share) / n + z2 / (4 * n * n))
    # At 0 and n the bound is exactly the share; elsewhere rounding must not push it past the share either.
    lo = 0.0 if successes == 0 else min(max(centre - half, 0.0), share)
    hi = 1.0 if successes == n else max(min(centre + half, 1.0), share)
    return lo, hi


# --- SLO text ----------------------------------------------------------------------------------------------

SLO_KEYS = ("ttft", "tpot", "e2el")
_SLO_HOWTO = "write e.g. ttft:300,tpot:50,e2el:2000 (milliseconds; keys ttft, tpot, e2el)"
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)


def _slo_item(item: str) -> tuple[str, float]:
    """One ``key:milliseconds`` pair, refused with a message that says how to write it."""
    key, colon, number = item.partition(":")
    if not colon:
        raise ValueError(f"SLO item {item!r} has no ':': {_SLO_HOWTO}")
    if key not in SLO_KEYS:
        raise ValueError(f"SLO key {key!r} is not one of ttft, tpot, e2el: {_SLO_HOWTO}")
    if not _NUMBER.fullmatch(number):
        raise ValueError(f"SLO {key} value {number!r} is not a number: {_SLO_HOWTO}")
    value = float(number)
    if not math.isfinite(value):
        raise ValueError(f"SLO {key} value {number!r} is not finite: {_SLO_HOWTO}")
    if value < 0:
        raise ValueError(f"SLO {key} value {number!r} is negative: {_SLO_HOWTO}")
    return key, value


def parse_slo(text: str) -> dict[str, float]:
    """Limits in milliseconds from ``ttft:300,tpot:50,e2el:2000``, the syntax ``vllm bench serve --goodput``
    takes (it also takes them space-separated, ``ttft:300 tpot:50``, and so does this).

    Only ValueError escapes, with one line saying what is wrong and how to write it."""
    items = [item for item in re.split(r"[,\s]+", text) if item]
    if not items:
        raise ValueError(f"empty SLO: {_SLO_HOWTO}")
    limits: dict[str, float] = {}
    for item in items:
        key, value = _slo_item(item)
        if key in limits:
            raise ValueError(f"SLO key {key!r} given twice: {_SLO_HOWTO}")
        limits[key] = value
    return limits
