"""``campaign curves [ID] [--json]``: the curves in state.db, offline: a line each, or one curve in full.

Why its own command: ``campaign curve`` measures (it needs the arm's launch on a box); reading what was
measured needs neither, so a colleague's state.db or a finished campaign reads here, each point valid or
invalid with its reasons (``readmodel.curve_validity``), as the Curves view shows it.
"""

from __future__ import annotations

import argparse
from typing import Any

from console import bounds
from console.cli.common import Column, argument, open_store, print_json, print_table
from console.cli.curve import show
from console.readmodel import CURVE_DEFINITIONS, curve, curves

COLUMNS = [
    Column("id", "ID", right=True),
    Column("arm", "ARM"),
    Column("box", "BOX"),
    Column("shape", "SHAPE"),
    Column("points", "POINTS"),
    Column("done", "STORED", right=True),
    Column("invalid", "INVALID", right=True),
    Column("state", "STATE"),
]


def _run(args: argparse.Namespace) -> int:
    with open_store(args, read_only=True) as store:
        views = [curve(store, args.id)] if args.id is not None else curves(store)
    if args.json:
        print_json(
            {
                "curves": [{**v.summary(), "points": [p.summary() for p in v.points]} for v in views],
                "definitions": CURVE_DEFINITIONS,
            }
        )
        return 0
    if args.id is not None:
        show(views[0], None)
        return 0
    if not views:
        print(
            "no curve in this state.db: `campaign curve ARM --box NAME --shape SHAPE --ladder 1:64:x2` measures one"
        )
        return 0
    rows = [
        {
            "id": v.id,
            "arm": v.arm,
            "box": v.box,
            "shape": v.shape,
            "points": ",".join(f"C{p.concurrency}" for p in v.points),
            "done": f"{v.done}/{len(v.points)}",
            "invalid": sum(1 for p in v.points if p.validity is not None and not p.validity.valid),
            "state": v.state,
        }
        for v in views
    ]
    print_table(rows, COLUMNS)
    return 0


def register(sub: argparse._SubParsersAction[Any], help_text: str) -> None:
    p = sub.add_parser(
        "curves", help=help_text, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "id", nargs="?", type=argument(bounds.ROW_ID.parse), metavar="ID", help="one curve in full"
    )
    p.add_argument("--json", action="store_true", help="every curve (or curve ID) with its points, as JSON")
    p.set_defaults(func=_run)
