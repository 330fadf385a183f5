"""The box inventory as the operator lists it."""

from __future__ import annotations

from console.readmodel import queries
from console.readmodel.records import IngestHealth
from console.store import Box, Store


def box_list(store: Store) -> list[Box]:
    """Every box the campaign knows, destroyed ones included (their results still name them)."""
    return store.boxes.every()


def ingest_health(store: Store) -> dict[str, IngestHealth]:
    """What each box's journal could not give this state.db (quarantined events, lost seqs), per box."""
    return queries.ingest_health(store, store.clock())
