"""``store.sweeps``: the record of a resumable sweep, one row per arm tried and per bench it ran.

Why the sweep's progress lives in state.db and not in the runner's memory: a sweep walks many arms over
hours on a rented box, and the console may die half-way (SSH drop, laptop sleep, the operator's Ctrl-C,
a hard-stop timer). Each arm's outcome is committed the moment it is known, so a resumed sweep skips
every finished arm and never loses a finished row; the arm that was running when it stopped is marked
``interrupted`` with the reason and tried again.

A sweep over several boxes (layout ``packed``) runs arms side by side: each attempt records where it was
claimed (box, GPUs, launch ids) before anything is sent, so a resumed sweep stops exactly what a dead
console left running and never starts an arm twice; ``sweep_attempts`` keeps every attempt, so an arm a
dead box gave back to the queue still shows why after it served elsewhere.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict

from console.store.errors import StoreError
from console.store.jsonutil import dumps, json_list, json_list_or_none

if TYPE_CHECKING:
    from console.store.connection import Connection

FINISHED = ("served", "refused", "degenerate", "crashed")
"""Outcomes that end an arm for good: a resumed sweep never runs these again."""
LAYOUTS = ("node", "packed")
"""node: each arm on every card of its one box, one replica per card; packed: each arm on the fewest GPUs
its layout needs, arms side by side on separate GPUs of the sweep's boxes."""


class Candidate(TypedDict):
    """An arm to queue on a sweep's walk: the sweep plan's and the engine's (console/service/sweep/plan.py).

    ``origin`` says why it is there: the list names it, a kernel pair of the list derives it from ``base``,
    or an engine refusal by ``queued_by`` accepted its backends."""

    arm: str
    origin: Literal["list", "pair", "accepted"]
    base: NotRequired[str]
    linear_backend: NotRequired[str | None]
    moe_backend: NotRequired[str | None]
    queued_by: NotRequired[str]


class SweepBusy(StoreError):
    """Another live console process is walking this sweep; two walkers would launch on the same GPUs."""


@dataclass
class SweepRow:
    id: int
    list_name: str
    box: str
    shapes: list[str]
    concurrency: list[int]
    bench_degenerate: bool
    state: str
    runner_pid: int | None
    runner_host: str | None
    detail: str | None
    created_ms: int
    updated_ms: int
    layout: str = "node"
    """See LAYOUTS; ``box`` is the first box a packed sweep was started with (``Sweeps.boxes`` has them all)."""

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> SweepRow:
        return cls(
            id=row["id"],
            list_name=row["list"],
            box=row["box"],
            shapes=json.loads(row["shapes"]),
            concurrency=json.loads(row["concurrency"]),
            bench_degenerate=bool(row["bench_degenerate"]),
            state=row["state"],
            runner_pid=row["runner_pid"],
            runner_host=row["runner_host"],
            detail=row["detail"],
            created_ms=row["created_ms"],
            updated_ms=row["updated_ms"],
            layout=row["layout"],
        )


@dataclass
class SweepBox:
    """A box a sweep feeds: walking, out (with why) or left out of the resumed run; GPUs it must not use."""

    sweep_id: int
    box: str
    position: int
    state: str
    detail: str | None
    excluded: dict[int, str]
    updated_ms: int

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> SweepBox:
        excluded = {int(k): str(v) for k, v in json.loads(row["excluded"] or "{}").items()}
        return cls(
            row["sweep_id"],
            row["box"],
            row["position"],
            row["state"],
            row["detail"],
            excluded,
            row["updated_ms"],
        )


@dataclass
class SweepAttempt:
    """One attempt of an arm: where it was claimed, what it launched, the GPU memory read around it, its end."""

    sweep_arm_id: int
    attempt: int
    box: str
    gpus: list[int] | None
    launch_ids: list[str]
    mem_before: dict[int, float | None] | None
    mem_after: dict[int, float | None] | None
    outcome: str | None
    reason: str | None
    started_ms: int
    ended_ms: int | None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> SweepAttempt:
        return cls(
            sweep_arm_id=row["sweep_arm_id"],
            attempt=row["attempt"],
            box=row["box"],
            gpus=_gpus(row["gpus"]),
            launch_ids=json_list(row["launch_ids"]),
            mem_before=_memory(row["mem_before"]),
            mem_after=_memory(row["mem_after"]),
            outcome=row["outcome"],
            reason=row["reason"],
            started_ms=row["started_ms"],
            ended_ms=row["ended_ms"],
        )


def _gpus(text: str | None) -> list[int] | None:
    return [int(g) for g in json.loads(text)] if text else None


def _memory(text: str | None) -> dict[int, float | None] | None:
    return {int(k): v for k, v in json.loads(text).items()} if text else None


@dataclass
class SweepArm:
    id: int
    sweep_id: int
    position: int
    arm: str
    base: str | None
    linear_backend: str | None
    moe_backend: str | None
    origin: str
    queued_by: str | None
    state: str
    attempts: int
    reason: str | None
    backends_accepted: list[str] | None  # None: no set recorded (the engine printed none, or no refusal)
    backends_potential: list[str]
    launch_ids: list[str]
    gpu_mem_mib: float | None
    kv_cache_tokens: int | None
    max_concurrency: float | None
    tripwire_run_id: int | None
    started_ms: int | None
    ended_ms: int | None
    box: str | None = None
    """Where the current (or last) attempt was claimed."""
    gpus: list[int] | None = None
    """Its GPUs there; None: every card of the box (a node sweep) or none claimed yet."""

    @property
    def finished(self) -> bool:
        return self.state in FINISHED

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> SweepArm:
        values = dict(row)
        for key in ("backends_potential", "launch_ids"):
            values[key] = json_list(row[key])
        values["backends_accepted"] = json_list_or_none(row["backends_accepted"])
        values["gpus"] = _gpus(row["gpus"])
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


_CURRENT = (
    "sweep_arm_id = ? AND attempt = "
    "(SELECT a.attempts FROM sweep_arms a WHERE a.id = sweep_attempts.sweep_arm_id)"
)
"""The WHERE clause naming an arm's current attempt (one ``?``: the sweep arm id)."""


class Sweeps:
    def __init__(self, store: Connection):
        self.store = store

    # -- sweeps ----------------------------------------------------------------------------------
    def create(
        self,
        list_name: str,
        boxes: list[str],
        shapes: list[str],
        concurrency: list[int],
        bench_degenerate: bool,
        candidates: list[Candidate],
        runner: tuple[int, str],
        layout: str = "node",
    ) -> SweepRow:
        """A new sweep over ``boxes`` with its planned candidates (``origin``, ``arm``, optional base/backends),
        in order."""
        if layout not in LAYOUTS or not boxes or (layout == "node" and len(boxes) != 1):
            raise ValueError(
                f"a {layout!r} sweep over boxes {boxes}: node sweeps walk one box, packed ones any"
            )
        now = self.store.clock()
        with self.store.atomic():
            sweep_id = self.store.insert(
                "sweeps",
                {
                    "list": list_name,
                    "box": boxes[0],
                    "shapes": dumps(shapes),
                    "concurrency": dumps(concurrency),
                    "bench_degenerate": int(bench_degenerate),
                    "state": "running",
                    "runner_pid": runner[0],
                    "runner_host": runner[1],
                    "created_ms": now,
                    "updated_ms": now,
                    "layout": layout,
                },
            )
            self.set_boxes(sweep_id, boxes)
            for candidate in candidates:
                self.queue(sweep_id, **candidate)
        return self.get(sweep_id)

    def get(self, sweep_id: int) -> SweepRow:
        rows = self.store.rows("SELECT * FROM sweeps WHERE id = ?", [sweep_id])
        if not rows:
            raise StoreError(f"no sweep #{sweep_id} in {self.store.path}; `campaign sweep status` lists them")
        return SweepRow.from_row(rows[0])

    def unfinished(self, list_name: str, boxes: list[str]) -> SweepRow | None:
        """The latest sweep of this list that did not finish and feeds any of ``boxes``: the one a new run resumes."""
        rows = self.store.rows(
            f"SELECT * FROM sweeps s WHERE list = ? AND state NOT IN ('done', 'abandoned') AND EXISTS ("
            f"SELECT 1 FROM sweep_boxes b WHERE b.sweep_id = s.id AND b.box IN ({', '.join('?' * len(boxes))})) "
            "ORDER BY id DESC LIMIT 1",
            [list_name, *boxes],
        )
        return SweepRow.from_row(rows[0]) if rows else None

    def every(self, box: str | None = None) -> list[SweepRow]:
        sql, params = "SELECT * FROM sweeps s", []
        if box is not None:
            sql += " WHERE EXISTS (SELECT 1 FROM sweep_boxes b WHERE b.sweep_id = s.id AND b.box = ?)"
            params = [box]
        return [SweepRow.from_row(r) for r in self.store.rows(sql + " ORDER BY id", params)]

    # -- the boxes a sweep feeds -----------------------------------------------------------------
    def boxes(self, sweep_id: int) -> list[SweepBox]:
        rows = self.store.rows(
            "SELECT * FROM sweep_boxes WHERE sweep_id = ? ORDER BY position, box", [sweep_id]
        )
        return [SweepBox.from_row(r) for r in rows]

    def set_boxes(self, sweep_id: int, boxes: list[str]) -> None:
        """The boxes this run of the sweep feeds, in order: each walks with a fresh look at its GPUs (nothing
        excluded yet); a box fed before and not now is marked ``left``."""
        now = self.store.clock()
        with self.store.atomic() as db:
            db.execute(
                "UPDATE sweep_boxes SET state = 'left', detail = 'not part of the resumed run', "
                "position = position + ?, updated_ms = ? WHERE sweep_id = ?",
                [len(boxes), now, sweep_id],
            )
            db.table("sweep_boxes").upsert_all(
                (
                    {
                        "sweep_id": sweep_id,
                        "box": box,
                        "position": position,
                        "state": "walking",
                        "detail": None,
                        "excluded": None,
                        "updated_ms": now,
                    }
                    for position, box in enumerate(boxes)
                ),
                pk=("sweep_id", "box"),
            )

    def box_out(self, sweep_id: int, box: str, detail: str) -> None:
        """The box takes no more arms in this run (unreachable, its agent gone, or it refused); ``detail`` says why."""
        with self.store.atomic() as db:
            db.execute(
                "UPDATE sweep_boxes SET state = 'out', detail = ?, updated_ms = ? WHERE sweep_id = ? AND box = ?",
                [detail, self.store.clock(), sweep_id, box],
            )

    def exclude_gpu(self, sweep_id: int, box: str, gpu: int, why: str) -> None:
        """A GPU of the box this run does not use: something else held it before an arm was put on it."""
        with self.store.atomic() as db:
            row = self.store.rows(
                "SELECT excluded FROM sweep_boxes WHERE sweep_id = ? AND box = ?", [sweep_id, box]
            )
            excluded = json.loads(row[0]["excluded"] or "{}") if row else {}
            excluded[str(gpu)] = why
            db.execute(
                "UPDATE sweep_boxes SET excluded = ?, updated_ms = ? WHERE sweep_id = ? AND box = ?",
                [dumps(excluded), self.store.clock(), sweep_id, box],
            )

    def claim(self, sweep_id: int, runner: tuple[int, str], alive: bool) -> None:
        """Take the sweep over for this process; refused while the recorded runner is still alive."""
        sweep = self.get(sweep_id)
        if sweep.state == "running" and alive and sweep.runner_pid != runner[0]:
            raise SweepBusy(
                f"sweep #{sweep_id} ({sweep.list_name} on {sweep.box}) is being walked by pid {sweep.runner_pid} on "
                f"{sweep.runner_host}; stop that process first (its arms are recorded as they finish)"
            )
        self._update_sweep(
            sweep_id, state="running", runner_pid=runner[0], runner_host=runner[1], detail=None
        )

    def stop(self, sweep_id: int, state: str, detail: str | None) -> None:
        self._update_sweep(sweep_id, state=state, detail=detail)

    def _update_sweep(self, sweep_id: int, **values: Any) -> None:
        values["updated_ms"] = self.store.clock()
        sets = ", ".join(f"{k} = ?" for k in values)
        with self.store.atomic() as db:
            db.execute(f"UPDATE sweeps SET {sets} WHERE id = ?", [*values.values(), sweep_id])

    # -- arms ------------------------------------------------------------------------------------
    def queue(
        self,
        sweep_id: int,
        arm: str,
        origin: str,
        base: str | None = None,
        linear_backend: str | None = None,
        moe_backend: str | None = None,
        queued_by: str | None = None,
    ) -> bool:
        """Append a candidate at the end of the walk; False when the sweep already has it (tried or queued)."""
        with self.store.atomic() as db:
            arms = db.table("sweep_arms")
            if arms.count_where("sweep_id = ? AND arm = ?", [sweep_id, arm]):
                return False
            position = int(
                self.store.scalar(
                    "SELECT coalesce(max(position), -1) + 1 FROM sweep_arms WHERE sweep_id = ?", [sweep_id]
                )
            )
            arms.insert(
                {
                    "sweep_id": sweep_id,
                    "position": position,
                    "arm": arm,
                    "base": base,
                    "linear_backend": linear_backend,
                    "moe_backend": moe_backend,
                    "origin": origin,
                    "queued_by": queued_by,
                }
            )
        return True

    def arms(self, sweep_id: int) -> list[SweepArm]:
        rows = self.store.rows("SELECT * FROM sweep_arms WHERE sweep_id = ? ORDER BY position", [sweep_id])
        return [SweepArm.from_row(r) for r in rows]

    def waiting(self, sweep_id: int) -> list[SweepArm]:
        """Arms in walk order that no attempt holds and that have not finished: pending, or given back."""
        rows = self.store.rows(
            "SELECT * FROM sweep_arms WHERE sweep_id = ? AND state IN ('pending', 'interrupted') ORDER BY position",
            [sweep_id],
        )
        return [SweepArm.from_row(r) for r in rows]

    def next_arm(self, sweep_id: int) -> SweepArm | None:
        """The first arm in walk order that has not finished (pending, or interrupted last time)."""
        rows = self.store.rows(
            f"SELECT * FROM sweep_arms WHERE sweep_id = ? AND state NOT IN ({', '.join('?' * len(FINISHED))}) "
            "ORDER BY position LIMIT 1",
            [sweep_id, *FINISHED],
        )
        return SweepArm.from_row(rows[0]) if rows else None

    def get_arm(self, sweep_arm_id: int) -> SweepArm:
        rows = self.store.rows("SELECT * FROM sweep_arms WHERE id = ?", [sweep_arm_id])
        if not rows:
            raise StoreError(f"no sweep arm #{sweep_arm_id} in {self.store.path}")
        return SweepArm.from_row(rows[0])

    def mark_interrupted(self, sweep_id: int, reason: str) -> list[SweepArm]:
        """Arms left ``running`` by a runner that is gone: recorded as interrupted (they will be retried).
        Returned as they were claimed, so the caller can stop what their attempts left on the boxes."""
        with self.store.atomic():
            rows = self.store.rows(
                "SELECT id FROM sweep_arms WHERE sweep_id = ? AND state = 'running'", [sweep_id]
            )
            for row in rows:
                self.finish_arm(row["id"], "interrupted", reason)
        return [self.get_arm(r["id"]) for r in rows]

    def start_arm(
        self, sweep_arm_id: int, box: str, gpus: list[int] | None, gpu_mem_mib: float | None
    ) -> None:
        """A new attempt, claimed by ``box`` (``gpus`` there; None: every card): the previous attempt's
        launch-specific figures are cleared, its benches kept."""
        now = self.store.clock()
        with self.store.atomic() as db:
            db.execute(
                "UPDATE sweep_arms SET state = 'running', attempts = attempts + 1, started_ms = ?, ended_ms = NULL, "
                "reason = NULL, launch_ids = NULL, kv_cache_tokens = NULL, max_concurrency = NULL, "
                "gpu_mem_mib = ?, box = ?, gpus = ? WHERE id = ?",
                [now, gpu_mem_mib, box, None if gpus is None else dumps(gpus), sweep_arm_id],
            )
            db.execute(
                "INSERT INTO sweep_attempts(sweep_arm_id, attempt, box, gpus, started_ms) "
                "SELECT id, attempts, box, gpus, ? FROM sweep_arms WHERE id = ?",
                [now, sweep_arm_id],
            )

    def claim_launches(self, sweep_arm_id: int, launch_ids: list[str]) -> None:
        """The launch ids of the current attempt, recorded before they are sent: a resumed sweep stops them."""
        with self.store.atomic() as db:
            self.update_arm(sweep_arm_id, launch_ids=launch_ids)
            db.execute(
                f"UPDATE sweep_attempts SET launch_ids = ? WHERE {_CURRENT}",
                [dumps(launch_ids), sweep_arm_id],
            )

    def record_memory(self, sweep_arm_id: int, when: str, memory: dict[int, float | None]) -> None:
        """The GPU memory used on the attempt's GPUs, read ``before`` the launch or ``after`` it served."""
        column = {"before": "mem_before", "after": "mem_after"}[when]
        with self.store.atomic() as db:
            db.execute(
                f"UPDATE sweep_attempts SET {column} = ? WHERE {_CURRENT}",
                [dumps({str(g): m for g, m in memory.items()}), sweep_arm_id],
            )

    def attempts_of(self, sweep_arm_id: int) -> list[SweepAttempt]:
        rows = self.store.rows(
            "SELECT * FROM sweep_attempts WHERE sweep_arm_id = ? ORDER BY attempt", [sweep_arm_id]
        )
        return [SweepAttempt.from_row(r) for r in rows]

    def update_arm(self, sweep_arm_id: int, **values: Any) -> None:
        for key in ("backends_accepted", "backends_potential", "launch_ids"):
            if key in values and values[key] is not None:
                values[key] = dumps(values[key])
        sets = ", ".join(f"{k} = ?" for k in values)
        with self.store.atomic() as db:
            db.execute(f"UPDATE sweep_arms SET {sets} WHERE id = ?", [*values.values(), sweep_arm_id])

    def finish_arm(self, sweep_arm_id: int, state: str, reason: str | None = None, **values: Any) -> None:
        """End the current attempt (``interrupted``: given back, it will be tried again)."""
        if state not in FINISHED and state != "interrupted":
            raise ValueError(f"an arm ends as one of {', '.join(FINISHED)} or interrupted, not {state!r}")
        now = self.store.clock()
        with self.store.atomic() as db:
            self.update_arm(sweep_arm_id, state=state, reason=reason, ended_ms=now, **values)
            db.execute(
                f"UPDATE sweep_attempts SET outcome = ?, reason = ?, ended_ms = ? WHERE {_CURRENT}",
                [state, reason, now, sweep_arm_id],
            )

    # -- benches ---------------------------------------------------------------------------------
    def add_bench(
        self,
        sweep_arm_id: int,
        launch_id: str,
        shape: str,
        concurrency: int,
        bench_run_id: int | None,
        error: str | None,
        admitted: int | None,
    ) -> None:
        """One node bench of the walk (``launch_id``: its first replica), with the streams a replica admits at
        once; the throughput row carries its own queueing mark (console.store.conditions)."""
        with self.store.atomic() as db:
            db.table("sweep_benches").insert(
                {
                    "sweep_arm_id": sweep_arm_id,
                    "launch_id": launch_id,
                    "shape": shape,
                    "concurrency": concurrency,
                    "bench_run_id": bench_run_id,
                    "error": error,
                    "admitted": admitted,
                    "t_ms": self.store.clock(),
                },
                replace=True,
            )

    def benches(self, sweep_arm_id: int) -> list[dict[str, Any]]:
        return self.store.rows(
            "SELECT b.*, r.out_tok_per_s, r.queueing, r.diagnostic_only FROM sweep_benches b "
            "LEFT JOIN bench_runs r ON r.id = b.bench_run_id WHERE b.sweep_arm_id = ? ORDER BY b.t_ms",
            [sweep_arm_id],
        )

    def benched(self, sweep_arm_id: int) -> set[tuple[str, int]]:
        """(shape, concurrency) pairs that already have a throughput row: a retried arm does not redo them."""
        rows = self.store.rows(
            "SELECT shape, concurrency FROM sweep_benches WHERE sweep_arm_id = ? AND bench_run_id IS NOT NULL",
            [sweep_arm_id],
        )
        return {(r["shape"], r["concurrency"]) for r in rows}
