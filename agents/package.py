"""The agent as one file: a deterministic zipapp of this package, versioned by its content.

Why content-hashed: the console pushes the agent over SFTP and must know when the copy on a box is
stale. A hand-bumped version number drifts; a hash of the sources changes whenever any code does, and
two consoles with the same tree produce byte-identical archives (fixed timestamps, sorted entries).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import pkgutil
import zipfile
from functools import lru_cache
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
VERSION_FILE = "_build_version"
_EPOCH = (1980, 1, 1, 0, 0, 0)
_MAIN = b"import sys\nfrom agents.__main__ import main\n\nsys.exit(main())\n"


def _sources() -> list[tuple[str, bytes]]:
    """(archive name, bytes) of every source file of the package, sorted; caches and builds left out."""
    out = []
    for path in sorted(PACKAGE_DIR.rglob("*")):
        rel = path.relative_to(PACKAGE_DIR)
        if (
            not path.is_file()
            or "__pycache__" in rel.parts
            or path.suffix in (".pyc", ".pyo")
            or path.name == VERSION_FILE
            or any(p.startswith(".") for p in rel.parts)
        ):
            continue
        out.append((f"agents/{rel.as_posix()}", path.read_bytes()))
    return out


def _hash(sources: list[tuple[str, bytes]]) -> str:
    h = hashlib.sha256()
    for name, data in sources:
        h.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    return h.hexdigest()[:16]


@lru_cache(maxsize=1)
def agent_version() -> str:
    """This agent's version: embedded in a zipapp, else computed from the source tree."""
    embedded = None
    with contextlib.suppress(OSError):
        embedded = pkgutil.get_data("agents", VERSION_FILE)
    if embedded:
        return embedded.decode().strip()
    return _hash(_sources())


def build_zipapp() -> bytes:
    """The pushable agent: ``python3 agent.pyz daemon --home DIR`` on any Python 3.10+."""
    sources = _sources()
    buf = io.BytesIO()
    buf.write(b"#!/usr/bin/env python3\n")  # as zipapp does: the archive follows the shebang line
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        entries = [
            ("__main__.py", _MAIN),
            (f"agents/{VERSION_FILE}", _hash(sources).encode() + b"\n"),
            *sources,
        ]
        for name, data in sorted(entries):
            info = zipfile.ZipInfo(name, date_time=_EPOCH)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    return buf.getvalue()


def __getattr__(name: str) -> str:
    """``AGENT_VERSION`` (the hash ``hello`` reports, agents/protocol.py): computed on first use, not at import."""
    if name == "AGENT_VERSION":
        return agent_version()
    raise AttributeError(name)
