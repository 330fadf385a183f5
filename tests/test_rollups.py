"""gpu_rollup_1m (schema V27) and gpu_rollup_10m (V29): per-minute and per-ten-minute count/sum/min/max of
each GPU's charted columns, kept in the writer's transaction, must each equal the same aggregate computed from
gpu_samples whatever order, gaps, re-sends or deletes ingest and imports make, and the migrations must
backfill a state.db that already holds samples."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.readmodel.queries import gpu_history
from console.store import Box, Store
from console.store.rollups import refresh_gpu_rollup
from console.store.schema import (
    MIGRATIONS,
    ROLLUP_BUCKET_MS,
    ROLLUP_COLUMNS,
    ROLLUP_TIERS_MS,
    V27,
    rollup_table,
)

_AGG = ", ".join(f"count({c}), sum({c}), min({c}), max({c})" for c in ROLLUP_COLUMNS)
_ROLLED = ", ".join(f"{c}_n, {c}_sum, {c}_min, {c}_max" for c in ROLLUP_COLUMNS)


def _from_raw(store: Store, tier: int) -> list[tuple[Any, ...]]:
    sql = (
        f"SELECT box, gpu, (t_ms / {tier}) * {tier} AS m, {_AGG} "
        "FROM gpu_samples GROUP BY box, gpu, m ORDER BY box, gpu, m"
    )
    return _rounded(store.db.execute(sql).fetchall())


def _rolled(store: Store, tier: int) -> list[tuple[Any, ...]]:
    sql = f"SELECT box, gpu, t_ms, {_ROLLED} FROM {rollup_table(tier)} ORDER BY box, gpu, t_ms"
    return _rounded(store.db.execute(sql).fetchall())


def _every_tier_is_the_raw_aggregate(store: Store) -> bool:
    return all(_rolled(store, tier) == _from_raw(store, tier) for tier in ROLLUP_TIERS_MS)


def _rounded(rows: list[Any]) -> list[tuple[Any, ...]]:
    """Sums added in another order differ in the last bits: compare at 1e-6."""
    return [tuple(round(v, 6) if isinstance(v, float) else v for v in r) for r in rows]


_reading = st.one_of(st.none(), st.floats(0, 1000, allow_nan=False).map(lambda x: round(x, 3)))
_sample = st.fixed_dictionaries(
    {
        "t_ms": st.integers(1, 25 * ROLLUP_BUCKET_MS),  # three ten-minute buckets
        "gpu": st.integers(0, 2),
        **{c: _reading for c in ROLLUP_COLUMNS},
    }
)


def _events(samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "v": 1,
            "seq": i + 1,
            "kind": "gpu_sample",
            "t_ms": s["t_ms"],
            "gpus": [{k: v for k, v in s.items() if k != "t_ms"}],
        }
        for i, s in enumerate(samples)
    ]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(samples=st.lists(_sample, max_size=60), resend=st.integers(0, 60), split=st.integers(0, 60))
def test_the_rollup_equals_the_raw_aggregate_whatever_ingest_sees(
    tmp_path: Path, samples: list[dict[str, Any]], resend: int, split: int
) -> None:
    """Out-of-order times and gaps come from the generator; a duplicate (box, gpu, t_ms) and a re-sent
    batch after a lost ack are ignored by gpu_samples and must not count twice in the rollup."""
    path = tmp_path / f"s{len(samples)}-{resend}-{split}.db"
    path.unlink(missing_ok=True)
    events = _events(samples)
    with Store(path) as store:
        store.boxes.add(Box(name="b1", host="127.0.0.1", ssh_user="u"))
        store.ingest.batch("b1", events[:split])
        store.ingest.batch("b1", events[: max(split, resend)])  # re-sends what is at or below the cursor
        store.ingest.batch("b1", events[max(split, resend) :])
        assert _every_tier_is_the_raw_aggregate(store)
        store.db.execute("DELETE FROM gpu_samples WHERE gpu = 1")  # as an import's cascade does
        assert _every_tier_is_the_raw_aggregate(store)


def test_the_migration_backfills_a_state_db_with_samples(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_ms INTEGER NOT NULL)"
    )
    for m in MIGRATIONS[: MIGRATIONS.index(V27)]:  # before any rollup: every tier's backfill is tested
        for statement in m.statements:
            conn.execute(statement)
        conn.execute("INSERT INTO schema_migrations VALUES (?, ?, 0)", (m.version, m.name))
    rows = [
        ("b1", g, 1_000 * t, 100.0 + t % 7, 300.0, 1400.0 + g, None if t % 5 else 50.0, 10.0)
        for g in (0, 1)
        for t in range(1300)
    ]
    conn.executemany(
        "INSERT INTO gpu_samples(box, gpu, t_ms, power_w, enforced_limit_w, sm_clock_mhz, util_pct, mem_used_mib) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    conn.commit()
    conn.close()
    with Store(path) as store:
        assert len(_rolled(store, ROLLUP_TIERS_MS[0])) == 2 * 22  # 1,300 s is 22 minutes started, per GPU
        assert len(_rolled(store, ROLLUP_TIERS_MS[1])) == 2 * 3
        assert _every_tier_is_the_raw_aggregate(store)
        store.db.execute(
            "DELETE FROM gpu_samples WHERE gpu = 1 AND t_ms < 690000"
        )  # as an import's cascade does: the first ten minutes go, the second's first minute
        assert _every_tier_is_the_raw_aggregate(store)


def test_a_30_day_window_charts_the_rollup_as_the_raw_rows_average(tmp_path: Path) -> None:
    """Each bucket of a wide window averages every sample under it, read from the rollup."""
    day = 86_400_000
    with Store(tmp_path / "state.db") as store:
        rows = [("b1", 0, t, float(t // 3_600_000 % 24)) for t in range(day, 31 * day, 30_000)]
        store.db.conn.executemany(
            "INSERT INTO gpu_samples(box, gpu, t_ms, power_w, enforced_limit_w, sm_clock_mhz) "
            "VALUES (?, ?, ?, ?, 300, 1500)",
            rows,
        )
        refresh_gpu_rollup(store.db.conn, rows)
        assert _every_tier_is_the_raw_aggregate(store)
        (history,) = gpu_history(store, "b1", [0], day, 31 * day, 30)
        assert history.power_w.values == tuple(11.5 for _ in range(30))
        # The ten-minute tier is what it reads: doubled there, the chart doubles.
        store.db.execute("UPDATE gpu_rollup_10m SET power_w_sum = 2 * power_w_sum")
        (doubled,) = gpu_history(store, "b1", [0], day, 31 * day, 30)
        assert doubled.power_w.values == tuple(23.0 for _ in range(30))
