"""``campaign compare A B [--shape S -c C] [--box B] [--json]``: is A faster than B, or is it a tie?

A and B are bench rows (id or run id), repeat groups (``group-...``) or arms (their newest group at the
shape and concurrency). The answer reads the difference of the medians against both measured spreads
and, when a control pair (the same arm launched twice, benched alike) exists, its noise floor. A side
with one run has no spread: no verdict (exit 1). Only reads the store.
"""

from __future__ import annotations

import argparse
from typing import Any

from console.cli.common import concurrency_arg, open_store, print_json
from console.readmodel import compare


def _run(args: argparse.Namespace) -> int:
    with open_store(args, read_only=True) as store:
        result = compare(store, args.a, args.b, args.shape, args.concurrency, args.box)
    if args.json:
        floor = result.floor
        print_json(
            {
                "verdict": result.verdict,
                "percent": result.percent,
                "winner": result.winner,
                "text": result.text,
                "a": result.a.summary(),
                "b": result.b.summary(),
                "noise_floor": None
                if floor is None
                else {"floor": floor.floor, "pair": [floor.a.summary(), floor.b.summary()]},
            }
        )
    else:
        for name, side in (("A", result.a), ("B", result.b)):
            print(f"{name}: {side.label}: {side.spread_text}  {side.marks}".rstrip())
        print(result.text)
    return 1 if result.verdict == "no-verdict" else 0


def register(sub: argparse._SubParsersAction[Any], help_text: str) -> None:
    p = sub.add_parser(
        "compare", help=help_text, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("a", metavar="A", help="a bench row id or run id, a repeat group id, or an arm")
    p.add_argument("b", metavar="B", help="the same kinds as A")
    p.add_argument("--shape", help="the shape an arm's group is taken at")
    p.add_argument(
        "--concurrency",
        "-c",
        type=concurrency_arg,
        metavar="C",
        help="the concurrency an arm's group is taken at",
    )
    p.add_argument("--box", metavar="NAME", help="only an arm's rows on this box")
    p.add_argument("--json", action="store_true", help="the verdict and both groups as JSON on stdout")
    p.set_defaults(func=_run)
