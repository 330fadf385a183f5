"""Check intents: probe a box (through its agent, or the agent's probe as a process on this machine) and
judge it: power limit against maximum, driver against the serving CUDA (error 804), topology, clock, disk."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from agents.protocol import PatchProbe, ProbeArgs, ProbeReport, ProbeResult
from console.checks.run import CheckRun, judge, local_probe, recipe_arm, serving_python
from console.errors import InputError
from console.service.base import ServiceBase, reaching
from console.store import LOCAL_BOX, BoxNotReachable

PROBE_COMMAND_TIMEOUT_S = 120.0


class CheckIntents(ServiceBase):
    def patch_probes(self) -> list[PatchProbe]:
        """Every engine patch the recipes declare: each probe looks for all of them, so the newest probe tells
        a launch whether the env carries what its arm needs, whichever arm the last check was for."""
        return [{"name": p.name, "module": p.module, "file": p.file} for p in self.catalog.patches.values()]

    async def probe(self, box: str, serving_python: str | None = None) -> ProbeReport:
        """A fresh probe through the box's agent; it also lands in the store through the journal."""
        link = await self.link(box)
        args: ProbeArgs = {"console_t_ms": self.store.clock(), "patches": self.patch_probes()}
        if serving_python:
            args["serving_python"] = serving_python
        with reaching(box):
            result = await link.command("probe", args, answer=ProbeResult, timeout=PROBE_COMMAND_TIMEOUT_S)
        await self.settle(box)
        return result["probe"].copy()

    async def check(
        self,
        box_name: str,
        arm: str | None = None,
        *,
        stored: bool = False,
        progress: Callable[[str], None] | None = None,
    ) -> CheckRun:
        """Probe the box now (``stored``: judge its newest stored probe, offline) and store the verdicts.

        With ``arm``, the box is judged for that arm: its tensor parallelism, GPUs and weights. ``progress``
        hears what takes time (the probe) just before it starts.
        """
        # The machine the console runs on is always checkable, registered or not yet.
        box = self.store.boxes.ensure_local() if box_name == LOCAL_BOX else self.store.boxes.get(box_name)
        resolver = recipe_arm(arm, self.catalog) if arm else None  # an unknown arm is refused before probing
        probe: ProbeReport | None
        if not stored and progress is not None:
            progress(f"probing box {box.name} ...")
        if stored:
            probe = None
        elif box.is_local:
            probe = await asyncio.to_thread(local_probe, box, self.store.clock(), self.patch_probes())
        else:
            try:
                probe = await self.probe(box.name, serving_python(box))
            except BoxNotReachable as exc:  # imported figures or a destroyed box
                raise InputError(
                    exc.message, f"`campaign check {box.name} --stored` judges its last stored probe"
                ) from exc
        return judge(self.store, box.name, probe, resolver)
