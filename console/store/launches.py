"""Arms as resolved and launched, and their launches (one per replica): what really ran, where.

A launch the agent never accepted is a row with its reason, never an omission. Launches point at the arm
row holding the exact argv and environment sent, so a result can always name what it measured.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from agents.protocol import LaunchStateName
from console.store.jsonutil import dumps, json_dict_or_none, json_list, json_tuple_or_none

if TYPE_CHECKING:
    from console.store.connection import Connection

LaunchStatus = Literal["requested", LaunchStateName]
"""A launch's state in state.db: ``requested`` until the box journals one of its own (agents.protocol)."""
LAUNCH_STATES: tuple[LaunchStatus, ...] = typing.get_args(LaunchStatus)
ENDED: tuple[LaunchStatus, ...] = ("failed", "stopped")
"""Launch states after which a server holds nothing (once its GPU release is journaled)."""


@dataclass(frozen=True)
class Launch:
    """One replica of an arm on a box, as the store last recorded it."""

    id: str
    box: str
    arm: str
    arm_id: int | None
    replica: int
    gpus: tuple[int, ...]
    port: int | None
    pid: int | None
    state: LaunchStatus
    start_ms: int | None
    ready_ms: int | None
    stop_ms: int | None
    exit_code: int | None
    failure_reason: str | None
    backends_accepted: tuple[str, ...] | None  # None: the engine printed no accepted set
    log_path: str | None
    forced: bool
    kv_cache_tokens: int | None
    max_concurrency: float | None
    gpu_mem_released: bool | None
    launch_group: str | None = None
    """Shared by the replicas one launch started (None for launches recorded before groups existed)."""
    patch_digests: dict[str, str | None] | None = None
    """Each engine patch its arm needed and the sha256 the box's probe found before the launch; None: none needed."""

    @property
    def ended(self) -> bool:
        return self.state in ENDED

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Launch:
        released = row["gpu_mem_released"]
        return cls(
            id=row["id"],
            box=row["box"],
            arm=row["arm"],
            arm_id=row["arm_id"],
            replica=row["replica"],
            gpus=tuple(json_list(row["gpus"])),
            port=row["port"],
            pid=row["pid"],
            state=row["state"],
            start_ms=row["start_ms"],
            ready_ms=row["ready_ms"],
            stop_ms=row["stop_ms"],
            exit_code=row["exit_code"],
            failure_reason=row["failure_reason"],
            backends_accepted=json_tuple_or_none(row["backends_accepted"]),
            log_path=row["log_path"],
            forced=bool(row["forced"]),
            kv_cache_tokens=row["kv_cache_tokens"],
            max_concurrency=row["max_concurrency"],
            gpu_mem_released=None if released is None else bool(released),
            launch_group=row["launch_group"],
            patch_digests=json_dict_or_none(row.get("patch_digests")),
        )


def argv_flag(argv: tuple[str, ...] | list[str], flag: str) -> str | None:
    """The value a server's argv gives ``flag`` (``--flag value`` or ``--flag=value``), None when absent."""
    for i, word in enumerate(argv):
        if word == flag and i + 1 < len(argv):
            return argv[i + 1]
        if word.startswith(flag + "="):
            return word.split("=", 1)[1]
    return None


@dataclass(frozen=True)
class ArmRecord:
    """An arm as resolved for one box: the exact argv and environment its launches ran."""

    id: int
    arm: str
    model: str
    box: str
    recipe_hash: str
    argv: tuple[str, ...]
    env: dict[str, str]
    gpus: tuple[tuple[int, ...], ...]
    tensor_parallel: int

    @property
    def served_model_name(self) -> str | None:
        return argv_flag(self.argv, "--served-model-name")

    def flag(self, name: str) -> str | None:
        return argv_flag(self.argv, name)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> ArmRecord:
        return cls(
            id=row["id"],
            arm=row["arm"],
            model=row["model"],
            box=row["box"],
            recipe_hash=row["recipe_hash"],
            argv=tuple(json.loads(row["argv"])),
            env=dict(json.loads(row["env"])),
            gpus=tuple(tuple(g) for g in json.loads(row["gpus"])),
            tensor_parallel=row["tensor_parallel"],
        )


class Launches:
    """``store.launches``: arms as resolved, their launches, and the few facts ingest adds to them."""

    def __init__(self, store: Connection):
        self.store = store

    # -- arms ------------------------------------------------------------------------------------
    def add_arm(
        self,
        arm: str,
        model: str,
        box: str,
        recipe_hash: str,
        argv: list[str],
        env: dict[str, str],
        gpus: list[list[int]],
        tensor_parallel: int,
        lint: Sequence[Mapping[str, object]],
    ) -> int:
        """The resolved arm, once per (arm, box, recipe hash): launches point at what really ran."""
        with self.store.atomic() as db:
            db.table("arms").insert(
                {
                    "arm": arm,
                    "model": model,
                    "box": box,
                    "recipe_hash": recipe_hash,
                    "argv": dumps(argv),
                    "env": dumps(env),
                    "gpus": dumps(gpus),
                    "tensor_parallel": tensor_parallel,
                    "lint": dumps(lint),
                    "created_ms": self.store.clock(),
                },
                ignore=True,  # the same resolution again: its first row stands
            )
        return int(
            self.store.scalar(
                "SELECT id FROM arms WHERE arm = ? AND box = ? AND recipe_hash = ?", [arm, box, recipe_hash]
            )
        )

    def arm_record(self, arm_id: int | None) -> ArmRecord | None:
        if arm_id is None:
            return None
        rows = self.store.rows("SELECT * FROM arms WHERE id = ?", [arm_id])
        return ArmRecord.from_row(rows[0]) if rows else None

    # -- launches --------------------------------------------------------------------------------
    def add(
        self,
        launch_id: str,
        box: str,
        arm: str,
        *,
        arm_id: int | None,
        replica: int,
        gpus: list[int],
        port: int,
        forced: bool,
        group: str | None = None,
        patch_digests: dict[str, str | None] | None = None,
    ) -> None:
        with self.store.atomic() as db:
            db.table("launches").insert(
                {
                    "id": launch_id,
                    "box": box,
                    "arm": arm,
                    "arm_id": arm_id,
                    "replica": replica,
                    "gpus": dumps(gpus),
                    "port": port,
                    "state": "requested",  # until the box journals a state of its own
                    "forced": 1 if forced else 0,
                    "launch_group": group,
                    "patch_digests": dumps(patch_digests) if patch_digests else None,
                }
            )

    def fail(self, launch_id: str, reason: str) -> None:
        """A launch the agent never accepted is a row with its reason, never an omission."""
        with self.store.atomic() as db:
            db.execute(
                "UPDATE launches SET state = 'failed', failure_reason = ?, stop_ms = ? WHERE id = ?",
                [reason, self.store.clock(), launch_id],
            )

    def stopped_because(self, launch_id: str, reason: str) -> None:
        """Why the console stopped a launch its box reports stopped (its multi-box arm lost a rank): the state
        stays the box's, which the journal keeps writing; the reason is the console's."""
        with self.store.atomic() as db:
            db.execute("UPDATE launches SET failure_reason = ? WHERE id = ?", [reason, launch_id])

    def with_id_prefix(self, prefix: str) -> list[Launch]:
        """Every launch whose id starts with ``prefix``, in replica order: a multi-box arm's processes share
        one (console/service/multinode.py names them)."""
        rows = self.store.rows(
            "SELECT * FROM launches WHERE substr(id, 1, ?) = ? ORDER BY replica, id", [len(prefix), prefix]
        )
        return [Launch.from_row(r) for r in rows]

    def get(self, launch_id: str) -> Launch | None:
        rows = self.store.rows("SELECT * FROM launches WHERE id = ?", [launch_id])
        return Launch.from_row(rows[0]) if rows else None

    def live(self, box: str, arm: str | None = None) -> list[Launch]:
        """Launches on ``box`` that may still hold GPUs (not failed, not stopped)."""
        sql = "SELECT * FROM launches WHERE box = ? AND state NOT IN ('failed', 'stopped')"
        params: list[str | None] = [box]
        if arm is not None:
            sql += " AND arm = ?"
            params.append(arm)
        return [Launch.from_row(r) for r in self.store.rows(sql + " ORDER BY start_ms, id", params)]

    def replicas_of(self, launch: Launch) -> list[Launch]:
        """Every replica the launch of ``launch`` started, in replica order: its group's, or for a launch
        recorded before groups the live launches of the same arm row on its box."""
        params: list[str | int | None]
        if launch.launch_group is not None:
            sql, params = "SELECT * FROM launches WHERE launch_group = ?", [launch.launch_group]
        else:
            sql = (
                "SELECT * FROM launches WHERE box = ? AND arm = ? AND arm_id IS ? AND launch_group IS NULL "
                "AND (id = ? OR state NOT IN ('failed', 'stopped'))"
            )
            params = [launch.box, launch.arm, launch.arm_id, launch.id]
        return [Launch.from_row(r) for r in self.store.rows(sql + " ORDER BY replica, id", params)]

    def kernel_lines(self, launch_id: str) -> list[tuple[str, str]]:
        """(category, line) the engine printed for ``launch_id``, in the order it printed them."""
        rows = self.store.rows(
            "SELECT category, line FROM kernel_lines WHERE launch_id = ? ORDER BY id", [launch_id]
        )
        return [(r["category"], r["line"]) for r in rows]
