"""Open work for the handover: queued items with the words that queued them, and the models no box here holds.

Neither is a result or a failure: a queued arm has no launch and no bench row (console/store/queued.py), and
a model that overflows the node is a profile whose weights no layout on any one box fits (lint R10's
``node_overflow``). The report lists both under "Queued / open" so the next person sees what was still to
do, never as a number or a refusal.
"""

from __future__ import annotations

from dataclasses import dataclass

from console.readmodel.inventory import box_list, lint_box
from console.recipes import Catalog
from console.recipes.lint import node_overflow
from console.store import Store


@dataclass(frozen=True)
class QueuedRow:
    """One queued item (``queued_work``): what would run, where, on which list, and the source's words."""

    id: int
    model: str
    kind: str  # launch, repeat or eval (console/store/queued.py QUEUED_KINDS)
    what: str
    sentence: str
    section: str
    box: str | None
    arm: str | None
    list: str | None
    imported: bool  # listed by an import (the write-up), not by this console


@dataclass(frozen=True)
class Overflow:
    """A profile whose weights no layout on one box of this state.db fits, judged on the box with the most
    GPU memory (serving it takes several boxes)."""

    profile: str
    checkpoint: str
    weights_gb: float
    reason: str  # lint R10's words against that box
    description: str | None


def queued_work(store: Store) -> list[QueuedRow]:
    """Every queued item, by box (none last), list and id."""
    rows = store.rows(
        "SELECT * FROM queued_work ORDER BY box IS NULL, box, list IS NULL, list, id",
    )
    return [
        QueuedRow(
            id=r["id"],
            model=r["model"],
            kind=r["kind"],
            what=r["what"],
            sentence=r["sentence"],
            section=r["section"],
            box=r["box"],
            arm=r["arm"],
            list=r["list"],
            imported=r["import_id"] is not None,
        )
        for r in rows
    ]


def overflowing_profiles(store: Store, catalog: Catalog) -> list[Overflow]:
    """The catalog's profiles that overflow even the largest box here (by total GPU memory, from its probe or
    else its inventory); none when no box's GPUs are known."""
    specs = [
        spec for box in box_list(store) if (spec := lint_box(store, box.name)).gpu_mem_gb and spec.gpu_count
    ]
    if not specs:
        return []
    largest = max(specs, key=lambda s: s.gpu_count * (s.gpu_mem_gb or 0.0))
    found = []
    for p in sorted(catalog.profiles.values(), key=lambda p: p.name):
        reason = node_overflow(p.weights_gb, largest) if p.weights_gb is not None else None
        if reason:
            found.append(Overflow(p.name, p.checkpoint, p.weights_gb or 0.0, reason, p.description))
    return found
