"""A curve point is valid or says why not, and is kept either way: a power limit that changed in its window,
a gap in its GPU samples, clocks slowed by heat, a concurrency it did not achieve, failed requests, a client
that set the pace, a failed tripwire. ``campaign curve --rerun-invalid`` measures only the invalid points
again, keeping their earlier rows. The state.db is built through the store's own ingest, as a box journals it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.loadgen.metrics import TIMING_COLUMNS
from console.readmodel import curve
from console.readmodel.curve_validity import ACHIEVED_SHARE, achieved_concurrency, point_validity
from console.readmodel.requests import RequestTiming
from console.service import CurvePlan, Service
from console.store import Box, Store
from tests.support.cli import run_cli

T0 = 1_788_658_020_000
WINDOW_MS = 10_000
C = 4


def _closed_loop(n: int, streams: int, durations: list[float]) -> list[list[Any]]:
    """``n`` requests from one shared queue over ``streams`` streams, each sent the moment its stream's last one
    ended (the load generator's closed loop); request k lasts ``durations[k % len(durations)]`` ms."""
    free = [0.0] * streams
    rows: list[list[Any]] = []
    for k in range(n):
        s = min(range(streams), key=lambda i: free[i])
        start, e2e = free[s], durations[k % len(durations)]
        free[s] = start + e2e
        rows.append([start, 0, 5.0, 1.0, 1.0, 2.0, e2e, 16, 8, None])
    rows.sort(key=lambda r: r[0])
    return rows


def _timings(rows: list[list[Any]]) -> list[RequestTiming]:
    return [RequestTiming(1, i, *r) for i, r in enumerate(rows)]


@settings(max_examples=60, deadline=None)
@given(
    streams=st.integers(1, 16),
    per_stream=st.integers(3, 12),
    durations=st.lists(st.floats(1.0, 500.0), min_size=1, max_size=7),
)
def test_a_closed_loop_achieves_its_concurrency_and_half_of_it_does_not(
    streams: int, per_stream: int, durations: list[float]
) -> None:
    full = _timings(_closed_loop(streams * per_stream, streams, durations))
    assert achieved_concurrency(full, streams) == pytest.approx(streams)
    if streams >= 2:  # the same requests on half the streams: what a server that admits half would give
        half = _timings(_closed_loop(streams * per_stream, streams // 2, durations))
        achieved = achieved_concurrency(half, streams)
        assert achieved is not None and achieved < ACHIEVED_SHARE * streams


def test_one_request_per_stream_is_judged_by_the_most_in_flight() -> None:
    rows = _closed_loop(C, C, [100.0])
    assert achieved_concurrency(_timings(rows), C) == C
    assert achieved_concurrency([], C) is None


# ---------------------------------------------------------------- points judged from the store


def _gpu(limit: float = 600.0, throttle: int | None = None) -> dict[str, Any]:
    reading: dict[str, Any] = {"gpu": 0, "power_w": 300.0, "enforced_limit_w": limit, "power_limit_w": limit}
    if throttle is not None:
        reading["throttle_reasons"] = throttle
    return reading


def _curve(db: Path, runs: list[dict[str, Any]], samples: list[tuple[int, dict[str, Any]]]) -> int:
    """Box b1 with launch L1 on GPU 0, the ``samples`` (ms after T0, GPU 0's reading), and a curve of arm
    ``qwen`` whose point k is ``runs[k]`` (the load generator's result fields over the defaults), stored done.
    Each run k measures [T0 + k x WINDOW_MS, T0 + (k + 1) x WINDOW_MS]. Returns the curve id."""
    events: list[dict[str, Any]] = [
        {
            "kind": "launch_state",
            "launch_id": "L1",
            "arm": "qwen",
            "state": "serving",
            "t_ms": T0 - 60_000,
            "gpus": [0],
        }
    ]
    events += [{"kind": "gpu_sample", "t_ms": T0 + t, "gpus": [reading]} for t, reading in samples]
    with Store(db, clock=lambda: T0) as store:
        store.boxes.add(Box(name="b1", host="127.0.0.1", ssh_user="u"))
        report = store.ingest.batch("b1", [{"v": 1, "seq": i + 1, **e} for i, e in enumerate(events)])
        assert not report.quarantined, report.quarantined
        levels = [int(r.get("concurrency", C * (k + 1))) for k, r in enumerate(runs)]
        made = store.curves.create("qwen", "b1", "short", levels, 1, None)
        for k, given_run in enumerate(runs):
            start = T0 + k * WINDOW_MS
            rows = given_run.pop("rows", None) or _closed_loop(8 * levels[k], levels[k], [400.0, 900.0])
            result: dict[str, Any] = {
                "requests": len(rows),
                "failed": sum(1 for r in rows if r[-1] is not None),
                "out_tok_per_s": 100.0 * (k + 1),
                "duration_s": WINDOW_MS / 1000,
                "started_ms": start,
                "ended_ms": start + WINDOW_MS,
                "request_timings": {"columns": list(TIMING_COLUMNS), "rows": rows, "omitted": 0},
                **given_run,
            }
            bench_id = store.results.add_bench_run(
                {
                    **result,
                    "arm": "qwen",
                    "shape": "short",
                    "concurrency": levels[k],
                    "box": "b1",
                    "launch_id": "L1",
                    "run_id": f"bench-{k}",
                    "t_ms": start + WINDOW_MS,
                    "raw": result,
                }
            )
            store.curves.finish_point(made.id, k, None, [bench_id])
        store.curves.set_state(made.id, "done")
        return made.id


def _samples(
    limits: dict[int, float] | None = None, gap: range = range(0)
) -> list[tuple[int, dict[str, Any]]]:
    """1 Hz readings of GPU 0 over three windows; the limit read back is 600 W but where ``limits`` says."""
    changed = limits or {}
    return [(t, _gpu(changed.get(t, 600.0))) for t in range(-500, 3 * WINDOW_MS + 1000, 1000) if t not in gap]


def _states(db: Path, curve_id: int) -> list[tuple[bool | None, tuple[str, ...]]]:
    with Store(db, read_only=True) as store:
        view = curve(store, curve_id)
    return [(p.validity.valid, p.validity.reasons) if p.validity else (None, ()) for p in view.points]


def test_a_power_limit_changed_mid_window_makes_only_that_point_invalid(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    changed = {t: 400.0 for t in range(WINDOW_MS + 4_500, 3 * WINDOW_MS + 1000, 1000)}
    curve_id = _curve(db, [{}, {}], _samples(changed))
    (ok, none), (bad, why) = _states(db, curve_id)
    assert ok and none == ()
    assert bad is False and len(why) == 1 and "changed from 600 W to 400 W" in why[0], why


def test_a_gap_in_the_gpu_samples_makes_the_point_invalid(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    curve_id = _curve(db, [{}], _samples(gap=range(2_000, 8_000)))
    [(valid, why)] = _states(db, curve_id)
    assert valid is False and any("gap between power samples" in w for w in why), why


def test_failures_a_client_bound_run_and_a_short_concurrency_each_say_why(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    failed = _closed_loop(32, C, [400.0])
    failed[-1][-1] = "HTTP 500: boom"
    failed[-1][2:7] = [None] * 5
    runs: list[dict[str, Any]] = [
        {"concurrency": C, "rows": failed},
        {"concurrency": 2 * C, "client_bound": True, "client_cpu": 0.97},
        {"concurrency": 3 * C, "rows": _closed_loop(24 * C, C, [400.0])},  # only C of 3C in flight
    ]
    curve_id = _curve(db, runs, _samples())
    (v1, w1), (v2, w2), (v3, w3) = _states(db, curve_id)
    assert v1 is False and w1 == ("1 of 32 requests failed",), w1
    assert v2 is False and len(w2) == 1 and w2[0].startswith("client-bound"), w2
    assert v3 is False and len(w3) == 1 and f"achieved concurrency {C:.1f} of {3 * C}" in w3[0], w3


def test_a_rate_paced_point_is_not_held_to_its_cap(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    curve_id = _curve(db, [{"concurrency": 3 * C, "rows": _closed_loop(24 * C, C, [400.0])}], _samples())
    with Store(db) as store:
        [point] = store.curves.points(curve_id)
        store.db.execute("UPDATE curve_points SET rate = 2.5 WHERE curve_id = ?", [curve_id])
        judged = point_validity(store, point.bench_run_ids, paced=True)
    assert judged is not None and judged.valid


def test_thermal_slowdown_is_a_fault_and_the_power_cap_only_a_note(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    samples = [
        (t, _gpu(throttle=0x4 if t < WINDOW_MS else 0x40)) for t in range(-500, 2 * WINDOW_MS + 1000, 1000)
    ]
    curve_id = _curve(db, [{}, {}], samples)
    with Store(db, read_only=True) as store:
        first, second = curve(store, curve_id).points
    assert first.validity is not None and first.validity.valid
    assert any("held by software power cap" in n for n in first.validity.notes), first.validity.notes
    assert second.validity is not None and not second.validity.valid
    assert any("hardware thermal slowdown" in r for r in second.validity.reasons)


def test_the_curve_json_says_valid_or_why_not_and_the_table_marks_invalid(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    changed = {t: 400.0 for t in range(WINDOW_MS + 4_500, 3 * WINDOW_MS + 1000, 1000)}
    _curve(db, [{}, {}], _samples(changed))
    code, out, err = run_cli(db, "curves", "--json")
    assert code == 0, err
    [body] = json.loads(out)["curves"]
    first, second = body["points"]
    assert first["valid"] is True and first["invalid_reasons"] == []
    assert second["valid"] is False and "changed from 600 W to 400 W" in second["invalid_reasons"][0]
    # Each point states what it rests on: 8 x C requests here, too few for a p90 (64) or a p99 (662).
    assert (first["requests"], second["requests"]) == (32, 64)
    assert first["tails_supported"] == "none (p90 needs 64)"
    assert second["tails_supported"] == "p90 (p99 needs 662)"
    assert first["shortest_window_s"] == WINDOW_MS / 1000
    assert "a p99 needs at least 662" in json.loads(out)["definitions"]["requests"]

    code, out, err = run_cli(db, "curves")
    assert code == 0, err
    [line] = [x for x in out.splitlines() if x.strip().startswith("1 ")]
    assert "2/2" in line and line.split()[-2:] == ["1", "done"], line  # one of two points invalid
    code, out, err = run_cli(db, "curves", "1")
    assert code == 0, err
    assert "valid" in out and "invalid: GPU 0 on b1: the power limit read back changed" in out, out
    assert "REQS" in out and "each point states what it rests on" in out, out
    code, out, err = run_cli(db, "curves", "7")
    assert code == 2 and "no curve #7" in err, err


def test_reopening_the_invalid_points_keeps_their_rows_and_leaves_the_valid_ones(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    changed = {t: 400.0 for t in range(WINDOW_MS + 4_500, 3 * WINDOW_MS + 1000, 1000)}
    curve_id = _curve(db, [{}, {}], _samples(changed))
    with Store(db) as store:
        service = Service(store)
        before = store.curves.points(curve_id)
        plan = CurvePlan(store.curves.get(curve_id), True, "qwen", "b1")
        assert service.reopen_invalid(plan) == (1,)
        valid, reopened = store.curves.points(curve_id)
        assert valid == before[0]
        assert reopened.state == "pending" and reopened.bench_run_ids == ()
        assert reopened.replaced_run_ids == before[1].bench_run_ids
        assert reopened.reason is not None and reopened.reason.startswith("measured again: invalid (GPU 0")
        assert store.curves.get(curve_id).state == "interrupted"  # the same command resumes it
        assert store.scalar("SELECT count(*) FROM bench_runs") == 2  # nothing measured is lost
        assert service.reopen_invalid(plan) == ()  # a pending point is not judged again
