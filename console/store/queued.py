"""``store.queued``: work a campaign queued and had not run, each item with the words that queued it.

A write-up's open work is part of what the next person picks up (the TP8 arms on the 8x RTX 5090 box, the
controls on the box/lists/*.txt lists, a third repeat, a 65k-token re-run): none of it is a result or a
failure, so none of it is a launch or a bench row. It lives here, read only by the handover's "Queued /
open" section (console/report.py), and an imported item is deleted with its import (``import_id``
cascades), as the import's figures are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

from console.errors import InputError
from console.store.connection import Connection

QUEUED_KINDS = ("launch", "repeat", "eval")
"""launch: an arm never served; repeat: another run of an arm that has figures; eval: a quality run."""


class QueuedError(InputError, ValueError):
    """An item that cannot be stored as given; the message names the field and the fix."""


@dataclass(frozen=True)
class QueuedItem:
    """One piece of queued work as its source states it (``queued_work`` columns)."""

    model: str
    kind: str  # QUEUED_KINDS
    what: str  # the item in words: what would run, where
    sentence: str  # the source's own words that queue it
    section: str  # where the source says it
    box: str | None = None  # None: the source names no box
    arm: str | None = None  # None: several arms (``what`` says which)
    list: str | None = None  # the queue list it is on (e.g. box/lists/control600w.txt); None: none named


class Queued:
    """The writer of ``queued_work``."""

    def __init__(self, store: Connection):
        self.store = store

    def add_imported(self, import_id: int, items: Sequence[QueuedItem]) -> int:
        """Store an import's queued items in one transaction; returns how many it stored: none when the import
        already has them (the same data imported again is a no-op, as ``record_import`` is). Each kind must be
        one of ``QUEUED_KINDS`` and every item carries the sentence that queued it."""
        if self.store.scalar("SELECT count(*) FROM queued_work WHERE import_id = ?", [import_id]):
            return 0
        for item in items:
            if item.kind not in QUEUED_KINDS:
                raise QueuedError(
                    f"queued item {item.what!r}: kind {item.kind!r} is not one of {', '.join(QUEUED_KINDS)}"
                )
            if not item.sentence.strip():
                raise QueuedError(f"queued item {item.what!r}: give the sentence that queued it")
        now = self.store.clock()
        with self.store.atomic() as db:
            db.table("queued_work").insert_all(
                {**asdict(item), "import_id": import_id, "t_ms": now} for item in items
            )
        return len(items)
