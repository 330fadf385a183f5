"""The GPU memory check that keeps two sweep arms off one GPU: read before the launch, and once it serves.

Before: every GPU given to the arm must be free, with no compute process on it and no more memory used
than an idle card shows; otherwise something else holds it (another campaign, a half-cleaned rental, a
server a dead console left behind) and the arm is not put there. After: each of its GPUs must show the
arm's own memory, a rise of at least ``SERVING_MIB`` over the reading before; a server that is not on
the GPU it was given sits on another one, perhaps another arm's. With both, every arm started beside
others is alone on its GPUs. The readings are the box's own, never assumed from what the sweep believes it
started:

- before, a fresh probe through its agent (it names the processes on each GPU). Arms starting side by side on
  one box share one: a request waits for the next probe that begins after it, so four slots ask the box
  once, not four times (the agent answers commands one at a time, and a probe runs nvidia-smi several
  times, the serving env's Python and the tripwire's client). The queue's first dealing of arms uses the
  probe the queue opened the box with (``opened``): nothing of the run has touched a GPU since, and a
  second probe a moment later would only hold the box's commands;
- after, the box's GPU sampler (the agent journals every GPU's memory each tick, and the supervised link
  brings it in): the first tick taken after the arm served. A probe would cost as much as above, for one
  figure, while eight tripwire clients need the same cores; it is the fallback when no tick comes within
  ``SAMPLE_WAIT_S`` (a sampler paused on a full disk).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agents.protocol import GpuHolder, ProbeReport
from console.readmodel.queries import gpu_power

if TYPE_CHECKING:
    from console.service.checks import CheckIntents

IDLE_MIB = 1024.0
"""The most an idle card shows used with no process on it (driver reservations, a display)."""
SERVING_MIB = 256.0
"""The least a serving engine adds on each of its GPUs: a CUDA context alone is larger."""

SAMPLE_WAIT_S = 5.0
"""How long the reading once an arm serves waits for a GPU sampler tick taken after it served (the agent samples
every second, the link pulls each sample as it is journaled) before it asks the box for a probe instead."""
SAMPLE_POLL_S = 0.1
"""The longest the reading waits before looking at the store again; it looks at once when the box's link commits."""

Reading = dict[int, float | None]
"""MiB used per GPU index; None where the box could not say."""


class GpuHeld(Exception):
    """A GPU given to an arm is not free; nothing was claimed or launched."""

    def __init__(self, box: str, gpu: int, why: str):
        super().__init__(why)
        self.box = box
        self.gpu = gpu
        self.why = why


@dataclass
class _Probes:
    """One box's probes: the one running, and the next one, which every request arriving meanwhile shares."""

    running: asyncio.Task[ProbeReport] | None = None
    next: asyncio.Task[ProbeReport] | None = None


class MemoryGuard:
    def __init__(self, service: CheckIntents):
        self.service = service
        self._probes: dict[str, _Probes] = {}
        self._opening: dict[str, tuple[ProbeReport, set[int]]] = {}
        """Box -> the probe the queue opened it with, and its GPUs no arm was given since."""

    def opened(self, box: str, probe: ProbeReport) -> None:
        """``probe``, taken as the queue opened ``box`` (after stopping what earlier attempts left there), is the
        reading before for each GPU of the box the first arms are given, until ``changed``."""
        self._opening[box] = (probe, {int(g["index"]) for g in probe.get("gpus") or []})

    def changed(self) -> None:
        """Something ended or a box went out: the first dealing is over, and every later arm is put on GPUs that
        may have held something since the opening probe, so it gets a fresh one."""
        self._opening.clear()

    async def probe(self, box: str) -> ProbeReport:
        """A probe of ``box`` that began after this call: the next one, shared by every caller until it starts."""
        state = self._probes.setdefault(box, _Probes())
        if state.next is None:
            state.next = asyncio.create_task(self._after(box, state, state.running))
        return await asyncio.shield(state.next)

    async def _after(
        self, box: str, state: _Probes, previous: asyncio.Task[ProbeReport] | None
    ) -> ProbeReport:
        if previous is not None:
            await asyncio.wait({previous})  # its outcome is its own callers'
        state.running, state.next = state.next, None
        try:
            return await self.service.probe(box)
        finally:
            if state.running is asyncio.current_task():
                state.running = None

    async def _read(
        self, box: str, gpus: list[int] | None = None
    ) -> tuple[Reading, dict[int, list[GpuHolder]]]:
        """The memory used and the processes on each GPU: from the opening probe where it still stands for all of
        ``gpus`` (they are then taken from it), else from a fresh probe."""
        opening = self._opening.get(box)
        if opening is not None and gpus and opening[1].issuperset(gpus):
            probe = opening[0]
            opening[1].difference_update(gpus)
        else:
            probe = await self.probe(box)
        used: Reading = {int(g["index"]): g.get("mem_used_mib") for g in probe.get("gpus") or []}
        processes: dict[int, list[GpuHolder]] = {}
        for p in probe.get("processes") or []:
            processes.setdefault(int(p.get("gpu", -1)), []).append(p)
        return used, processes

    async def before(self, box: str, gpus: list[int]) -> Reading:
        """The memory used on ``gpus`` now; ``GpuHeld`` for the first one that is not free."""
        used, processes = await self._read(box, gpus)
        for gpu in gpus:
            if gpu not in used:
                raise GpuHeld(box, gpu, f"GPU {gpu} of box {box} is missing from its probe")
            holders = processes.get(gpu, [])
            mib = used[gpu]
            if holders or (mib is not None and mib > IDLE_MIB):
                who = ", ".join(
                    f"pid {p.get('pid')} ({p.get('name')}, {_mib(p.get('used_mib'))})" for p in holders
                )
                raise GpuHeld(
                    box,
                    gpu,
                    f"GPU {gpu} of box {box} held {_mib(mib)} before an arm of this sweep was put "
                    f"on it" + (f": {who}" if who else ""),
                )
        return {gpu: used[gpu] for gpu in gpus}

    async def after(self, box: str, before: Reading, served_ms: int) -> tuple[Reading, str | None]:
        """The memory used on the same GPUs once the arm served (the box's instant ``served_ms``), and what is
        wrong when one shows nothing of the arm."""
        sampled = await self._sampled(box, list(before), served_ms)
        used = sampled if sampled is not None else (await self._read(box))[0]
        after = {gpu: used.get(gpu) for gpu in before}
        for gpu, mib in after.items():
            if mib is None or mib - (before[gpu] or 0.0) < SERVING_MIB:
                return after, (
                    f"GPU {gpu} of box {box} shows no memory of it ({_mib(before[gpu])} used before the "
                    f"launch, {_mib(mib)} once it served): its server is not on the GPU it was given"
                )
        return after, None

    async def _sampled(self, box: str, gpus: list[int], since_ms: int) -> Reading | None:
        """Each of ``gpus`` as the box's GPU sampler read it in its first tick after ``since_ms`` (the box's clock,
        as its samples are), once the link has brought that tick in (each commit of the box's link wakes the look);
        None when none came in ``SAMPLE_WAIT_S``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SAMPLE_WAIT_S
        while True:
            newest = {g.gpu: g for g in gpu_power(self.service.store, box, NEWEST_MS)}
            if all(g in newest and newest[g].t_ms > since_ms for g in gpus):
                return {g: newest[g].mem_used_mib for g in gpus}
            if loop.time() > deadline:
                return None
            await self.service.until_ingested(box, SAMPLE_POLL_S)


NEWEST_MS = 2**62
"""An instant after any sample: ``gpu_power`` at it is the box's newest tick, whatever the console's clock says."""


def _mib(value: float | None) -> str:
    return "an unknown amount" if value is None else f"{float(value):.0f} MiB"
