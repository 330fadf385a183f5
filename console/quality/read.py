"""Which harness wrote a file: lm-evaluation-harness output or an Inspect AI eval log."""

from __future__ import annotations

from pathlib import Path

from console.quality.harness import HarnessFileError, HarnessRun, check_file, load_json, read_file
from console.quality.inspect_log import read_inspect
from console.quality.lmeval import is_lm_eval, read_lm_eval


def read_harness_file(path: Path, metric: str | None = None) -> HarnessRun:
    """The run in ``path``: an lm-eval ``results_*.json``, ``samples_<task>_*.jsonl`` or the folder holding
    them, or an Inspect ``.eval``/``.json`` log. ``metric`` picks the score where a task logs several
    (lm-eval ``exact_match,strict-match``; an Inspect scorer name)."""
    if not path.exists():
        raise HarnessFileError(f"{path}: no such file or folder")
    if path.is_dir():
        return read_lm_eval(path, metric)
    check_file(path)  # a FIFO, a device or a huge file is refused here, before anything opens it
    if path.suffix == ".jsonl":
        return read_lm_eval(path, metric)
    data = read_file(path)
    if path.suffix != ".eval" and is_lm_eval(load_json(path, data)):
        return read_lm_eval(path, metric)
    return read_inspect(path, metric, data)
