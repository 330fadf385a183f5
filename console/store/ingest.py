"""Journal ingest: the box's events, the rows derived from them and the cursor, in one transaction.

Exactly-once ingest rests on one rule: the journal rows, every row derived from them and the new cursor
are written in ONE transaction, and the console acks the box only after that transaction committed. A
crash before the commit leaves nothing and the box re-sends; a crash after it leaves the cursor ahead, so
the re-sent events are skipped. ``UNIQUE(box, seq)`` is the last line of defence, never the mechanism.

An event that breaks the wire contract (agents/protocol.py ``event_problem``: a missing or mistyped field,
an integer outside 64 bits, a float that is not finite, text that is not UTF-8, nesting too deep, or a row
the agent itself could not read) is quarantined: kept with its raw text and the reason in the
``quarantine`` table, counted per box, and the cursor moves past it. So is one SQLite refuses when stored:
a batch that fails is written again event by event, each in its own savepoint, so one bad value never
rolls back or blocks its neighbours. One bad event never holds the events after it hostage.

The sequence is continuous: a batch must start at cursor + 1 and hold consecutive seqs, else SequenceGap
(nothing written); the link asks the box again, and a gap the box can no longer fill is recorded as lost
(``lost_events``: seqs n..m and why) in the same transaction as the events after it, never skipped silently.
A full disk under state.db is the one thing that stops ingest (StoreFull): nothing is committed, so
nothing is acked, and the box keeps every event until space returns.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import TYPE_CHECKING, Any, Protocol, TypeGuard, TypeVar

from agents.protocol import (
    EVENTS,
    GPU_COLUMNS,
    GPU_ROW_TYPES,
    INT64_MAX,
    INT64_MIN,
    SERVER_COLUMNS,
    SERVER_ROW_TYPES,
    AgentStarted,
    BenchResult,
    CommandDone,
    Deadline,
    EventBase,
    GpuReleased,
    GpuSample,
    KernelLine,
    KldiffResult,
    LaunchBudget,
    LaunchState,
    LaunchStateName,
    Probe,
    ServerSample,
    SpecdiffResult,
    TripwireResult,
    event_problem,
    plain_figures,
    plain_sample,
)
from console.errors import Refused
from console.store.connection import Connection
from console.store.errors import disk_full, full_disk_guard
from console.store.jsonutil import dumps
from console.store.rollups import refresh_gpu_rollup

if TYPE_CHECKING:
    from console.store.checks import Checks
    from console.store.commands import Commands
    from console.store.kldiff import Kldiff
    from console.store.launches import Launches
    from console.store.results import Results
    from console.store.specdiff import Specdiff
    from console.store.timers import Timers

log = logging.getLogger(__name__)


class IngestError(Refused, ValueError):
    """A stream that cannot be committed as it is (seqs missing or out of order); nothing was written."""


class SequenceGap(IngestError):
    """The batch does not continue the cursor: seqs ``first_missing``..``next_seen - 1`` did not come."""

    def __init__(self, box: str, first_missing: int, next_seen: int):
        super().__init__(
            f"box {box}: the journal sent seq {next_seen} where seq {first_missing} was due; "
            f"seqs {first_missing}..{next_seen - 1} are missing",
            "the link asks the box again, and records them as lost when the box no longer holds them",
        )
        self.box, self.first_missing, self.next_seen = box, first_missing, next_seen


@dataclass
class IngestReport:
    """What one batch did: the committed cursor, the events kept only as journal rows (and why), the
    events quarantined (seq -> why) and the seqs recorded as lost (first, last)."""

    box: str
    inserted: int = 0
    skipped: int = 0
    cursor: int = 0
    journal_only: dict[str, str] = field(default_factory=dict)
    quarantined: dict[int, str] = field(default_factory=dict)
    lost: tuple[int, int] | None = None


_DERIVE_ERRORS = (IngestError, ValueError, LookupError, TypeError, AttributeError, sqlite3.IntegrityError)
"""What a derived row may fail with on an odd (but well-formed) event: the event keeps its journal row."""
_STORE_REFUSALS = (sqlite3.Error, ValueError, OverflowError, TypeError, RecursionError)
"""What SQLite (or encoding for it) may raise on a value it cannot store: the batch is retried event by
event and the event that fails alone is quarantined. A full disk is not among them (``Ingest._refused``)."""
LOST_REASON = (
    "left the box journal before this state.db committed them (released under the box's disk floor, this "
    "campaign detached, or the journal edited by hand); the box's warning events say which"
)


_GPU_INSERT = (
    f"INSERT OR IGNORE INTO gpu_samples(box, gpu, t_ms, {', '.join(GPU_COLUMNS)}) "
    f"VALUES (?, ?, ?, {', '.join('?' * len(GPU_COLUMNS))})"
)
_SERVER_INSERT = (
    f"INSERT OR IGNORE INTO server_samples(box, launch_id, t_ms, {', '.join(SERVER_COLUMNS)}) "
    f"VALUES (?, ?, ?, {', '.join('?' * len(SERVER_COLUMNS))})"
)
_QUARANTINE_INSERT = "INSERT OR IGNORE INTO quarantine(box, seq, t_ms, kind, raw, reason, quarantined_ms) VALUES (?, ?, ?, ?, ?, ?, ?)"
_JOURNAL_INSERT = "INSERT INTO journal(box, seq, t_ms, kind, payload, ingested_ms) VALUES (?, ?, ?, ?, ?, ?)"
_encode = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode
"""The event as it came (the agent's key order), compact: the bulk of ingest time is this encoding."""

Row = tuple[object, ...]
"""One row's values for an ``executemany``, in its statement's column order."""
HELD_IN = {"gpu_sample": '{"rows":"gpu_samples"}', "server_sample": '{"rows":"server_samples"}'}
"""The journal payload of a sample whose every field has a column: the rows hold it whole (box, gpu or launch,
t_ms), so its text is not stored twice (a month of 1 Hz samples would triple state.db)."""
_Fresh = tuple[int, Any, str | None]
"""An event to write: its seq, the event, and its JSON as it came (None: encode it)."""
E = TypeVar("E", bound=EventBase)
RunEvent = BenchResult | TripwireResult | KldiffResult | SpecdiffResult
"""A box-side run's result: a row of figures, or the reason the run failed."""
Deriver = Callable[[str, Any], None]
"""A kind's handler: (box, the event as its kind's TypedDict). ``Any`` because Python cannot tie a TypedDict
to the ``kind`` string inside it; ``Ingest._derive`` picks the handler by that kind, after the contract check."""


def _of_kind(event: EventBase, spec: type[E]) -> TypeGuard[E]:
    """Whether a checked event is a ``spec``: its kind names that TypedDict in ``EVENTS``, and
    ``event_problem`` (run before any event reaches here) checked its fields against it."""
    return EVENTS.get(event["kind"]) is spec


def _gpu_rows(box: str, event: GpuSample) -> list[Row]:
    t_ms = event["t_ms"]
    return [(box, gpu["gpu"], t_ms, *map(gpu.get, GPU_COLUMNS)) for gpu in event["gpus"]]


def _server_row(box: str, event: ServerSample) -> Row:
    return (box, event["launch_id"], event["t_ms"], *map(event.get, SERVER_COLUMNS))


def _admitted(event: Any, text: str | None) -> tuple[str | None, str | None]:
    """An event's journal text and why it may not be ingested (None: it may)."""
    why = event_problem(event)
    if why is not None or text is not None:
        return text, why
    try:
        return _encode(event), None
    except (ValueError, RecursionError) as exc:
        return None, f"it holds a value JSON cannot carry ({exc})"


class _NotPlain(Exception):
    """A batch's samples were not all plainly valid (agents/protocol.py ``plain_figures``): it is written again
    with every event checked field by field, so the one at fault is named and quarantined alone."""


def _raw(event: Any) -> str:
    """The quarantined event as it came: the box's stored text for a row the agent could not read.

    Text SQLite can store whatever the event held: a lone surrogate is escaped; an event nested too deep
    for the encoder is kept as a note (its reason says why).
    """
    if type(event) is dict and "malformed" in event and isinstance(event.get("body"), str):
        return str(event["body"]).encode("utf-8", "backslashreplace").decode()
    try:
        return json.dumps(event, separators=(",", ":"), default=repr)
    except RecursionError:
        return "(not kept: nested too deep to encode)"


@dataclass
class _Rows:
    """Rows of a batch not yet written: one ``executemany`` per table when flushed. ``bulk``: some sample rows
    come from events whose figures were not checked one by one; their columns are checked before writing.

    ``held``: journal rows (their index, the event, its text) of samples whose every field has a column; their
    payload only names the table (``HELD_IN``). If any sample row of the batch was not written (a duplicate
    of one already stored: same GPU or launch at the same t_ms), every held sample keeps its whole text."""

    bulk: bool = False
    journal: list[Row] = field(default_factory=list)
    quarantine: list[Row] = field(default_factory=list)
    gpu: list[Row] = field(default_factory=list)
    server: list[Row] = field(default_factory=list)
    held: list[tuple[int, Any, str | None]] = field(default_factory=list)
    all_landed: bool = True

    def flush_samples(self, conn: sqlite3.Connection) -> None:
        if self.bulk and not (
            plain_figures(self.gpu, GPU_ROW_TYPES) and plain_figures(self.server, SERVER_ROW_TYPES)
        ):
            raise _NotPlain
        landed = conn.executemany(_GPU_INSERT, self.gpu).rowcount == len(self.gpu)
        refresh_gpu_rollup(conn, self.gpu)
        landed = conn.executemany(_SERVER_INSERT, self.server).rowcount == len(self.server) and landed
        self.all_landed = self.all_landed and landed
        self.gpu.clear()
        self.server.clear()

    def flush_event(self, conn: sqlite3.Connection) -> None:
        """The journal and sample rows, not the quarantine: what one event's savepoint covers."""
        self.flush_samples(
            conn
        )  # first: in bulk, its columns are checked before anything of theirs is written
        if not self.all_landed:
            for i, event, text in self.held:
                row = self.journal[i]
                self.journal[i] = (*row[:4], text if text is not None else _encode(event), row[5])
        conn.executemany(_JOURNAL_INSERT, self.journal)
        self.journal.clear()
        self.held.clear()
        self.all_landed = True

    def flush(self, conn: sqlite3.Connection) -> None:
        self.flush_event(conn)
        conn.executemany(_QUARANTINE_INSERT, self.quarantine)
        self.quarantine.clear()

    def clear(self) -> None:
        """Forget what an event added before its savepoint was rolled back."""
        self.journal.clear()
        self.gpu.clear()
        self.server.clear()
        self.held.clear()
        self.all_landed = True


class IngestConnection(Connection, Protocol):
    """What ``Ingest`` needs of the store: its connection, and the repositories a batch's events land in."""

    @property
    def checks(self) -> Checks: ...

    @property
    def commands(self) -> Commands: ...

    @property
    def kldiff(self) -> Kldiff: ...

    @property
    def launches(self) -> Launches: ...

    @property
    def results(self) -> Results: ...

    @property
    def specdiff(self) -> Specdiff: ...

    @property
    def timers(self) -> Timers: ...


class Ingest:
    """``store.ingest``: the journal cursor per box, and the one transaction that commits a batch."""

    def __init__(self, store: IngestConnection):
        self.store = store
        self._derivers: dict[str, Deriver] = {
            "launch_state": self._on_launch_state,
            "kernel_line": self._on_kernel_line,
            "launch_budget": self._on_launch_budget,
            "gpu_released": self._on_gpu_released,
            "agent_started": self._on_agent_started,
            "deadline": self._on_deadline,
            "command_done": self._on_command_done,
            "probe": self._on_probe,
            "bench_result": self._on_bench_result,
            "tripwire_result": self._on_tripwire_result,
            "kldiff_result": self._on_kldiff_result,
            "specdiff_result": self._on_specdiff_result,
        }
        """The kinds that add rows beyond their journal row (samples aside: ``_add`` batches those)."""

    def cursor(self, box: str) -> int:
        """The last seq committed for ``box`` (0 when nothing was ever ingested)."""
        return int(self.store.scalar("SELECT seq FROM ingest_cursor WHERE box = ?", [box]) or 0)

    def consumer_id(self) -> str:
        """This state.db's campaign id: how every box journal tells this database from any other.

        Made once, when the database was created (or upgraded to schema 7); a copy of the file made with
        ``cp`` carries the same id and so reads as the same consumer (docs/schema.md).
        """
        return str(self.store.scalar("SELECT value FROM meta WHERE key = 'campaign_id'"))

    def quarantined(self, box: str | None = None) -> dict[str, int]:
        """Events quarantined as malformed, per box (only boxes that have any)."""
        where, params = ("WHERE box = ?", [box]) if box else ("", [])
        rows = self.store.rows(f"SELECT box, count(*) AS n FROM quarantine {where} GROUP BY box", params)
        return {r["box"]: int(r["n"]) for r in rows}

    def batch(
        self,
        box: str,
        events: Iterable[Any],
        *,
        texts: Sequence[str | None] | None = None,
        accept_gap: bool = False,
    ) -> IngestReport:
        """Commit a batch of journal events for ``box`` exactly once; return the new cursor.

        Events at or below the cursor were committed before (a re-send after a lost ack) and are
        skipped. The rest must continue the cursor one by one: a seq that goes back is a corrupt stream
        (IngestError), one that jumps ahead is a SequenceGap, both before anything is written. With
        ``accept_gap`` (the box was asked again and no longer holds the missing seqs) the gap is recorded
        as lost in the same transaction. A cursor of 0 (nothing ever ingested) may start anywhere: what
        the box released before this state.db registered was never owed to it.

        ``texts``, where given, are the events' JSON as they came (agents/protocol.py ``row_event``, one per
        event, None where there is none): the journal rows keep them instead of encoding each event again.

        Samples, nearly all of the volume, are checked a column of the batch at a time and written with one
        ``executemany`` per table; rarer kinds go through their handler in a savepoint. Raises StoreFull
        (nothing written) when the disk under state.db is full.
        """
        events = list(events)
        with full_disk_guard(self.store.path), self.store.atomic():
            cursor = self.cursor(box)
            fresh, skipped, lost = self._continuing(box, cursor, events, texts, accept_gap)
            now = self.store.clock()
            try:
                report = self._write_batch(box, fresh, now)
            except _STORE_REFUSALS as exc:
                if not self._refused(exc):
                    raise
                log.warning(
                    "box %s: a batch of %d events failed (%s); writing it event by event",
                    box,
                    len(fresh),
                    exc,
                )
                report = self._write(box, fresh, now, bulk=False, by_event=True)
            report.skipped, report.lost = skipped, lost
            if lost is not None:
                self.store.db.execute(
                    "INSERT OR IGNORE INTO lost_events(box, first_seq, last_seq, reason, recorded_ms) VALUES (?, ?, ?, ?, ?)",
                    [box, lost[0], lost[1], LOST_REASON, now],
                )
                log.warning("box %s: seqs %d..%d recorded as lost: %s", box, lost[0], lost[1], LOST_REASON)
            last = fresh[-1][0] if fresh else cursor
            if last != cursor:
                self.store.db.execute(
                    "INSERT INTO ingest_cursor(box, seq, updated_ms) VALUES (?, ?, ?) "
                    "ON CONFLICT(box) DO UPDATE SET seq = excluded.seq, updated_ms = excluded.updated_ms",
                    [box, last, now],
                )
                self.store.db.execute("UPDATE boxes SET last_seen_ms = ? WHERE name = ?", [now, box])
            report.cursor = last
        return report

    @staticmethod
    def _continuing(
        box: str, cursor: int, events: list[Any], texts: Sequence[str | None] | None, accept_gap: bool
    ) -> tuple[list[_Fresh], int, tuple[int, int] | None]:
        """The events after ``cursor`` with their seqs and texts, how many were skipped, and the gap accepted
        as lost."""
        fresh: list[_Fresh] = []
        skipped = 0
        lost = None
        last = cursor
        for event, text in (
            zip(events, texts, strict=True) if texts is not None else zip(events, repeat(None))
        ):
            seq = event.get("seq") if type(event) is dict else None
            if type(seq) is not int:
                raise IngestError(
                    f"box {box}: event {str(event)[:80]} has no integer seq; the stream is corrupt"
                )
            if seq <= cursor:
                skipped += 1
                continue
            if seq <= last:
                raise IngestError(
                    f"box {box}: event seq {seq} after seq {last} in one batch; stream out of order"
                )
            if seq != last + 1 and (last > 0 or fresh):
                if not accept_gap or lost is not None:
                    raise SequenceGap(box, last + 1, seq)
                lost = (last + 1, seq - 1)
            last = seq
            fresh.append((seq, event, text))
        return fresh, skipped, lost

    def _refused(self, exc: BaseException) -> bool:
        """Whether SQLite refused a value (the event is quarantined) rather than lacked disk (ingest stops)."""
        return disk_full(exc, self.store.path) is None

    def _write_batch(self, box: str, fresh: list[_Fresh], now: int) -> IngestReport:
        """The batch in one savepoint, its samples checked in bulk; if they are not all plainly valid, again
        with every event checked on its own (the checks agree: tests/test_ingest_plain.py)."""
        try:
            with self.store.atomic():
                return self._write(box, fresh, now, bulk=True, by_event=False)
        except _NotPlain:
            with self.store.atomic():
                return self._write(box, fresh, now, bulk=False, by_event=False)

    def _write(self, box: str, fresh: list[_Fresh], now: int, bulk: bool, by_event: bool) -> IngestReport:
        """Write the events: samples batched per table, or (``by_event``) each event in its own savepoint,
        where one that SQLite refuses is rolled back alone and quarantined with SQLite's reason. ``bulk``: a
        plain sample (``plain_sample``) skips the check field by field; its rows' columns are checked as a
        whole before they are written (``_Rows.flush_samples``), any doubt raising _NotPlain, and its journal
        row is held in them (``HELD_IN``)."""
        report = IngestReport(box=box)
        conn = self.store.db.conn
        rows = _Rows(bulk=bulk)
        for seq, event, text in fresh:
            if bulk and type(event) is dict and type(event.get("kind")) is str and plain_sample(event):
                self._add(box, seq, event, HELD_IN[event["kind"]], now, rows, report)
                rows.held.append((len(rows.journal) - 1, event, text))
                continue
            payload, why = _admitted(event, text)
            if why is None and by_event:
                why = self._add_alone(box, seq, event, payload, now, rows, report)
            elif why is None:
                self._add(box, seq, event, payload, now, rows, report)
            if why is not None:
                t_ms, kind = event.get("t_ms"), event.get("kind")
                rows.quarantine.append(
                    (
                        box,
                        seq,
                        t_ms if type(t_ms) is int and INT64_MIN <= t_ms <= INT64_MAX else None,
                        kind if type(kind) is str else None,
                        _raw(event),
                        why,
                        now,
                    )
                )
                report.quarantined[seq] = why
                log.warning("box %s: event seq %d quarantined: %s", box, seq, why)
        rows.flush(conn)
        return report

    def _add_alone(
        self,
        box: str,
        seq: int,
        event: EventBase,
        payload: str | None,
        now: int,
        rows: _Rows,
        report: IngestReport,
    ) -> str | None:
        """``_add`` and the event's rows written in a savepoint of their own; why SQLite refused them (all
        rolled back, the report as before) or None."""
        kept = report.journal_only.get(event["kind"])  # an earlier event's reason, if any
        try:
            with self.store.atomic():
                self._add(box, seq, event, payload, now, rows, report)
                rows.flush_event(self.store.db.conn)
        except _STORE_REFUSALS as exc:
            if not self._refused(exc):
                raise
            rows.clear()
            report.inserted -= 1
            if kept is None:
                report.journal_only.pop(event["kind"], None)
            else:
                report.journal_only[event["kind"]] = kept
            return f"state.db refused it: {type(exc).__name__}: {exc}"
        return None

    def _add(
        self,
        box: str,
        seq: int,
        event: EventBase,
        payload: str | None,
        now: int,
        rows: _Rows,
        report: IngestReport,
    ) -> None:
        """One valid event: its journal row and samples to the batch, its derived rows at once."""
        kind = event["kind"]
        rows.journal.append((box, seq, event["t_ms"], kind, payload, now))
        report.inserted += 1
        try:
            if _of_kind(event, GpuSample):
                rows.gpu.extend(_gpu_rows(box, event))
            elif _of_kind(event, ServerSample):
                rows.server.append(_server_row(box, event))
            else:
                # A derived row reads the samples before it (a bench row takes its power limit from the
                # newest GPU sample): write the pending ones first.
                rows.flush_samples(self.store.db.conn)
                self._derive(box, event)
        except _DERIVE_ERRORS as exc:
            reason = f"seq {seq}: {type(exc).__name__}: {exc}"
            report.journal_only[kind] = reason
            log.warning("box %s: %s kept in the journal only: %s", box, kind, reason)

    def _derive(self, box: str, event: EventBase) -> None:
        """Derived rows in a savepoint: one that cannot be derived keeps only its journal row.

        A bad derived row must never stall ingest (the box would re-send the same batch forever and keep
        every later measurement hostage); the journal row keeps the event for a later re-derivation.
        """
        handler = self._derivers.get(event["kind"])
        if handler is not None:
            with self.store.atomic():
                handler(box, event)

    def _ensure_launch(self, box: str, launch_id: str, arm: str | None) -> None:
        """A launch the console did not request (adopted after a console wipe) still gets its row."""
        self.store.db.execute(
            "INSERT OR IGNORE INTO launches(id, box, arm, state) VALUES (?, ?, ?, 'requested')",
            [launch_id, box, arm or "(unknown: launched outside this state.db)"],
        )

    def _on_launch_state(self, box: str, event: LaunchState) -> None:
        """The launch row follows the box. A state this console does not know never gets here: the
        contract check refuses it (``LaunchStateName``), so the event is quarantined, not misread."""
        state = event["state"]
        self._ensure_launch(box, event["launch_id"], event.get("arm"))
        values: dict[str, object] = {"state": state}
        for src, dst in (
            ("pid", "pid"),
            ("port", "port"),
            ("exit_code", "exit_code"),
            ("reason", "failure_reason"),
            ("log_path", "log_path"),
        ):
            value = event.get(src)
            if value is not None:
                values[dst] = value
        for src in ("gpus", "backends_accepted"):
            value = event.get(src)
            if value is not None:
                values[src] = dumps(value)
        moment: dict[LaunchStateName, str] = {
            "starting": "start_ms",
            "serving": "ready_ms",
            "failed": "stop_ms",
            "stopped": "stop_ms",
        }
        if state in moment:
            values[moment[state]] = event["t_ms"]
        sets = ", ".join(f"{k} = ?" for k in values)
        self.store.db.execute(
            f"UPDATE launches SET {sets} WHERE id = ?", [*values.values(), event["launch_id"]]
        )

    def _on_kernel_line(self, box: str, event: KernelLine) -> None:
        self.store.db.execute(
            "INSERT INTO kernel_lines(box, launch_id, t_ms, category, line) VALUES (?, ?, ?, ?, ?)",
            [box, event["launch_id"], event["t_ms"], event["category"], event["line"]],
        )

    def _on_launch_budget(self, box: str, event: LaunchBudget) -> None:
        self._ensure_launch(box, event["launch_id"], None)
        self.store.db.execute(
            "UPDATE launches SET kv_cache_tokens = ?, max_concurrency = ? WHERE id = ?",
            [event.get("kv_cache_tokens"), event.get("max_concurrency"), event["launch_id"]],
        )

    def _on_gpu_released(self, box: str, event: GpuReleased) -> None:
        self._ensure_launch(box, event["launch_id"], None)
        self.store.db.execute(
            "UPDATE launches SET gpu_mem_released = ? WHERE id = ?",
            [1 if event["released"] else 0, event["launch_id"]],
        )

    def _on_agent_started(self, box: str, event: AgentStarted) -> None:
        if event.get("version"):
            self.store.db.execute(
                "UPDATE boxes SET agent_version = ? WHERE name = ?", [event["version"], box]
            )

    def _on_deadline(self, box: str, event: Deadline) -> None:
        self.store.timers.on_agent_event(box, event)

    def _on_command_done(self, box: str, event: CommandDone) -> None:
        known = self.store.commands.find(event["command_id"])
        if known is not None and known.state == "failed":
            return  # the run's own result event already recorded why it failed
        self.store.commands.record_answer(
            event["command_id"], bool(event["ok"]), event.get("result"), event.get("error"), event["t_ms"]
        )

    def _on_probe(self, box: str, event: Probe) -> None:
        self.store.checks.add_probe(box, event["probe"])

    def _on_bench_result(self, box: str, event: BenchResult) -> None:
        if not self._run_failed(event, event["bench_id"]):
            self.store.results.add_bench_run(self._result_row(box, event, event["bench_id"]))

    def _on_tripwire_result(self, box: str, event: TripwireResult) -> None:
        if not self._run_failed(event, event["tripwire_id"]):
            self.store.results.add_tripwire_run(self._result_row(box, event, event["tripwire_id"]))

    def _on_kldiff_result(self, box: str, event: KldiffResult) -> None:
        if not self._run_failed(event, event["kldiff_id"]):
            self.store.kldiff.add_run(self._result_row(box, event, event["kldiff_id"]))

    def _on_specdiff_result(self, box: str, event: SpecdiffResult) -> None:
        if not self._run_failed(event, event["specdiff_id"]):
            self.store.specdiff.add_run(self._result_row(box, event, event["specdiff_id"]))

    def _run_failed(self, event: RunEvent, run_id: str) -> bool:
        """A run that reported an error is a failed command with its reason, never a row without numbers."""
        error = event["result"].get("error")
        if error is None:
            return False
        self.store.commands.record_answer(run_id, False, None, str(error), event["t_ms"])
        return True

    def _result_row(self, box: str, event: RunEvent, run_id: str) -> dict[str, Any]:
        """The tool's result, then what the console asked (its arguments win over the tool's echo of them).

        ``workload`` is the recipe shape's name: sent under its own key because the load generator only
        knows its built-in shape names, while the console sends explicit lengths for every shape.
        """
        launch_id = event["launch_id"]
        launch = self.store.launches.get(launch_id) if launch_id is not None else None
        command = self.store.commands.find(run_id)
        row: dict[str, Any] = dict(event["result"])
        row.update(command.args if command else {})
        if "workload" in row:
            row["shape"] = row.pop("workload")
        row.update(
            box=box,
            launch_id=launch_id,
            t_ms=event["t_ms"],
            raw=event["result"],
            run_id=run_id,
        )
        row.setdefault("arm", launch.arm if launch else None)
        return row
