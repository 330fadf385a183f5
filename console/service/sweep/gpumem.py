"""The GPU memory check that keeps two sweep arms off one GPU: read before the launch, and once it serves.

Before: every GPU given to the arm must be free, with no compute process on it and no more memory used
than an idle card shows; otherwise something else holds it (another campaign, a half-cleaned rental, a
server a dead console left behind) and the arm is not put there. After: each of its GPUs must show the
arm's own memory, a rise of at least ``SERVING_MIB`` over the reading before; a server that is not on
the GPU it was given sits on another one, perhaps another arm's. With both, every arm started beside
others is alone on its GPUs. The readings are the box's own (a fresh probe through its agent), never
assumed from what the sweep believes it started. Arms starting side by side on one box share a reading:
a request waits for the next probe that begins after it, so four slots ask the box once, not four times
(the agent answers commands one at a time, and a probe runs nvidia-smi several times).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agents.protocol import GpuHolder, ProbeReport

if TYPE_CHECKING:
    from console.service.checks import CheckIntents

IDLE_MIB = 1024.0
"""The most an idle card shows used with no process on it (driver reservations, a display)."""
SERVING_MIB = 256.0
"""The least a serving engine adds on each of its GPUs: a CUDA context alone is larger."""

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

    async def _read(self, box: str) -> tuple[Reading, dict[int, list[GpuHolder]]]:
        probe = await self.probe(box)
        used: Reading = {int(g["index"]): g.get("mem_used_mib") for g in probe.get("gpus") or []}
        processes: dict[int, list[GpuHolder]] = {}
        for p in probe.get("processes") or []:
            processes.setdefault(int(p.get("gpu", -1)), []).append(p)
        return used, processes

    async def before(self, box: str, gpus: list[int]) -> Reading:
        """The memory used on ``gpus`` now; ``GpuHeld`` for the first one that is not free."""
        used, processes = await self._read(box)
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

    async def after(self, box: str, before: Reading) -> tuple[Reading, str | None]:
        """The memory used on the same GPUs now, and what is wrong when one shows nothing of the arm."""
        used, _ = await self._read(box)
        after = {gpu: used.get(gpu) for gpu in before}
        for gpu, mib in after.items():
            if mib is None or mib - (before[gpu] or 0.0) < SERVING_MIB:
                return after, (
                    f"GPU {gpu} of box {box} shows no memory of it ({_mib(before[gpu])} used before the "
                    f"launch, {_mib(mib)} once it served): its server is not on the GPU it was given"
                )
        return after, None


def _mib(value: float | None) -> str:
    return "an unknown amount" if value is None else f"{float(value):.0f} MiB"
