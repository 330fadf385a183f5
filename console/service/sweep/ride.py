"""A sweep rides out a box whose SSH link drops mid-walk: the link reconnects and the arm goes on.

Why: a sweep walks for hours over a rented box's network; one dropped connection used to stop it part-way
(``Unreachable`` from the first command or journal pull that hit the dead connection), and resuming it
relaunched the arm it was on. Here the walk keeps the box's link supervised (console/fleet/link.py
``BoxLink.run``: reconnect with console/backoff.py, journal pulled in the background, commands waiting for
delivery re-sent under the same id, which the agent answers from its ledger instead of running them
twice), so the arm's server, its tripwire and its benches keep running on the box while the link is down,
their rows land once it is back, and the walk goes on from the step it was at: no row lost, none doubled.

A box that stays down longer than the sweep's patience (``SweepOptions.reconnect_s``) stops the walk as
before, resumable; one that cannot be reached when the walk starts, or whose link needs the operator (a
changed host key, a journal that disagrees with state.db), stops it at once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from console.errors import Unreachable

if TYPE_CHECKING:
    from console.fleet import BoxLink
    from console.service.base import ServiceBase

T = TypeVar("T")

WATCH_S = 0.1
"""How often the watch looks at the link: a drop is noticed within this, far below any reconnect."""


class LinkWatch:
    """One box's link, supervised for the length of a walk and watched while each arm is walked. ``say`` hears
    the link going and coming back; neither it nor an error names the box, which the caller does once (every
    failure of a walk reads "box NAME: ...")."""

    def __init__(
        self,
        service: ServiceBase,
        box: str,
        patience_s: float,
        say: Callable[[str], None],
        *,
        wait_when_refused: bool = True,
    ):
        self.service = service
        self.box = box
        self.patience_s = patience_s
        self.wait_when_refused = wait_when_refused
        """False: a reconnect attempt that fails ends the wait at once (the queue gives the arm to another
        box rather than wait for a box that does not answer); a dropped connection that comes straight back
        is ridden out either way."""
        self._say = say
        self._link: BoxLink | None = None
        self._failed: str | None = None
        self._failures = 0
        """Connection attempts that failed (a drop of a live connection is not one)."""
        self._was_up = False
        """The link came up since the last retry: the next retry is a drop, not a failed attempt."""
        self._previous_retry: Callable[[str, str], None] | None = None
        self._previous_status: Callable[[str, str | None], None] | None = None

    async def start(self) -> None:
        """Supervise the link (unless something already does: the TUI's links are) and wait until it is up and
        the journal pulled to where the box was when it connected, so the walk starts from what the box did.
        A first attempt that fails raises ``Unreachable`` at once: a box down at the start is the operator's."""
        fleet = self.service.fleet
        link = self._link = fleet.link(self.box)
        self._previous_retry, self._previous_status = link.on_retry, link.on_status
        link.on_retry, link.on_status = self._retried, self._status
        self._was_up = link.connected
        if not fleet.supervised(self.box):
            fleet.start(self.box)
        deadline = time.monotonic() + self.patience_s
        while True:
            if link.fatal is not None:
                raise link.fatal
            if link.connected and self.service.store.ingest.cursor(self.box) >= link.box_last_seq:
                return
            if self._failed is not None and not link.connected:
                raise Unreachable(
                    self._failed,
                    f"`campaign box connect {self.box}` shows the link's state",
                )
            if time.monotonic() > deadline:
                if link.connected:  # a long backlog: the walk reads what has landed, the rest follows
                    return
                raise self._gone(self.patience_s)
            await asyncio.sleep(WATCH_S)

    def stop(self) -> None:
        """Give the link its retry listener back (the supervision itself ends with the service)."""
        if self._link is not None:
            self._link.on_retry, self._link.on_status = self._previous_retry, self._previous_status
            self._link = None

    async def run(self, work: Awaitable[T]) -> T:
        """``work`` (one arm's walk) while the link is watched: a drop is ridden out while it lasts no longer
        than the patience; past it, or on a problem only the operator can fix, ``work`` is cancelled and
        ``Unreachable`` raised (the caller records the arm as interrupted, resumable)."""
        walking = asyncio.ensure_future(work)
        watching = asyncio.ensure_future(self._watch())
        try:
            await asyncio.wait({walking, watching}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (watching, walking):
                if not task.done():
                    task.cancel()
            await asyncio.gather(watching, walking, return_exceptions=True)
        if not walking.done() or walking.cancelled():
            watching.result()  # why the walk was stopped
        return walking.result()

    async def _watch(self) -> None:
        link = self._link
        assert link is not None, "start() first"
        down_since: float | None = None
        failures = self._failures
        while True:
            await asyncio.sleep(WATCH_S)
            if link.fatal is not None:
                raise link.fatal
            if link.connected:
                if down_since is not None:
                    back = time.monotonic() - down_since
                    self._say(f"link back after {back:.0f} s; going on")
                down_since, failures = None, self._failures
                continue
            now = time.monotonic()
            if down_since is None:
                down_since = now
                self._say(f"link lost; reconnecting (up to {self.patience_s:.0f} s)")
            refused = not self.wait_when_refused and self._failures > failures
            if refused or now - down_since > self.patience_s:
                raise self._gone(now - down_since)

    def _retried(self, status: str, detail: str) -> None:
        if self._was_up:  # the live connection dropped: the reconnect is yet to be tried
            self._was_up = False
        else:
            self._failures += 1
            self._failed = self.service.store.boxes.get(self.box).status_detail or status
        if self._previous_retry is not None:
            self._previous_retry(status, detail)

    def _status(self, status: str, detail: str | None) -> None:
        if status == "up":
            self._was_up = True
        if self._previous_status is not None:
            self._previous_status(status, detail)

    def _gone(self, seconds: float) -> Unreachable:
        box = self.service.store.boxes.get(self.box)
        return Unreachable(
            f"its link has been down {seconds:.0f} s ({box.status}: {box.status_detail})",
            "run the same command again once the box is back: the sweep resumes at the arm it was on",
        )
