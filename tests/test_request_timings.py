"""Every request's timings, measured once and kept: the load generator's ``request_timings`` block (vLLM's
definitions, within one journal event), its rows in ``bench_requests`` beside the bench row, a malformed
block that loses only itself, the migration, and the whole path through the real agent and load generator
against the zero-cost server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from agents.journal import MAX_EVENT_BYTES
from agents.loadgen import metrics
from agents.loadgen.run import TIMINGS_RESERVE_BYTES, request_timings
from agents.loadgen.worker import Record
from console.readmodel import RequestTiming, bench_request_count, bench_requests, request_figures
from console.store import Box, Store
from console.store.results import TIMING_COLUMNS
from testbed.agent_box import AgentBox
from tests.support.listening import start_listening, stop
from tests.test_loadgen import ZERO_SERVER

T0 = 1_788_658_020_000
BOX = "pro-a"
COLUMNS = list(metrics.TIMING_COLUMNS)


def rec(
    start: float,
    times: list[float],
    counts: list[int],
    tokens: int | None = None,
    error: str | None = None,
    target: int = 0,
) -> Record:
    return Record(
        0,
        0,
        start,
        times[-1] if times else start + 0.05,
        times,
        counts,
        prompt_tokens=None if error else 10,
        completion_tokens=None if error else (tokens if tokens is not None else sum(counts)),
        finish_reason=None if error else "length",
        error=error,
        target=target,
    )


# ---------------------------------------------------------------- the load generator's rows


def test_one_row_per_request_by_vllms_definitions() -> None:
    t0 = 100.0
    # Events at +0.1 (1), +0.3 (2 in one read), +0.4 (1): 4 tokens; TPOT (400 - 100) / 3 = 100 ms.
    r1 = rec(t0 + 1.0, [t0 + 1.1, t0 + 1.3, t0 + 1.4], [1, 2, 1], target=1)
    one = rec(t0 + 2.0, [t0 + 2.25], [1])  # one token: no TPOT, no gap
    failed = rec(t0 + 0.5, [], [], error="HTTP 500: boom")
    block = request_timings([r1, one, failed], t0, MAX_EVENT_BYTES)
    assert block["columns"] == COLUMNS and block["omitted"] == 0
    rows = [dict(zip(COLUMNS, row, strict=True)) for row in block["rows"]]
    assert [r["start_ms"] for r in rows] == [500.0, 1000.0, 2000.0]  # sorted by start, from the run's start
    bad, first, single = rows
    assert first == {
        "start_ms": 1000.0,
        "target": 1,
        "ttft_ms": 100.0,
        "tpot_ms": 100.0,
        "itl_p50_ms": 100.0,  # gaps 200, 0 (the read's second event), 100: median 100
        "itl_max_ms": 200.0,
        "e2e_ms": 400.0,
        "in_tokens": 10,
        "out_tokens": 4,
        "error": None,
    }
    assert single["tpot_ms"] is None and single["itl_p50_ms"] is None and single["itl_max_ms"] is None
    assert (single["ttft_ms"], single["e2e_ms"], single["out_tokens"]) == (250.0, 250.0, 1)
    assert bad["error"] == "HTTP 500: boom" and bad["ttft_ms"] is None and bad["e2e_ms"] is None
    assert (bad["in_tokens"], bad["out_tokens"]) == (None, 0)


def test_tpot_counts_the_servers_tokens_and_agrees_with_the_runs_own_figure() -> None:
    # One read carried 3 events but the server counted 5 tokens: TPOT divides by 5 - 1, as summarize does.
    r = rec(0.0, [0.2, 0.6], [1, 3], tokens=5)
    [row] = request_timings([r], 0.0, MAX_EVENT_BYTES)["rows"]
    values = dict(zip(COLUMNS, row, strict=True))
    assert values["tpot_ms"] == 100.0 and values["out_tokens"] == 5
    assert metrics.summarize([r], 1.0)["tpot_ms_p50"] == pytest.approx(values["tpot_ms"])
    assert values["itl_p50_ms"] == 0.0 and values["itl_max_ms"] == 400.0  # gaps 400, 0, 0


def test_times_are_rounded_to_the_microsecond() -> None:
    r = rec(0.0001234567, [0.0123456789], [1])
    [row] = request_timings([r], 0.0, MAX_EVENT_BYTES)["rows"]
    assert row[0] == 0.123 and row[2] == 12.222


def test_rows_past_the_events_bound_are_counted_as_omitted_never_a_failed_event() -> None:
    records = [rec(i * 0.01, [i * 0.01 + 0.1, i * 0.01 + 0.2], [1, 1]) for i in range(1000)]
    whole = request_timings(records, 0.0, MAX_EVENT_BYTES)
    size = len(json.dumps(whole, separators=(",", ":")))
    assert whole["omitted"] == 0 and len(whole["rows"]) == 1000
    cut = request_timings(records, 0.0, size // 2)
    assert len(json.dumps(cut, separators=(",", ":"))) <= size // 2
    assert cut["omitted"] == 1000 - len(cut["rows"]) > 0
    assert cut["rows"] == whole["rows"][: len(cut["rows"])]  # the earliest-started are kept
    # The arithmetic of the docstring: a realistic row is 60-75 bytes, so the default 8 prompts a stream
    # fit one event up to C13,000 or more.
    row = [183422.716, 1, 412.093, 23.581, 23.102, 61.877, 3407.211, 1024, 128, None]
    per_row = len(json.dumps(row, separators=(",", ":"))) + 1
    assert 60 <= per_row <= 75
    assert (MAX_EVENT_BYTES - TIMINGS_RESERVE_BYTES) // 75 > 8 * 13_000


def test_the_columns_are_one_list_from_the_load_generator_to_the_read_model() -> None:
    assert tuple(TIMING_COLUMNS) == metrics.TIMING_COLUMNS
    assert [f.name for f in fields(RequestTiming)] == ["bench_run_id", "i", *COLUMNS]


# ---------------------------------------------------------------- the store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "state.db", clock=lambda: T0)
    try:
        yield s
    finally:
        s.close()


def _bench(timings: Any) -> dict[str, Any]:
    result = {"requests": 3, "failed": 1, "out_tok_per_s": 10.0, "request_timings": timings}
    return {**result, "arm": "a", "shape": "router", "concurrency": 2, "t_ms": T0, "raw": result}


GOOD_ROWS: list[list[Any]] = [
    [0.5, 0, 12.5, 1.25, 1.0, 3.0, 50.0, 10, 31, None],
    [1.0, 1, 13.0, None, None, None, 13.0, 10, 1, None],
    [2.0, 0, None, None, None, None, None, None, 0, "HTTP 500: boom"],
]
GOOD: dict[str, Any] = {"columns": COLUMNS, "rows": GOOD_ROWS, "omitted": 0}


def test_a_bench_result_stores_exactly_its_rows_and_raw_keeps_only_a_summary(store: Store) -> None:
    bench_id = store.results.add_bench_run(_bench(GOOD))
    rows = bench_requests(store, bench_id)
    assert [r.i for r in rows] == [0, 1, 2] and bench_request_count(store, bench_id) == 3
    assert rows[0] == RequestTiming(bench_id, 0, 0.5, 0, 12.5, 1.25, 1.0, 3.0, 50.0, 10, 31, None)
    assert rows[1].tpot_ms is None and rows[2].error == "HTTP 500: boom" and not rows[2].ok
    raw = json.loads(store.scalar("SELECT raw FROM bench_runs WHERE id = ?", [bench_id]))
    assert raw["request_timings"] == {"stored": 3, "omitted": 0} and raw["requests"] == 3
    assert store.scalar("SELECT requests FROM bench_runs WHERE id = ?", [bench_id]) == 3
    # Another run's rows are its own, and go with its bench row.
    other = store.results.add_bench_run(_bench({**GOOD, "rows": GOOD_ROWS[:1], "omitted": 7}))
    assert bench_request_count(store, other) == 1 and bench_request_count(store, bench_id) == 3
    raw = json.loads(store.scalar("SELECT raw FROM bench_runs WHERE id = ?", [other]))
    assert raw["request_timings"] == {"stored": 1, "omitted": 7}
    with store.atomic() as db:
        db.execute("DELETE FROM bench_runs WHERE id = ?", [bench_id])
    assert bench_requests(store, bench_id) == [] and bench_request_count(store, other) == 1


def test_the_blocks_columns_are_read_by_name(store: Store) -> None:
    order = list(reversed(COLUMNS))
    block = {"columns": order, "rows": [list(reversed(row)) for row in GOOD_ROWS]}
    bench_id = store.results.add_bench_run(_bench(block))
    assert [r.e2e_ms for r in bench_requests(store, bench_id)] == [50.0, 13.0, None]


@pytest.mark.parametrize(
    ("block", "reason"),
    [
        ("rows", "it is str, not an object"),
        ({"columns": COLUMNS[:-1], "rows": []}, "lack ['error']"),
        ({"columns": COLUMNS, "rows": {}}, "its rows are not a list"),
        ({"columns": COLUMNS, "rows": [GOOD_ROWS[0], [1.0]]}, "row 1 is not a list of 10 values"),
        (
            {"columns": COLUMNS, "rows": [[*GOOD_ROWS[0][:9], 5]]},
            "row 0 has a value of the wrong type in error",
        ),
        ({"columns": COLUMNS, "rows": [["0.5", True, *GOOD_ROWS[0][2:]]]}, "in start_ms, target"),
        ({"columns": COLUMNS, "rows": [[*GOOD_ROWS[0][:7], 2**70, 1, None]]}, "in in_tokens"),
    ],
)
def test_a_malformed_block_keeps_the_bench_row_and_says_why(store: Store, block: Any, reason: str) -> None:
    bench_id = store.results.add_bench_run(_bench(block))
    assert bench_requests(store, bench_id) == []
    raw = json.loads(store.scalar("SELECT raw FROM bench_runs WHERE id = ?", [bench_id]))
    skipped = raw["request_timings"]["skipped"]
    assert skipped.startswith("request timings not stored: ") and reason in skipped
    assert store.scalar("SELECT out_tok_per_s FROM bench_runs WHERE id = ?", [bench_id]) == 10.0


def test_a_result_without_timings_stores_as_before(store: Store) -> None:
    result = {"requests": 3, "failed": 0}
    bench_id = store.results.add_bench_run(
        {**result, "arm": "a", "shape": "s", "concurrency": 1, "raw": result}
    )
    assert bench_requests(store, bench_id) == []
    assert json.loads(store.scalar("SELECT raw FROM bench_runs WHERE id = ?", [bench_id])) == result


# ---------------------------------------------------------------- end to end


@pytest.fixture(scope="module")
def zero_server() -> Iterator[str]:
    proc, url = start_listening(ZERO_SERVER)
    yield url
    stop(proc)


def test_a_real_bench_through_the_agent_stores_one_row_per_request(zero_server: str, tmp_path: Path) -> None:
    args = {
        "bench_id": "bench-e2e",
        "launch_id": "L1",
        "launch_ids": ["L1"],
        "replicas": 1,
        "arm": "zero-arm",
        "base_url": [zero_server],
        "model": "zero",
        "vocab_size": 1000,
        "workload": "router",
        "input_len": 16,
        "output_len": 24,
        "prefix_len": 0,
        "concurrency": 4,
        "prompts": 40,
        "warmup": 0,
        "seed": 3,
    }
    box = AgentBox(tmp_path / "home", path_prefix=[])
    box.start()
    try:
        box.ok("bench", args, command_id="bench-e2e")
        event = box.wait_for(lambda e: e["kind"] == "bench_result", timeout=60, what="the bench result")
        events = box.events()
    finally:
        box.stop()
    result = event["result"]
    assert result["requests"] == 40 and result["failed"] == 0 and result["request_timings"]["omitted"] == 0

    with Store(tmp_path / "state.db", clock=lambda: T0) as store:
        store.boxes.add(Box(name=BOX, host="203.0.113.7", ssh_user="root"))
        store.commands.add("bench-e2e", BOX, "bench", args)
        report = store.ingest.batch(BOX, events)
        assert not report.journal_only, report.journal_only
        bench_id = store.scalar("SELECT id FROM bench_runs WHERE run_id = 'bench-e2e'")
        rows = bench_requests(store, bench_id)
        raw = json.loads(store.scalar("SELECT raw FROM bench_runs WHERE id = ?", [bench_id]))
        stored = store.scalar("SELECT requests FROM bench_runs WHERE id = ?", [bench_id])
        figures = request_figures(store, "bench-e2e", {"e2el": 60_000.0})

    assert len(rows) == result["requests"] == stored == 40
    assert raw["request_timings"] == {"stored": 40, "omitted": 0}
    ok = [r for r in rows if r.ok]
    assert len(ok) == result["completed"] == 40
    assert all(r.ttft_ms is not None and r.e2e_ms is not None and r.ttft_ms <= r.e2e_ms for r in ok)
    assert all(r.start_ms is not None and r.start_ms >= 0 for r in rows)
    assert [r.start_ms for r in rows] == sorted(r.start_ms for r in rows if r.start_ms is not None)
    # Token totals: the rows add up to the run's own rates times its duration.
    duration = result["duration_s"]
    assert sum(r.out_tokens or 0 for r in ok) == 40 * 24 == round(result["out_tok_per_s"] * duration)
    assert sum(r.in_tokens or 0 for r in ok) == round(result["in_tok_per_s"] * duration)
    assert all(r.tpot_ms is not None and r.target == 0 for r in ok)
    # The figures `campaign requests` shows come from these rows: 40 requests claim a p90 (64 needed: too few)
    # and the run's own p50 TTFT; every request met a one-minute E2E limit.
    ttft = next(t for t in figures.tails if t.name == "ttft")
    assert figures.requests == 40 and ttft.n == 40 and ttft.p90.estimate is None and ttft.p90.needed == 64
    assert ttft.p50 == pytest.approx(result["ttft_ms_p50"], rel=1e-3, abs=0.01)
    assert figures.slo is not None and (figures.slo.good, figures.slo.n) == (40, 40)
