"""The sweep runner: open (or resume) a sweep, and walk a one-box sweep one arm at a time, resumably.

A one-box sweep gives each arm every card of its box: one replica per card where the arm fits one card,
all in parallel, then the next arm once the GPUs are confirmed free (console/service/sweep/walk.py walks each
arm). A sweep over several boxes is the queue's (console/service/sweep/queue.py): arms side by side, each on the
fewest GPUs its layout needs.

WHY everything goes through ``console.service``: the sweep is an operator's sequence of intents, and the
same policy (lint gate, failed-check gate, recorded commands) must hold as for a launch by hand; the
service's ``run_sweep`` drives this runner, which only decides what to do next.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from console.errors import ConsoleError
from console.service.sweep.plan import candidates
from console.service.sweep.ride import LinkWatch
from console.service.sweep.walk import ArmWalk, Place, SweepError, SweepOptions
from console.store import LOCAL_BOX
from console.store.sweeps import SweepArm, SweepBusy, SweepRow

if TYPE_CHECKING:
    from console.service.runs import RunIntents

Progress = Callable[[SweepRow, list[SweepArm], str], None]
"""Called with the sweep, its arms and what is happening now, whenever something changes."""


def this_runner() -> tuple[int, str]:
    return os.getpid(), socket.gethostname()


class Walked(Protocol):
    """What ``runner_alive`` reads of a sweep: the store's row (the runner's own check) or the read model's
    entry (``campaign sweep status``)."""

    @property
    def runner_pid(self) -> int | None: ...

    @property
    def runner_host(self) -> str | None: ...


def runner_alive(sweep: Walked) -> bool:
    """The process recorded as walking the sweep still exists (on this host: a pid elsewhere is unknown)."""
    if sweep.runner_pid is None or sweep.runner_host != socket.gethostname():
        return False
    try:
        os.kill(sweep.runner_pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return sweep.runner_pid != os.getpid()


DEFAULT_SHAPES = ["router"]
DEFAULT_CONCURRENCY = [1]


def open_sweep(
    service: RunIntents,
    list_name: str,
    boxes: list[str],
    shapes: list[str] | None = None,
    concurrency: list[int] | None = None,
    bench_degenerate: bool = False,
    new: bool = False,
) -> tuple[SweepRow, bool]:
    """The unfinished sweep of this list that feeds any of these boxes, taken over (resumed), else a new one.
    Returns (sweep, resumed).

    One box: each arm on every card of it (layout ``node``); several: one queue over all of them, each arm
    on the fewest GPUs its layout needs (``packed``). A resumed sweep keeps its layout, shapes and
    concurrencies, so its rows stay comparable; asking for others is refused (``new`` abandons the
    unfinished sweep and starts again). A packed sweep may be resumed on other boxes (a dead one left out).
    """
    store = service.store
    boxes = _sweep_boxes(service, boxes)
    if concurrency is not None and (not concurrency or any(c < 1 for c in concurrency)):
        raise SweepError(f"concurrency {concurrency}: give one or more positive integers")
    existing = store.sweeps.unfinished(list_name, boxes)
    if existing is not None and not new:
        return _resume(service, existing, list_name, boxes, shapes, concurrency), True
    _check_shapes(service, shapes or DEFAULT_SHAPES)
    planned = candidates(service.catalog, list_name)
    if existing is not None:
        _abandon(service, existing)
    sweep = store.sweeps.create(
        list_name,
        boxes,
        shapes or DEFAULT_SHAPES,
        concurrency or DEFAULT_CONCURRENCY,
        bench_degenerate,
        planned,
        this_runner(),
        "packed" if len(boxes) > 1 else "node",
    )
    return sweep, False


def _sweep_boxes(service: RunIntents, boxes: list[str]) -> list[str]:
    """The boxes asked for, each once in the order given; at least one, and every one known."""
    store = service.store
    boxes = list(dict.fromkeys(boxes))
    if not boxes:
        raise SweepError("a sweep needs a box: --box NAME (repeat it to feed one queue to several boxes)")
    for box in boxes:
        store.boxes.ensure_local() if box == LOCAL_BOX else store.boxes.get(box)
    return boxes


def _abandon(service: RunIntents, existing: SweepRow) -> None:
    """``--new``: the unfinished sweep is stopped as abandoned, unless a live console is still walking it."""
    if runner_alive(existing):
        raise SweepError(f"sweep #{existing.id} is being walked by pid {existing.runner_pid}; stop it first")
    service.store.sweeps.stop(existing.id, "abandoned", "replaced by a new sweep of the same list")


def _resume(
    service: RunIntents,
    existing: SweepRow,
    list_name: str,
    boxes: list[str],
    shapes: list[str] | None,
    concurrency: list[int] | None,
) -> SweepRow:
    """Take over the unfinished sweep: the arm a dead runner left running is marked interrupted, and a packed
    sweep now feeds the boxes asked for."""
    store = service.store
    _refuse_other_settings(service, existing, list_name, boxes, shapes, concurrency)
    try:
        store.sweeps.claim(existing.id, this_runner(), runner_alive(existing))
    except SweepBusy as exc:
        raise SweepError(str(exc)) from exc
    store.sweeps.mark_interrupted(
        existing.id,
        f"the console walking the sweep (pid {existing.runner_pid}) stopped while this arm was running",
    )
    if existing.layout == "packed":
        store.sweeps.set_boxes(existing.id, boxes)
    return store.sweeps.get(existing.id)


def _refuse_other_settings(
    service: RunIntents,
    existing: SweepRow,
    list_name: str,
    boxes: list[str],
    shapes: list[str] | None,
    concurrency: list[int] | None,
) -> None:
    """A resumed sweep keeps its shapes, concurrencies and (walking one box) its box, so its rows stay
    comparable; asking for others is refused."""
    where = (
        ", ".join(b.box for b in service.store.sweeps.boxes(existing.id) if b.state != "left") or existing.box
    )
    for what, asked, kept in (
        ("shapes", shapes, existing.shapes),
        ("concurrency", concurrency, existing.concurrency),
    ):
        if asked is not None and list(asked) != kept:
            raise SweepError(
                f"sweep #{existing.id} of {list_name} on {where} was started with {what} {kept}; resume "
                f"it without --{what} (its rows stay comparable) or start again with --new"
            )
    if existing.layout == "node" and boxes != [existing.box]:
        raise SweepError(
            f"sweep #{existing.id} of {list_name} walks each arm on every card of box {existing.box}; "
            f"resume it with --box {existing.box} alone, or start a sweep over these boxes with --new"
        )


def _check_shapes(service: RunIntents, shapes: list[str]) -> None:
    unknown = [s for s in shapes if s not in service.catalog.shapes]
    if unknown:
        raise SweepError(
            f"unknown shape(s) {', '.join(unknown)}; known: {', '.join(sorted(service.catalog.shapes))}"
        )


class SweepRunner:
    """The one-box walk: every unfinished arm in order, each on every card of the box."""

    def __init__(
        self,
        service: RunIntents,
        sweep_id: int,
        options: SweepOptions | None = None,
        progress: Progress | None = None,
    ):
        self.service = service
        self.store = service.store
        self.options = options or SweepOptions()
        self.sweep = self.store.sweeps.get(sweep_id)
        service.fleet.link(self.sweep.box)  # the box can be driven, before anything is recorded
        self._progress = progress
        self._current: SweepArm | None = None
        self.walker = ArmWalk(service, self.sweep, self.options, self._say)

    async def run(self) -> SweepRow:
        """Walk every unfinished arm; returns the sweep. Interruption leaves it resumable."""
        sid = self.sweep.id
        place = Place(self.sweep.box)
        box = self.sweep.box
        link = LinkWatch(
            self.service, box, self.options.reconnect_s, lambda what: self._say(f"box {box}: {what}")
        )
        try:
            await link.start()
            while (candidate := self.store.sweeps.next_arm(sid)) is not None:
                self._current = candidate
                await link.run(self.walker.walk(candidate, place))
                self._current = None
            self.store.sweeps.stop(sid, "done", None)
        except (asyncio.CancelledError, KeyboardInterrupt):
            await self._interrupted("the operator interrupted the sweep")
            raise
        except SweepError as exc:
            await self._interrupted(str(exc))
            raise
        except ConsoleError as exc:  # the box refused or could not be reached: the sweep stays resumable
            await self._interrupted(f"box {self.sweep.box}: {exc}")
            raise SweepError(f"box {self.sweep.box}: {exc}") from exc
        finally:
            link.stop()
        self._say("done")
        return self.store.sweeps.get(sid)

    async def _interrupted(self, why: str) -> None:
        """Record the arm in progress as interrupted and stop its servers (they would hold the GPUs)."""
        self.store.sweeps.stop(self.sweep.id, "interrupted", why)
        if self._current is not None:
            await self.walker.abandon(self._current, Place(self.sweep.box), why)

    def _say(self, what: str) -> None:
        if self._progress is not None:
            self._progress(self.store.sweeps.get(self.sweep.id), self.store.sweeps.arms(self.sweep.id), what)
