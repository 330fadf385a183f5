"""``campaign requests ROW``: a bench run read from its stored request timings. Tails carry LoadGen's
early-stopping estimate (or say how many requests they need), both interactivity definitions are shown and
labelled, and an SLO given afterwards gives attainment with its Wilson interval, goodput and a p99 verdict
per limit, with no re-run."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agents.loadgen.metrics import TIMING_COLUMNS
from console.readmodel import request_figures
from console.store import Box, Store
from console.tails import min_queries, wilson
from tests.support.cli import run_cli

T0 = 1_788_658_020_000


def _rows(n: int, slow_every: int = 0, failed: int = 0) -> list[list[Any]]:
    """``n`` requests: TTFT 20 ms, TPOT 10 ms over 33 tokens (E2E 340 ms); every ``slow_every``-th has a
    TTFT of 900 ms; the last ``failed`` failed before any token."""
    rows: list[list[Any]] = []
    for i in range(n):
        ttft = 900.0 if slow_every and i % slow_every == 0 else 20.0
        if i >= n - failed:
            rows.append([float(i), 0, None, None, None, None, None, 16, 0, "HTTP 500: boom"])
            continue
        rows.append([float(i), 0, ttft, 10.0, 10.0, 12.0, ttft + 320.0, 16, 33, None])
    return rows


def _store_bench(db: Path, rows: list[list[Any]], run_id: str = "bench-1") -> int:
    with Store(db, clock=lambda: T0) as store:
        store.boxes.add(Box(name="b1", host="127.0.0.1", ssh_user="u"))
        result = {
            "requests": len(rows),
            "failed": sum(1 for r in rows if r[-1] is not None),
            "out_tok_per_s": 800.0,
            "in_tok_per_s": 400.0,
            "duration_s": 10.0,
            "request_timings": {"columns": list(TIMING_COLUMNS), "rows": rows, "omitted": 0},
        }
        return store.results.add_bench_run(
            {
                **result,
                "arm": "tiny-cpu",
                "shape": "short",
                "concurrency": 8,
                "box": "b1",
                "run_id": run_id,
                "t_ms": T0,
                "raw": result,
            }
        )


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "state.db"


def test_a_p99_from_too_few_requests_says_so_and_a_p90_has_its_estimate(db: Path) -> None:
    bench_id = _store_bench(db, _rows(200, slow_every=50))
    code, out, _ = run_cli(db, "requests", str(bench_id))
    assert code == 0, out
    assert f"row {bench_id}: tiny-cpu short C8 on b1: 200 requests (200 ok, 0 failed)" in out
    ttft = next(line for line in out.splitlines() if line.strip().startswith("ttft"))
    assert f"too few (needs {min_queries(0.99)})" in ttft  # 200 < 662: no p99 can be claimed
    assert "est." in ttft  # 200 >= 64: a p90 estimate exists
    assert "(1000/median TPOT)" in out and "(output tok/s / C)" in out
    assert "100.0 tok/s/user (1000/median TPOT)" in out  # TPOT 10 ms
    assert "100.0 tok/s/user (output tok/s / C)" in out  # 800 out tok/s over 8 streams
    assert "energy" not in out  # no launch, no GPU samples: nothing to integrate, nothing said


def test_an_slo_given_afterwards_counts_every_request_and_rests_its_verdict_on_the_estimate(db: Path) -> None:
    rows = _rows(1000, slow_every=10, failed=5)  # 100 slow TTFTs, 5 errors
    bench_id = _store_bench(db, rows)
    with Store(db) as store:
        figures = request_figures(store, str(bench_id), {"ttft": 300.0, "tpot": 50.0})
    slo = figures.slo
    assert slo is not None
    good = 1000 - 100 - 5  # a failed request never meets an SLO
    assert (slo.good, slo.n) == (good, 1000)
    assert slo.interval == wilson(good, 1000)
    assert slo.goodput_req_per_s == pytest.approx(good / 10.0)
    verdicts = dict(slo.verdicts)
    assert verdicts["ttft"].verdict == "misses" and verdicts["ttft"].over == 105  # the failed count as over
    # Every TPOT is 10 ms, but five requests failed: at 99% confidence a p99 under 50 ms needs more requests.
    assert verdicts["tpot"].verdict == "too-few" and verdicts["tpot"].over == 5
    assert verdicts["tpot"].needed_more > 0
    assert slo.verdict == "misses"

    code, out, _ = run_cli(db, "requests", "bench-1", "--slo", "ttft:300,tpot:50", "--json")
    assert code == 0
    data = json.loads(out)
    assert (
        data["bench_row"] == bench_id and data["slo"]["good"] == good and data["slo"]["verdict"] == "misses"
    )
    assert "attainment" in data["definitions"] and "interactivity (1000/TPOT)" in data["definitions"]


def test_a_p99_verdict_with_too_few_requests_says_how_many_more(db: Path) -> None:
    bench_id = _store_bench(db, _rows(100))
    code, out, _ = run_cli(db, "requests", str(bench_id), "--slo", "e2el:1000")
    assert code == 0
    assert "SLO e2el <= 1000 ms: too-few" in out
    assert "100 of 100 requests meet every limit: 100.0% (Wilson 95%:" in out
    assert "needs" in out.split("p99 e2el: too-few")[1]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["requests", "99"], "no bench row '99'"),
        (["requests", "1", "--slo", "ttft:-3"], "--slo 'ttft:-3'"),
        (["requests", "1", "--slo", "latency:30"], "--slo 'latency:30'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(db: Path, argv: list[str], said: str) -> None:
    _store_bench(db, _rows(10))
    code, out, err = run_cli(db, *argv)
    assert code == 2 and out == ""
    assert said in err and len(err.strip().splitlines()) <= 2, err


def test_a_row_without_timings_says_why_and_what_to_do(db: Path) -> None:
    with Store(db, clock=lambda: T0) as store:
        bench_id = store.results.add_bench_run(
            {"arm": "a", "shape": "short", "concurrency": 2, "t_ms": T0, "out_tok_per_s": 5.0, "raw": {}}
        )
    code, _, err = run_cli(db, "requests", str(bench_id))
    assert code == 2 and "has no request timings" in err and "campaign bench" in err
