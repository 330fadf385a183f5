"""state.db: the campaign's single source of record. Only this package writes it."""

from console.store.boxes import LOCAL_BOX, Box, BoxExists, BoxNotReachable, NoSuchBox
from console.store.core import DEFAULT_DB, Store, resolve_db_path
from console.store.errors import ReadOnlyStore, StoreError, StoreFull, StoreTooNew

__all__ = [
    "DEFAULT_DB",
    "LOCAL_BOX",
    "Box",
    "BoxExists",
    "BoxNotReachable",
    "NoSuchBox",
    "ReadOnlyStore",
    "Store",
    "StoreError",
    "StoreFull",
    "StoreTooNew",
    "resolve_db_path",
]
