"""Keep gpu_rollup_1m (schema V27) equal to the per-minute aggregate of gpu_samples after a bulk insert
(gpu_rollup_10m, schema V29, follows the minutes by its triggers).

Ingest and imports write raw GPU rows with one ``executemany``; a per-row trigger cost ingest 1.65x
(schema V28 dropped it). Instead the writer, in its own transaction, rebuilds each (box, gpu, minute) its
rows touched from the raw rows: duplicates ignored by gpu_samples, gaps and out-of-order arrival then
cannot make the rollup drift from what a query over the raw rows would give.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from console.store.schema import ROLLUP_BUCKET_MS, rollup_rebuild_sql

_REBUILD_MINUTE = rollup_rebuild_sql(
    f"WHERE box = ?1 AND gpu = ?2 AND t_ms >= ?3 AND t_ms < ?3 + {ROLLUP_BUCKET_MS}", verb="INSERT OR REPLACE"
)


def refresh_gpu_rollup(conn: sqlite3.Connection, samples: Iterable[tuple[object, ...]]) -> None:
    """Rebuild the rollup minutes of ``samples`` (rows starting ``box, gpu, t_ms``). Every touched minute
    holds at least the row just written (or the one an ignored duplicate met), so REPLACE covers it."""
    minutes = {(s[0], s[1], int(s[2]) // ROLLUP_BUCKET_MS * ROLLUP_BUCKET_MS) for s in samples}  # type: ignore[call-overload]
    conn.executemany(_REBUILD_MINUTE, sorted(minutes))


def rebuild_gpu_rollup(conn: sqlite3.Connection) -> None:
    """Recompute every rollup minute from gpu_samples in one statement: after a bulk load that wrote raw
    rows without ``refresh_gpu_rollup`` (bench/tui.py), far cheaper than refreshing minute by minute. The
    ten-minute tier's triggers still run once a minute written (a 30-day, 16-GPU build: 250 s to 260 s)."""
    conn.execute("DELETE FROM gpu_rollup_1m")
    conn.execute(rollup_rebuild_sql(""))
