"""All box links of one console process, concurrently in one event loop: one link (one connection) per box."""

from __future__ import annotations

import asyncio
import contextlib

from console.fleet.link import BoxLink, LinkSettings
from console.store import Store
from console.store.boxes import LOCAL_BOX, BoxNotReachable


class FleetManager:
    def __init__(self, store: Store, settings: LinkSettings | None = None):
        self.store = store
        self.settings = settings or LinkSettings()
        self._links: dict[str, BoxLink] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def link(self, name: str) -> BoxLink:
        """The one link of ``name`` (created on first use; not connected until ``start`` or ``connect``)."""
        if name == LOCAL_BOX:
            self.store.boxes.ensure_local()  # the embedded default: works on a laptop with no rented box
        else:
            box = self.store.boxes.get(name)  # NoSuchBox with the operator's fix, before anything connects
            if not box.reachable:
                raise BoxNotReachable(name, box.unreachable_why)
        if name not in self._links:
            self._links[name] = BoxLink(self.store, name, self.settings)
        return self._links[name]

    def start(self, name: str) -> BoxLink:
        """Supervise ``name`` in the background: connect, ingest, reconnect, until ``close``."""
        link = self.link(name)
        task = self._tasks.get(name)
        if task is None or task.done():
            self._tasks[name] = asyncio.create_task(link.run(), name=f"link:{name}")
        return link

    def supervised(self, name: str) -> bool:
        task = self._tasks.get(name)
        return task is not None and not task.done()

    def start_all(self) -> list[BoxLink]:
        """Every box still rented: a dead or silent one only delays itself; imported figures have no box, and
        a box detached from this campaign stays detached until the operator connects it again."""
        return [
            self.start(b.name)
            for b in self.store.boxes.every(include_destroyed=False)
            if b.reachable and b.status != "detached"
        ]

    async def close(self) -> None:
        for link in self._links.values():
            await link.close()
        for task in self._tasks.values():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
