"""Timer intents: arm, cancel, enforce and watch guarded hard stops; and what the enforcer asks of a box.

The enforcer (``console.timers.Enforcer``) is the policy: warnings, the T-10 pull, the early-fire guard. This
service is its ``BoxActions``: arming the box's own watchdog, pulling the journal and logs, stopping the arms,
handing a shutdown to the box. The CLI's ``timer watch`` and the TUI's supervision run the same enforcer over
the same service, so what one records the other records too.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agents.protocol import TimerAction
from console.bounds import INTERVAL_S, ROW_ID
from console.errors import InputError
from console.service.base import reaching
from console.service.launches import LaunchIntents, released
from console.store.timers import ACTIONS, Timer, timer_action
from console.timers import Enforcer, cancel, parse_deadline, readings
from ops.providers import for_box

LOG_LINES = 200
"""The tail of each live launch's log kept with the final pull (a destroy loses the rest)."""
STOP_GRACE_S = 30.0

Notify = Callable[[Timer, str], None]


@dataclass(frozen=True)
class TimerPlan:
    """A deadline as the operator confirms it before anything is stored or armed."""

    box: str
    action: TimerAction
    deadline_ms: int
    input_text: str
    readings: tuple[tuple[str, str], ...]  # (label, text): UTC, console, box, remaining
    others: tuple[Timer, ...]  # live timers of the same box


@dataclass(frozen=True)
class OnBox:
    """Whether the box's own watchdog took the step (armed, disarmed), and what it said or why not."""

    done: bool
    detail: str
    remaining_s: float | None = None


@dataclass(frozen=True)
class TimerChange:
    timer: Timer
    on_box: OnBox | None  # None when the box was deliberately not reached (--no-arm)


class TimerIntents(LaunchIntents):
    # -- intents -------------------------------------------------------------------------------
    def plan_timer(
        self, box: str, *, at: str | None, within: str | None, action: str = "stop-arms"
    ) -> TimerPlan:
        """Read the deadline (refusing anything ambiguous) and check the action fits the box. ``action`` is
        the word the operator typed (the CLI's argument, the TUI's field): one not in ACTIONS is refused."""
        try:
            chosen = timer_action(action)
        except ValueError:
            raise InputError(f"--action {action!r}: choose one of {', '.join(ACTIONS)}") from None
        self._check_action(box, chosen)
        box_tz = self.store.timers.box_tz(box)
        now = self.store.clock()
        deadline = parse_deadline(at, within, now_ms=now, box_tz=box_tz)
        text = at if at is not None else f"in {within}"
        return TimerPlan(
            box,
            chosen,
            deadline,
            text,
            tuple(readings(deadline, now, box_tz)),
            tuple(self.store.timers.every(box, active_only=True)),
        )

    def _check_action(self, box_name: str, action: TimerAction) -> None:
        box = self.store.boxes.get(box_name)
        if box.status == "destroyed":
            raise InputError(f"box {box_name} is already destroyed; nothing to stop")
        if not box.reachable:  # imported figures: there is no machine behind the name to stop
            raise InputError(f"box {box_name} cannot be reached ({box.unreachable_why}); nothing to stop")
        if action == "stop-arms":
            return
        provider = for_box(box.provider)  # a Vast box without an API key fails here, not at the deadline
        if action == "shutdown":
            return
        if not provider.can_destroy:
            raise InputError(
                f"--action destroy on box {box_name}: it is a {provider.name} host and cannot be "
                "destroyed by the console",
                "use --action shutdown (or stop-arms)",
            )
        if not box.instance_id:
            raise InputError(
                f"--action destroy on box {box_name}: the box has no provider instance id",
                f"`campaign box add ... --provider {box.provider} --instance ID`",
            )

    async def arm_timer(self, plan: TimerPlan, *, on_box: bool = True) -> TimerChange:
        """Store the timer, then arm the box's own watchdog so the stop holds with this console closed."""
        timer = self.store.timers.add(
            plan.box,
            plan.deadline_ms,
            plan.action,
            plan.input_text,
            now_ms=self.store.clock(),
            detail={"readings": dict(plan.readings)},
        )
        if not on_box:
            return TimerChange(timer, None)
        result = await self.enforcer().arm_box(timer)
        return TimerChange(timer, self._on_box(timer, result, "armed-on-box"))

    async def cancel_timer(self, timer_id: int, *, on_box: bool = True) -> TimerChange:
        """Disarm a timer in the store, then on the box (if it was ever armed there)."""
        ROW_ID.check(timer_id, "timer id")  # an id past SQLite's integers is no timer, not an OverflowError
        timer = cancel(self.store, timer_id, now_ms=self.store.clock())
        if not on_box:
            return TimerChange(timer, None)
        result = await self.enforcer().disarm_box(timer)
        if result is None and not self.store.timers.has_event(timer.id, "armed-on-box"):
            return TimerChange(timer, OnBox(True, "it was never armed on the box"))
        return TimerChange(timer, self._on_box(timer, result, "cancelled-on-box"))

    def _on_box(self, timer: Timer, result: dict[str, Any] | None, done_event: str) -> OnBox:
        if result is not None:
            remaining = result.get("remaining_s")
            return OnBox(True, "done", float(remaining) if remaining is not None else None)
        if self.store.timers.has_event(timer.id, done_event):
            return OnBox(True, "already done")
        last = self.store.timers.log_for(timer.id)[-1]
        return OnBox(False, str((last["detail"] or {}).get("error", last["event"])))

    def enforcer(self, notify: Notify | None = None, name: str = "console") -> Enforcer:
        return Enforcer(self.store, self, clock=self.store.clock, notify=notify, name=name)

    async def watch_timers(
        self,
        stop: asyncio.Event,
        *,
        notify: Notify | None = None,
        tick: Callable[[list[Timer]], None] | None = None,
        interval_s: float = 1.0,
    ) -> list[Timer]:
        """Enforce every live timer from this console until none is left or ``stop``; returns those watched."""
        INTERVAL_S.check(interval_s, "--interval")
        watched = [t.id for t in self.store.timers.every(active_only=True)]
        enforcer = self.enforcer(notify)
        while not stop.is_set() and (live := self.store.timers.every(active_only=True)):
            await enforcer.tick()
            if tick is not None:
                tick(live)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval_s)
        return [self.store.timers.get(i) for i in watched]

    async def supervise(
        self, stop: asyncio.Event, *, notify: Notify | None = None, name: str = "console"
    ) -> None:
        """The live console: keep every box's link up (ingesting its journal) and enforce the timers."""
        self.fleet.start_all()
        await self.enforcer(notify, name).run(stop)

    # -- what the enforcer asks of a box (console.timers.BoxActions) ---------------------------
    async def arm_watchdog(
        self, box: str, timer_id: int, deadline_ms: int, action: TimerAction, console_now_ms: int
    ) -> dict[str, Any]:
        link = await self.link(box)
        args = {
            "timer_id": self.store.timers.box_id(timer_id),
            "deadline_ms": deadline_ms,
            "action": action,
            "console_now_ms": console_now_ms,
        }
        with reaching(box):
            return dict(await link.command("set_deadline", args))

    async def cancel_watchdog(self, box: str, timer_id: int) -> dict[str, Any]:
        link = await self.link(box)
        with reaching(box):
            return dict(
                await link.command("cancel_deadline", {"timer_id": self.store.timers.box_id(timer_id)})
            )

    async def _live_on_box(self, box: str) -> list[str]:
        """What the box itself says is running (the store may be behind when the laptop slept)."""
        link = await self.link(box)
        with reaching(box):
            launches = (await link.command("launches", {}))["launches"]
        return [la["launch_id"] for la in launches if la.get("state") in ("starting", "serving")]

    async def pull(self, box: str) -> dict[str, Any]:
        """Ingest every unacknowledged journal event and the tail of each live launch's log."""
        link = await self.link(box)
        with reaching(box):
            inserted = await link.sync()
            logs = {}
            for launch_id in await self._live_on_box(box):
                logs[launch_id] = (
                    await link.command("log_tail", {"launch_id": launch_id, "lines": LOG_LINES})
                )["lines"]
        return {"events": inserted, "logs": logs}

    async def stop_arms(self, box: str) -> dict[str, Any]:
        """Stop everything the box says is running, whichever state.db launched it."""
        stopped = await self.stop_launches(box, await self._live_on_box(box), STOP_GRACE_S)
        return {"killed": {x.id: {"state": x.state, "gpu_released": released(x)} for x in stopped}}

    async def shutdown(self, box: str) -> dict[str, Any]:
        """Hand the shutdown to the box's own watchdog (re-armed for now): the agent knows how its host
        powers off (``--shutdown-cmd``), and its grace lets a last pull in."""
        link = await self.link(box)
        now = self.store.clock()
        args = {
            "timer_id": f"shutdown-{now}",
            "deadline_ms": now,
            "action": "shutdown",
            "console_now_ms": now,
        }
        with reaching(box):
            result = await link.command("set_deadline", args)
        return {"handed_to": "box watchdog", **dict(result)}
