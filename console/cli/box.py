"""``campaign box add|list|rm``: the inventory of boxes the console drives."""

from __future__ import annotations

import argparse
import asyncio
import re
import signal
from dataclasses import asdict
from pathlib import Path
from typing import Any

from console.cli.common import CliError, confirm, open_store, print_json, print_table
from console.cli.remote import describe
from console.fleet import AgentError, HostKeyProblem, JournalMismatch
from console.fleet.link import LINK_ERRORS, Detached
from console.fleet.progress import IngestProgress
from console.service import Service, ServiceError
from console.store import LOCAL_BOX, Box, BoxExists, NoSuchBox, Store, StoreFull
from console.store.ingest import IngestError

_TARGET = re.compile(r"^(?P<user>[A-Za-z0-9._-]+)@(?P<host>\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+)(?::(?P<port>\d{1,5}))?$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


def parse_target(text: str) -> tuple[str, str, int]:
    """``USER@HOST[:PORT]`` into its parts; anything else is refused with the expected form."""
    m = _TARGET.match(text)
    if not m:
        raise CliError(f"--ssh {text!r}: expected USER@HOST[:PORT], e.g. root@203.0.113.7:22022")
    port = int(m["port"] or 22)
    if not 0 < port < 65536:
        raise CliError(f"--ssh {text!r}: port {port} is out of range 1-65535")
    return m["user"], m["host"].strip("[]"), port


def _add(args: argparse.Namespace) -> int:
    if not _NAME.match(args.name):
        raise CliError(f"box name {args.name!r}: use letters, digits, '.', '_' or '-' (max 63)")
    user, host, port = parse_target(args.ssh)
    if args.key and not Path(args.key).expanduser().is_file():
        raise CliError(f"--key {args.key}: no such file")
    if args.provider and not args.instance:
        raise CliError(f"--provider {args.provider} needs --instance ID (the provider's instance id)")
    if args.price_per_hour is not None and args.price_per_hour < 0:
        raise CliError("--price-per-hour must be zero or more")
    box = Box(
        name=args.name,
        ssh_user=user,
        host=host,
        port=port,
        key_path=str(Path(args.key).expanduser().resolve()) if args.key else None,
        provider=args.provider,
        instance_id=args.instance,
        price_per_hour=args.price_per_hour,
        serving_env=args.serving_env,
        model_root=args.model_root,
        agent_home=args.agent_home,
    )
    with open_store(args) as store:
        try:
            store.boxes.add(box)
        except BoxExists as exc:
            raise CliError(str(exc)) from exc
    print(f"added box {box.name} ({box.ssh_target})")
    return 0


def _quarantined(n: int) -> str:
    """How a box's quarantined events are shown beside its status (the rows are in ``quarantine``)."""
    return f"{n} event{'s' if n != 1 else ''} quarantined" if n else ""


def _list(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        boxes = store.boxes.every()
        quarantined = store.ingest.quarantined()
    if args.json:
        print_json([asdict(b) | {"quarantined": quarantined.get(b.name, 0)} for b in boxes])
        return 0
    rows = [
        {
            "name": b.name,
            "target": b.ssh_target,
            "status": ", ".join(filter(None, (b.status, _quarantined(quarantined.get(b.name, 0))))),
            "gpus": b.gpu_summary,
            "price/h": f"{b.price_per_hour:.2f}" if b.price_per_hour is not None else None,
            "provider": ":".join(filter(None, (b.provider, b.instance_id))) or None,
        }
        for b in boxes
    ]
    print_table(rows, ["name", "target", "status", "gpus", "price/h", "provider"])
    return 0


def _rm(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        try:
            box = store.boxes.get(args.name)
        except NoSuchBox as exc:
            raise CliError(str(exc)) from exc
        where = box.ssh_target or "no SSH address"
        if not confirm(f"remove box {box.name} ({where}) and its journal from the store?", args.yes):
            print("not removed")
            return 1
        store.boxes.remove(args.name)
    print(f"removed box {args.name}")
    return 0


async def _connect_async(store: Store, name: str, follow: bool) -> int:
    service = Service(store)
    link = service.fleet.link(name)
    progress = IngestProgress(link)
    link.on_ingest = progress
    try:
        if not follow:
            done = await service.connect(name)
            bad = _quarantined(store.ingest.quarantined(name).get(name, 0))
            print(f"{name}: {done}" + (f"; {bad} (see the quarantine table)" if bad else ""))
            return 0
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        service.fleet.start(name)
        while not stop.is_set() and link.fatal is None:
            try:
                await asyncio.wait_for(stop.wait(), 1.0)
            except TimeoutError:
                pass
        if link.fatal is not None:
            raise link.fatal
        return 0
    finally:
        progress.done()
        await service.close()


def _connect(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        try:
            if args.name != LOCAL_BOX:
                store.boxes.get(args.name)
            return asyncio.run(_connect_async(store, args.name, args.follow))
        except (NoSuchBox, HostKeyProblem, JournalMismatch, IngestError, ServiceError, AgentError, Detached,
                StoreFull) as exc:
            raise CliError(str(exc)) from exc
        except LINK_ERRORS as exc:
            status = store.boxes.get(args.name)
            raise CliError(f"box {args.name}: {describe(exc)} (status {status.status})", 3) from exc


def _detach(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        service = Service(store)
        try:
            store.boxes.get(args.name)
            result = asyncio.run(_detach_async(service, args.name))
        except (NoSuchBox, HostKeyProblem, JournalMismatch, IngestError, ServiceError, AgentError, StoreFull) as exc:
            raise CliError(str(exc)) from exc
        except LINK_ERRORS as exc:
            raise CliError(f"box {args.name}: {describe(exc)}", 3) from exc
    if result.get("detached"):
        print(f"{args.name}: detached; the box no longer keeps events for this campaign "
              f"(`campaign box connect {args.name}` attaches it again)")
    else:
        print(f"{args.name}: this campaign was not attached to the box's journal; nothing changed")
    return 0


async def _detach_async(service: Service, name: str) -> dict[str, Any]:
    try:
        return await service.detach(name)
    finally:
        await service.close()


def _trust(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        service = Service(store)
        try:
            box = store.boxes.get(args.name)
            line, fp = asyncio.run(service.presented_key(args.name))
        except (NoSuchBox, ServiceError) as exc:
            raise CliError(str(exc)) from exc
        except LINK_ERRORS as exc:
            raise CliError(f"box {args.name}: cannot read its host key: {describe(exc)}", 3) from exc
        print(f"box {box.name} ({box.ssh_target}) presents {line.split()[0]} {fp}")
        if box.host_key == line and box.host_key_source in ("tofu", "known_hosts"):
            print("this key is already trusted")
            return 0
        if not confirm(f"trust {fp} for box {box.name}? compare it with the provider's console first", args.yes):
            print("not trusted")
            return 1
        try:
            service.trust(args.name, line, replace=args.replace)
        except HostKeyProblem as exc:
            raise CliError(str(exc)) from exc
    print(f"trusted {fp} for box {args.name}")
    return 0


def _placement_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--serving-env", metavar="DIR", help="prefix of the serving environment on the box (its bin/ has vllm)")
    p.add_argument("--model-root", metavar="DIR", help="directory of local checkpoints on the box")
    p.add_argument("--agent-home", metavar="DIR", help="the agent's directory on the box (default ~/.campaign-agent)")


def _set(args: argparse.Namespace) -> int:
    names = ("price_per_hour", "serving_env", "model_root", "agent_home")
    values = {n: getattr(args, n) for n in names if getattr(args, n) is not None}
    if not values:
        raise CliError("nothing to set: give --price-per-hour, --serving-env, --model-root or --agent-home")
    if values.get("price_per_hour", 0) < 0:
        raise CliError("--price-per-hour must be zero or more")
    with open_store(args) as store:
        if args.name == LOCAL_BOX:
            store.boxes.ensure_local()
        try:
            store.boxes.update(args.name, **values)
        except NoSuchBox as exc:
            raise CliError(str(exc)) from exc
    print(f"box {args.name}: " + ", ".join(f"{k.replace('_', '-')} = {v}" for k, v in values.items()))
    return 0


def register(sub: argparse._SubParsersAction, help_text: str) -> None:
    p = sub.add_parser("box", help=help_text, description=help_text)
    boxsub = p.add_subparsers(dest="box_command", metavar="ACTION", required=True)

    add = boxsub.add_parser("add", help="add a box reached over SSH")
    add.add_argument("name")
    add.add_argument("--ssh", required=True, metavar="USER@HOST[:PORT]")
    add.add_argument("--key", metavar="PATH", help="private key file (the path is stored, never the key)")
    add.add_argument("--provider", choices=["vast", "manual"], help="who rents the box out")
    add.add_argument("--instance", metavar="ID", help="the provider's instance id")
    add.add_argument("--price-per-hour", type=float, metavar="USD")
    _placement_options(add)
    add.set_defaults(func=_add)

    setp = boxsub.add_parser("set", help="change where a box keeps things, or its price (the local box too)")
    setp.add_argument("name")
    setp.add_argument("--price-per-hour", type=float, metavar="USD")
    _placement_options(setp)
    setp.set_defaults(func=_set)

    ls = boxsub.add_parser("list", help="list boxes")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=_list)

    rm = boxsub.add_parser("rm", help="remove a box from the store")
    rm.add_argument("name")
    rm.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    rm.set_defaults(func=_rm)

    conn = boxsub.add_parser("connect", help="connect, push/restart the agent if needed, ingest its journal")
    conn.add_argument("name")
    conn.add_argument("--follow", action="store_true",
                      help="keep ingesting and reconnecting until interrupted (Ctrl-C / SIGTERM)")
    conn.set_defaults(func=_connect)

    detach = boxsub.add_parser("detach", help="ingest what is pending, then stop the box keeping events for this "
                               "campaign (other campaigns on the box keep theirs)")
    detach.add_argument("name")
    detach.set_defaults(func=_detach)

    trust = boxsub.add_parser("trust", help="show the box's host key and trust it (first use)")
    trust.add_argument("name")
    trust.add_argument("--replace", action="store_true",
                       help="replace a different, previously trusted key (after checking it out of band)")
    trust.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    trust.set_defaults(func=_trust)
