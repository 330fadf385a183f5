"""``campaign demo [--force]``: build a state.db from the campaign write-up's published figures.

The figures come from ops/data/seed/ and are marked ``imported`` with their provenance. Running it twice
changes nothing; a database holding measured results is refused unless ``--force``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from console.cli.common import open_store
from console.progress import ProgressLine, bar
from console.readmodel import database_path, imported_counts
from ops.demo import build_demo

BAR_WIDTH = 30


def _progress(line: ProgressLine) -> Callable[[str, int, int], None]:
    """The import's steps as one progress line (console/progress.py draws it)."""

    def step(what: str, done: int, total: int) -> None:
        line.step(f"{bar(done / max(1, total), BAR_WIDTH)} {done}/{total} {what}", now=done == total)

    return step


def _run(args: argparse.Namespace) -> int:
    line = ProgressLine()
    with open_store(args, seed=False) as store:
        try:
            outcome = build_demo(store, force=args.force, progress=_progress(line))
        finally:
            line.end()
        counts = imported_counts(store)
        path = database_path(store)
    verb = {"imported": "imported", "replaced": "re-imported (data changed)", "unchanged": "already present"}
    print(
        f"demo campaign {verb[outcome.state]} in {path}: {counts.bench_runs} throughput rows, "
        f"{counts.tripwire_runs} tripwire verdicts, {counts.eval_runs} task-accuracy rows, {counts.kldiff_runs} "
        "logit-level divergence rows"
    )
    return 0


def register(sub: argparse._SubParsersAction[Any], help_text: str) -> None:
    p = sub.add_parser("demo", help=help_text, description=__doc__)
    p.add_argument("--force", action="store_true", help="import even into a database with measured results")
    p.set_defaults(func=_run)
