"""The console's only way to change anything: an adapter from keys to ``console.service`` intents.

The TUI never opens SSH, never writes SQL and never ingests on Textual's event loop. ``ServiceActions``
runs one ``Service`` on a thread of its own with its own asyncio loop (``ServiceThread``): the box links,
journal ingest and the timer enforcer live there, so an hour of backlog arriving never freezes a redraw.
Each method is one service call, marshalled onto that loop, and renders the typed result in words.
Pilot tests hand the App another object with the same methods (``Actions``). Browsing is read-only: every
action is refused up front with a message that says why and what to run instead.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from console.errors import Refused
from console.readmodel import CheckMark
from console.tui.render import num

if TYPE_CHECKING:
    from console.service import Service
    from console.store.timers import Timer

T = TypeVar("T")

BENCH_WAIT_S = 3600.0
TRIPWIRE_WAIT_S = 1800.0
"""How long the console waits for a run's row (as ``campaign bench`` / ``campaign tripwire`` do); the run
itself goes on on the box, and its row lands at the next pull either way."""


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
    """The arms the recipes define (name -> model profile) and the workload shapes a bench can run, or the
    reason they could not be read."""

    arms: dict[str, str | None]
    problem: str | None = None
    shapes: tuple[str, ...] = ()
    aliases: tuple[tuple[str, str], ...] = ()
    """(alias, the arm it is): arms that are another arm's settings under a second name (``same_as``)."""


class Actions(Protocol):
    read_only: bool

    def recipes(self) -> Recipes: ...

    def lint(self, arm: str, box: str) -> list[LintLine]:
        """Blocking: call from a worker thread, never from the event loop."""
        ...

    async def launch(self, box: str, arm: str) -> str: ...

    async def kill(self, box: str, launch_id: str) -> str: ...

    async def log_tail(self, launch_id: str, lines: int) -> list[str]: ...

    async def arm_timer(self, box: str, text: str, action: str) -> str: ...

    async def check(self, box: str) -> str: ...

    async def connect(self, box: str) -> str: ...

    async def bench(self, launch_id: str, box: str, shape: str, concurrency: int) -> str:
        """Run one bench against a serving launch and say its row when it lands (minutes)."""
        ...

    async def tripwire(self, launch_id: str, box: str) -> str:
        """Run the tripwire against a serving launch and say its verdict when it lands."""
        ...

    async def supervise(self, notify: Callable[[str], None]) -> None: ...

    async def close(self) -> None: ...


def refusal(verb: str, db_path: Path) -> Refused:
    return Refused(
        f"{verb} is disabled: this is `campaign browse`, a read-only view of {db_path}",
        f"open it with `campaign --db {db_path}` to act on the fleet",
    )


class ServiceThread:
    """One ``Service`` on a daemon thread with its own event loop; every call is marshalled onto it.

    The service's store is a SQLite connection: using it from one thread only (this one) is what keeps it
    safe, so even the service's synchronous methods run here.

    Two event loops in one process make one rule strict: the service closes every stream and channel it
    opens, on every path. One left to the garbage collector can be finalized on Textual's thread, and
    CPython's stream finalizers then close its socket and, by descriptor number, unregister that number
    from this loop's selector, after a new connection of this loop may have taken the number: that
    connection is never read again (tests/support/listening.py tells how a test server hung on it).
    """

    def __init__(self, db_path: Path):
        self.db_path = db_path
        self._loop = asyncio.new_event_loop()
        self._ready: Future[Service] = Future()
        self._thread = threading.Thread(target=self._main, name="console-service", daemon=True)
        self._thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            from console.service import Service
            from console.store import Store

            self._ready.set_result(Service(Store(self.db_path)))
        except BaseException as exc:  # shown by the first call that needs the service
            self._ready.set_exception(exc)
        self._loop.run_forever()

    def submit(self, call: Callable[[Service], Awaitable[T]]) -> Future[T]:
        async def run() -> T:
            return await call(self._ready.result())

        return asyncio.run_coroutine_threadsafe(run(), self._loop)

    async def call(self, call: Callable[[Service], Awaitable[T]]) -> T:
        """Await ``call(service)`` from another event loop (Textual's) without blocking it."""
        return await asyncio.wrap_future(self.submit(call))

    def call_blocking(self, call: Callable[[Service], T]) -> T:
        """Run a synchronous service method on the service thread and wait for it (worker threads only)."""

        async def run(service: Service) -> T:
            return call(service)

        return self.submit(run).result()

    async def close(self) -> None:
        if self._ready.done() and self._ready.exception() is None:
            service = self._ready.result()

            async def shut(_: Service) -> None:
                await service.close()
                service.store.close()

            await self.call(shut)
        self._loop.call_soon_threadsafe(self._loop.stop)
        await asyncio.to_thread(self._thread.join, 10)


class ServiceActions:
    """Recipes from ``console.recipes``; everything else is one ``console.service`` call on its thread.

    The service gets its own writable Store (the console's panels read through a read-only one), opened
    on first use, so browsing never opens the file for writing at all.
    """

    def __init__(self, db_path: Path, *, read_only: bool = False):
        self.db_path = db_path
        self.read_only = read_only
        self._thread: ServiceThread | None = None
        self._stop: asyncio.Event | None = None

    def recipes(self) -> Recipes:
        from console.errors import ConsoleError
        from console.recipes import load_catalog

        try:
            catalog = load_catalog()
        except ConsoleError as exc:  # a broken recipe must not take the console down; it is shown instead
            return Recipes({}, f"recipes not loaded: {exc}")
        return Recipes(
            {name: arm.profile for name, arm in sorted(catalog.arms.items())},
            shapes=tuple(sorted(catalog.shapes)),
            aliases=tuple((n, a.alias_of) for n, a in sorted(catalog.arms.items()) if a.alias_of),
        )

    def service(self, verb: str) -> ServiceThread:
        if self.read_only:
            raise refusal(verb, self.db_path)
        if self._thread is None:
            self._thread = ServiceThread(self.db_path)
        return self._thread

    def lint(self, arm: str, box: str) -> list[LintLine]:
        """The recipe rules for ``arm`` on ``box`` as last probed, and the box's failed checks (which block)."""
        plan = self.service("launching").call_blocking(lambda s: s.plan_launch(arm, box))
        lines = [LintLine(f.severity, f.rule_id, f.reason, f.where()) for f in plan.findings]
        lines += [
            LintLine("error", "check-failed", f"{failed}; `campaign launch --force` records a forced launch")
            for failed in plan.failed_checks
        ]
        return lines

    async def launch(self, box: str, arm: str) -> str:
        async def go(s: Service) -> str:
            outcome = await s.launch(s.plan_launch(arm, box))
            if outcome.serving:
                return f"serving: {', '.join(outcome.launch_ids)}"
            failed = outcome.failed
            if failed:
                raise Refused(f"{failed[0].id} failed: {failed[0].failure_reason or failed[0].state}")
            raise Refused(f"{', '.join(outcome.launch_ids)} not serving yet: {outcome.replicas[0].state}")

        return await self.service("launching").call(go)

    async def kill(self, box: str, launch_id: str) -> str:
        from console.service import released

        async def go(s: Service) -> str:
            launches = await s.kill(s.plan_kill(launch_id, box))
            return "; ".join(
                f"{x.id} {x.state}, GPU memory " + ("freed" if released(x) else "NOT confirmed free")
                for x in launches
            )

        return await self.service("killing").call(go)

    async def log_tail(self, launch_id: str, lines: int) -> list[str]:
        return await self.service("reading a log on its box").call(lambda s: s.log_tail(launch_id, lines))

    async def arm_timer(self, box: str, text: str, action: str) -> str:
        """Record the timer, then arm the box's own watchdog so the stop holds with the laptop closed."""
        from console.timeutil import deadline_words

        at, within = deadline_words(text)

        async def go(s: Service) -> str:
            change = await s.arm_timer(s.plan_timer(box, at=at, within=within, action=action))
            if change.on_box is not None and change.on_box.done:
                return f"timer {change.timer.id} armed on {box}"
            why = change.on_box.detail if change.on_box else "not reached"
            return f"timer {change.timer.id} recorded; the box's watchdog is NOT armed yet ({why}); the console retries"

        return await self.service("setting a timer").call(go)

    async def check(self, box: str) -> str:
        """Probe the box now and judge it; the verdicts land in the store (Fleet shows them)."""

        async def go(s: Service) -> str:
            run = await s.check(box)
            marks = [CheckMark(v.check, v.verdict, v.reason) for v in run.verdicts]
            bad = [f"{m.word} {m.name} ({m.reason})" for m in marks if m.verdict != "ok"]
            return "; ".join(bad) if bad else f"every check ok ({', '.join(m.name for m in marks)})"

        return await self.service("checking a box").call(go)

    async def connect(self, box: str) -> str:
        """Bring the box's agent up (pushed or restarted as needed) and ingest its journal."""

        async def go(s: Service) -> str:
            return str(await s.connect(box))

        return await self.service("connecting a box").call(go)

    async def bench(self, launch_id: str, box: str, shape: str, concurrency: int) -> str:
        """A node bench of the launch's arm on its box (every serving replica at once), waited for."""

        async def go(s: Service) -> str:
            [row] = (await s.bench(launch_id, box, shape, concurrency, timeout_s=BENCH_WAIT_S)).rows
            said = f"{row.arm} {row.shape} C{row.concurrency} x{row.replicas}: out {num(row.out_tok_per_s)} tok/s, "
            said += f"in {num(row.in_tok_per_s)} tok/s, tripwire {row.tripwire.word}"
            return said + (f", {row.marks}" if row.marks else "")

        return await self.service("benchmarking").call(go)

    async def tripwire(self, launch_id: str, box: str) -> str:
        async def go(s: Service) -> str:
            run = await s.tripwire_result(box, await s.tripwire(launch_id), TRIPWIRE_WAIT_S)
            return f"{run.arm}: tripwire {run.verdict.text}" + (
                "" if run.verdict.passed else "; its throughput rows are now marked diagnostic-only"
            )

        return await self.service("running the tripwire").call(go)

    async def supervise(self, notify: Callable[[str], None]) -> None:
        """The live console: every box's link up (ingesting its journal) and the timers enforced, on the
        service's thread; ``notify`` is called there with each timer warning (thread-safe callers only)."""
        thread = self.service("supervising boxes")

        async def start(s: Service) -> None:
            self._stop = asyncio.Event()

            def told(_: Timer, message: str) -> None:
                notify(message)

            asyncio.ensure_future(s.supervise(self._stop, notify=told, name="tui"))

        await thread.call(start)

    async def close(self) -> None:
        if self._thread is None:
            return
        stop = self._stop
        if stop is not None:

            async def halt(_: Service) -> None:
                stop.set()

            await self._thread.call(halt)
        await self._thread.close()
