"""``store.history``: an imported campaign's recorded history, written as imported rows of its import.

A newcomer's first screen is the demo (ops/demo.py), and a campaign in progress is more than its result
tables: GPU power and clock series, servers' throughput over time, tripwire runs at their instants, the
power check of each box, hard-stop timers and the sweeps that walked the arms. ops/demo_history.py builds
that history from the write-up's published figures; this module only writes it, every row tied to the
write-up's ``imports`` row by ``import_id`` (schema V18), so it is deleted and rebuilt with that import and
never counted as measured here (``Results.has_measured_data`` counts neither samples nor these tables).

The imported launches and tripwire runs already exist (``Results.record_import``); the history places them
on its timeline: when each launch started, served and stopped, when each tripwire ran. The bench rows keep no
window of their own: energy and a curve point's validity are read from the GPU samples inside a row's window,
and modelled samples must never become a measured figure; a sweep's bench says when it ran.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from console.store.connection import Connection
from console.store.jsonutil import dumps
from console.store.rollups import refresh_gpu_rollup

if TYPE_CHECKING:
    from console.store.checks import Checks, CheckVerdict
    from console.store.timers import Timers


@dataclass(frozen=True)
class GpuSample:
    """One GPU at one instant, as NVML would report it (``gpu_samples`` columns); None: not known."""

    box: str
    gpu: int
    t_ms: int
    power_w: float
    power_limit_w: float
    enforced_limit_w: float
    max_limit_w: float
    sm_clock_mhz: float
    mem_total_mib: float | None = None


@dataclass(frozen=True)
class ServerSample:
    """One launch's /metrics rates at one instant (``server_samples`` columns); None: not known."""

    box: str
    launch_id: str
    t_ms: int
    gen_tok_per_s: float
    prompt_tok_per_s: float | None
    running: float | None


@dataclass(frozen=True)
class LaunchSpan:
    """When an imported launch started, served (None: it never did) and stopped."""

    launch_id: str
    start_ms: int
    ready_ms: int | None
    stop_ms: int


@dataclass(frozen=True)
class BenchSpan:
    """When an imported bench row (its launch, shape and concurrency) ran on the timeline (a sweep's bench)."""

    launch_id: str
    shape: str
    concurrency: int
    started_ms: int
    ended_ms: int


@dataclass(frozen=True)
class CheckRun:
    """A box's check verdicts at one instant, judged by console.checks from the published figures."""

    box: str
    t_ms: int
    verdicts: Sequence[CheckVerdict]


@dataclass(frozen=True)
class TimerEvent:
    t_ms: int
    event: str  # armed, warn-30m, ..., fired, cancelled (console/timers.py's events)
    detail: Mapping[str, object] | None = None


@dataclass(frozen=True)
class ImportedTimer:
    """A hard stop as the write-up tells it: its deadline, what it would do, and its log."""

    box: str
    deadline_ms: int
    action: str
    input_text: str
    state: str  # its last event's state: fired, cancelled
    log: Sequence[TimerEvent]


@dataclass(frozen=True)
class ImportedSweepArm:
    """One arm of a sweep list and how it ended: served, refused, degenerate, or pending (never reached)."""

    arm: str
    state: str
    reason: str | None = None
    launch_id: str | None = None  # the imported launch it ran as; None when it never ran
    started_ms: int | None = None
    ended_ms: int | None = None
    kv_cache_tokens: int | None = None
    benches: Sequence[BenchSpan] = ()


@dataclass(frozen=True)
class ImportedSweep:
    """A sweep list walked on one box, its arms in walk order; ``detail`` says why it stopped short."""

    list_name: str
    box: str
    state: str  # done, interrupted
    detail: str | None
    shapes: Sequence[str]
    concurrency: Sequence[int]
    created_ms: int
    updated_ms: int
    arms: Sequence[ImportedSweepArm]


@dataclass
class HistoryPayload:
    gpu_samples: list[GpuSample] = field(default_factory=list)
    server_samples: list[ServerSample] = field(default_factory=list)
    launches: list[LaunchSpan] = field(default_factory=list)
    tripwires: dict[str, int] = field(default_factory=dict)  # launch id -> when its tripwire ran
    checks: list[CheckRun] = field(default_factory=list)
    timers: list[ImportedTimer] = field(default_factory=list)
    sweeps: list[ImportedSweep] = field(default_factory=list)


class HistoryConnection(Connection, Protocol):
    """The store as the history writer needs it: the check and timer repositories write their own rows."""

    @property
    def checks(self) -> Checks: ...

    @property
    def timers(self) -> Timers: ...


class History:
    def __init__(self, store: HistoryConnection):
        self.store = store

    def add_imported(self, import_id: int, history: HistoryPayload) -> None:
        """Write ``history`` as rows of import ``import_id`` (the launches, tripwire and bench rows it places
        must be that import's); one transaction."""
        with self.store.atomic() as db:
            db.table("gpu_samples").insert_all(
                ({**vars(s), "import_id": import_id} for s in history.gpu_samples), batch_size=500
            )
            refresh_gpu_rollup(db.conn, [(s.box, s.gpu, s.t_ms) for s in history.gpu_samples])
            db.table("server_samples").insert_all(
                ({**vars(s), "import_id": import_id} for s in history.server_samples), batch_size=500
            )
            for span in history.launches:
                db.execute(
                    "UPDATE launches SET start_ms = ?, ready_ms = ?, stop_ms = ? WHERE id = ? AND id LIKE 'import:%'",
                    [span.start_ms, span.ready_ms, span.stop_ms, span.launch_id],
                )
            for launch_id, t_ms in history.tripwires.items():
                db.execute(
                    "UPDATE tripwire_runs SET t_ms = ? WHERE launch_id = ? AND import_id = ?",
                    [t_ms, launch_id, import_id],
                )
            for run in history.checks:
                self.store.checks.add_verdicts(run.box, None, run.verdicts, run.t_ms, import_id=import_id)
            for timer in history.timers:
                self._timer(timer, import_id)
            for sweep in history.sweeps:
                self._sweep(sweep, import_id)

    def _timer(self, timer: ImportedTimer, import_id: int) -> None:
        first = timer.log[0].t_ms if timer.log else timer.deadline_ms
        last = timer.log[-1].t_ms if timer.log else first
        timer_id = self.store.insert(
            "timers",
            {
                "box": timer.box,
                "deadline_ms": timer.deadline_ms,
                "action": timer.action,
                "state": timer.state,
                "input_text": timer.input_text,
                "created_ms": first,
                "updated_ms": last,
                "import_id": import_id,
            },
        )
        tz = self.store.timers.box_tz(timer.box)
        for e in timer.log:
            self.store.timers.log(
                timer_id,
                e.event,
                enforcer="console",
                now_ms=e.t_ms,
                deadline_ms=timer.deadline_ms,
                tz=tz,
                detail=e.detail,
            )

    def _sweep(self, sweep: ImportedSweep, import_id: int) -> None:
        sweep_id = self.store.insert(
            "sweeps",
            {
                "list": sweep.list_name,
                "box": sweep.box,
                "shapes": dumps(list(sweep.shapes)),
                "concurrency": dumps(list(sweep.concurrency)),
                "bench_degenerate": 0,
                "state": sweep.state,
                "detail": sweep.detail,
                "created_ms": sweep.created_ms,
                "updated_ms": sweep.updated_ms,
                "layout": "node",
                "import_id": import_id,
            },
        )
        self.store.insert(
            "sweep_boxes",
            {
                "sweep_id": sweep_id,
                "box": sweep.box,
                "position": 0,
                "state": "walking",
                "updated_ms": sweep.created_ms,
            },
        )
        for position, arm in enumerate(sweep.arms):
            self._sweep_arm(sweep_id, position, sweep.box, arm, import_id)

    def _sweep_arm(
        self, sweep_id: int, position: int, box: str, arm: ImportedSweepArm, import_id: int
    ) -> None:
        launch_ids = [arm.launch_id] if arm.launch_id else []
        tripwire_id = (
            self.store.scalar(
                "SELECT id FROM tripwire_runs WHERE launch_id = ? AND import_id = ?",
                [arm.launch_id, import_id],
            )
            if arm.launch_id
            else None
        )
        values: dict[str, Any] = {
            "sweep_id": sweep_id,
            "position": position,
            "arm": arm.arm,
            "origin": "list",
            "state": arm.state,
            "attempts": 1 if arm.started_ms is not None else 0,
            "reason": arm.reason,
            "launch_ids": dumps(launch_ids) if launch_ids else None,
            "kv_cache_tokens": arm.kv_cache_tokens,
            "tripwire_run_id": tripwire_id,
            "started_ms": arm.started_ms,
            "ended_ms": arm.ended_ms,
            "box": box if arm.started_ms is not None else None,
        }
        arm_id = self.store.insert("sweep_arms", values)
        if arm.started_ms is None:
            return
        self.store.insert(
            "sweep_attempts",
            {
                "sweep_arm_id": arm_id,
                "attempt": 1,
                "box": box,
                "launch_ids": dumps(launch_ids),
                "outcome": arm.state,
                "reason": arm.reason,
                "started_ms": arm.started_ms,
                "ended_ms": arm.ended_ms,
            },
        )
        for b in arm.benches:
            bench_id = self.store.scalar(
                "SELECT id FROM bench_runs WHERE launch_id = ? AND shape = ? AND concurrency = ? AND import_id = ?",
                [b.launch_id, b.shape, b.concurrency, import_id],
            )
            self.store.insert(
                "sweep_benches",
                {
                    "sweep_arm_id": arm_id,
                    "launch_id": b.launch_id,
                    "shape": b.shape,
                    "concurrency": b.concurrency,
                    "bench_run_id": bench_id,
                    "t_ms": b.ended_ms,
                },
            )
