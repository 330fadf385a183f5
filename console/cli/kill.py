"""``campaign kill LAUNCH|ARM --box NAME [--yes]``: stop a launch, or every live launch of an arm, on a box.

It names what it will kill (launch, arm, box) and asks first unless ``--yes``.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from console.cli.common import CliError, confirm, open_store
from console.cli.remote import reaching
from console.service import Service, ServiceError
from console.store import NoSuchBox


async def _kill(service: Service, ids: list[str], box: str, grace_s: float) -> dict[str, Any]:
    try:
        return await service.kill(ids, box, grace_s)
    finally:
        await service.close()


def _run(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        service = Service(store)
        try:
            store.boxes.get(args.box)
            ids = service.kill_targets(args.target, args.box)
        except (NoSuchBox, ServiceError) as exc:
            raise CliError(str(exc)) from exc
        launches = [launch for launch in map(store.launches.get, ids) if launch is not None]
        names = ", ".join(f"{launch['id']} (arm {launch['arm']})" for launch in launches)
        if not confirm(f"kill {names} on box {args.box}?", args.yes):
            print("nothing killed")
            return 1
        with reaching(args.box):
            results = asyncio.run(_kill(service, ids, args.box, args.grace))
    for launch_id, result in results.items():
        print(f"{launch_id}: {result.get('state', 'kill sent')}")
    return 0


def register(sub: argparse._SubParsersAction, help_text: str) -> None:
    p = sub.add_parser("kill", help=help_text, description=help_text)
    p.add_argument("target", metavar="LAUNCH|ARM")
    p.add_argument("--box", required=True, metavar="NAME")
    p.add_argument("--grace", type=float, default=30.0, metavar="SECONDS",
                   help="SIGTERM, then SIGKILL after this long")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p.set_defaults(func=_run)
