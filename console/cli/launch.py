"""``campaign launch ARM --box NAME [--gpus 0,1] [--force] [--no-wait]``: lint-gated launch of an arm.

By default it waits, with progress on stderr, until every replica serves or fails: a launch is not "ok"
because the agent accepted it. Exit status: 0 every replica serves (or, with ``--no-wait``, the agent
accepted them), 1 refused (lint error, failed check without --force, the agent said no) or a replica failed
(the engine's own reason is printed), 2 bad input, 3 the box could not be reached.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from console.bounds import GPU_INDEX
from console.cli.common import csv_values, print_json, print_table, run, say, service_for, wait_s_arg
from console.errors import InputError
from console.progress import ProgressLine
from console.service import (
    DEFAULT_READY_TIMEOUT_S,
    Launch,
    LaunchOutcome,
    LaunchPlan,
    MultiNodeLaunchPlan,
    MultiNodeOutcome,
    Service,
)

T = TypeVar("T")


def parse_gpus(text: str | None) -> list[int] | None:
    """``--gpus 0,1``: distinct GPU indexes, each in ``GPU_INDEX``'s range; None when not given."""
    gpus = csv_values(text, "gpus", GPU_INDEX.parse)
    if gpus is not None and len(set(gpus)) != len(gpus):
        raise InputError(f"--gpus {text!r}: give distinct GPU indexes, e.g. 0,1")
    return gpus


def _show_plan(plan: LaunchPlan) -> None:
    r = plan.resolved
    say(
        f"arm {r.arm} on box {plan.box}: {r.model} as {r.served_model_name}, TP{r.tensor_parallel}, "
        f"{len(r.replicas)} replica(s)"
    )
    for rep in r.replicas:
        say(f"  replica {rep.index}: GPUs {','.join(map(str, rep.gpus)) or '-'}, port {rep.port}")
    for f in plan.findings:
        say(f"  {f.severity.upper()} [{f.rule_id}] {f.reason}" + (f" ({f.where()})" if f.where() else ""))
    for failed in plan.failed_checks:
        say(f"  FAILED CHECK {failed}")


class Progress:
    """One line on stderr while replicas start: how many serve, how many are still starting."""

    def __init__(self, line: ProgressLine | None = None) -> None:
        self.line = line or ProgressLine()
        self.started = time.monotonic()

    def __call__(self, replicas: list[Launch]) -> None:
        states = ", ".join(f"{x.id.rsplit('.', 1)[-1]} {x.state}" for x in replicas)
        self.line.step(f"{time.monotonic() - self.started:5.0f} s  {states}"[:200])

    def done(self) -> None:
        self.line.end()


def _record(outcome: LaunchOutcome) -> dict[str, Any]:
    return {
        "arm": outcome.arm,
        "box": outcome.box,
        "forced": outcome.forced,
        "waited": outcome.waited,
        "serving": outcome.serving,
        "launch_ids": outcome.launch_ids,
        "replicas": [
            {
                "launch_id": x.id,
                "replica": x.replica,
                "state": x.state,
                "port": x.port,
                "gpus": list(x.gpus),
                "reason": x.failure_reason,
                "backends_accepted": None if x.backends_accepted is None else list(x.backends_accepted),
            }
            for x in outcome.replicas
        ],
    }


def _show_multinode(mplan: MultiNodeLaunchPlan) -> None:
    p = mplan.plan
    say(f"arm {p.arm} over boxes {', '.join(p.boxes)}: {p.model} as {p.served_model_name}, {p.mode}")
    for process in p.processes:
        say(f"  {process.role} on {process.box}: GPUs {','.join(map(str, process.gpus)) or '-'}")
    for f in mplan.findings:
        say(f"  {f.severity.upper()} [{f.rule_id}] {f.reason}" + (f" ({f.where()})" if f.where() else ""))
    for box, failed in mplan.failed_checks.items():
        say(f"  FAILED CHECK {box}: {'; '.join(failed)}")


def _launching(
    service: Service, start: Callable[..., Awaitable[T]], plan: Any, args: argparse.Namespace
) -> T:
    """``start(plan)`` (a one-box or a multi-box launch) with the operator's options, its progress on stderr."""
    progress = Progress()
    try:
        return run(
            service,
            lambda: start(
                plan,
                force=args.force,
                ready_timeout_s=args.ready_timeout,
                wait=not args.no_wait,
                progress=progress,
            ),
        )
    finally:
        progress.done()


def _run_multinode(args: argparse.Namespace) -> int:
    """A multi-box arm: every process through its box's agent, stopped together if one fails."""
    if args.gpus:
        raise InputError("--gpus lays out one box; a multi-box arm's plan takes each node's cards")
    with service_for(args) as service:
        mplan = service.plan_multinode(args.arm, args.box)
        _show_multinode(mplan)
        outcome: MultiNodeOutcome = _launching(service, service.launch_multinode, mplan, args)
    rows = [
        {
            "launch": x.id,
            "box": x.box,
            "role": p.role,
            "state": x.state,
            "port": x.port,
            "gpus": ",".join(map(str, x.gpus)) or "-",
            "reason": x.failure_reason or "",
        }
        for p, x in zip(outcome.processes, outcome.launches, strict=False)
    ]
    if args.json:
        print_json(
            {"arm": outcome.arm, "serving": outcome.serving, "stopped": outcome.stopped, "processes": rows}
        )
    else:
        print_table(rows, ["launch", "box", "role", "state", "port", "gpus", "reason"])
    if outcome.stopped:
        say(outcome.stopped)
        return 1
    if outcome.waited and not outcome.serving:
        say(f"not serving after {args.ready_timeout:.0f} s")
        return 1
    say("serving" if outcome.waited else "accepted by the agents")
    return 0


def _run(args: argparse.Namespace) -> int:
    if len(args.box) > 1:
        return _run_multinode(args)
    args.box = args.box[0]
    gpus = parse_gpus(args.gpus)
    with service_for(args) as service:
        plan = service.plan_launch(args.arm, args.box, gpus)
        _show_plan(plan)
        outcome = _launching(service, service.launch, plan, args)
    failed = outcome.failed
    if args.json:
        print_json(_record(outcome))
    else:
        forced = " (FORCED past a failed check; recorded)" if outcome.forced else ""
        print_table(
            [
                {
                    "launch": x.id,
                    "state": x.state,
                    "port": x.port,
                    "gpus": ",".join(map(str, x.gpus)) or "-",
                    "reason": x.failure_reason or "",
                }
                for x in outcome.replicas
            ],
            ["launch", "state", "port", "gpus", "reason"],
        )
        if not outcome.waited:
            say(f"accepted by the agent{forced}; `campaign box connect {args.box}` follows it")
        elif outcome.serving:
            say(f"serving{forced}")
    if failed:
        for x in failed:
            accepted = (
                f" (the engine accepts: {', '.join(x.backends_accepted)})" if x.backends_accepted else ""
            )
            say(f"{x.id} failed: {x.failure_reason or x.state}{accepted}")
        return 1
    if outcome.waited and not outcome.serving:
        say(f"not serving after {args.ready_timeout:.0f} s: {', '.join(x.id for x in outcome.replicas)}")
        return 1
    return 0


def register(sub: argparse._SubParsersAction[Any], help_text: str) -> None:
    p = sub.add_parser("launch", help=help_text, description=help_text)
    p.add_argument("arm")
    p.add_argument(
        "--box",
        required=True,
        metavar="NAME",
        action="append",
        help="the box; repeat it for an arm that spans several boxes, the head first (docs/multinode.md)",
    )
    p.add_argument("--gpus", metavar="0,1", help="GPU indexes to use (default: what the arm's layout needs)")
    p.add_argument(
        "--force",
        action="store_true",
        help="launch although the box's last check failed (recorded with the launch)",
    )
    p.add_argument(
        "--no-wait",
        action="store_true",
        help="return once the agent accepted the launch, without waiting for the server to serve",
    )
    p.add_argument(
        "--ready-timeout",
        type=wait_s_arg,
        default=DEFAULT_READY_TIMEOUT_S,
        metavar="SECONDS",
        help="the agent fails the launch if the server is not ready by then",
    )
    p.add_argument(
        "--json", action="store_true", help="print the outcome as JSON (and nothing else) on stdout"
    )
    p.set_defaults(func=_run)
