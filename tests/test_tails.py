"""Tail latencies and SLO verdicts (console/tails.py) against MLPerf LoadGen's own answers, and by property.

The table tests/fixtures/loadgen/early_stopping.tsv was captured from LoadGen's C++ (testbed/loadgen_table.py
compiles tests/fixtures/loadgen/harness.cc against the mlcommons-loadgen 6.0.17 sdist): the port must give
every row exactly, not nearly. Nothing here compiles or reaches the network.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agents.loadgen import metrics
from console import tails

TABLE = Path(__file__).parent / "fixtures" / "loadgen" / "early_stopping.tsv"
SDIST_SHA256 = "a2e85d09e3cc0c606f89bfe1fbf97537c8b5b238ae0afbd923ad9c710fcf2ca8"

Row = tuple[str, float, int, int, int]


@cache
def rows() -> tuple[Row, ...]:
    """The table's data rows: kind, p, t or n, then one or two numbers (-1 where none)."""
    out: list[Row] = []
    for line in TABLE.read_text().splitlines()[4:]:
        kind, p, x, y, *z = line.split("\t")
        out.append((kind, float(p), int(x), int(y), int(z[0]) if z else -1))
    return tuple(out)


def of_kind(kind: str) -> Iterator[Row]:
    return (row for row in rows() if row[0] == kind)


def test_table_names_the_sdist_it_was_captured_from() -> None:
    head = TABLE.read_text().splitlines()[:4]
    assert "mlcommons-loadgen 6.0.17" in head[0] and SDIST_SHA256 in head[0]
    assert head[3] == "kind\tp\tx\ty\tz"
    assert {row[1] for row in rows()} == {0.5, 0.9, 0.95, 0.97, 0.99, 0.999}
    assert sum(1 for _ in of_kind("finder")) == sum(1 for _ in of_kind("seq")) + 6  # seq has no t = 0


def test_min_passing_equals_loadgens_fresh_finder() -> None:
    wrong = [(p, t, h, tails.min_passing(t, p)) for _, p, t, h, _ in of_kind("finder")]
    assert [w for w in wrong if w[2] != w[3]] == []


def test_a_finder_asked_in_order_equals_loadgens() -> None:
    """The single-stream loop's finder is asked t = 1, 2, ...: its cache narrows each search, and the
    answers (LoadGen's and the port's) are the fresh finder's on this grid."""
    finders: dict[float, tuple[tails._Finder, list[int]]] = {}
    wrong = []
    for _, p, t, h, _ in of_kind("seq"):
        finder, hs = finders.setdefault(p, (tails._Finder(), [0]))
        while len(hs) <= t:
            hs.append(finder(len(hs), p, 0.0, 0.99))
        if hs[t] != h or tails.min_passing(t, p) != h:
            wrong.append((p, t, h, hs[t]))
    assert wrong == []


def test_tail_reads_the_order_statistic_loadgen_reads() -> None:
    """With values 0, 1, ..., n - 1 the estimate is the index LoadGen reads; too few gives its count."""
    wrong = []
    for _, p, n, index, need in of_kind("tail"):
        got = tails.tail([float(i) for i in range(n)], p)
        found = (-1 if got.estimate is None else int(got.estimate), -1 if got.needed is None else got.needed)
        if found != (index, need) or (got.estimate is not None and got.discarded != n - 1 - index):
            wrong.append((p, n, index, need, found))
    assert wrong == []


def test_min_queries_is_loadgens_count_for_an_estimate() -> None:
    needs = {p: need for _, p, _, index, need in of_kind("tail") if index == -1}
    assert needs == {p: tails.min_queries(p) for p in needs}
    assert tails.min_queries(0.99) == 662  # the figure MLPerf's rules quote for a p99


def test_words() -> None:
    few = tails.tail([1.0] * 100, 0.99)
    assert few.words == "too few: 100 requests, a p99 needs at least 662"
    assert tails.tail([1.0], 0.999).words == "too few: 1 requests, a p99.9 needs at least 6636"
    many = tails.tail([float(i) for i in range(1000)], 0.99)
    assert many.estimate is not None and f"p99 <= {many.estimate:g}" in many.words


def test_empty_and_bad_arguments() -> None:
    empty = tails.tail([], 0.9)
    assert (empty.empirical, empty.estimate, empty.needed) == (None, None, 64)
    assert tails.slo_verdict([], 100.0, 0.9) == tails.SloVerdict(100.0, 0.9, 0, 0, "too-few", 44)
    for p in (0.0, 1.0, -0.5, math.nan):
        with pytest.raises(ValueError, match="percentile"):
            tails.tail([1.0], p)
    with pytest.raises(ValueError, match="count"):
        tails.min_passing(-1, 0.9)


# --- SLO verdicts ------------------------------------------------------------------------------------------


def test_verdict_meets_misses_and_too_few() -> None:
    over = [500.0] * 5
    assert tails.slo_verdict([10.0] * 1302 + over, 300.0, 0.99).verdict == "meets"  # 5 over need 1307 in all
    assert tails.slo_verdict([10.0] * 1301 + over, 300.0, 0.99).needed_more == 1
    assert tails.slo_verdict([10.0] * 80 + [500.0] * 20, 300.0, 0.9) == tails.SloVerdict(
        300.0, 0.9, 100, 20, "misses", 0
    )
    few = tails.slo_verdict([10.0] * 700 + [500.0] * 3, 300.0, 0.99)
    assert (few.verdict, few.over, few.needed_more) == ("too-few", 3, tails.min_passing(3, 0.99) + 3 - 703)
    assert tails.slo_verdict([300.0] * 700, 300.0, 0.99).over == 0  # at the limit is not over, as in LoadGen


def test_meets_can_stand_beside_an_estimate_one_order_statistic_over() -> None:
    """LoadGen's Server rule counts the t over the limit; its single-stream estimate counts its own request
    as over too. 64 requests, one over a p90 limit: Server says successful, the estimate is the maximum."""
    values = [1.0] * 63 + [5.0]
    assert tails.slo_verdict(values, 2.0, 0.9).verdict == "meets"
    assert tails.tail(values, 0.9).estimate == 5.0


LATENCIES = st.lists(st.integers(min_value=0, max_value=40).map(float), max_size=400)
PERCENTILES = st.sampled_from([0.5, 0.9, 0.95])


@settings(max_examples=150, deadline=None)
@given(values=LATENCIES, limit=st.integers(min_value=0, max_value=40).map(float), p=PERCENTILES)
@example(values=[1.0] * 63 + [5.0], limit=2.0, p=0.9)
def test_verdict_and_estimate_agree_within_one_order_statistic(
    values: list[float], limit: float, p: float
) -> None:
    """An estimate within the limit implies "meets"; "meets" implies the value below the estimate is
    within the limit (see SloVerdict); "misses" is exactly the reported percentile being over the limit."""
    verdict = tails.slo_verdict(values, limit, p)
    estimate = tails.tail(values, p)
    ordered = sorted(values)
    if estimate.estimate is not None and estimate.estimate <= limit:
        assert verdict.verdict == "meets"
    if verdict.verdict == "meets" and estimate.estimate is not None and estimate.discarded + 1 < len(values):
        assert ordered[len(values) - estimate.discarded - 2] <= limit
    empirical = metrics.percentile(ordered, p * 100)
    if verdict.verdict != "meets":
        assert (verdict.verdict == "misses") == (empirical is not None and empirical > limit)
    assert (verdict.needed_more > 0) == (verdict.verdict == "too-few")
    assert verdict.over == sum(1 for v in values if v > limit)


@settings(max_examples=100, deadline=None)
@given(values=LATENCIES, limit=st.integers(min_value=0, max_value=40).map(float), more=st.integers(1, 300))
def test_requests_within_the_limit_only_bring_meets_nearer(
    values: list[float], limit: float, more: int
) -> None:
    """Each further request within the limit cuts ``needed_more`` by one until the point meets; a point that
    misses stays missed or meets, one that is too few never turns into a miss."""
    before = tails.slo_verdict(values, limit, 0.9)
    after = tails.slo_verdict(values + [min(limit, 0.0)] * more, limit, 0.9)
    if before.verdict == "too-few":
        assert after.verdict in ("too-few", "meets")
        assert after.needed_more == max(before.needed_more - more, 0)
    if before.verdict == "meets":
        assert after.verdict == "meets"


# --- Tails -------------------------------------------------------------------------------------------------


def drawn(seed: int, n: int, ties: bool) -> list[float]:
    """n latencies from a seeded generator: long lists without Hypothesis drawing each element (slow)."""
    rng = random.Random(seed)
    if ties:
        return [float(rng.randrange(30)) for _ in range(n)]
    return [rng.lognormvariate(3.0, 1.0) for _ in range(n)]


@settings(max_examples=150, deadline=None)
@given(
    values=st.lists(st.floats(min_value=0.0, max_value=1e5, allow_nan=False), max_size=200)
    | st.builds(drawn, st.integers(0, 2**32), st.integers(0, 3000), st.booleans()),
    p=st.sampled_from([0.5, 0.9, 0.95, 0.97, 0.99]),
)
def test_estimate_is_never_below_the_empirical_percentile(values: list[float], p: float) -> None:
    got = tails.tail(values, p)
    assert got.empirical == metrics.percentile(sorted(values), p * 100)
    if got.estimate is not None:
        assert got.empirical is not None and got.estimate >= got.empirical
    assert (got.estimate is None) == (got.needed is not None) == (len(values) < tails.min_queries(p))


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(min_value=0, max_value=3000), more=st.integers(min_value=0, max_value=3000), p=PERCENTILES
)
def test_more_requests_never_need_more(n: int, more: int, p: float) -> None:
    """``needed`` only ever goes from a count to None, and the estimate never discards fewer."""
    first = tails.tail([float(i) for i in range(n)], p)
    second = tails.tail([float(i) for i in range(n + more)], p)
    assert second.needed is None or (first.needed is not None and second.needed <= first.needed)
    assert second.discarded >= first.discarded


# --- Wilson ------------------------------------------------------------------------------------------------


@given(n=st.integers(min_value=0, max_value=10**9), share=st.floats(0.0, 1.0), z=st.floats(0.01, 10.0))
def test_wilson_contains_the_share_and_stays_in_unit_interval(n: int, share: float, z: float) -> None:
    successes = round(share * n)
    interval = tails.wilson(successes, n, z)
    if n == 0:
        assert interval is None
        return
    assert interval is not None
    lo, hi = interval
    assert 0.0 <= lo <= successes / n <= hi <= 1.0


def test_wilson_known_values_and_refusals() -> None:
    interval = tails.wilson(95, 100)
    assert interval is not None and interval == pytest.approx((0.8882, 0.9785), abs=1e-4)
    zero = tails.wilson(0, 10)
    assert zero is not None and zero[0] == 0.0 and zero[1] == pytest.approx(0.2775, abs=1e-4)
    for successes, n in ((-1, 5), (6, 5), (0, -1)):
        with pytest.raises(ValueError):
            tails.wilson(successes, n)


# --- SLO text ----------------------------------------------------------------------------------------------

LIMITS = st.dictionaries(
    st.sampled_from(tails.SLO_KEYS), st.floats(min_value=0.0, max_value=1e12, allow_nan=False), min_size=1
)


@given(limits=LIMITS, separator=st.sampled_from([",", " ", ", ", "  "]))
def test_parse_slo_round_trips(limits: dict[str, float], separator: str) -> None:
    text = separator.join(f"{key}:{value!r}" for key, value in limits.items())
    assert tails.parse_slo(text) == limits


@given(text=st.text(max_size=40))
@example(text="ttft:1e999")
@example(text="ttft:nan")
@example(text="ttft:٣")
def test_parse_slo_refuses_garbage_with_value_error_only(text: str) -> None:
    try:
        limits = tails.parse_slo(text)
    except ValueError as error:
        assert "\n" not in str(error)
        return
    assert set(limits) <= set(tails.SLO_KEYS)
    assert all(math.isfinite(v) and v >= 0 for v in limits.values())


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("ttft:300,tpot:50,e2el:2000", None),
        ("ttft:300 tpot:50", None),
        ("TTFT:300", "not one of"),
        ("itl:5", "not one of"),
        ("ttft:-1", "negative"),
        ("ttft:nan", "not a number"),
        ("ttft:inf", "not a number"),
        ("ttft:1e400", "not finite"),
        ("ttft:300,ttft:200", "twice"),
        ("ttft300", "no ':'"),
        ("ttft:", "not a number"),
        ("", "empty"),
        (" , ", "empty"),
    ],
)
def test_parse_slo_messages(text: str, what: str | None) -> None:
    if what is None:
        assert tails.parse_slo(text) == {
            "ttft": 300.0,
            "tpot": 50.0,
            **({"e2el": 2000.0} if "e2el" in text else {}),
        }
        return
    with pytest.raises(ValueError, match=what) as caught:
        tails.parse_slo(text)
    assert "ttft:300,tpot:50,e2el:2000" in str(caught.value)
