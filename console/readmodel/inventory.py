"""The box inventory as the operator lists it."""

from __future__ import annotations

from console.readmodel import queries
from console.readmodel.records import BoxStatus, IngestHealth
from console.recipes import BoxSpec, box_spec
from console.recipes.multinode import PlanBox
from console.recipes.resolve import LOOPBACK
from console.store import Box, Store


def box_list(store: Store) -> list[Box]:
    """Every box the campaign knows, destroyed ones included (their results still name them)."""
    return store.boxes.every()


def box_named(store: Store, name: str) -> Box:
    """One box of the inventory (an unknown name is the store's one-line error, with the fix)."""
    return store.boxes.get(name)


def lint_box(store: Store, name: str) -> BoxSpec:
    """The box as resolve and lint see it: its row, with the GPUs its latest probe measured, else its
    inventory's (none known: ``gpu_count`` 0)."""
    box = store.boxes.get(name)
    probe = store.checks.latest_probe(box.name)
    return box_spec(box, probe.data if probe else None)


def plan_box(store: Store, name: str) -> PlanBox:
    """A box as a multi-box arm's plan needs it: ``lint_box``'s spec and the address it is registered by
    (127.0.0.1 for a box on the console's own machine: only other boxes on this machine reach it)."""
    box = store.boxes.get(name)
    return PlanBox(lint_box(store, name), LOOPBACK if box.is_local else box.host)


def ingest_health(store: Store) -> dict[str, IngestHealth]:
    """What each box's journal could not give this state.db (quarantined events, lost seqs), per box."""
    return queries.ingest_health(store, store.clock())


def box_status(store: Store, name: str) -> BoxStatus:
    """One box now: status, checks, what serves, its timer, and what its journal could not give (an unknown
    box is the store's one-line error)."""
    box = store.boxes.get(name)
    at = (
        store.clock() if box.destroyed_ms is None else box.destroyed_ms - 1
    )  # a destroyed box: as it was last
    [row] = queries.fleet(store, at, name)
    return BoxStatus(row, store.ingest.cursor(name))
