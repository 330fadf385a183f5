"""What every intent shares: the store, the fleet's links, the recipes, and one mapping of link failures.

A box link fails in many ways (OSError, asyncssh, a closed channel, a timed-out delivery); the operator
needs one thing from all of them: the box could not be reached, and what the link last said. ``reaching``
turns those into ``Unreachable`` at this boundary, so no adapter has to know the fleet's exception types.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

from console.errors import Refused, Unreachable
from console.fleet import BoxLink, FleetManager, LinkSettings
from console.fleet.link import LINK_ERRORS
from console.recipes import Catalog, load_catalog
from console.store import Store


class ServiceError(Refused):
    """An intent refused by policy before anything was sent; the message says why and what to do."""


def describe(exc: BaseException) -> str:
    """The exception's message, or its name where it has none (a bare ``TimeoutError()``)."""
    return str(exc) or type(exc).__name__


@contextmanager
def reaching(box: str) -> Iterator[None]:
    """Turn a link failure while talking to ``box`` into ``Unreachable``; everything else passes through."""
    try:
        yield
    except Unreachable:
        raise
    except LINK_ERRORS as exc:
        raise Unreachable(
            f"box {box}: {describe(exc)}", f"`campaign box connect {box}` shows the link's state"
        ) from exc


class ServiceBase:
    """The state every intent works on. One instance per console process (CLI command or TUI)."""

    def __init__(
        self,
        store: Store,
        fleet: FleetManager | None = None,
        *,
        catalog: Catalog | None = None,
        settings: LinkSettings | None = None,
    ):
        self.store = store
        self.fleet = fleet or FleetManager(store, settings)
        self._catalog = catalog

    @property
    def catalog(self) -> Catalog:
        """The recipes, read on first use (a command that never needs them never parses them)."""
        if self._catalog is None:
            self._catalog = load_catalog()
        return self._catalog

    async def link(self, box: str) -> BoxLink:
        """The box's link, connected: the supervised one when running, else one attempt now."""
        link = self.fleet.link(box)
        if not self.fleet.supervised(box) and link.fatal is None and not link.connected:
            with reaching(box):
                await link.connect()
        return link

    async def until_ingested(self, box: str, timeout_s: float) -> None:
        """Wait before looking at the store again for what the box did: until its supervised link commits the
        box's next events (the TUI, ``--follow``, a sweep), else ``timeout_s`` (``settle`` pulls then)."""
        if self.fleet.supervised(box):
            await self.fleet.link(box).next_commit(timeout_s)
        else:
            await asyncio.sleep(timeout_s)

    async def settle(self, box: str) -> int:
        """Make the store show what the box did: without a supervised loop (one-shot CLI), pull the journal
        now; with one (the TUI, ``--follow``) the loop is already pulling. Returns the events inserted."""
        if self.fleet.supervised(box):
            return 0
        link = await self.link(box)
        with reaching(box):
            return await link.sync()

    async def close(self) -> None:
        await self.fleet.close()
