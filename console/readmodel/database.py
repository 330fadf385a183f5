"""The campaign database itself, as an adapter names it: where it is, and its clock now."""

from __future__ import annotations

from pathlib import Path

from console.store import Store


def database_path(store: Store) -> Path:
    """The state.db the store has open."""
    return store.path


def now_ms(store: Store) -> int:
    """The campaign's clock now, in UTC epoch milliseconds (the store's: tests inject it)."""
    return store.clock()
