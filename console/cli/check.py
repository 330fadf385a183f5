"""``campaign check NAME [--arm ARM] [--stored] [--json]``: preflight checks of one box.

Exit status: 0 when nothing failed (warnings are shown, not fatal), 1 when any check failed — scripts
and ``campaign launch`` rely on it — and 2 when the check itself could not run.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter

from console.checks.run import CheckError, CheckRun, fleet_probe, local_probe, recipe_arm, run_check
from console.cli.common import CliError, open_store, print_json, print_table
from console.store import LOCAL_BOX, NoSuchBox
from console.timeutil import fmt_utc


def _print_run(run: CheckRun) -> None:
    probe = run.probe
    when = fmt_utc(probe["t_ms"]) if isinstance(probe.get("t_ms"), int) else "unknown time"
    arm = f", arm {run.arm.name}" if run.arm else ""
    print(f"box {run.box}: probe {run.probe_id} taken {when} (box zone {probe.get('tz') or 'unknown'}){arm}")
    print_table([{"check": v.check, "verdict": v.verdict.upper(), "reason": v.reason} for v in run.verdicts],
                ["check", "verdict", "reason"])
    counts = Counter(v.verdict for v in run.verdicts)
    print(f"verdict: {run.verdict.upper()} ({counts['fail']} fail, {counts['warn']} warn, {counts['ok']} ok)")
    for w in probe.get("warnings") or []:
        print(f"  probe warning: {w}")


def _run(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        try:
            # The machine the console runs on is always checkable, registered or not yet.
            box = store.boxes.ensure_local() if args.name == LOCAL_BOX else store.boxes.get(args.name)
        except NoSuchBox as exc:
            raise CliError(str(exc)) from exc
        resolver = None
        if args.arm:
            try:
                resolver = recipe_arm(args.arm)
            except ValueError as exc:  # RecipeError: file:line: what
                raise CliError(f"recipes: {exc}") from exc
        # The local box runs the agent's probe as a process (no daemon needed); others ask their agent.
        provider = None if args.stored else local_probe if box.is_local else fleet_probe(store)
        if provider is not None:
            print(f"probing box {box.name} ...", file=sys.stderr, flush=True)
        try:
            run = run_check(store, box.name, provider, resolver)
        except CheckError as exc:
            raise CliError(str(exc)) from exc
    if args.json:
        print_json(run.to_dict())
    else:
        _print_run(run)
    return 1 if run.verdict == "fail" else 0


def register(sub: argparse._SubParsersAction, help_text: str) -> None:
    p = sub.add_parser("check", help=help_text, description=help_text + ". Exits 1 when any check fails.")
    p.add_argument("name", help="the box (see `campaign box list`)")
    p.add_argument("--arm", help="judge the box for this arm: its tensor parallelism, GPUs and weights")
    p.add_argument("--stored", action="store_true",
                   help="judge the newest stored probe instead of probing the box now (works offline)")
    p.add_argument("--json", action="store_true", help="print the run as JSON")
    p.set_defaults(func=_run)
