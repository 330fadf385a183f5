"""``campaign kill LAUNCH|ARM --box NAME [--yes]``: stop a launch, or every live launch of an arm, on a box.

It names what it will kill (launch, arm, box) and asks first unless ``--yes``; then it waits until the box
confirms each server stopped and its GPU memory freed. An arm that spans several boxes is stopped on every
box, workers before its head (docs/multinode.md). Exit status: 0 all stopped and freed, 1 declined or
not confirmed, 2 bad input, 3 the box could not be reached.
"""

from __future__ import annotations

import argparse
from typing import Any

from console.cli.common import confirm, grace_s_arg, print_json, print_table, run, say, service_for
from console.service import released


def _run(args: argparse.Namespace) -> int:
    with service_for(args) as service:
        if service.spans_boxes(args.target):  # a multi-box arm: its processes on every box, as one arm
            live = service.multinode_live(args.target, args.box)
            names = ", ".join(f"{x.id} on {x.box}" for x in live)
            if not confirm(f"kill arm {args.target} ({names})?", args.yes):
                say("nothing killed")
                return 1
            stopped = run(service, lambda: service.kill_multinode(args.target, args.box, args.grace))
        else:
            plan = service.plan_kill(args.target, args.box)
            names = ", ".join(f"{x.id} (arm {x.arm})" for x in plan.launches)
            if not confirm(f"kill {names} on box {args.box}?", args.yes):
                say("nothing killed")
                return 1
            stopped = run(service, lambda: service.kill(plan, args.grace))
    rows = [
        {"launch": x.id, "state": x.state, "gpu_memory": "freed" if released(x) else "NOT confirmed free"}
        for x in stopped
    ]
    if args.json:
        print_json(rows)
    else:
        print_table(rows, ["launch", "state", "gpu_memory"])
    return 0 if all(released(x) for x in stopped) else 1


def register(sub: argparse._SubParsersAction[Any], help_text: str) -> None:
    p = sub.add_parser("kill", help=help_text, description=help_text)
    p.add_argument("target", metavar="LAUNCH|ARM")
    p.add_argument("--box", required=True, metavar="NAME")
    p.add_argument(
        "--grace",
        type=grace_s_arg,
        default=30.0,
        metavar="SECONDS",
        help="SIGTERM, then SIGKILL after this long",
    )
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p.add_argument(
        "--json", action="store_true", help="print the outcome as JSON (and nothing else) on stdout"
    )
    p.set_defaults(func=_run)
