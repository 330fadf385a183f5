"""Open-loop arrivals (agents/loadgen/arrivals.py) and rate-paced runs of the load generator.

The schedule's properties are checked over many draws (hypothesis): the mean interval is 1/R, the intervals'
coefficient of variation is about 1/sqrt(K) (a gamma of shape K), and a seed gives the same schedule again.
The runs go against testbed/zero_server.py, a real server process: what is asserted is order and counts
(no request is sent before its time, never more than C in flight, a faster rate sends faster), not timing.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.loadgen import main
from agents.loadgen.arrivals import arrival_offsets
from tests.support.listening import start_listening, stop

ROOT = Path(__file__).resolve().parents[1]

rates = st.floats(min_value=0.01, max_value=10_000.0, allow_nan=False, allow_infinity=False)
shapes = st.floats(min_value=0.25, max_value=16.0, allow_nan=False, allow_infinity=False)
seeds = st.integers(min_value=0, max_value=2**31 - 1)


def intervals(offsets: list[float]) -> list[float]:
    return [b - a for a, b in zip([0.0, *offsets], offsets, strict=False)]


@settings(max_examples=25, deadline=None)
@given(rate=rates, burstiness=shapes, seed=seeds)
def test_intervals_have_mean_one_over_the_rate_and_the_cv_of_a_gamma_of_that_shape(
    rate: float, burstiness: float, seed: int
) -> None:
    n = 20_000
    offsets = arrival_offsets(n, rate, burstiness, seed)
    gaps = intervals(offsets)
    assert len(offsets) == n and all(g >= 0 for g in gaps)
    assert statistics.fmean(gaps) == pytest.approx(1 / rate, rel=1e-9)  # the span is n/R exactly
    cv = statistics.pstdev(gaps) / statistics.fmean(gaps)
    # 20,000 draws: the sample CV is within a few percent of the gamma's 1/sqrt(K)
    assert cv == pytest.approx(1 / math.sqrt(burstiness), rel=0.08)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(min_value=1, max_value=500), rate=rates, burstiness=shapes, seed=seeds)
def test_a_seed_gives_the_same_schedule_and_another_seed_another(
    n: int, rate: float, burstiness: float, seed: int
) -> None:
    first = arrival_offsets(n, rate, burstiness, seed)
    assert first == arrival_offsets(n, rate, burstiness, seed)
    assert first == sorted(first) and first[-1] == pytest.approx(n / rate)
    if n > 1:
        assert first != arrival_offsets(n, rate, burstiness, seed + 1)


def test_burstier_arrivals_bunch_up_and_smoother_ones_even_out() -> None:
    cvs = {
        k: statistics.pstdev(g) / statistics.fmean(g)
        for k in (0.25, 1.0, 4.0)
        for g in [intervals(arrival_offsets(5000, 2.0, k, 7))]
    }
    assert cvs[0.25] > cvs[1.0] > cvs[4.0]


@pytest.mark.parametrize(
    ("rate", "burstiness"), [(0.0, 1.0), (-1.0, 1.0), (math.inf, 1.0), (1.0, 0.0), (1.0, math.nan)]
)
def test_a_rate_or_burstiness_not_above_zero_and_finite_is_refused(rate: float, burstiness: float) -> None:
    with pytest.raises(ValueError, match="finite number above 0"):
        arrival_offsets(10, rate, burstiness, 1)


# ---------------------------------------------------------------- paced runs against a real server


@pytest.fixture(scope="module")
def paced_server() -> Iterator[str]:
    """The zero server pacing its tokens (one every 20 ms), so requests stay in flight long enough to overlap."""
    proc, url = start_listening(
        [sys.executable, str(ROOT / "testbed" / "zero_server.py"), "--port", "0", "--itl-ms", "20"]
    )
    yield url
    stop(proc)


def paced_run(
    capsys: pytest.CaptureFixture[str], url: str, records: Path, *extra: str, prompts: int = 30, c: int = 4
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    fixed = "--model zero --vocab-size 1000 --input-len 8 --output-len 8 --warmup 2 --seed 5 --json --quiet"
    rc = main(
        ["--base-url", url, "--concurrency", str(c), "--prompts", str(prompts), "--records", str(records)]
        + [*fixed.split(), *extra]
    )
    out = json.loads(capsys.readouterr().out)
    assert rc == 0, out
    lines = [json.loads(line) for line in records.read_text().splitlines()[1:]]
    return out, lines


def most_in_flight(lines: list[dict[str, Any]]) -> int:
    edges = sorted([(r["start_ms"], 1) for r in lines] + [(r["end_ms"], -1) for r in lines])
    level = peak = 0
    for _, step in edges:
        level += step
        peak = max(peak, level)
    return peak


@pytest.mark.parametrize("processes", ["1", "2"])
def test_a_paced_run_sends_no_request_before_its_arrival_and_reports_its_pacing(
    paced_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], processes: str
) -> None:
    out, lines = paced_run(
        capsys, paced_server, tmp_path / "r.jsonl", "--request-rate", "40", "--processes", processes
    )
    assert (out["request_rate"], out["burstiness"]) == (40.0, 1.0)
    assert out["requests"] == out["completed"] == 30 and len(lines) == 30  # warm-up not counted
    schedule = arrival_offsets(30, 40.0, 1.0, 5)
    for r in lines:
        assert r["start_ms"] >= schedule[r["i"]] * 1000 - 1e-3, r  # released at its time, never before
    # the achieved rate cannot exceed the rate asked: the last request leaves at n/R or later
    assert out["req_per_s"] <= 40.0


def test_the_concurrency_caps_the_requests_in_flight_and_none_is_skipped(
    paced_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 1000 req/s against requests of about 160 ms: arrivals pile up behind a cap of 2
    out, lines = paced_run(
        capsys, paced_server, tmp_path / "r.jsonl", "--request-rate", "1000", c=2, prompts=12
    )
    assert most_in_flight(lines) == 2
    assert sorted(r["i"] for r in lines) == list(range(12)) and out["failed"] == 0


def test_a_faster_rate_sends_faster_and_burstiness_is_reported(
    paced_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    slow, _ = paced_run(capsys, paced_server, tmp_path / "slow.jsonl", "--request-rate", "10", prompts=10)
    fast, _ = paced_run(
        capsys,
        paced_server,
        tmp_path / "fast.jsonl",
        "--request-rate",
        "60",
        "--burstiness",
        "0.5",
        prompts=10,
    )
    assert slow["req_per_s"] < fast["req_per_s"]
    assert (fast["request_rate"], fast["burstiness"]) == (60.0, 0.5)


def test_a_closed_loop_run_reports_no_pacing(
    paced_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, _ = paced_run(capsys, paced_server, tmp_path / "r.jsonl", prompts=8)
    assert (out["request_rate"], out["burstiness"]) == (None, None)


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--burstiness", "2"], "without --request-rate"),
        (["--request-rate", "0"], "--request-rate 0.0: must be a finite number above 0"),
        (["--request-rate", "nan"], "--request-rate nan"),
        (["--request-rate", "1", "--burstiness", "-1"], "--burstiness -1.0"),
    ],
)
def test_bad_pacing_is_refused_in_one_line(
    paced_server: str, capsys: pytest.CaptureFixture[str], flags: list[str], said: str
) -> None:
    rc = main(
        ["--base-url", paced_server, "--model", "zero", "--shape", "router", "--concurrency", "1", *flags]
    )
    err = capsys.readouterr().err
    assert rc == 2 and said in err and len(err.strip().splitlines()) == 1
