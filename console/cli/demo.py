"""``campaign demo [--force]``: build a state.db from the seed campaign's published figures.

The figures come from ops/data/seed/ and are marked ``imported`` with their provenance. Running it twice
changes nothing; a database holding measured results is refused unless ``--force``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from console.cli.common import open_store
from console.readmodel import imported_counts
from ops.demo import build_demo

BAR_WIDTH = 30


def _progress(step: str, done: int, total: int) -> None:
    filled = BAR_WIDTH * done // total
    end = "\n" if done == total else ""
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {done}/{total} {step:<40}{end}")
    sys.stderr.flush()


def _run(args: argparse.Namespace) -> int:
    with open_store(args, seed=False) as store:
        outcome = build_demo(store, force=args.force, progress=_progress)
        counts = imported_counts(store)
        path = store.path
    verb = {"imported": "imported", "replaced": "re-imported (data changed)", "unchanged": "already present"}
    print(f"demo campaign {verb[outcome.state]} in {path}: {counts.bench_runs} throughput rows, "
          f"{counts.tripwire_runs} tripwire verdicts, {counts.eval_runs} task-accuracy rows, {counts.kldiff_runs} "
          "logit-level divergence rows")  # fmt: skip
    return 0


def register(sub: argparse._SubParsersAction[Any], help_text: str) -> None:
    p = sub.add_parser("demo", help=help_text, description=__doc__)
    p.add_argument("--force", action="store_true", help="import even into a database with measured results")
    p.set_defaults(func=_run)
