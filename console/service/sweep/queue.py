"""The sweep queue: one sweep list fed to several boxes, arms side by side on separate GPUs.

One async task per (box, GPU slot) pulls the next arm, in walk order, that fits. An arm needs
tensor_parallel x data_parallel x replicas GPUs (an arm that fits one card: one card, one replica); a
CPU arm (``device = "cpu"``) needs a box without GPUs, whole. A slot takes an arm only while its own GPU
is free, with the lowest other free GPUs of its box when the arm needs more. An arm that fits a box's
size but not its free GPUs now makes that box drain for it (no smaller arm starts there meanwhile),
unless another box already drains for it: the arms behind a big one never starve it, and only one box
waits. An arm no box of the sweep could ever hold is refused, as a one-box sweep refuses an arm that does
not fit its box.

Before a launch the arm's GPUs are read free on the box itself (the first arms of a box by the probe the
queue opens it with), and once it serves they must show its memory (console/service/sweep/gpumem.py): a
GPU something else holds is left out of this run, with the reason recorded, and the arm goes to another
slot. Every attempt is claimed in the store (box, GPUs, then the launch ids) before anything is sent.

A box that fails (unreachable, its agent gone, or it refused what every arm needs: a failed check, ports
taken, GPUs not freed) takes no more arms; the arm it was running goes back to the queue as
``interrupted``, with the reason, for another box. On resume after a console restart, what the dead
console's attempts left running on a box is stopped and confirmed freed before that box takes an arm, so
no arm runs twice at once, and a finished arm never runs again.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

from agents.protocol import ProbeReport
from console.errors import ConsoleError, Unreachable
from console.recipes import Arm
from console.service.base import reaching
from console.service.checks import CheckIntents
from console.service.runs import RunIntents
from console.service.sweep.gpumem import GpuHeld, MemoryGuard
from console.service.sweep.plan import PlanError, materialize
from console.service.sweep.ride import LinkWatch
from console.service.sweep.runner import Progress
from console.service.sweep.walk import ArmWalk, Place, PortBook, SweepError, SweepOptions
from console.store.sweeps import SweepArm, SweepRow

STORED_POLL_S = 0.05
"""The longest a box's opening waits before looking for its probe in the store again; a commit of its link wakes
the look at once."""


class QueueIntents(RunIntents, CheckIntents):
    """What the queue drives: the runs that launch, measure and kill each arm, and the checks that read a box's
    GPUs afresh around it. ``console.service.SweepIntents`` builds on it, so the queue is typed without
    importing the module that starts it. (A class, not a Protocol: the walk and the memory guard take these
    intents by their classes, and a Protocol cannot be both.)"""


@dataclass
class BoxSlots:
    """What the queue knows of one box in this run: its GPUs as probed, which are free, which it must not use."""

    name: str
    gpus: list[int]
    """Its GPUs as probed; empty: a box without GPUs (one slot, for CPU arms)."""
    known: bool = True
    """False: never probed (unreachable from the start), so its size is unknown."""
    free: set[int] = field(default_factory=set)
    excluded: dict[int, str] = field(default_factory=dict)
    busy: bool = False
    """A box without GPUs: its one slot holds an arm."""
    out: str | None = None
    """Why the box takes no more arms in this run; None while it walks."""

    @property
    def cpu(self) -> bool:
        return not self.gpus

    @property
    def usable(self) -> list[int]:
        return [g for g in self.gpus if g not in self.excluded]

    def slots(self) -> list[int | None]:
        return list(self.gpus) if self.gpus else [None]


@dataclass(frozen=True)
class Take:
    """An arm a slot took: its GPUs (None: a box without GPUs), or why no box of the sweep can ever hold it."""

    arm: SweepArm
    gpus: list[int] | None
    refusal: str | None = None


def gpus_needed(arm: Arm) -> int:
    """GPUs an arm takes on its own: tensor_parallel x data_parallel per server, times its replicas
    (one where it leaves the count to the box); 0 for a CPU arm."""
    if arm.device == "cpu":
        return 0
    return arm.gpus_per_server * (arm.replicas or 1)


def fits_nowhere(need: int, boxes: list[BoxSlots]) -> str | None:
    """Why no box of the sweep could ever hold an arm needing ``need`` GPUs; None when one could (or a box's
    size is unknown)."""
    if any(not b.known for b in boxes):
        return None
    sizes = ", ".join(f"{b.name} {len(b.gpus)}" for b in boxes)
    if need == 0:
        return (
            None
            if any(b.cpu for b in boxes)
            else f'a CPU arm (device = "cpu") needs a box without GPUs; every box of the sweep has GPUs ({sizes})'
        )
    if any(len(b.gpus) >= need for b in boxes):
        return None
    return f"does not fit any box of the sweep: it needs {need} GPUs, the boxes have {sizes}"


class SweepQueue:
    def __init__(
        self,
        service: QueueIntents,
        sweep_id: int,
        options: SweepOptions | None = None,
        progress: Progress | None = None,
    ):
        self.service = service
        self.store = service.store
        self.options = options or SweepOptions()
        self.sweep = self.store.sweeps.get(sweep_id)
        self._progress = progress
        self.boxes: dict[str, BoxSlots] = {}
        self.inflight: set[int] = set()
        self.draining: dict[int, str] = {}
        """Arm id -> the box that lets no smaller arm start until the arm fits it."""
        self.ports = PortBook()
        self.guard = MemoryGuard(service)
        self._needs: dict[int, int | None] = {}
        self._changed = asyncio.Event()
        self.links: dict[str, LinkWatch] = {}
        """Each box's link, supervised while the queue runs: a drop mid-arm is ridden out (ride.py)."""

    # -- the run ---------------------------------------------------------------------------------
    async def run(self) -> SweepRow:
        """Feed every unfinished arm to the boxes until none is left that a box can take; returns the sweep.
        Raises ``SweepError`` (resumable) when arms are left because boxes failed or GPUs were held."""
        sid = self.sweep.id
        names = [b.box for b in self.store.sweeps.boxes(sid) if b.state == "walking"]
        tasks = [asyncio.create_task(self._open(name)) for name in names]
        try:
            await asyncio.gather(*tasks)
            tasks = [
                asyncio.create_task(self._slot(box, gpu))
                for box in self.boxes.values()
                for gpu in box.slots()
            ]
            await asyncio.gather(*tasks)
        except (asyncio.CancelledError, KeyboardInterrupt):
            for task in tasks:
                task.cancel()
            await asyncio.gather(
                *tasks, return_exceptions=True
            )  # each gives its arm back and stops its servers
            self.store.sweeps.stop(sid, "interrupted", "the operator interrupted the sweep")
            raise
        finally:
            for link in self.links.values():
                link.stop()
        left = self.store.sweeps.waiting(sid)
        if not left:
            self.store.sweeps.stop(sid, "done", None)
            self._say("done")
            return self.store.sweeps.get(sid)
        detail = self._why_left(left)
        self.store.sweeps.stop(sid, "interrupted", detail)
        raise SweepError(detail)

    async def _open(self, name: str) -> None:
        """Reach the box, stop what earlier attempts left running there, and read its GPUs afresh."""
        link = self.links[name] = LinkWatch(
            self.service,
            name,
            self.options.reconnect_s,
            lambda what: self._say(f"{name}: {what}"),
            wait_when_refused=False,  # another box of the queue can take the arm
        )
        try:
            with reaching(name):
                await link.start()
                await self.service.settle(name)
                await self._stop_left(name)
                probe = await self.service.probe(name)
                await self._stored(name, probe)
                self.guard.opened(name, probe)
        except ConsoleError as exc:
            stored = self.store.checks.latest_probe(name)
            gpus = [int(g["index"]) for g in stored.data.get("gpus") or []] if stored else []
            self.boxes[name] = BoxSlots(name, gpus, known=stored is not None)
            self._box_out(self.boxes[name], _about(name, exc))
            return
        gpus = sorted(int(g["index"]) for g in probe.get("gpus") or [])
        self.boxes[name] = BoxSlots(name, gpus, free=set(gpus))
        self._say(f"{name}: {len(gpus)} GPU(s)" if gpus else f"{name}: no GPUs (CPU arms)")

    async def _stored(self, name: str, probe: ProbeReport) -> None:
        """Until the box's journal has brought ``probe`` into the store, where each launch's plan reads the box's
        GPUs: the link is supervised (ride.py), so its rows land in the background, not by the time the probe
        answers; each commit of its link wakes the look. Bounded by the sweep's patience; a probe that never lands
        leaves the plan to say so."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.options.reconnect_s
        while loop.time() < deadline:
            stored = self.store.checks.latest_probe(name)
            if stored is not None and (stored.data.get("t_ms") or 0) >= (probe.get("t_ms") or 0):
                return
            await self.service.until_ingested(name, STORED_POLL_S)

    async def _stop_left(self, name: str) -> None:
        """Servers of unfinished arms last claimed on this box (a dead console's attempts): stopped and their
        GPUs confirmed free, so the arm never runs twice at once."""
        walk = self._walker(Place(name))
        for arm in self.store.sweeps.arms(self.sweep.id):
            if arm.finished or arm.box != name:
                continue
            live = [
                i for i in arm.launch_ids if (x := self.store.launches.get(i)) is not None and not x.ended
            ]
            if live:
                self._say(f"{name}: {arm.arm}: stopping {len(live)} server(s) its last attempt left running")
                await walk.stop(name, live)

    # -- a slot ----------------------------------------------------------------------------------
    async def _slot(self, box: BoxSlots, gpu: int | None) -> None:
        """One GPU of a box (or a box without GPUs): take the next arm that fits, walk it, again."""
        while True:
            if box.out or (gpu is not None and gpu in box.excluded) or self._over():
                return
            take = self._take(box, gpu)
            if take is None:
                await self._changed.wait()
                continue
            await self._attempt(box, take)

    def _take(self, box: BoxSlots, gpu: int | None) -> Take | None:
        """The first waiting arm, in walk order, that this slot can start now; claims its GPUs in memory."""
        if box.busy if gpu is None else gpu not in box.free:
            return None
        for arm in self.store.sweeps.waiting(self.sweep.id):
            if arm.id in self.inflight:
                continue
            need = self._need(arm)
            if need is None:  # it cannot be planned: the walk records why, launching nothing
                return self._claim(box, arm, None if gpu is None else [gpu])
            refusal = fits_nowhere(need, list(self.boxes.values()))
            if refusal is not None:
                self.inflight.add(arm.id)
                return Take(arm, None, refusal)
            if (need == 0) != box.cpu or need > len(box.usable):
                continue
            if gpu is None:
                return self._claim(box, arm, None)
            if need <= len(box.free):
                return self._claim(box, arm, sorted([gpu, *sorted(box.free - {gpu})[: need - 1]]))
            if self.draining.setdefault(arm.id, box.name) == box.name:
                return None  # this box drains for it: no smaller arm starts here until it fits
        return None

    def _claim(self, box: BoxSlots, arm: SweepArm, gpus: list[int] | None) -> Take:
        self.inflight.add(arm.id)
        self.draining.pop(arm.id, None)
        if gpus is None:
            box.busy = True
        else:
            box.free.difference_update(gpus)
        return Take(arm, gpus)

    def _release(self, box: BoxSlots, take: Take) -> None:
        self.inflight.discard(take.arm.id)
        if take.gpus is not None:
            box.free.update(g for g in take.gpus if g not in box.excluded)
        elif take.refusal is None:
            box.busy = False
        self._signal()

    async def _attempt(self, box: BoxSlots, take: Take) -> None:
        place = Place(box.name, take.gpus)
        walk = self._walker(place)
        try:
            if take.refusal is not None:
                self.store.sweeps.start_arm(take.arm.id, box.name, None, None)
                self.store.sweeps.finish_arm(take.arm.id, "refused", take.refusal)
                return
            with reaching(box.name):
                await self.links[box.name].run(walk.walk(take.arm, place))
        except GpuHeld as held:  # nothing was claimed: the arm waits for another slot
            box.excluded[held.gpu] = held.why
            box.free.discard(held.gpu)
            self.store.sweeps.exclude_gpu(self.sweep.id, box.name, held.gpu, held.why)
            self._say(f"{place}: GPU {held.gpu} left out of this run: {held.why}")
        except asyncio.CancelledError:
            await walk.abandon(take.arm, place, "the operator interrupted the sweep")
            raise
        except ConsoleError as exc:
            why = _about(box.name, exc)
            self._box_out(box, why)
            if self.store.sweeps.get_arm(take.arm.id).state == "running":
                self.store.sweeps.finish_arm(take.arm.id, "interrupted", f"{why}; given back to the queue")
            if not isinstance(exc, Unreachable):  # the box still answers: its servers must not keep the GPUs
                with contextlib.suppress(ConsoleError):
                    await walk.stop_live(box.name, walk.arm_name(take.arm), wait=False)
        finally:
            self._release(box, take)

    # -- state -----------------------------------------------------------------------------------
    def _need(self, arm: SweepArm) -> int | None:
        if arm.id not in self._needs:
            try:
                self._needs[arm.id] = gpus_needed(
                    materialize(self.service.catalog, arm, self.sweep.list_name)
                )
            except PlanError:
                self._needs[arm.id] = None
        return self._needs[arm.id]

    def _walking(self) -> list[BoxSlots]:
        return [b for b in self.boxes.values() if b.out is None]

    def _over(self) -> bool:
        """Nothing runs and no waiting arm can start on a box still walking: every slot can stop."""
        if self.inflight:
            return False
        walking = self._walking()
        for arm in self.store.sweeps.waiting(self.sweep.id):
            need = self._need(arm)
            if need is None or fits_nowhere(need, list(self.boxes.values())) is not None:
                return not walking
            if any((need == 0) == b.cpu and need <= len(b.usable) for b in walking):
                return False
        return True

    def _box_out(self, box: BoxSlots, why: str) -> None:
        if box.out is not None:
            return
        box.out = why
        self.store.sweeps.box_out(self.sweep.id, box.name, why)
        for arm_id in [a for a, b in self.draining.items() if b == box.name]:
            del self.draining[arm_id]
        self._say(f"{box.name}: out of this run: {why}")
        self._signal()

    def _signal(self) -> None:
        """Wake every waiting slot: a GPU was freed, an arm finished or was queued, a box went out. The first
        dealing is over: an arm put on a GPU from now on gets a fresh reading of it."""
        self.guard.changed()
        self._changed.set()
        self._changed = asyncio.Event()

    def _why_left(self, left: list[SweepArm]) -> str:
        names = ", ".join(a.arm for a in left[:4]) + (f" and {len(left) - 4} more" if len(left) > 4 else "")
        reasons = [f"box {b.name} is out ({b.out})" for b in self.boxes.values() if b.out]
        reasons += [
            f"{b.name} GPU {g} left out ({why})" for b in self.boxes.values() for g, why in b.excluded.items()
        ]
        return f"{len(left)} arm(s) not run ({names}): no box of the sweep can take them now" + (
            f"; {'; '.join(reasons)}" if reasons else ""
        )

    def _walker(self, place: Place) -> ArmWalk:
        return ArmWalk(
            self.service,
            self.sweep,
            self.options,
            lambda what: self._say(f"{place}: {what}"),
            self.ports,
            self.guard,
        )

    def _say(self, what: str) -> None:
        if self._progress is not None:
            self._progress(self.store.sweeps.get(self.sweep.id), self.store.sweeps.arms(self.sweep.id), what)


def _about(box: str, exc: ConsoleError) -> str:
    """The error, naming the box once."""
    text = str(exc)
    return text if text.startswith(f"box {box}") else f"box {box}: {text}"
