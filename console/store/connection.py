"""What a repository needs of the Store it hangs off: the open state.db and its write and read primitives.

``console.store.core.Store`` builds the repositories (``store.boxes``, ``store.checks``, ...) and hands each
itself; a repository names it by this protocol, never by ``Store``, so the core imports its repositories and
none of them imports the core back. A repository that also reaches a sibling (ingest files a probe under
``checks``) adds that sibling to its own protocol, beside its class.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

import sqlite_utils

from console.timeutil import Clock


class Connection(Protocol):
    path: Path
    clock: Clock
    db: sqlite_utils.Database

    def atomic(self) -> AbstractContextManager[sqlite_utils.Database]:
        """One transaction (savepoint when nested); writers go through it."""
        ...

    def insert(self, table: str, values: dict[str, Any]) -> int: ...

    def rows(self, sql: str, params: Any = ()) -> list[dict[str, Any]]: ...

    def scalar(self, sql: str, params: Any = ()) -> Any: ...
