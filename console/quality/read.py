"""Which harness wrote a file: lm-evaluation-harness output or an Inspect AI eval log."""

from __future__ import annotations

from pathlib import Path

from console.quality.harness import HarnessFileError, HarnessRun, load_json
from console.quality.inspect_log import read_inspect
from console.quality.lmeval import is_lm_eval, read_lm_eval


def read_harness_file(path: Path, metric: str | None = None) -> HarnessRun:
    """The run in ``path``: an lm-eval ``results_*.json``, ``samples_<task>_*.jsonl`` or the folder holding
    them, or an Inspect ``.eval``/``.json`` log. ``metric`` picks the score where a task logs several
    (lm-eval ``exact_match,strict-match``; an Inspect scorer name)."""
    if not path.exists():
        raise HarnessFileError(f"{path}: no such file or folder")
    if path.suffix == ".eval":
        return read_inspect(path, metric)
    if path.is_dir() or path.suffix == ".jsonl" or is_lm_eval(load_json(path)):
        return read_lm_eval(path, metric)
    return read_inspect(path, metric)
