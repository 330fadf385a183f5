"""State.db files as an earlier version of the console left them: the migrations up to a version applied by
hand, as that version's console applied them, so a test can open one with today's Store and migrate it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from console.store.schema import MIGRATIONS


def database_at(path: Path, version: int) -> sqlite3.Connection:
    """A new database at ``path`` with migrations 1..``version`` applied and recorded, left open (committed)
    for the test to add the rows that version held."""
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
        "applied_ms INTEGER NOT NULL)"
    )
    for m in MIGRATIONS[:version]:
        for statement in m.statements:
            conn.execute(statement)
        conn.execute("INSERT INTO schema_migrations VALUES (?, ?, 0)", [m.version, m.name])
    conn.commit()
    return conn


def schema_of(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """Every table's and index's SQL as stored, by name: two databases with equal lists have one schema."""
    return sorted(conn.execute("SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL").fetchall())
