"""``store.curves``: the record of a curve, one arm measured at a list of concurrencies, point by point.

Why the curve's progress lives in state.db and not in the command's memory: a curve is many benches in a row
on a rented box, and the console may die half-way (Ctrl-C, a dropped laptop, a killed process). Each point
is committed the moment its rows are stored, so running the same command again measures only the points
not yet stored; a point that was running when the console stopped reads ``running`` (or ``pending`` with the
reason, when the console saw the interruption) and is measured again.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from console.store.errors import StoreError
from console.store.jsonutil import dumps, json_dict_or_none, json_list, json_list_or_none

if TYPE_CHECKING:
    from console.store.connection import Connection

CURVE_STATES = ("running", "done", "interrupted")
CURVE_SOURCES = ("console", "sweep", "imported")
POINT_STATES = ("pending", "running", "done", "failed")
UNKNOWN_BOX = "unknown"
"""The box of an imported curve whose rows name none (a ``vllm bench serve`` file records no machine)."""


@dataclass(frozen=True)
class CurveRow:
    id: int
    arm: str
    box: str
    shape: str
    concurrency: tuple[int, ...]
    repeat: int
    prompts_per_slot: int | None
    created_ms: int
    updated_ms: int
    state: str
    rate: tuple[float, ...] | None  # the points' request rates (req/s); None: closed loop at each concurrency
    burstiness: float | None  # gamma shape of paced arrivals (1: Poisson); None: not paced
    source: str  # console, sweep or imported (CURVE_SOURCES)
    sweep_id: int | None
    import_id: int | None
    plan: dict[str, Any] | None  # how points are chosen when not a given list (schema.py V16)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> CurveRow:
        rate = json_list_or_none(row["rate"])
        return cls(
            id=row["id"],
            arm=row["arm"],
            box=row["box"],
            shape=row["shape"],
            concurrency=tuple(int(c) for c in json_list(row["concurrency"])),
            repeat=row["repeat"],
            prompts_per_slot=row["prompts_per_slot"],
            created_ms=row["created_ms"],
            updated_ms=row["updated_ms"],
            state=row["state"],
            rate=None if rate is None else tuple(float(r) for r in rate),
            burstiness=row["burstiness"],
            source=row["source"],
            sweep_id=row["sweep_id"],
            import_id=row["import_id"],
            plan=json_dict_or_none(row["plan"]),
        )


@dataclass(frozen=True)
class CurvePoint:
    curve_id: int
    concurrency: int
    position: int
    state: str
    reason: str | None
    repeat_group: str | None
    bench_run_ids: tuple[int, ...]
    started_ms: int | None
    ended_ms: int | None
    rate: float | None  # requests/s the point's arrivals were paced at; None: closed loop at its concurrency
    replaced_run_ids: tuple[int, ...]  # rows of earlier, invalid measurements of this point, no longer linked

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> CurvePoint:
        return cls(
            curve_id=row["curve_id"],
            concurrency=row["concurrency"],
            position=row["position"],
            state=row["state"],
            reason=row["reason"],
            repeat_group=row["repeat_group"],
            bench_run_ids=tuple(int(i) for i in json_list(row["bench_run_ids"])),
            started_ms=row["started_ms"],
            ended_ms=row["ended_ms"],
            rate=row["rate"],
            replaced_run_ids=tuple(int(i) for i in json_list(row["replaced_run_ids"])),
        )


class CurveBusy(StoreError):
    """Another console is measuring this curve right now."""


class Curves:
    def __init__(self, store: Connection):
        self.store = store

    @contextmanager
    def walking(self, curve_id: int) -> Iterator[None]:
        """Hold curve ``curve_id`` while this process measures it: a second console walking the same curve at the
        same time (two terminals, the TUI beside the CLI) is refused, since both would measure the same points
        on the same server and link whichever finished last.

        Why a lock on a file beside state.db (one byte of ``state.db.curves.lock`` per curve, POSIX record
        locks) and not a row: the system drops it the moment its process dies, so a killed console never
        leaves its curve held, and nothing has to guess whether a ``running`` point's console is still alive.
        """
        path = self.store.path.with_name(f"{self.store.path.name}.curves.lock")
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, curve_id)
            except OSError as exc:
                raise CurveBusy(
                    f"curve #{curve_id} is being measured by another console on {self.store.path}",
                    "let it finish, or stop it (Ctrl-C) and run the same command again: it resumes the curve",
                ) from exc
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the lock

    def create(
        self,
        arm: str,
        box: str,
        shape: str,
        concurrency: list[int],
        repeat: int,
        prompts_per_slot: int | None,
        rate: list[float] | None = None,
        burstiness: float | None = None,
        points: list[tuple[int, float]] | None = None,
        plan: dict[str, Any] | None = None,
        sweep_id: int | None = None,
    ) -> CurveRow:
        """A new curve with every point pending, in the order of ``concurrency``, in one transaction: a curve
        is never stored without its points. A rate curve (``rate``: its rates, ``concurrency`` the cap given,
        if any) has ``points``: each point's (cap, rate) in order. ``sweep_id``: a sweep's walk measures it
        (source ``sweep``)."""
        now = self.store.clock()
        with self.store.atomic():
            curve_id = self.store.insert(
                "curves",
                {
                    "arm": arm,
                    "box": box,
                    "shape": shape,
                    "concurrency": dumps(concurrency),
                    "repeat": repeat,
                    "prompts_per_slot": prompts_per_slot,
                    "created_ms": now,
                    "updated_ms": now,
                    "state": "running",
                    "rate": None if rate is None else dumps(rate),
                    "burstiness": burstiness,
                    "plan": None if plan is None else dumps(plan),
                    "source": "console" if sweep_id is None else "sweep",
                    "sweep_id": sweep_id,
                },
            )
            planned: list[tuple[int, float | None]] = (
                [(c, None) for c in concurrency] if points is None else [*points]
            )
            for position, (c, r) in enumerate(planned):
                self.store.insert(
                    "curve_points",
                    {
                        "curve_id": curve_id,
                        "concurrency": c,
                        "position": position,
                        "state": "pending",
                        "rate": r,
                    },
                )
        return self.get(curve_id)

    def add_imported(self, import_id: int) -> list[CurveRow]:
        """The curves of import ``import_id``'s bench rows, each point already done, in one transaction: one
        curve per (arm, box, shape, burstiness) with a point per (concurrency, request rate) its rows cover
        (repeats of a point: its several rows), never a point the rows do not have. Called again for the same
        import it adds nothing; a re-import's new import id replaces them (``import_id`` cascades).

        A row of no known box (another client's file names none) is filed under ``UNKNOWN_BOX``."""
        if self.store.rows("SELECT 1 FROM curves WHERE import_id = ? LIMIT 1", [import_id]):
            return [c for c in self.all() if c.import_id == import_id]
        rows = self.store.rows(
            "SELECT id, arm, coalesce(box, ?) AS box, shape, concurrency, request_rate, burstiness, repeat_group "
            "FROM bench_runs WHERE import_id = ? "
            "ORDER BY arm, box, shape, burstiness, concurrency, request_rate, id",
            [UNKNOWN_BOX, import_id],
        )
        grouped: dict[tuple[Any, ...], dict[tuple[int, float | None], list[dict[str, Any]]]] = {}
        for r in rows:
            key = (r["arm"], r["box"], r["shape"], r["burstiness"])
            grouped.setdefault(key, {}).setdefault((r["concurrency"], r["request_rate"]), []).append(r)
        now = self.store.clock()
        with self.store.atomic():
            for (arm, box, shape, burstiness), points in grouped.items():
                rates = [rate for _, rate in points]
                curve_id = self.store.insert(
                    "curves",
                    {
                        "arm": arm,
                        "box": box,
                        "shape": shape,
                        "concurrency": dumps(sorted({c for c, _ in points})),
                        "repeat": max(len(runs) for runs in points.values()),
                        "created_ms": now,
                        "updated_ms": now,
                        "state": "done",
                        "rate": None if all(r is None for r in rates) else dumps(rates),
                        "burstiness": burstiness,
                        "source": "imported",
                        "import_id": import_id,
                    },
                )
                for position, ((c, rate), runs) in enumerate(points.items()):
                    self.store.insert(
                        "curve_points",
                        {
                            "curve_id": curve_id,
                            "concurrency": c,
                            "position": position,
                            "state": "done",
                            "repeat_group": runs[0]["repeat_group"],
                            "bench_run_ids": dumps([r["id"] for r in runs]),
                            "rate": rate,
                        },
                    )
        return [c for c in self.all() if c.import_id == import_id]

    def get(self, curve_id: int) -> CurveRow:
        rows = self.store.rows("SELECT * FROM curves WHERE id = ?", [curve_id])
        if not rows:
            raise StoreError(f"no curve #{curve_id} in {self.store.path}")
        return CurveRow.from_row(rows[0])

    def latest(
        self,
        arm: str,
        box: str,
        shape: str,
        concurrency: list[int],
        repeat: int,
        rate: list[float] | None = None,
        burstiness: float | None = None,
    ) -> CurveRow | None:
        """The newest curve of this identity, whatever its state: the one the same command resumes (when it is
        done, the same command measures nothing and shows it; ``--new`` measures another). A rate curve's
        identity adds its rates and burstiness (a closed-loop curve has neither)."""
        rows = self.store.rows(
            "SELECT * FROM curves WHERE arm = ? AND box = ? AND shape = ? AND concurrency = ? AND repeat = ? "
            "AND rate IS ? AND burstiness IS ? ORDER BY id DESC LIMIT 1",
            [arm, box, shape, dumps(concurrency), repeat, None if rate is None else dumps(rate), burstiness],
        )
        return CurveRow.from_row(rows[0]) if rows else None

    def of_sweep(self, sweep_id: int, arm: str, box: str, shape: str) -> CurveRow | None:
        """The curve sweep ``sweep_id`` measures for ``arm`` on ``box`` at ``shape``: a resumed sweep finishes
        it point by point instead of starting another."""
        rows = self.store.rows(
            "SELECT * FROM curves WHERE sweep_id = ? AND arm = ? AND box = ? AND shape = ? ORDER BY id DESC LIMIT 1",
            [sweep_id, arm, box, shape],
        )
        return CurveRow.from_row(rows[0]) if rows else None

    def add_point(self, curve_id: int, concurrency: int, rate: float | None = None) -> CurvePoint:
        """A pending point at the curve's next position, its concurrency appended to the curve's list, in one
        transaction: a planned curve (``plan``) grows point by point as its planner chooses them."""
        with self.store.atomic():
            position = int(
                self.store.scalar(
                    "SELECT coalesce(max(position) + 1, 0) FROM curve_points WHERE curve_id = ?", [curve_id]
                )
            )
            levels = [*self.get(curve_id).concurrency, concurrency]
            self.store.db.execute(
                "UPDATE curves SET concurrency = ?, updated_ms = ? WHERE id = ?",
                [dumps(levels), self.store.clock(), curve_id],
            )
            self.store.insert(
                "curve_points",
                {
                    "curve_id": curve_id,
                    "concurrency": concurrency,
                    "position": position,
                    "state": "pending",
                    "rate": rate,
                },
            )
        return self.points(curve_id)[position]

    def points(self, curve_id: int) -> list[CurvePoint]:
        rows = self.store.rows("SELECT * FROM curve_points WHERE curve_id = ? ORDER BY position", [curve_id])
        return [CurvePoint.from_row(r) for r in rows]

    def set_state(self, curve_id: int, state: str) -> None:
        if state not in CURVE_STATES:
            raise ValueError(f"curve state {state!r}: one of {', '.join(CURVE_STATES)}")
        with self.store.atomic():
            self.store.db.execute(
                "UPDATE curves SET state = ?, updated_ms = ? WHERE id = ?",
                [state, self.store.clock(), curve_id],
            )

    def _point(
        self, curve_id: int, position: int, values: dict[str, Any], curve_state: str | None = None
    ) -> None:
        """Change one point and touch its curve (its state too, when given), in one transaction."""
        now = self.store.clock()
        sets = ", ".join(f"{k} = ?" for k in values)
        with self.store.atomic():
            self.store.db.execute(
                f"UPDATE curve_points SET {sets} WHERE curve_id = ? AND position = ?",
                [*values.values(), curve_id, position],
            )
            self.store.db.execute(
                "UPDATE curves SET updated_ms = ?, state = coalesce(?, state) WHERE id = ?",
                [now, curve_state, curve_id],
            )

    def start_point(self, curve_id: int, position: int) -> None:
        """The point is being measured now (its curve running): a console that dies leaves it ``running``."""
        self._point(
            curve_id,
            position,
            {"state": "running", "reason": None, "started_ms": self.store.clock(), "ended_ms": None},
            "running",
        )

    def finish_point(
        self, curve_id: int, position: int, repeat_group: str | None, bench_run_ids: list[int]
    ) -> None:
        """The point's rows are stored: it links them (their group, their ids) and is never measured again."""
        self._point(
            curve_id,
            position,
            {
                "state": "done",
                "reason": None,
                "repeat_group": repeat_group,
                "bench_run_ids": dumps(bench_run_ids),
                "ended_ms": self.store.clock(),
            },
        )

    def fail_point(self, curve_id: int, position: int, reason: str) -> None:
        """The point's bench failed: recorded with the reason; the curve stops, interrupted, to be resumed."""
        self._point(
            curve_id,
            position,
            {"state": "failed", "reason": reason, "ended_ms": self.store.clock()},
            "interrupted",
        )

    def reopen_point(self, curve_id: int, position: int, reason: str) -> None:
        """A stored point judged invalid is to be measured again: back to pending with the reason, its rows moved
        to ``replaced_run_ids`` (kept in bench_runs, no longer the point's) and the curve to resume."""
        held = self.store.rows(
            "SELECT bench_run_ids, replaced_run_ids FROM curve_points WHERE curve_id = ? AND position = ?",
            [curve_id, position],
        )
        if not held:
            raise StoreError(f"curve #{curve_id} has no point at position {position}")
        replaced = json_list(held[0]["replaced_run_ids"]) + json_list(held[0]["bench_run_ids"])
        self._point(
            curve_id,
            position,
            {
                "state": "pending",
                "reason": reason,
                "repeat_group": None,
                "bench_run_ids": None,
                "replaced_run_ids": dumps(replaced),
                "ended_ms": None,
            },
            "interrupted",
        )

    def interrupt_point(self, curve_id: int, position: int, reason: str) -> None:
        """The console was stopped while the point ran: back to pending with the reason, the curve interrupted."""
        self._point(
            curve_id,
            position,
            {"state": "pending", "reason": reason, "ended_ms": self.store.clock()},
            "interrupted",
        )

    def all(self) -> list[CurveRow]:
        return [CurveRow.from_row(r) for r in self.store.rows("SELECT * FROM curves ORDER BY id")]
