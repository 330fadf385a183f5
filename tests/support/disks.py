"""Small filesystems of the tests' own: a full disk and a read-only folder are real, not simulated.

The suite runs as root (it creates unix users for its sshd boxes), so it can mount a tmpfs of a few MiB to
fill, and a read-only bind mount that refuses writes even to root.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (e.g. ``4m``) mounted at ``where`` (created), unmounted afterwards."""
    where.mkdir(exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "--lazy", str(where)], check=True)


@contextmanager
def read_only_view(src: Path, where: Path) -> Iterator[Path]:
    """``src`` seen at ``where`` through a read-only bind mount."""
    where.mkdir(exist_ok=True)
    subprocess.run(["mount", "--bind", str(src), str(where)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(where)], check=True)
        yield where
    finally:
        subprocess.run(["umount", "--lazy", str(where)], check=True)
