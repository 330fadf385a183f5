"""``campaign launch ARM --box NAME [--gpus 0,1] [--force]``: lint-gated launch of an arm on a box.

Exit status: 0 launched, 1 refused (lint error, failed check without --force, the box's agent said no),
2 bad input, 3 the box could not be reached.
"""

from __future__ import annotations

import argparse
import asyncio

from console.cli.common import CliError, open_store, print_json, print_table
from console.cli.remote import reaching
from console.recipes import RecipeError, ResolveError
from console.service import DEFAULT_READY_TIMEOUT_S, LaunchPlan, Service
from console.store import NoSuchBox


def parse_gpus(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        gpus = [int(part) for part in text.split(",") if part.strip() != ""]
    except ValueError as exc:
        raise CliError(f"--gpus {text!r}: expected GPU indexes separated by commas, e.g. 0,1") from exc
    if not gpus or any(g < 0 for g in gpus) or len(set(gpus)) != len(gpus):
        raise CliError(f"--gpus {text!r}: give distinct non-negative GPU indexes, e.g. 0,1")
    return gpus


def _show(plan: LaunchPlan) -> None:
    r = plan.resolved
    print(f"arm {r.arm} on box {plan.box}: {r.model} as {r.served_model_name}, TP{r.tensor_parallel}, "
          f"{len(r.replicas)} replica(s)")  # fmt: skip
    print_table([{"replica": rep.index, "gpus": ",".join(map(str, rep.gpus)) or "-", "port": rep.port}
                 for rep in r.replicas], ["replica", "gpus", "port"])  # fmt: skip
    for f in plan.findings:
        print(f"  {f.severity.upper()} [{f.rule_id}] {f.reason}" + (f" ({f.where()})" if f.where() else ""))
    for failed in plan.failed_checks:
        print(f"  FAILED CHECK {failed}")


async def _launch(service: Service, plan: LaunchPlan, force: bool, ready_timeout_s: float) -> LaunchPlan:
    try:
        return await service.launch(plan, force=force, ready_timeout_s=ready_timeout_s)
    finally:
        await service.close()


def _run(args: argparse.Namespace) -> int:
    gpus = parse_gpus(args.gpus)
    with open_store(args) as store:
        service = Service(store)
        try:
            plan = service.plan_launch(args.arm, args.box, gpus)
        except (NoSuchBox, RecipeError, ResolveError) as exc:
            raise CliError(str(exc)) from exc
        _show(plan)
        with reaching(args.box):
            plan = asyncio.run(_launch(service, plan, args.force, args.ready_timeout))
        if args.json:
            print_json({"arm": plan.resolved.arm, "box": plan.box, "launch_ids": plan.launch_ids,
                        "forced": bool(args.force and plan.failed_checks)})  # fmt: skip
        else:
            forced = " (FORCED past a failed check; recorded)" if args.force and plan.failed_checks else ""
            print(f"launched {', '.join(plan.launch_ids)}{forced}; `campaign box connect {args.box}` follows it")
    return 0


def register(sub: argparse._SubParsersAction, help_text: str) -> None:
    p = sub.add_parser("launch", help=help_text, description=help_text)
    p.add_argument("arm")
    p.add_argument("--box", required=True, metavar="NAME")
    p.add_argument("--gpus", metavar="0,1", help="GPU indexes to use (default: what the arm's layout needs)")
    p.add_argument("--force", action="store_true",
                   help="launch although the box's last check failed (recorded with the launch)")
    p.add_argument("--ready-timeout", type=float, default=DEFAULT_READY_TIMEOUT_S, metavar="SECONDS",
                   help="the agent fails the launch if the server is not ready by then")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_run)
