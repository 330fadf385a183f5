"""The demo campaign's seed data as tests break it: a writable copy of what `campaign demo` reads
(ops/data/seed/). The demo's state.db itself is the ``demo`` fixture (tests/conftest.py)."""

from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path

from console.readmodel import quality_runs
from console.readmodel.records import QualityRun
from console.store import Store
from ops.demo import SEED_DIR


def copy_seed(tmp_path: Path) -> Path:
    """A writable copy of the shipped seed data under ``tmp_path``, to break on purpose."""
    with resources.as_file(SEED_DIR) as seed:
        return Path(shutil.copytree(seed, tmp_path / "seed"))


def runs_by_label(db: Path) -> dict[str, QualityRun]:
    """The quality runs of a state.db by label: the demo's published runs are named by the write-up's labels."""
    return {r.label: r for r in quality_runs(Store(db))}
