"""``campaign check NAME [--arm ARM] [--stored] [--json]``: preflight checks of one box.

Exit status: 0 when nothing failed (warnings are shown, not fatal), 1 when any check failed — scripts
and ``campaign launch`` rely on it — and 2 when the check itself could not run.
"""

from __future__ import annotations

import argparse
from collections import Counter
from typing import Any

from console.checks.run import CheckRun
from console.cli.common import print_json, print_table, run, say, service_for
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
    with service_for(args) as service:
        checked = run(service, lambda: service.check(args.name, args.arm, stored=args.stored, progress=say))
    if args.json:
        print_json(checked.to_dict())
    else:
        _print_run(checked)
    return 1 if checked.verdict == "fail" else 0


def register(sub: argparse._SubParsersAction[Any], help_text: str) -> None:
    p = sub.add_parser("check", help=help_text, description=help_text + ". Exits 1 when any check fails.")
    p.add_argument("name", help="the box (see `campaign box list`)")
    p.add_argument("--arm", help="judge the box for this arm: its tensor parallelism, GPUs and weights")
    p.add_argument(
        "--stored",
        action="store_true",
        help="judge the newest stored probe instead of probing the box now (works offline)",
    )
    p.add_argument("--json", action="store_true", help="print the run as JSON")
    p.set_defaults(func=_run)
