"""The store: creation mode, WAL, migrations forward, newer files refused, read-only browsing."""

from __future__ import annotations

import sqlite3
import stat
from pathlib import Path

import pytest

from console.store import Box, ReadOnlyStore, Store, StoreError, StoreTooNew
from console.store.schema import LATEST, MIGRATIONS
from tests.support.schema import database_at, schema_of

FIXTURES = Path(__file__).parent / "fixtures"


def test_new_file_is_private_wal_and_latest(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with Store(path) as store:
        assert store.schema_version == LATEST
        assert store.scalar("PRAGMA journal_mode") == "wal"
        store.boxes.ensure_local()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_loose_mode_is_tightened(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    Store(path).close()
    path.chmod(0o644)
    Store(path).close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def _load_v1(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.executescript((FIXTURES / "state_v1.sql").read_text())
    conn.close()


def test_v1_file_is_upgraded_with_its_rows_and_a_backup(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    _load_v1(path)
    with Store(path) as store:
        assert store.schema_version == LATEST
        versions = [
            r["version"] for r in store.rows("SELECT version FROM schema_migrations ORDER BY version")
        ]
        assert versions == [m.version for m in MIGRATIONS]
        assert store.boxes.get("pro-a").port == 22022
        assert store.scalar("SELECT out_tok_per_s FROM bench_runs") == 5161
        # A console bench before node rows measured one replica: the upgraded row says so.
        assert store.scalar("SELECT replicas FROM bench_runs") == 1
        # Tables added after v1 exist and work.
        assert store.scalar("SELECT count(*) FROM api_prices") == 0
    backup = tmp_path / "state.db.v1.bak"
    assert backup.exists()
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600
    old = sqlite3.connect(backup)
    assert old.execute("SELECT max(version) FROM schema_migrations").fetchone()[0] == 1


@pytest.mark.parametrize("version", [m.version for m in MIGRATIONS[:-1]])
def test_every_earlier_version_migrates_to_the_fresh_schema(tmp_path: Path, version: int) -> None:
    """A state.db any earlier console left, opened today, ends with exactly the schema of a new one and every
    migration recorded (v14's bench_requests, v15's curves and v16's rebuilt curve_points included)."""
    database_at(tmp_path / "old.db", version).close()
    Store(tmp_path / "old.db").close()
    Store(tmp_path / "fresh.db").close()
    migrated, fresh = sqlite3.connect(tmp_path / "old.db"), sqlite3.connect(tmp_path / "fresh.db")
    try:
        assert schema_of(migrated) == schema_of(fresh)
        assert {"bench_requests", "curves", "curve_points"} <= set(dict(schema_of(fresh)))
        versions = [r[0] for r in migrated.execute("SELECT version FROM schema_migrations ORDER BY version")]
        assert versions == [m.version for m in MIGRATIONS]
    finally:
        migrated.close()
        fresh.close()


def test_reopening_latest_does_not_migrate_again(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    Store(path).close()
    Store(path).close()
    assert not list(tmp_path.glob("*.bak"))


def test_newer_file_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    Store(path).close()
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO schema_migrations VALUES (?, 'from the future', 0)", [LATEST + 5])
    conn.commit()
    conn.close()
    with pytest.raises(StoreTooNew, match=rf"schema version {LATEST + 5}.*upgrade campaign-console"):
        Store(path)
    with pytest.raises(StoreTooNew):
        Store(path, read_only=True)


def test_foreign_sqlite_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="not a campaign state.db"):
        Store(path)


def test_read_only_store_refuses_writes_and_old_files(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with Store(path) as store:
        store.boxes.add(Box(name="b1", ssh_user="u", host="h", port=22))
    with Store(path, read_only=True) as ro:
        assert [b.name for b in ro.boxes.every()] == ["b1"]
        with pytest.raises(ReadOnlyStore):
            ro.boxes.add(Box(name="b2"))
        with pytest.raises(sqlite3.OperationalError):
            ro.db.execute("DELETE FROM boxes")
    old = tmp_path / "old.db"
    _load_v1(old)
    with pytest.raises(StoreError, match="older than"):
        Store(old, read_only=True)
    with pytest.raises(StoreError, match="no such database"):
        Store(tmp_path / "missing.db", read_only=True)


def test_journal_is_unique_per_box_and_seq(tmp_path: Path) -> None:
    with Store(tmp_path / "state.db") as store:
        store.boxes.ensure_local()
        row = {"box": "local", "seq": 1, "t_ms": 1, "kind": "x", "payload": "{}", "ingested_ms": 2}
        with store.atomic() as db:
            db.table("journal").insert(row)
        with pytest.raises(sqlite3.IntegrityError), store.atomic() as db:
            db.table("journal").insert(row)


def test_indexes_serve_the_tui_queries(tmp_path: Path) -> None:
    """Charts read samples by box and time; the planner must use an index, not scan millions of rows."""
    with Store(tmp_path / "state.db") as store:
        for sql in (
            "SELECT * FROM gpu_samples WHERE box = 'a' AND t_ms BETWEEN 0 AND 10",
            "SELECT * FROM server_samples WHERE box = 'a' AND t_ms > 0",
            "SELECT * FROM server_samples WHERE launch_id = 'x' AND t_ms > 0",
            "SELECT * FROM bench_runs WHERE arm = 'a'",
            "SELECT * FROM journal WHERE box = 'a' AND kind = 'k'",
        ):
            plan = " ".join(r["detail"] for r in store.rows("EXPLAIN QUERY PLAN " + sql))
            assert "USING" in plan and "SCAN" not in plan, (sql, plan)


def test_a_file_that_is_not_sqlite_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    """A mistyped --db (say, a config file) gets one clear error, and its mode and bytes are untouched."""
    path = tmp_path / "notes.txt"
    path.write_text("not a database\n" * 100)
    path.chmod(0o644)
    for read_only in (False, True):
        with pytest.raises(
            StoreError, match="is not a SQLite database, so not a state.db.*--db or CAMPAIGN_DB"
        ):
            Store(path, read_only=read_only)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert path.read_text() == "not a database\n" * 100


def test_a_directory_is_refused_with_the_file_to_give(tmp_path: Path) -> None:
    for read_only in (False, True):
        with pytest.raises(StoreError, match=r"is a directory; give a state.db file in it, e.g. .*state.db"):
            Store(tmp_path, read_only=read_only)


def test_a_mistyped_folder_is_refused_not_created(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="does not exist; create it first"):
        Store(tmp_path / "no-such-dir" / "state.db")
    assert not (tmp_path / "no-such-dir").exists()
