"""What the store refuses: a leaf module, so every repository can raise these without an import cycle."""

from __future__ import annotations

from console.errors import InputError


class StoreError(InputError):
    """state.db cannot be used as asked; the message says what and how to fix it."""


class StoreTooNew(StoreError):
    """The file was written by a newer campaign-console than this one."""


class ReadOnlyStore(StoreError):
    """A write was attempted on a store opened for browsing."""
