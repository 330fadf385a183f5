"""``store.sweeps``: the record of a resumable sweep, one row per arm tried and per bench it ran.

Why the sweep's progress lives in state.db and not in the runner's memory: a sweep walks many arms over
hours on a rented box, and the console may die half-way (SSH drop, laptop sleep, the operator's Ctrl-C,
a hard-stop timer). Each arm's outcome is committed the moment it is known, so a resumed sweep skips
every finished arm and never loses a finished row; the arm that was running when it stopped is marked
``interrupted`` with the reason and tried again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from console.store.errors import StoreError
from console.store.jsonutil import dumps, json_list, json_list_or_none

if TYPE_CHECKING:
    from console.store.core import Store

FINISHED = ("served", "refused", "degenerate", "crashed")
"""Outcomes that end an arm for good: a resumed sweep never runs these again."""


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

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> SweepRow:
        return cls(
            id=row["id"], list_name=row["list"], box=row["box"], shapes=json.loads(row["shapes"]),
            concurrency=json.loads(row["concurrency"]), bench_degenerate=bool(row["bench_degenerate"]),
            state=row["state"], runner_pid=row["runner_pid"], runner_host=row["runner_host"], detail=row["detail"],
            created_ms=row["created_ms"], updated_ms=row["updated_ms"],
        )  # fmt: skip


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

    @property
    def finished(self) -> bool:
        return self.state in FINISHED

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> SweepArm:
        values = dict(row)
        for key in ("backends_potential", "launch_ids"):
            values[key] = json_list(row[key])
        values["backends_accepted"] = json_list_or_none(row["backends_accepted"])
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class Sweeps:
    def __init__(self, store: Store):
        self.store = store

    # -- sweeps ----------------------------------------------------------------------------------
    def create(self, list_name: str, box: str, shapes: list[str], concurrency: list[int], bench_degenerate: bool,
               candidates: list[dict[str, Any]], runner: tuple[int, str]) -> SweepRow:  # fmt: skip
        """A new sweep with its planned candidates (``origin``, ``arm``, optional base/backends), in order."""
        now = self.store.clock()
        with self.store.atomic():
            sweep_id = self.store.insert("sweeps", {
                "list": list_name, "box": box, "shapes": dumps(shapes), "concurrency": dumps(concurrency),
                "bench_degenerate": int(bench_degenerate), "state": "running", "runner_pid": runner[0],
                "runner_host": runner[1], "created_ms": now, "updated_ms": now,
            })  # fmt: skip
            for candidate in candidates:
                self.queue(sweep_id, **candidate)
        return self.get(sweep_id)

    def get(self, sweep_id: int) -> SweepRow:
        rows = self.store.rows("SELECT * FROM sweeps WHERE id = ?", [sweep_id])
        if not rows:
            raise StoreError(f"no sweep #{sweep_id} in {self.store.path}; `campaign sweep status` lists them")
        return SweepRow.from_row(rows[0])

    def unfinished(self, list_name: str, box: str) -> SweepRow | None:
        """The latest sweep of this list on this box that did not finish: the one a new run resumes."""
        rows = self.store.rows(
            "SELECT * FROM sweeps WHERE list = ? AND box = ? AND state NOT IN ('done', 'abandoned') "
            "ORDER BY id DESC LIMIT 1",
            [list_name, box],
        )
        return SweepRow.from_row(rows[0]) if rows else None

    def every(self, box: str | None = None) -> list[SweepRow]:
        sql, params = "SELECT * FROM sweeps", []
        if box is not None:
            sql, params = sql + " WHERE box = ?", [box]
        return [SweepRow.from_row(r) for r in self.store.rows(sql + " ORDER BY id", params)]

    def claim(self, sweep_id: int, runner: tuple[int, str], alive: bool) -> None:
        """Take the sweep over for this process; refused while the recorded runner is still alive."""
        sweep = self.get(sweep_id)
        if sweep.state == "running" and alive and sweep.runner_pid != runner[0]:
            raise SweepBusy(
                f"sweep #{sweep_id} ({sweep.list_name} on {sweep.box}) is being walked by pid {sweep.runner_pid} on "
                f"{sweep.runner_host}; stop that process first (its arms are recorded as they finish)"
            )
        self._update_sweep(sweep_id, state="running", runner_pid=runner[0], runner_host=runner[1], detail=None)

    def stop(self, sweep_id: int, state: str, detail: str | None) -> None:
        self._update_sweep(sweep_id, state=state, detail=detail)

    def _update_sweep(self, sweep_id: int, **values: Any) -> None:
        values["updated_ms"] = self.store.clock()
        sets = ", ".join(f"{k} = ?" for k in values)
        with self.store.atomic() as db:
            db.execute(f"UPDATE sweeps SET {sets} WHERE id = ?", [*values.values(), sweep_id])

    # -- arms ------------------------------------------------------------------------------------
    def queue(self, sweep_id: int, arm: str, origin: str, base: str | None = None, linear_backend: str | None = None,
              moe_backend: str | None = None, queued_by: str | None = None) -> bool:  # fmt: skip
        """Append a candidate at the end of the walk; False when the sweep already has it (tried or queued)."""
        with self.store.atomic() as db:
            position = int(self.store.scalar(
                "SELECT coalesce(max(position), -1) + 1 FROM sweep_arms WHERE sweep_id = ?", [sweep_id]
            ))  # fmt: skip
            cursor = db.execute(
                "INSERT OR IGNORE INTO sweep_arms(sweep_id, position, arm, base, linear_backend, moe_backend, origin, "
                "queued_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [sweep_id, position, arm, base, linear_backend, moe_backend, origin, queued_by],
            )
        return cursor.rowcount == 1

    def arms(self, sweep_id: int) -> list[SweepArm]:
        rows = self.store.rows("SELECT * FROM sweep_arms WHERE sweep_id = ? ORDER BY position", [sweep_id])
        return [SweepArm.from_row(r) for r in rows]

    def next_arm(self, sweep_id: int) -> SweepArm | None:
        """The first arm in walk order that has not finished (pending, or interrupted last time)."""
        rows = self.store.rows(
            f"SELECT * FROM sweep_arms WHERE sweep_id = ? AND state NOT IN ({', '.join('?' * len(FINISHED))}) "
            "ORDER BY position LIMIT 1",
            [sweep_id, *FINISHED],
        )
        return SweepArm.from_row(rows[0]) if rows else None

    def mark_interrupted(self, sweep_id: int, reason: str) -> list[str]:
        """Arms left ``running`` by a runner that is gone: recorded as interrupted (they will be retried)."""
        with self.store.atomic() as db:
            rows = self.store.rows("SELECT arm FROM sweep_arms WHERE sweep_id = ? AND state = 'running'", [sweep_id])
            db.execute(
                "UPDATE sweep_arms SET state = 'interrupted', reason = ?, ended_ms = ? "
                "WHERE sweep_id = ? AND state = 'running'",
                [reason, self.store.clock(), sweep_id],
            )
        return [r["arm"] for r in rows]

    def start_arm(self, sweep_arm_id: int, gpu_mem_mib: float | None) -> None:
        """A new attempt: the previous attempt's launch-specific figures are cleared, its benches kept."""
        with self.store.atomic() as db:
            db.execute(
                "UPDATE sweep_arms SET state = 'running', attempts = attempts + 1, started_ms = ?, ended_ms = NULL, "
                "reason = NULL, launch_ids = NULL, kv_cache_tokens = NULL, max_concurrency = NULL, "
                "gpu_mem_mib = ? WHERE id = ?",
                [self.store.clock(), gpu_mem_mib, sweep_arm_id],
            )

    def update_arm(self, sweep_arm_id: int, **values: Any) -> None:
        for key in ("backends_accepted", "backends_potential", "launch_ids"):
            if key in values and values[key] is not None:
                values[key] = dumps(values[key])
        sets = ", ".join(f"{k} = ?" for k in values)
        with self.store.atomic() as db:
            db.execute(f"UPDATE sweep_arms SET {sets} WHERE id = ?", [*values.values(), sweep_arm_id])

    def finish_arm(self, sweep_arm_id: int, state: str, reason: str | None = None, **values: Any) -> None:
        if state not in FINISHED and state != "interrupted":
            raise ValueError(f"an arm ends as one of {', '.join(FINISHED)} or interrupted, not {state!r}")
        self.update_arm(sweep_arm_id, state=state, reason=reason, ended_ms=self.store.clock(), **values)

    # -- benches ---------------------------------------------------------------------------------
    def add_bench(self, sweep_arm_id: int, launch_id: str, shape: str, concurrency: int, bench_run_id: int | None,
                  error: str | None, admitted: int | None) -> None:  # fmt: skip
        """One node bench of the walk (``launch_id``: its first replica), with the streams a replica admits at
        once; the throughput row carries its own queueing mark (console.store.conditions)."""
        with self.store.atomic() as db:
            db.execute(
                "INSERT OR REPLACE INTO sweep_benches(sweep_arm_id, launch_id, shape, concurrency, bench_run_id, "
                "error, admitted, t_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [sweep_arm_id, launch_id, shape, concurrency, bench_run_id, error, admitted, self.store.clock()],
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
