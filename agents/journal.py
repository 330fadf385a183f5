"""The on-box journal: every event the agent produces, kept in SQLite (WAL) until the console acks it.

Why SQLite: the box must never lose a measurement when the SSH link or the laptop goes away, and the
agent itself may crash or be replaced. A WAL database survives both, gives ``seq`` for free
(``AUTOINCREMENT`` never reuses a number, even after acked rows are deleted) and lets the console page
through "events after N" cheaply. The same file holds the command ledger (a re-sent command is answered
from here instead of running twice), the launches table (so a restarted daemon re-adopts its servers)
and the jobs table (so a bench or tripwire run outlives a restart and its result is journaled once).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

SAMPLE_KINDS = frozenset({"gpu_sample", "server_sample", "bench_progress"})
"""Events the agent may drop when the disk is nearly full; everything else is always written."""

MAX_EVENTS_BYTES = 8 * 1024 * 1024
"""One ``events`` reply stays well under protocol.MAX_LINE however large single events are."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    t_ms INTEGER NOT NULL,
    kind TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS commands (
    id TEXT PRIMARY KEY,
    op TEXT NOT NULL,
    t_ms INTEGER NOT NULL,
    response TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS launches (
    launch_id TEXT PRIMARY KEY,
    pid INTEGER,
    start_ticks INTEGER,
    port INTEGER NOT NULL,
    gpus TEXT NOT NULL,
    log_path TEXT NOT NULL,
    state TEXT NOT NULL,
    t_ms INTEGER NOT NULL,
    kill_command_id TEXT,
    log_offset INTEGER
);
CREATE TABLE IF NOT EXISTS jobs (
    key TEXT PRIMARY KEY,
    op TEXT NOT NULL,
    job_id TEXT NOT NULL,
    launch_id TEXT,
    command_id TEXT,
    pid INTEGER,
    start_ticks INTEGER,
    out_path TEXT NOT NULL,
    err_path TEXT NOT NULL,
    state TEXT NOT NULL,
    t_ms INTEGER NOT NULL,
    samples_offset INTEGER
);
"""
_JOB_COLUMNS = ("key", "op", "job_id", "launch_id", "command_id", "pid", "start_ticks", "out_path", "err_path", "state",
                "samples_offset")


def now_ms() -> int:
    """UTC epoch milliseconds of the box clock."""
    return time.time_ns() // 1_000_000


class Journal:
    """Thread-safe wrapper over ``<home>/journal.db``; every public method is one transaction, and
    ``atomic()`` groups several (a state change and its event) so a crash keeps both or neither."""

    def __init__(self, path: Path, clock: Callable[[], int] = now_ms) -> None:
        self.path = path
        self.clock = clock
        self._lock = threading.RLock()  # re-entered by the methods inside atomic()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        launch_columns = {r[1] for r in self._db.execute("PRAGMA table_info(launches)")}
        for column in ("kill_command_id TEXT", "log_offset INTEGER"):  # a journal.db of an older agent
            if column.split()[0] not in launch_columns:
                self._db.execute(f"ALTER TABLE launches ADD COLUMN {column}")
        if "samples_offset" not in {r[1] for r in self._db.execute("PRAGMA table_info(jobs)")}:
            self._db.execute("ALTER TABLE jobs ADD COLUMN samples_offset INTEGER")
        self.samples_paused = False
        """Set by the disk guard: below the floor, samples are dropped and everything else kept."""

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """One transaction around the journal calls in the block; other threads wait for its end.

        Why: a result event and the row saying "this job is finished" must commit together, or a crash
        between them either loses the result or journals it twice after the restart.
        """
        with self._lock:
            if self._db.in_transaction:  # nested: the outer block commits
                yield
                return
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield
                self._db.execute("COMMIT")  # inside the try: a COMMIT failing on a full disk rolls back too
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise

    # -- events -------------------------------------------------------------------------------------

    def append(self, kind: str, **fields: Any) -> int | None:
        """Journal one event; returns its seq, or None for a sample dropped under the disk floor."""
        if self.samples_paused and kind in SAMPLE_KINDS:
            return None
        t_ms = fields.pop("t_ms", None) or self.clock()
        body = json.dumps(fields, separators=(",", ":"), allow_nan=False)
        with self._lock:
            cur = self._db.execute("INSERT INTO events (t_ms, kind, body) VALUES (?, ?, ?)", (t_ms, kind, body))
            return int(cur.lastrowid)

    def events_after(self, after: int, limit: int) -> list[dict[str, Any]]:
        """Events with seq > after, oldest first, at most ``limit`` and about MAX_EVENTS_BYTES."""
        out: list[dict[str, Any]] = []
        size = 0
        with self._lock:
            rows = self._db.execute(
                "SELECT seq, t_ms, kind, body FROM events WHERE seq > ? ORDER BY seq LIMIT ?", (after, limit)
            ).fetchall()
        for seq, t_ms, kind, body in rows:
            size += len(body) + 64
            if out and size > MAX_EVENTS_BYTES:
                break
            event = json.loads(body)
            event.update(seq=seq, t_ms=t_ms, kind=kind)
            out.append(event)
        return out

    def last_seq(self) -> int:
        with self._lock:
            row = self._db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'events'").fetchone()
        return int(row[0]) if row else 0

    def acked_seq(self) -> int:
        return int(self.get_meta("acked_seq") or 0)

    def ack(self, seq: int) -> int:
        """The console committed everything up to ``seq``: those rows may go. Never beyond last_seq."""
        if not isinstance(seq, int) or seq < 0:
            raise ValueError(f"ack seq must be a non-negative integer, got {seq!r}")
        last = self.last_seq()
        if seq > last:
            raise ValueError(f"ack seq {seq} is beyond the last journaled seq {last}; the console is ahead of this box")
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                row = self._db.execute("SELECT value FROM meta WHERE key = 'acked_seq'").fetchone()
                acked = max(int(row[0]) if row else 0, seq)
                self._db.execute("DELETE FROM events WHERE seq <= ?", (acked,))
                self._db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('acked_seq', ?)", (str(acked),))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return acked

    # -- meta ---------------------------------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    # -- command ledger -----------------------------------------------------------------------------

    def command_response(self, command_id: str) -> dict[str, Any] | None:
        """The recorded response of a command already executed, so a re-send does not run it twice."""
        with self._lock:
            row = self._db.execute("SELECT response FROM commands WHERE id = ?", (command_id,)).fetchone()
        return json.loads(row[0]) if row else None

    def record_command(self, command_id: str, op: str, response: dict[str, Any]) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO commands (id, op, t_ms, response) VALUES (?, ?, ?, ?)",
                (command_id, op, self.clock(), json.dumps(response, separators=(",", ":"))),
            )

    # -- launches (for re-adoption after a restart) -------------------------------------------------

    def save_launch(
        self, launch_id: str, pid: int | None, start_ticks: int | None, port: int, gpus: list[int],
        log_path: str, state: str,
    ) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO launches (launch_id, pid, start_ticks, port, gpus, log_path, state, t_ms)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (launch_id, pid, start_ticks, port, json.dumps(gpus), log_path, state, self.clock()),
            )

    def set_launch_state(self, launch_id: str, state: str, kill_command_id: str | None = None) -> None:
        """``kill_command_id``: the kill being carried out, kept so a restarted agent still answers it."""
        with self._lock:
            self._db.execute("UPDATE launches SET state = ?, kill_command_id = coalesce(?, kill_command_id)"
                             " WHERE launch_id = ?", (state, kill_command_id, launch_id))

    def set_log_offset(self, launch_id: str, offset: int) -> None:
        """How far the launch's log has been read (and its lines journaled): a restart reads on from here."""
        with self._lock:
            self._db.execute("UPDATE launches SET log_offset = ? WHERE launch_id = ?", (offset, launch_id))

    def kill_answered(self, launch_id: str) -> None:
        with self._lock:
            self._db.execute("UPDATE launches SET kill_command_id = NULL WHERE launch_id = ?", (launch_id,))

    def launch_ids(self) -> set[str]:
        with self._lock:
            return {r[0] for r in self._db.execute("SELECT launch_id FROM launches")}

    def live_launches(self) -> list[dict[str, Any]]:
        """Launches the journal last saw alive, or ended with a kill not yet answered: to re-adopt."""
        with self._lock:
            rows = self._db.execute(
                "SELECT launch_id, pid, start_ticks, port, gpus, log_path, state, kill_command_id, log_offset"
                " FROM launches"
                " WHERE state IN ('starting', 'serving', 'stopping') OR kill_command_id IS NOT NULL ORDER BY t_ms"
            ).fetchall()
        return [
            {"launch_id": r[0], "pid": r[1], "start_ticks": r[2], "port": r[3], "gpus": json.loads(r[4]),
             "log_path": r[5], "state": r[6], "kill_command_id": r[7], "log_offset": r[8]}
            for r in rows
        ]

    # -- bench / tripwire jobs (for re-adoption after a restart) ------------------------------------

    def save_job(self, key: str, op: str, job_id: str, launch_id: str | None, command_id: str | None,
                 pid: int | None, start_ticks: int | None, out_path: str, err_path: str, state: str) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO jobs (key, op, job_id, launch_id, command_id, pid, start_ticks, out_path,"
                " err_path, state, t_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (key, op, job_id, launch_id, command_id, pid, start_ticks, out_path, err_path, state, self.clock()),
            )

    def set_job_state(self, key: str, state: str) -> None:
        with self._lock:
            self._db.execute("UPDATE jobs SET state = ? WHERE key = ?", (state, key))

    def set_job_samples_offset(self, key: str, offset: int) -> None:
        """How far a bench's progress samples were journaled (agents/jobs.py), committed with those events."""
        with self._lock:
            self._db.execute("UPDATE jobs SET samples_offset = ? WHERE key = ?", (offset, key))

    def job(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute(f"SELECT {', '.join(_JOB_COLUMNS)} FROM jobs WHERE key = ?", (key,)).fetchone()
        return dict(zip(_JOB_COLUMNS, row, strict=True)) if row else None

    def running_jobs(self) -> list[dict[str, Any]]:
        """Jobs whose result is not journaled yet: candidates for re-adoption."""
        with self._lock:
            rows = self._db.execute(
                f"SELECT {', '.join(_JOB_COLUMNS)} FROM jobs WHERE state IN ('starting', 'running') ORDER BY t_ms"
            ).fetchall()
        return [dict(zip(_JOB_COLUMNS, r, strict=True)) for r in rows]
