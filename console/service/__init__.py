"""``console.service``: the only place anything happens.

The CLI and the TUI are adapters: they parse input, call one method of ``Service``, and render its typed
result. Policy (lint gates, failed-check gates, the early-fire guard, what a launch must prove before it
counts) lives in these intents, once. Errors are ``console.errors.ConsoleError``s with their exit category.

The intents are grouped by what they act on, one module each; ``Service`` is all of them over one store and
one fleet of box links.
"""

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from console.service.base import ServiceError, describe
from console.service.boxes import BoxIntents, Connected, HostKey
from console.service.checks import CheckIntents
from console.service.curves import CurveIntents, CurvePlan, CurveWalk
from console.service.kldiff import KldiffIntents, KldiffOptions, KldiffOutcome
from console.service.launches import (
    DEFAULT_READY_TIMEOUT_S,
    KillPlan,
    LaunchOutcome,
    LaunchPlan,
    released,
)
from console.service.multinode import MultiNodeIntents, MultiNodeLaunchPlan, MultiNodeOutcome
from console.service.quality import QualityImported, QualityIntents
from console.service.runs import BenchNode, BenchOutcome
from console.service.setup import SetupIntents, SetupOutcome
from console.service.specdiff import SpecdiffIntents, SpecdiffOptions
from console.service.sweeps import SweepIntents
from console.service.timers import Notify, OnBox, TimerChange, TimerIntents, TimerPlan

# The store's records the intents take and return, named here so that an adapter never imports the store.
from console.store import Box
from console.store.ingest import IngestReport
from console.store.launches import Launch
from console.store.sweeps import FINISHED as SWEEP_FINISHED
from console.store.sweeps import SweepArm, SweepRow
from console.store.timers import ACTIONS as TIMER_ACTIONS
from console.store.timers import Timer


class Service(
    BoxIntents,
    TimerIntents,
    SweepIntents,
    QualityIntents,
    KldiffIntents,
    SpecdiffIntents,
    CurveIntents,
    SetupIntents,
    MultiNodeIntents,
    CheckIntents,
):
    """Every intent over one state.db and one fleet of box links; ``await close()`` when done."""

    # A console that follows its boxes also watches the multi-box arms on them (MultiNodeIntents.watch_ranks):
    # wired here, where the intents meet, so neither the box intents nor the timers know of multi-box arms.
    async def follow(
        self,
        name: str,
        stop: asyncio.Event,
        on_ingest: Callable[[IngestReport], None] | None = None,
        on_notice: Callable[[str], None] | None = None,
        stall_notice_s: float | None = None,
    ) -> None:
        await self._watching_ranks(
            BoxIntents.follow(self, name, stop, on_ingest, on_notice, stall_notice_s), stop, on_notice
        )

    async def supervise(
        self, stop: asyncio.Event, *, notify: Notify | None = None, name: str = "console"
    ) -> None:
        # the live console shows a failed arm's reason on its launches (Arms view): no notice of its own
        await self._watching_ranks(TimerIntents.supervise(self, stop, notify=notify, name=name), stop, None)

    async def _watching_ranks(
        self, work: Awaitable[None], stop: asyncio.Event, on_notice: Callable[[str], None] | None
    ) -> None:
        watch = asyncio.ensure_future(self.watch_ranks(stop, on_notice))
        try:
            await work
        finally:
            watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watch


__all__ = [
    "SWEEP_FINISHED",
    "TIMER_ACTIONS",
    "BenchNode",
    "BenchOutcome",
    "Box",
    "DEFAULT_READY_TIMEOUT_S",
    "Connected",
    "CurvePlan",
    "CurveWalk",
    "HostKey",
    "KillPlan",
    "KldiffOptions",
    "KldiffOutcome",
    "Launch",
    "LaunchOutcome",
    "LaunchPlan",
    "MultiNodeLaunchPlan",
    "MultiNodeOutcome",
    "OnBox",
    "QualityImported",
    "Service",
    "ServiceError",
    "SetupOutcome",
    "SpecdiffOptions",
    "SweepArm",
    "SweepRow",
    "Timer",
    "TimerChange",
    "TimerPlan",
    "describe",
    "released",
]
