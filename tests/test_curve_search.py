"""The planners of curves chosen as they are measured (console/service/curve_search.py): the SLO search's
answer and probes for any monotone latency, the workload levels' order and place, the pooled p99s. End to end
on the CPU vLLM (an SLO search and a workload curve): tests/test_curves_vllm.py."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from console.readmodel.requests import RequestTiming
from console.service.curve_search import (
    pooled_p99s,
    slo_bracket,
    slo_next,
    workload_levels,
    workload_next,
)
from tests.support.cli import run_cli


def _search(threshold: int, maximum: int) -> tuple[list[int], dict[int, bool]]:
    """Run the SLO search against a server whose latency rises with C: every C <= threshold meets."""
    meets: dict[int, bool] = {}
    probes = []
    while (c := slo_next(meets, maximum)) is not None:
        probes.append(c)
        meets[c] = c <= threshold
        assert len(probes) <= 64
    return probes, meets


@given(st.integers(0, 5000), st.integers(1, 4096))
def test_slo_search_finds_largest_meeting_next_missing(threshold: int, maximum: int) -> None:
    probes, meets = _search(threshold, maximum)
    assert len(probes) == len(set(probes)), "a concurrency probed twice"
    assert all(1 <= c <= maximum for c in probes)
    b = slo_bracket(meets)
    if threshold == 0:
        assert b.meeting is None and b.missing == 1
    elif threshold >= maximum:
        assert b.meeting == maximum and b.missing is None
    else:
        assert b.meeting == threshold and b.missing == threshold + 1


def test_slo_search_doubles_then_bisects() -> None:
    probes, _ = _search(threshold=11, maximum=256)
    assert probes == [1, 2, 4, 8, 16, 12, 10, 11]


def test_slo_search_ignores_a_meeting_point_above_a_miss() -> None:
    assert slo_bracket({1: True, 2: True, 4: False, 8: True}).meeting == 2
    assert slo_next({1: True, 2: True, 4: False, 8: True}, 256) == 3


@given(
    st.floats(0.5, 4.0),
    st.floats(1.0, 5000.0),
    st.integers(1, 32),
    st.integers(2, 4096),
)
def test_workload_levels_lie_between_anchors(
    serial: float, saturated: float, iters: int, maximum: int
) -> None:
    levels = workload_levels(serial, saturated, iters, maximum)
    assert levels == sorted(set(levels))
    assert all(1 < c < maximum for c in levels)
    assert len(levels) <= iters


def test_workload_walk_anchors_then_levels() -> None:
    achieved: dict[int, float | None] = {}
    order = []
    while (c := workload_next(achieved, 2, 64)) is not None:
        order.append(c)
        achieved[c] = {1: 1.0, 64: 31.0}.get(c, float(c))
    # anchors C1 and C64, then 2 levels evenly between the achieved 1 and 31: 11 and 21
    assert order == [1, 64, 11, 21]


def _timing(i: int, ttft: float, error: str | None = None) -> RequestTiming:
    return RequestTiming(1, i, float(i), None, ttft, 10.0, None, None, ttft + 100, 10, 10, error)


def test_pooled_p99_counts_a_failure_as_over_and_says_too_few() -> None:
    ok = [_timing(i, 50.0) for i in range(50)]
    (ttft,) = pooled_p99s(ok, {"ttft": 100.0})
    assert ttft.meets and ttft.verdict == "too-few" and ttft.estimate_ms is None and ttft.n == 50
    (failed,) = pooled_p99s([*ok, _timing(50, 50.0, "reset")], {"ttft": 100.0})
    assert failed.n == 51 and not failed.meets


# ---------------------------------------------------------------- refusals and end to end on the CPU vLLM


def test_the_cli_refuses_a_search_with_explicit_points_and_stores_nothing(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    base = ("curve", "tiny-cpu", "--box", "local", "--shape", "tiny")
    for argv in (
        (*base, "--slo", "ttft:500", "--concurrency", "1,2"),
        (*base, "--slo", "ttft:500", "--workload-iters", "2"),
        (*base, "--slo", "ttfb:500"),
        (*base, "--workload-iters", "0"),
        (*base, "--slo", "ttft:500", "--rate", "1"),
        (*base, "--concurrency", "1,2", "--max-concurrency", "8"),
    ):
        code, _, err = run_cli(db, *argv)
        assert code == 2 and len(err.strip().splitlines()) == 1, (argv, err)
    assert not db.exists()
