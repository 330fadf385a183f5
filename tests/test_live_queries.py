"""Live reads a box's GPU histories in one query (and every launch's throughput in one), where it made one query
a GPU (and a launch): the one query must give what the per-GPU queries gave, whatever the samples, their gaps,
the window (every sample averaged, each bucket probed, the per-minute rollup) and a GPU the rollup lacks; and
a Live load makes a handful of SQLite calls, not one a GPU.

The oracles below are the per-GPU and per-launch SQL that console/readmodel/queries.py ran before, fetched row
by row as it fetched them."""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.readmodel import ReadModel
from console.readmodel.queries import (
    EXACT_WINDOW_MS,
    GPU_EXACT_WINDOW_MS,
    GPU_PROBE_MS,
    PROBE_MS,
    _summed,
    gpu_history,
    live_series,
    throughput,
)
from console.store import Box, Store
from console.store.rollups import refresh_gpu_rollup
from console.store.schema import ROLLUP_TIERS_MS, rollup_table
from testbed import tui_fixture as F

T0 = 1_780_000_000_000
WINDOWS_MS = (
    GPU_EXACT_WINDOW_MS,
    EXACT_WINDOW_MS,
    6 * 3_600_000,
    2 * 86_400_000,
)  # 6 h: minutes, 2 d: ten minutes
"""Every raw sample averaged; each bucket probed (GPU) or averaged (throughput); the GPU rollup read."""


def _bucket_sql(table: str, where: str, columns: str, probed: bool) -> str:
    if not probed:
        return f"""SELECT NULL AS k, ((t_ms - :start) * :n - 1) / :span AS b, {columns} FROM {table}
                   WHERE {where} AND t_ms > :start AND t_ms <= :end GROUP BY k, b"""
    return f"""WITH RECURSIVE b(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM b WHERE i < :n - 1)
               SELECT NULL AS k, b.i, {columns} FROM b JOIN {table}
                 ON {where} AND t_ms > :start + b.i * :width AND t_ms <= :start + b.i * :width + :probe
               GROUP BY k, b.i"""


def _span(start: int, end: int, buckets: int, probe_ms: int) -> dict[str, int]:
    width = max(1, (end - start) // buckets)
    return {
        "start": start,
        "end": end,
        "n": buckets,
        "span": max(1, end - start),
        "width": width,
        "probe": probe_ms,
    }


def _one_gpu(store: Store, box: str, gpu: int, start: int, end: int, buckets: int) -> list[tuple[Any, ...]]:
    """One GPU's buckets as gpu_history read them a GPU at a time: the coarsest rollup whose bucket a bucket
    spans, beyond the exact window, where the GPU has rollup rows there, else its raw rows."""
    values: dict[str, Any] = {"box": box, "gpu": gpu, **_span(start, end, buckets, GPU_PROBE_MS)}
    rows: list[tuple[Any, ...]] = []
    tiers = [tier for tier in ROLLUP_TIERS_MS if (end - start) // buckets >= tier]
    if end - start > GPU_EXACT_WINDOW_MS and tiers:
        averages = ", ".join(
            f"sum({c}_sum) / nullif(sum({c}_n), 0)" for c in ("power_w", "enforced_limit_w", "sm_clock_mhz")
        )
        sql = f"""SELECT NULL AS k, ((t_ms - :start) * :n) / :span AS b, {averages} FROM {rollup_table(tiers[-1])}
                  WHERE box = :box AND gpu = :gpu AND t_ms >= :start AND t_ms < :end GROUP BY b"""
        rows = [tuple(r) for r in store.db.execute(sql, values).fetchall()]
    if not rows:
        probed = end - start > GPU_EXACT_WINDOW_MS and values["width"] > GPU_PROBE_MS
        sql = _bucket_sql(
            "gpu_samples",
            "box = :box AND gpu = :gpu",
            "avg(power_w), avg(enforced_limit_w), avg(sm_clock_mhz)",
            probed,
        )
        rows = [tuple(r) for r in store.db.execute(sql, values).fetchall()]
    return rows


def _per_launch(store: Store, box: str, start: int, end: int, buckets: int) -> list[list[float | None]]:
    """Output and input tok/s as throughput read them a launch at a time, summed across launches."""
    ids = store.db.execute(
        "SELECT id FROM launches WHERE box = ? AND coalesce(start_ms, 0) <= ? AND (stop_ms IS NULL OR stop_ms >= ?)",
        [box, end, start],
    ).fetchall()
    probed = end - start > EXACT_WINDOW_MS and max(1, (end - start) // buckets) > PROBE_MS
    sql = _bucket_sql(
        "server_samples", "launch_id = :launch", "avg(gen_tok_per_s), avg(prompt_tok_per_s)", probed
    )
    rows = [
        tuple(r)
        for (launch,) in ids
        for r in store.db.execute(sql, {"launch": launch, **_span(start, end, buckets, PROBE_MS)}).fetchall()
    ]
    return _summed(rows, buckets, 2)


_segments = st.lists(st.tuples(st.integers(-120, 2 * 86_400), st.integers(1, 240)), max_size=4)
"""Runs of 1 Hz samples (start second in the window, length): gaps between them, some past either edge."""


def _samples(segments: list[tuple[int, int]], window_ms: int, seed: int) -> list[tuple[int, float | None]]:
    """(t_ms, value) of the runs, scaled into the window; a run may carry no value (a column NVML left out)."""
    rng = random.Random(seed)
    scale = window_ms / (2 * 86_400_000)
    out: dict[int, float | None] = {}
    for first, length in segments:
        missing = rng.random() < 0.2
        for s in range(length):
            t = T0 + int(first * 1000 * scale) // 1000 * 1000 + s * 1000
            out[t] = None if missing else rng.uniform(0, 2000)
    return sorted(out.items())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    window_ms=st.sampled_from(WINDOWS_MS),
    buckets=st.integers(1, 80),
    per_gpu=st.lists(_segments, min_size=1, max_size=4),
    unrolled=st.integers(-1, 3),
    seed=st.integers(0, 2**32),
)
def test_one_query_gives_every_gpu_what_its_own_query_gave(
    tmp_path: Path,
    window_ms: int,
    buckets: int,
    per_gpu: list[list[tuple[int, int]]],
    unrolled: int,
    seed: int,
) -> None:
    """``unrolled``: that GPU's rollup rows are gone (as before V27's backfill); it must read its raw rows."""
    path = tmp_path / f"h-{window_ms}-{buckets}-{unrolled}-{seed}.db"
    path.unlink(missing_ok=True)
    rows: list[tuple[Any, ...]] = []
    for gpu, segments in enumerate(per_gpu):
        for t, value in _samples(segments, window_ms, seed + gpu):
            clock = None if value is None else 1000 + value / 2
            rows += [("b1", gpu, t, value, 300.0 + gpu, clock), ("b2", gpu, t, 1.0, 1.0, 1.0)]
    with Store(path) as store:
        store.db.conn.executemany(
            "INSERT INTO gpu_samples(box, gpu, t_ms, power_w, enforced_limit_w, sm_clock_mhz) VALUES (?,?,?,?,?,?)",
            rows,
        )
        refresh_gpu_rollup(store.db.conn, rows)
        store.db.execute("DELETE FROM gpu_rollup_1m WHERE box = 'b1' AND gpu = ?", [unrolled])
        store.db.conn.commit()
        gpus = [*range(len(per_gpu)), 7]  # GPU 7 has no sample at all
        start, end = T0, T0 + window_ms
        got = gpu_history(store, "b1", gpus, start, end, buckets)
        assert [h.gpu for h in got] == gpus
        assert live_series(store, "b1", gpus, start, end, 90, buckets)[2] == got  # read beside the throughput
        for h in got:
            power, limit, sm = _summed(_one_gpu(store, "b1", h.gpu, start, end, buckets), buckets, 3)
            assert (h.power_w.values, h.limit_w.values, h.sm_clock_mhz.values) == (
                tuple(power),
                tuple(limit),
                tuple(sm),
            )


def _close(a: tuple[float | None, ...], b: list[float | None]) -> bool:
    """Launches' averages summed in another order differ in the last bits."""
    return len(a) == len(b) and all(
        (x is None and y is None) or (x is not None and y is not None and math.isclose(x, y, rel_tol=1e-12))
        for x, y in zip(a, b, strict=True)
    )


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    window_ms=st.sampled_from(WINDOWS_MS),
    buckets=st.integers(1, 120),
    per_launch=st.lists(_segments, min_size=0, max_size=4),
    stopped=st.integers(-1, 3),
    seed=st.integers(0, 2**32),
)
def test_one_query_gives_the_launches_summed_throughput_their_own_queries_gave(
    tmp_path: Path,
    window_ms: int,
    buckets: int,
    per_launch: list[list[tuple[int, int]]],
    stopped: int,
    seed: int,
) -> None:
    """``stopped``: that launch stopped before the window, so neither reading counts it."""
    path = tmp_path / f"t-{window_ms}-{buckets}-{stopped}-{seed}.db"
    path.unlink(missing_ok=True)
    with Store(path, clock=lambda: T0) as store:
        store.boxes.add(Box(name="b1", status="up", tz="UTC"))
        launches = [
            {
                "id": f"L{k}",
                "box": "b1",
                "arm": "a",
                "replica": k,
                "state": "stopped" if k == stopped else "serving",
                "start_ms": T0 - 86_400_000,
                "stop_ms": T0 - 1 if k == stopped else None,
                "gpus": f"[{k}]",
            }
            for k in range(len(per_launch))
        ]
        with store.atomic() as db:
            db.table("launches").insert_all(launches)
            db.conn.executemany(
                "INSERT INTO server_samples(box, launch_id, t_ms, gen_tok_per_s, prompt_tok_per_s) VALUES (?,?,?,?,?)",
                [
                    ("b1", f"L{k}", t, value, None if value is None else value * 3)
                    for k, segments in enumerate(per_launch)
                    for t, value in _samples(segments, window_ms, seed + k)
                ],
            )
            db.conn.executemany(
                "INSERT INTO gpu_samples(box, gpu, t_ms, power_w, enforced_limit_w, sm_clock_mhz) VALUES (?,?,?,?,?,?)",
                [
                    ("b1", 0, t, value, 300.0, 1500.0)
                    for t, value in _samples(per_launch[0] if per_launch else [], window_ms, seed)
                ],
            )
        out, inp = throughput(store, "b1", T0, T0 + window_ms, buckets)
        want_out, want_in = _per_launch(store, "b1", T0, T0 + window_ms, buckets)
        assert _close(out.values, want_out) and _close(inp.values, want_in)
        gpu_buckets = max(1, buckets // 2)  # bucket counts of their own, bound in the same statement
        assert live_series(store, "b1", [0], T0, T0 + window_ms, buckets, gpu_buckets) == (
            out,
            inp,
            gpu_history(store, "b1", [0], T0, T0 + window_ms, gpu_buckets),
        )


def _statements(model: ReadModel, store: Store, box: str) -> list[str]:
    """The SQL a Live load of ``box`` runs (after a first load, as a redraw runs it)."""
    view = model.live(box, buckets=100, gpu_buckets=50)
    assert view is not None and view.gpu_history and view.gpu_history[-1].power_w.peak is not None
    statements: list[str] = []
    store.db.conn.set_trace_callback(statements.append)
    model.live(box, buckets=100, gpu_buckets=50)
    store.db.conn.set_trace_callback(None)
    return statements


def test_a_live_load_makes_as_many_sqlite_calls_for_8_gpus_and_4_servers_as_for_4_and_1(
    tmp_path: Path,
) -> None:
    """Every SQLite call of a redraw gives up the interpreter lock, which an ingesting thread may then keep for
    its switch interval (bench/tui_ingest.py): a box's GPU histories, its servers' throughput and their latest
    samples are each one query, and no read is wrapped in a savepoint."""
    fx = F.build(tmp_path / "state.db")
    with Store(fx.path) as store:
        model = ReadModel(store, clock=lambda: F.NOW)
        before = _statements(model, store, "pro-a")
        start = F.NOW - 3_600_000
        F.insert_gpu_rows(store, (r for r in F.gpu_rows("pro-a", 8, start, F.NOW, 1000) if r[1] >= 4))
        with store.atomic() as db:
            db.table("launches").insert_all(
                [
                    {"id": f"L-r{k}", "box": "pro-a", "arm": F.QWEN, "replica": k, "state": "serving"}
                    | {"start_ms": start, "ready_ms": start + 1000, "gpus": f"[{4 + k}]", "port": 8100 + k}
                    for k in range(1, 4)
                ]
            )
        for k in range(1, 4):
            F.insert_server_rows(store, F.server_rows("pro-a", f"L-r{k}", start, F.NOW, 1000, peak=5200.0))
        after = _statements(model, store, "pro-a")
        view = model.live("pro-a", buckets=100, gpu_buckets=50)
        assert view is not None and len(view.gpu_history) == 8 and len(view.servers) >= 4
    assert not [s for s in after if "SAVEPOINT" in s]
    assert len(after) == len(before), after
