"""The on-box journal: every event the agent produces, kept in SQLite (WAL) until the console acks it.

Why SQLite: the box must never lose a measurement when the SSH link or the laptop goes away, and the
agent itself may crash or be replaced. A WAL database survives both, gives ``seq`` for free
(``AUTOINCREMENT`` never reuses a number, even after acked rows are deleted) and lets the console page
through "events after N" cheaply. The same file holds the command ledger (a re-sent command is answered
from here instead of running twice), the launches table (so a restarted daemon re-adopts its servers)
and the jobs table (so a bench or tripwire run outlives a restart and its result is journaled once).

Any number of campaigns (state.db files) may consume one box's journal. Each registers as a *consumer*
under its campaign id and acks what it has committed; an event is deleted only once every registered
consumer acked it, so one database can never take events away from another. The one exception is the
disk floor: when the disk is nearly full, a consumer silent for ``STALE_ACK_MS`` is released from what
the others have acked, and a warning event says who lost what.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypedDict

from agents import protocol
from agents.protocol import RAW_HEAD_CHARS, ConsumerInfo, EventKind, LaunchStateName, Registered

SAMPLE_KINDS = frozenset({"gpu_sample", "server_sample", "bench_progress"})
"""Events the agent may drop when the disk is nearly full; everything else is always written."""

MAX_EVENT_BYTES = 8 * 1024 * 1024
"""The largest body one event may have. ``append`` writes ASCII JSON, so an event on the wire is this plus
its envelope (seq, t_ms, kind): far below protocol.MAX_LINE, which must hold it (tests/test_agent_journal.py
checks the bound). A bigger event is journaled as a warning that says so; a bigger row written by anything
else is sent as malformed with only its head."""
EVENTS_MAX_BYTES = 4 * 1024 * 1024
"""The most event bytes one ``events`` reply carries (a reply always carries at least one event)."""
FOREIGN_LOOK_S = 0.5
"""How often a waiting ``wait_after`` looks for rows written by another process, which cannot notify it."""
STALE_ACK_MS = 60 * 60 * 1000
"""Under the disk floor, a consumer that has not acked for this long stops holding events the others acked."""
_ENVELOPE = 48
"""Bytes the envelope (``,"seq":…,"t_ms":…,"kind":""``) adds to a body on the wire, besides the kind itself."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    t_ms INTEGER NOT NULL,
    kind TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS consumers (
    consumer TEXT PRIMARY KEY,
    label TEXT NOT NULL,
    acked_seq INTEGER NOT NULL,
    registered_ms INTEGER NOT NULL,
    acked_ms INTEGER NOT NULL
);
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
_CONSUMER_COLUMNS = ("consumer", "label", "acked_seq", "registered_ms", "acked_ms")
_JOB_COLUMNS = (
    "key",
    "op",
    "job_id",
    "launch_id",
    "command_id",
    "pid",
    "start_ticks",
    "out_path",
    "err_path",
    "state",
    "samples_offset",
)


class LaunchRow(TypedDict):
    """A launch as the journal keeps it for re-adoption (agents/supervisor.py)."""

    launch_id: str
    pid: int | None
    start_ticks: int | None
    port: int
    gpus: list[int]
    log_path: str
    state: LaunchStateName
    kill_command_id: str | None
    """The kill being carried out, answered by a restarted agent."""
    log_offset: int | None
    """How far its log was read; None for a launch of an agent that did not keep it."""


class JobRow(TypedDict):
    """A bench, tripwire or kldiff run as the journal keeps it for re-adoption (agents/jobs.py)."""

    key: str
    op: str
    job_id: str
    launch_id: str | None
    command_id: str | None
    pid: int | None
    start_ticks: int | None
    out_path: str
    err_path: str
    state: str
    samples_offset: int | None


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
        self._grown = threading.Condition(self._lock)
        """Notified by ``append``; a waiter wakes once the appending transaction let go of the lock."""
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=30)
        self._db.execute("PRAGMA auto_vacuum=INCREMENTAL")  # takes effect on a new file: drops can free disk
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
                if _open_transaction(self._db):
                    self._db.execute("ROLLBACK")
                raise

    # -- events -------------------------------------------------------------------------------------

    def append(self, kind: EventKind, **fields: Any) -> int | None:
        """Journal one event; returns its seq, or None for a sample dropped under the disk floor.

        An event over MAX_EVENT_BYTES could never be sent: a warning saying so is journaled instead.
        """
        if self.samples_paused and kind in SAMPLE_KINDS:
            return None
        t_ms = fields.pop("t_ms", None) or self.clock()
        body = json.dumps(fields, separators=(",", ":"), allow_nan=False)
        if len(body) > MAX_EVENT_BYTES:
            message = (
                f"a {kind} event of {len(body)} bytes exceeds the {MAX_EVENT_BYTES}-byte bound of one event "
                f"and was not journaled; it began: {body[:2000]}"
            )
            kind, body = (
                "warning",
                json.dumps({"where": "journal", "message": message}, separators=(",", ":")),
            )
        with self._lock:
            cur = self._db.execute(
                "INSERT INTO events (t_ms, kind, body) VALUES (?, ?, ?)", (t_ms, kind, body)
            )
            assert cur.lastrowid is not None
            self._grown.notify_all()
            return cur.lastrowid

    def events_after(self, after: int, limit: int, max_bytes: int = EVENTS_MAX_BYTES) -> list[dict[str, Any]]:
        """Events with seq > after, oldest first: at most ``limit`` events and about ``max_bytes`` on the wire,
        but always the first one however large it is (so a big event can never stall the link).

        A row that is not an event (its body is not a JSON object, or too large, or its t_ms or kind has
        the wrong type) is sent as ``{seq, t_ms, kind, malformed: why, body: the stored text}``, for the
        console to quarantine: one bad row must neither break the reply nor hide the rows after it.
        """
        return [wire_event(*row) for row in self._stored_after(after, limit, max_bytes)]

    def rows_after(self, after: int, limit: int, max_bytes: int = EVENTS_MAX_BYTES) -> list[Any]:
        """``events_after`` as a ``rows`` reply carries it: each row's body as stored (``wire_row``), so the agent
        neither parses nor encodes the bulk of a backlog; the console reads each body once."""
        return [wire_row(*row) for row in self._stored_after(after, limit, max_bytes)]

    def _stored_after(self, after: int, limit: int, max_bytes: int) -> list[tuple[Any, ...]]:
        try:
            return self._rows_after(_ROWS_AS_TEXT, after, limit, max_bytes)
        except sqlite3.OperationalError:
            # A row holding text that is not UTF-8 (written by anything but ``append``) fails SQLite's decoder
            # and with it the whole read: read the rows as bytes instead, so it goes as malformed, alone.
            return self._rows_after(_ROWS_AS_BYTES, after, limit, max_bytes)

    def _rows_after(self, sql: str, after: int, limit: int, max_bytes: int) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = []
        size = 0
        with self._lock:  # only the reading: decoding happens after, so the 1 Hz tick never waits on it
            cursor = self._db.execute(sql, (after,))
            try:
                for row in cursor:  # lazily: a byte-bounded batch never loads ``limit`` large rows
                    n = _wire_size(row[2], row[3])
                    if rows and size + n > max_bytes:
                        break
                    rows.append(row)
                    size += n
                    if len(rows) >= limit:
                        break
            finally:
                cursor.close()
        return rows

    def wait_after(self, seq: int, timeout_s: float) -> None:
        """Until an event after ``seq`` is journaled (returns at once if one is held) or ``timeout_s`` passes: a
        console's ``events`` call waits here for what it would otherwise poll for. This process's appends wake
        it at once; rows another process wrote into the file (a backlog a test or a bench writes) are seen
        within FOREIGN_LOOK_S."""
        deadline = time.monotonic() + timeout_s
        with self._grown:
            while self.last_seq() <= seq:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._grown.wait(min(left, FOREIGN_LOOK_S))

    def last_seq(self) -> int:
        with self._lock:
            row = self._db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'events'").fetchone()
        return int(row[0]) if row else 0

    def first_seq(self) -> int:
        """The oldest seq still held (last_seq + 1 when nothing is): what a new consumer starts from."""
        with self._lock:
            row = self._db.execute("SELECT min(seq) FROM events").fetchone()
        return int(row[0]) if row and row[0] is not None else self.last_seq() + 1

    # -- consumers (one per state.db) ---------------------------------------------------------------

    def register(self, consumer: str, label: str) -> Registered:
        """Hold events for ``consumer`` from now on; a new one is owed every event still held."""
        _check_consumer(consumer)
        with self.atomic():
            known = self.consumer(consumer)
            if known is not None:
                self._db.execute("UPDATE consumers SET label = ? WHERE consumer = ?", (label, consumer))
                return {**known, "label": label, "new": False}
            now = self.clock()
            acked = self.first_seq() - 1
            self._db.execute(
                "INSERT INTO consumers (consumer, label, acked_seq, registered_ms, acked_ms)"
                " VALUES (?, ?, ?, ?, ?)",
                (consumer, label, acked, now, now),
            )
        return {
            "consumer": consumer,
            "label": label,
            "acked_seq": acked,
            "registered_ms": now,
            "acked_ms": now,
            "new": True,
        }

    def consumer(self, consumer: str) -> ConsumerInfo | None:
        with self._lock:
            row = self._db.execute(
                f"SELECT {', '.join(_CONSUMER_COLUMNS)} FROM consumers WHERE consumer = ?", (consumer,)
            ).fetchone()
        return _consumer_info(row) if row else None

    def consumers(self) -> list[ConsumerInfo]:
        with self._lock:
            rows = self._db.execute(
                f"SELECT {', '.join(_CONSUMER_COLUMNS)} FROM consumers ORDER BY registered_ms"
            )
            return [_consumer_info(r) for r in rows]

    def ack(self, seq: int, consumer: str) -> int | None:
        """``consumer`` committed everything up to ``seq``; rows every consumer acked go. Returns the
        consumer's acked seq, or None when it is not registered (detached): then nothing changes."""
        if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
            raise ValueError(f"ack seq must be a non-negative integer, got {seq!r}")
        _check_consumer(consumer)
        last = self.last_seq()
        if seq > last:
            raise ValueError(
                f"ack seq {seq} is beyond the last journaled seq {last}; the console is ahead of this box"
            )
        with self.atomic():
            known = self.consumer(consumer)
            if known is None:
                return None
            acked = max(int(known["acked_seq"]), seq)
            self._db.execute(
                "UPDATE consumers SET acked_seq = ?, acked_ms = ? WHERE consumer = ?",
                (acked, self.clock(), consumer),
            )
            self._release()
        return acked

    def detach(self, consumer: str) -> bool:
        """Stop holding events for ``consumer``; what only it still needed goes. False if it was not registered."""
        _check_consumer(consumer)
        with self.atomic():
            gone = self._db.execute("DELETE FROM consumers WHERE consumer = ?", (consumer,)).rowcount > 0
            self._release()
        return gone

    def release_stale(self, stale_after_ms: int = STALE_ACK_MS) -> list[str]:
        """Under the disk floor: a consumer silent for ``stale_after_ms`` that still holds events every
        other consumer acked is unregistered, and those events go. Returns one message per consumer
        released, for a warning event; it is owed only the events still held if it registers again.

        Nothing is dropped that no consumer has committed, and never while every consumer is silent:
        then those events are the only copy anywhere.
        """
        messages = []
        with self.atomic():
            now = self.clock()
            consumers = self.consumers()
            fresh = [c["acked_seq"] for c in consumers if now - c["acked_ms"] < stale_after_ms]
            if not fresh:
                return []
            floor = min(fresh)
            for c in consumers:
                if c["acked_seq"] >= floor:
                    continue
                rows = self._db.execute(
                    "SELECT kind, count(*) FROM events WHERE seq > ? AND seq <= ? GROUP BY kind"
                    " ORDER BY kind",
                    (c["acked_seq"], floor),
                ).fetchall()
                self._db.execute("DELETE FROM consumers WHERE consumer = ?", (c["consumer"],))
                kinds = ", ".join(f"{n} {kind}" for kind, n in rows) or "none still held"
                messages.append(
                    f"disk below the floor: released consumer {c['consumer']} ({c['label'] or 'no label'}), silent "
                    f"for {(now - c['acked_ms']) // 60_000} min, and dropped the events only it still needed "
                    f"(seq {c['acked_seq'] + 1}..{floor}: {kinds}); that state.db will miss them, the others have them"
                )
            self._release()
        if messages:
            with self._lock:
                # Give the pages back to the disk (a journal this agent created is in incremental auto-vacuum).
                self._db.execute("PRAGMA incremental_vacuum").fetchall()
        return messages

    def _release(self) -> None:
        """Delete what every registered consumer acked; with none registered, keep everything."""
        self._db.execute("DELETE FROM events WHERE seq <= (SELECT min(acked_seq) FROM consumers)")

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
        self,
        launch_id: str,
        pid: int | None,
        start_ticks: int | None,
        port: int,
        gpus: list[int],
        log_path: str,
        state: LaunchStateName,
    ) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO launches (launch_id, pid, start_ticks, port, gpus, log_path, state, t_ms)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (launch_id, pid, start_ticks, port, json.dumps(gpus), log_path, state, self.clock()),
            )

    def set_launch_state(
        self, launch_id: str, state: LaunchStateName, kill_command_id: str | None = None
    ) -> None:
        """``kill_command_id``: the kill being carried out, kept so a restarted agent still answers it."""
        with self._lock:
            self._db.execute(
                "UPDATE launches SET state = ?, kill_command_id = coalesce(?, kill_command_id)"
                " WHERE launch_id = ?",
                (state, kill_command_id, launch_id),
            )

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

    def live_launches(self) -> list[LaunchRow]:
        """Launches the journal last saw alive, or ended with a kill not yet answered: to re-adopt."""
        with self._lock:
            rows = self._db.execute(
                "SELECT launch_id, pid, start_ticks, port, gpus, log_path, state, kill_command_id, log_offset"
                " FROM launches"
                " WHERE state IN ('starting', 'serving', 'stopping') OR kill_command_id IS NOT NULL ORDER BY t_ms"
            ).fetchall()
        return [
            {
                "launch_id": r[0],
                "pid": r[1],
                "start_ticks": r[2],
                "port": r[3],
                "gpus": json.loads(r[4]),
                "log_path": r[5],
                "state": r[6],
                "kill_command_id": r[7],
                "log_offset": r[8],
            }
            for r in rows
        ]

    # -- bench / tripwire jobs (for re-adoption after a restart) ------------------------------------

    def save_job(
        self,
        key: str,
        op: str,
        job_id: str,
        launch_id: str | None,
        command_id: str | None,
        pid: int | None,
        start_ticks: int | None,
        out_path: str,
        err_path: str,
        state: str,
    ) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO jobs (key, op, job_id, launch_id, command_id, pid, start_ticks, out_path,"
                " err_path, state, t_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    key,
                    op,
                    job_id,
                    launch_id,
                    command_id,
                    pid,
                    start_ticks,
                    out_path,
                    err_path,
                    state,
                    self.clock(),
                ),
            )

    def set_job_state(self, key: str, state: str) -> None:
        with self._lock:
            self._db.execute("UPDATE jobs SET state = ? WHERE key = ?", (state, key))

    def set_job_samples_offset(self, key: str, offset: int) -> None:
        """How far a bench's progress samples were journaled (agents/jobs.py), committed with those events."""
        with self._lock:
            self._db.execute("UPDATE jobs SET samples_offset = ? WHERE key = ?", (offset, key))

    def job(self, key: str) -> JobRow | None:
        with self._lock:
            row = self._db.execute(
                f"SELECT {', '.join(_JOB_COLUMNS)} FROM jobs WHERE key = ?", (key,)
            ).fetchone()
        return _job_row(row) if row else None

    def running_jobs(self) -> list[JobRow]:
        """Jobs whose result is not journaled yet: candidates for re-adoption."""
        with self._lock:
            rows = self._db.execute(
                f"SELECT {', '.join(_JOB_COLUMNS)} FROM jobs WHERE state IN ('starting', 'running') ORDER BY t_ms"
            ).fetchall()
        return [_job_row(r) for r in rows]


# -- events on the wire ---------------------------------------------------------------------------------

_ROWS_AS_TEXT = "SELECT seq, t_ms, kind, body FROM events WHERE seq > ? ORDER BY seq"
_ROWS_AS_BYTES = "SELECT seq, t_ms, CAST(kind AS BLOB), CAST(body AS BLOB), typeof(body) FROM events WHERE seq > ? ORDER BY seq"


def _wire_size(kind: Any, body: Any) -> int:
    """About how many bytes a row takes in a reply: exact for what ``append`` writes (ASCII JSON); a row
    that is too large is sent as its head (RAW_HEAD_CHARS, which JSON escaping may grow sixfold)."""
    n = len(body) if isinstance(body, (str, bytes)) else 64
    if n > MAX_EVENT_BYTES:
        n = 6 * RAW_HEAD_CHARS
    return n + (len(kind) if isinstance(kind, (str, bytes)) else 64) + _ENVELOPE


def _text(stored: Any) -> str | None:
    """A stored value as text, or None when it is not valid UTF-8."""
    if isinstance(stored, bytes):
        try:
            return stored.decode("utf-8")
        except UnicodeDecodeError:
            return None
    return stored if isinstance(stored, str) else None


def _body_fields(text: str | None) -> tuple[Any, str | None]:
    """A text body's fields, or why it cannot be an event: not UTF-8, too large, or what
    ``protocol.object_fields`` finds (not JSON, not an object, nested too deep)."""
    if text is None:
        return None, "body is not valid UTF-8 text"
    if len(text) > MAX_EVENT_BYTES:
        return (
            None,
            f"body of {len(text)} bytes exceeds the {MAX_EVENT_BYTES}-byte bound of one event (head sent)",
        )
    return protocol.object_fields(text)


def wire_event(seq: int, t_ms: Any, kind: Any, body: Any, stored_as: str | None = None) -> dict[str, Any]:
    """One journal row as the event the console receives: a malformed one included (agents/protocol.py
    ``Malformed``). Read as text, a body that comes back as bytes was stored as a blob; read as bytes
    (``_ROWS_AS_BYTES``), ``stored_as`` is SQLite's type of the body.

    Checked here: what could break the reply or hide the rows after this one (text that is not UTF-8, a
    body that is not a JSON object, too large, or nested deeper than protocol.MAX_DEPTH, a t_ms or kind of
    the wrong type). Every field's type is checked by the console against protocol.EVENTS.
    """
    stored_as = stored_as or ("blob" if isinstance(body, bytes) else "text")
    text = _text(body)
    raw = (
        text
        if text is not None
        else (body.decode("utf-8", "replace") if isinstance(body, bytes) else repr(body))
    )
    fields, problem = (
        _body_fields(text) if stored_as == "text" else (None, f"body is stored as {stored_as}, not text")
    )
    kind_text = _text(kind)
    if type(t_ms) is not int:
        problem = problem or f"t_ms {t_ms!r} is not an integer"
        t_ms = t_ms if isinstance(t_ms, str) else repr(t_ms)
    if kind_text is None:
        problem = problem or f"kind {kind!r} is not UTF-8 text"
        kind_text = repr(kind)
    if problem is not None:
        return protocol.malformed_event(seq, t_ms, kind_text, problem, raw)
    assert fields is not None  # no problem: _body_fields read a JSON object
    event: dict[str, Any] = fields
    event.update(seq=seq, t_ms=t_ms, kind=kind_text)
    return event


TEXT_ROW_CHARS = MAX_EVENT_BYTES // 8
"""The largest body a ``rows`` reply carries as text. JSON escaping may grow text sixfold (a control character
becomes \\u00XX): a larger body goes parsed, as in ``events``, so a reply stays within protocol.MAX_LINE."""


def wire_row(seq: int, t_ms: Any, kind: Any, body: Any, stored_as: str | None = None) -> Any:
    """One journal row for a ``rows`` reply: ``[seq, t_ms, kind, body]`` when it is text of a size to send
    as it is, with a t_ms and kind of the right types, the body marked to go as JSON where it reads as one
    object (``protocol.json_object_text``: what ``append`` writes), else as a string for the console to
    judge; any other row as ``wire_event`` reads it (a malformed one included), as before."""
    if (
        stored_as is None
        and type(t_ms) is int
        and type(kind) is str
        and type(body) is str
        and len(body) <= TEXT_ROW_CHARS
    ):
        return [seq, t_ms, kind, protocol.json_object_text(body) or body]
    return wire_event(seq, t_ms, kind, body, stored_as)


def wire_safe(event: dict[str, Any]) -> dict[str, Any]:
    """``event`` as it can be sent: a row holding NaN or an overflowing number (1e999 decodes to inf)
    becomes malformed, since JSON cannot carry it. Used only when a reply failed to encode."""
    try:
        json.dumps(event, allow_nan=False)
    except ValueError:
        body = {k: v for k, v in event.items() if k not in ("seq", "t_ms", "kind")}
        return {
            "seq": event["seq"],
            "t_ms": event["t_ms"],
            "kind": event["kind"],
            "malformed": "body holds a number JSON cannot carry (NaN or infinity)",
            "body": json.dumps(body),
        }
    return event


def _consumer_info(row: tuple[Any, ...]) -> ConsumerInfo:
    """A ``consumers`` row, its columns in ``_CONSUMER_COLUMNS`` order."""
    consumer, label, acked_seq, registered_ms, acked_ms = row
    return {
        "consumer": consumer,
        "label": label,
        "acked_seq": acked_seq,
        "registered_ms": registered_ms,
        "acked_ms": acked_ms,
    }


def _job_row(row: tuple[Any, ...]) -> JobRow:
    """A ``jobs`` row, its columns in ``_JOB_COLUMNS`` order."""
    key, op, job_id, launch_id, command_id, pid, start_ticks, out_path, err_path, state, samples_offset = row
    return {
        "key": key,
        "op": op,
        "job_id": job_id,
        "launch_id": launch_id,
        "command_id": command_id,
        "pid": pid,
        "start_ticks": start_ticks,
        "out_path": out_path,
        "err_path": err_path,
        "state": state,
        "samples_offset": samples_offset,
    }


def _check_consumer(consumer: Any) -> None:
    if not isinstance(consumer, str) or not consumer or len(consumer) > 200:
        raise ValueError(
            f"consumer must be a campaign id (non-empty text of at most 200 characters), got {consumer!r}"
        )


def _open_transaction(db: sqlite3.Connection) -> bool:
    """Whether ``db`` is inside a transaction now (a failed COMMIT on a full disk may already have ended it)."""
    return db.in_transaction
