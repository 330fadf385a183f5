"""The console's only way to change anything: a small adapter over the recipes and console.service.

The TUI never opens SSH and never writes SQL. Keys call this adapter; the adapter calls the service
layer (the same intents the CLI uses), which writes through console.store and reaches boxes through
console.fleet. Pilot tests hand the App another object with the same methods. Browsing is read-only:
every action is refused up front with a message that says why and what to run instead.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from console.service import Service
    from console.store import Store


class ActionRefused(Exception):
    """An action the console will not take; the message is shown to the operator as is."""


@dataclass(frozen=True)
class LintLine:
    severity: str  # error blocks a launch, warn is shown
    rule_id: str
    reason: str
    where: str = ""

    @property
    def blocking(self) -> bool:
        return self.severity == "error"


@dataclass(frozen=True)
class Recipes:
    """The arms the recipes define (name -> model profile), or the reason they could not be read."""

    arms: dict[str, str | None]
    problem: str | None = None


class Actions(Protocol):
    read_only: bool

    def recipes(self) -> Recipes: ...

    def lint(self, arm: str, box: str) -> list[LintLine]: ...

    async def launch(self, box: str, arm: str) -> str: ...

    async def kill(self, box: str, launch_id: str) -> str: ...

    async def log_tail(self, launch_id: str, lines: int) -> list[str]: ...

    async def set_deadline(self, box: str, deadline_ms: int, action: str, input_text: str) -> str: ...

    async def supervise(self) -> None: ...

    async def close(self) -> None: ...


def refusal(verb: str, db_path: Path) -> ActionRefused:
    return ActionRefused(
        f"{verb} is disabled: this is `campaign browse`, a read-only view of {db_path}; "
        f"open it with `campaign --db {db_path}` to act on the fleet"
    )


class ServiceActions:
    """Recipes from ``console.recipes``; launch, kill, timers and box links through ``console.service``.

    The service gets its own writable Store (the console's panels read through a read-only one), opened
    on first use, so browsing never opens the file for writing at all.
    """

    def __init__(self, db_path: Path, *, read_only: bool = False):
        self.db_path = db_path
        self.read_only = read_only
        self._store: Store | None = None
        self._service: Service | None = None
        self._stop = asyncio.Event()
        self._enforcer: asyncio.Task[None] | None = None

    def recipes(self) -> Recipes:
        from console.recipes import load_catalog

        try:
            catalog = load_catalog()
        except Exception as exc:  # a broken recipe must not take the console down; it is shown instead
            return Recipes({}, f"recipes not loaded: {exc}")
        return Recipes({name: arm.profile for name, arm in sorted(catalog.arms.items())})

    def service(self, verb: str) -> Service:
        if self.read_only:
            raise refusal(verb, self.db_path)
        if self._service is None:
            from console.service import Service
            from console.store import Store

            self._store = Store(self.db_path)
            self._service = Service(self._store)
        return self._service

    def lint(self, arm: str, box: str) -> list[LintLine]:
        """The recipe rules for ``arm`` on ``box`` as last probed, and the box's failed checks (which block)."""
        plan = self.service("launching").plan_launch(arm, box)
        lines = [LintLine(f.severity, f.rule_id, f.reason, f.where()) for f in plan.findings]
        lines += [
            LintLine("error", "check-failed", f"{failed}; `campaign launch --force` records a forced launch")
            for failed in plan.failed_checks
        ]
        return lines

    async def launch(self, box: str, arm: str) -> str:
        service = self.service("launching")
        plan = await service.launch(service.plan_launch(arm, box))
        return f"sent {len(plan.launch_ids)} replica(s): {', '.join(plan.launch_ids)}"

    async def kill(self, box: str, launch_id: str) -> str:
        results = await self.service("killing").kill([launch_id], box)
        return f"{launch_id}: {results.get(launch_id)}"

    async def log_tail(self, launch_id: str, lines: int) -> list[str]:
        return await self.service("reading a log on its box").log_tail(launch_id, lines)

    async def set_deadline(self, box: str, deadline_ms: int, action: str, input_text: str) -> str:
        """Record the timer, then arm the box's own watchdog so the stop holds with the laptop closed."""
        from console.timers import Enforcer, FleetActions

        service = self.service("setting a timer")
        store = service.store
        timer = store.timers.add(box, deadline_ms, action, input_text, now_ms=store.clock())
        enforcer = Enforcer(store, FleetActions(service.fleet, store.clock), clock=store.clock)
        result = await enforcer.arm_box(timer)
        if result is None:
            return (
                f"timer {timer.id} recorded; the box's watchdog is NOT armed yet (the console keeps retrying)"
            )
        return f"timer {timer.id} armed on {box}"

    async def supervise(self) -> None:
        """The live console: keep every box's link up (ingesting its journal) and enforce the timers."""
        from console.timers import Enforcer, FleetActions

        service = self.service("supervising boxes")
        service.fleet.start_all()
        store = service.store
        enforcer = Enforcer(store, FleetActions(service.fleet, store.clock), clock=store.clock)
        self._enforcer = asyncio.create_task(enforcer.run(self._stop), name="timers")

    async def close(self) -> None:
        self._stop.set()
        if self._enforcer is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._enforcer
        if self._service is not None:
            await self._service.close()
        if self._store is not None:
            self._store.close()
