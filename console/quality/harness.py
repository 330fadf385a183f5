"""What every harness file becomes: one run of per-item scores, whatever wrote it.

A ``HarnessRun`` holds the items (id, score 0..1, truncated, output tokens), the tasks, what the score is,
the model and generation settings the file says were sent, and a digest of the bytes read. The readers
(console/quality/lmeval.py, console/quality/inspect_log.py) use the standard library only, so importing
needs neither harness installed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from console.errors import InputError
from console.files import MiB, check_regular, read_regular
from console.store.quality import QualityItem

MAX_FILE_BYTES = 1024 * MiB
"""The largest harness file read (an Inspect log of a long run is hundreds of MiB); anything larger, a FIFO
or a device is refused before a byte is read (console/files.py)."""
WHAT = "harness file"
TOO_BIG = "give one run's lm-eval results or samples file, or its Inspect log (none is this large)"


class HarnessFileError(InputError, ValueError):
    """A harness file that cannot be read as a run; the message names the file and what is wrong."""


@dataclass(frozen=True)
class HarnessRun:
    harness: str  # lm-eval or inspect
    harness_version: str | None
    tasks: tuple[str, ...]
    metric: str  # what an item's score is
    model: str | None  # the model name the harness sent requests for
    t_ms: int | None  # when it ran, by the harness's own record
    sampling: Mapping[str, Any]  # generation settings as the file records them (no credentials)
    thinking: str | None
    items: tuple[QualityItem, ...]
    unscored: int  # items listed without a score (errors, cancelled)
    files: tuple[str, ...]
    digest: str


def check_file(path: Path) -> None:
    """Refuse ``path`` unless it is a regular file within ``MAX_FILE_BYTES`` (nothing is opened)."""
    check_regular(path, WHAT, MAX_FILE_BYTES, HarnessFileError, TOO_BIG)


def read_file(path: Path) -> bytes:
    """The bytes of the harness file ``path``: a regular file within ``MAX_FILE_BYTES``, read once."""
    return read_regular(path, WHAT, MAX_FILE_BYTES, HarnessFileError, TOO_BIG)


def text(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HarnessFileError(
            f"{path}: not UTF-8 text ({exc})",
            "give an lm-eval or Inspect output file as the harness wrote it",
        ) from exc


def load_json(path: Path, data: bytes | None = None) -> Any:
    """The JSON in ``path`` (``data``: its bytes, already read with ``read_file``)."""
    raw = text(path, read_file(path) if data is None else data)
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise HarnessFileError(
            f"{path}: not JSON ({exc.msg} at line {exc.lineno})",
            "give an lm-eval results_*.json or samples_*.jsonl, or an Inspect .eval/.json log",
        ) from exc


def digest(parts: Iterable[tuple[str, bytes]]) -> str:
    """sha256 over (name, bytes) pairs in name order: the same files give the same digest."""
    h = hashlib.sha256()
    for name, data in sorted(parts):
        h.update(name.encode() + b"\0" + data + b"\0")
    return h.hexdigest()


def unit_score(value: Any, where: str) -> float:
    """A score as a number in 0..1; anything else is refused with where it was found."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float) and 0.0 <= float(value) <= 1.0:
        return float(value)
    raise HarnessFileError(
        f"{where}: score {value!r} is not a number from 0 to 1",
        "pick a 0..1 metric with --metric (accuracy-like: exact_match, acc, a correct/incorrect scorer)",
    )
