"""``campaign report [-o RESUME.md]``: the markdown handover of the campaign (like the write-up's RESUME)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from console.cli.common import open_store, utilisation_arg
from console.economics import COST_BASES, DEFAULT_UTILISATION, check_utilisation
from console.readmodel import now_ms
from console.report import build_report
from ops.export import write_atomic


def _run(args: argparse.Namespace) -> int:
    utilisation = check_utilisation(args.utilisation)
    with open_store(args, read_only=True) as store:
        text = build_report(
            store, now_ms=now_ms(store), operator_tz=args.tz, utilisation=utilisation, basis=args.basis
        )
    write_atomic(text, args.output)
    if args.output not in (None, "-"):
        print(f"wrote {args.output}", file=sys.stderr)
    return 0


def register(sub: argparse._SubParsersAction[Any], help_text: str) -> None:
    p = sub.add_parser("report", help=help_text, description=__doc__)
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE atomically (default: stdout)")
    p.add_argument(
        "--tz", metavar="ZONE", help="your zone for the timers' local times (default: this machine's)"
    )
    p.add_argument(
        "--utilisation",
        type=utilisation_arg,
        default=DEFAULT_UTILISATION,
        metavar="U",
        help="node utilisation for the frontier's costs, 0-1 (default 0.7)",
    )
    p.add_argument(
        "--basis",
        choices=COST_BASES,
        default="list",
        help="the cost basis of boxes bought on the cost model (default list: Scan list)",
    )
    p.set_defaults(func=_run)
