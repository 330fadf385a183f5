"""What the store refuses: a leaf module, so every repository can raise these without an import cycle."""

from __future__ import annotations

import errno
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from console.errors import InputError


class StoreError(InputError):
    """state.db cannot be used as asked; the message says what and how to fix it."""


class StoreTooNew(StoreError):
    """The file was written by a newer campaign-console than this one."""


class ReadOnlyStore(StoreError):
    """A write was attempted on a store opened for browsing."""


class StoreFull(StoreError):
    """The disk under state.db is full: nothing can be committed until space is freed."""


_NEARLY_NOTHING = 64 * 1024
"""Free bytes under which an I/O error of SQLite is read as the disk being full (the -shm/-wal cannot grow)."""


def disk_full(exc: BaseException, path: Path) -> StoreFull | None:
    """``exc`` as a StoreFull when it means the disk under ``path`` is full, else None.

    SQLite says SQLITE_FULL when a page cannot be written; when its shared-memory file cannot grow it says
    "disk I/O error" instead, so an I/O error on a disk with (nearly) nothing free counts as full too.
    """
    full = isinstance(exc, OSError) and exc.errno == errno.ENOSPC
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
        full = code == sqlite3.SQLITE_FULL or (code == sqlite3.SQLITE_IOERR and _free(path) < _NEARLY_NOTHING)
    if not full:
        return None
    return StoreFull(
        f"state.db disk full: {path} cannot be written ({exc})",
        f"free space on the disk holding {path.resolve().parent}; nothing is lost (a box keeps every event until "
        "state.db has committed it): `--follow` resumes by itself, else connect again",
    )


def _free(path: Path) -> int:
    try:
        return shutil.disk_usage(path.resolve().parent).free
    except OSError:
        return 0


@contextmanager
def full_disk_guard(path: Path) -> Iterator[None]:
    """Raise StoreFull (one clear line) instead of SQLite's error when the disk under ``path`` is full."""
    try:
        yield
    except (sqlite3.Error, OSError) as exc:
        full = disk_full(exc, path)
        if full is None:
            raise
        raise full from exc
