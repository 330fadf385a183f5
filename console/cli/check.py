"""``campaign check NAME [--arm ARM] [--stored] [--json]``: preflight checks of one box.

``campaign check B1 B2 ... --arm ARM``: every box of an arm that spans them, each judged for its node.

Exit status: 0 when nothing failed (warnings are shown, not fatal), 1 when any check failed — scripts
and ``campaign launch`` rely on it — and 2 when the check itself could not run.
"""

from __future__ import annotations

import argparse
from collections import Counter
from typing import Any

from console.checks.run import CheckRun
from console.cli.common import print_json, print_table, run, say, service_for
from console.errors import InputError
from console.timeutil import fmt_utc


def _print_run(run: CheckRun) -> None:
    probe = run.probe
    when = fmt_utc(probe["t_ms"]) if isinstance(probe.get("t_ms"), int) else "unknown time"
    arm = f", arm {run.arm.name}" if run.arm else ""
    print(f"box {run.box}: probe {run.probe_id} taken {when} (box zone {probe.get('tz') or 'unknown'}){arm}")
    print_table(
        [{"check": v.check, "verdict": v.verdict.upper(), "reason": v.reason} for v in run.verdicts],
        ["check", "verdict", "reason"],
    )
    counts = Counter(v.verdict for v in run.verdicts)
    print(f"verdict: {run.verdict.upper()} ({counts['fail']} fail, {counts['warn']} warn, {counts['ok']} ok)")
    for w in probe.get("warnings") or []:
        print(f"  probe warning: {w}")


def _run(args: argparse.Namespace) -> int:
    if len(args.name) > 1:
        return _run_boxes(args)
    with service_for(args) as service:
        checked = run(
            service, lambda: service.check(args.name[0], args.arm, stored=args.stored, progress=say)
        )
    if args.json:
        print_json(checked.to_dict())
    else:
        _print_run(checked)
    return 1 if checked.verdict == "fail" else 0


def _run_boxes(args: argparse.Namespace) -> int:
    """Every box of a multi-box arm, each judged for its node (docs/multinode.md)."""
    if not args.arm:
        raise InputError(
            "several boxes are checked together for one arm that spans them",
            f"add --arm ARM, or check each box alone: campaign check {args.name[0]}",
        )
    with service_for(args) as service:
        runs = run(
            service,
            lambda: service.check_multinode(args.arm, args.name, stored=args.stored, progress=say),
        )
    if args.json:
        print_json([r.to_dict() for r in runs])
    else:
        for checked in runs:
            _print_run(checked)
    return 1 if any(r.verdict == "fail" for r in runs) else 0


def register(sub: argparse._SubParsersAction[Any], help_text: str) -> None:
    p = sub.add_parser("check", help=help_text, description=help_text + ". Exits 1 when any check fails.")
    p.add_argument(
        "name",
        nargs="+",
        help="the box (see `campaign box list`); several: every box of the --arm that spans them, head first",
    )
    p.add_argument("--arm", help="judge the box for this arm: its tensor parallelism, GPUs and weights")
    p.add_argument(
        "--stored",
        action="store_true",
        help="judge the newest stored probe instead of probing the box now (works offline)",
    )
    p.add_argument("--json", action="store_true", help="print the run as JSON")
    p.set_defaults(func=_run)
