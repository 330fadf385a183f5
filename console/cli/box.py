"""``campaign box add|set|list|rm|trust|connect``: the inventory of boxes the console drives, and their links."""

from __future__ import annotations

import argparse
import asyncio
import re
import signal
from dataclasses import asdict
from pathlib import Path
from typing import Any

from console.cli.common import (
    confirm,
    open_store,
    price_per_hour_arg,
    print_json,
    print_table,
    run,
    say,
    service_for,
    store_and_service,
)
from console.errors import InputError
from console.service import Box
from console.service.boxes import PRICE_BASES

_TARGET = re.compile(
    r"^(?P<user>[A-Za-z0-9._-]+)@(?P<host>\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+)(?::(?P<port>\d{1,5}))?$"
)


def parse_target(text: str) -> tuple[str, str, int]:
    """``USER@HOST[:PORT]`` into its parts; anything else is refused with the expected form."""
    m = _TARGET.match(text)
    if not m:
        raise InputError(f"--ssh {text!r}: expected USER@HOST[:PORT], e.g. root@203.0.113.7:22022")
    port = int(m["port"] or 22)
    if not 0 < port < 65536:
        raise InputError(f"--ssh {text!r}: port {port} is out of range 1-65535")
    return m["user"], m["host"].strip("[]"), port


def _add(args: argparse.Namespace) -> int:
    user, host, port = parse_target(args.ssh)
    box = Box(
        name=args.name,
        ssh_user=user,
        host=host,
        port=port,
        key_path=str(Path(args.key).expanduser().resolve()) if args.key else None,
        provider=args.provider,
        instance_id=args.instance,
        price_per_hour=args.price_per_hour,
        price_basis=args.price_basis,
        price_provenance=args.price_provenance,
        serving_env=args.serving_env,
        model_root=args.model_root,
        agent_home=args.agent_home,
    )
    with service_for(args) as service:
        service.add_box(box)
    print(f"added box {box.name} ({box.ssh_target})")
    return 0


def _list(args: argparse.Namespace) -> int:
    from console.readmodel import box_list, ingest_health
    from console.readmodel.records import IngestHealth

    with open_store(args) as store:
        boxes = box_list(store)
        health = ingest_health(store)
    if args.json:
        none = IngestHealth()
        print_json(
            [
                asdict(b)
                | {
                    "quarantined": health.get(b.name, none).quarantined,
                    "lost_events": health.get(b.name, none).lost,
                    "ingest": health.get(b.name, none).line,
                }
                for b in boxes
            ]
        )
        return 0
    rows = [
        {
            "name": b.name,
            "target": b.ssh_target,
            "status": ", ".join(filter(None, (b.status, health[b.name].line if b.name in health else ""))),
            "gpus": b.gpu_summary,
            "price/h": f"{b.price_per_hour:.2f}" if b.price_per_hour is not None else None,
            "provider": ":".join(filter(None, (b.provider, b.instance_id))) or None,
        }
        for b in boxes
    ]
    print_table(rows, ["name", "target", "status", "gpus", "price/h", "provider"])
    return 0


def _status(args: argparse.Namespace) -> int:
    from console.readmodel import box_status
    from console.timeutil import fmt_utc

    with open_store(args, seed=False) as store:
        status = box_status(store, args.name)
    row = status.fleet
    if args.json:
        print_json(asdict(status) | {"ingest_line": row.ingest.line})
        return 0
    timer = row.timer
    lines = [
        f"{row.name}: {row.status}" + (f" ({row.status_detail})" if row.status_detail else ""),
        f"  reached as {row.ssh_target or 'no SSH address'}; GPUs {row.gpu_summary or 'unknown'}; time zone {row.tz or '?'}",
        f"  journal committed to seq {status.committed_seq}"
        + (f"; last GPU sample {fmt_utc(row.last_sample_ms)}" if row.last_sample_ms else ""),
        f"  checks: {', '.join(f'{c.name} {c.word}' for c in row.checks) or 'never checked'}",
        f"  serving: {', '.join(row.serving) or 'nothing'}",
        f"  timer: {f'{timer.action} at {fmt_utc(timer.deadline_ms)} ({timer.state})' if timer else 'none armed'}",
        f"  ingest: {row.ingest.line or 'every journal row ingested'}",
    ]
    print("\n".join(lines))
    return 0


def _rm(args: argparse.Namespace) -> int:
    from console.readmodel import box_named

    with store_and_service(args) as (store, service):
        box = box_named(store, args.name)
        where = box.ssh_target or "no SSH address"
        if not confirm(f"remove box {box.name} ({where}) and its journal from the store?", args.yes):
            say("not removed")
            return 1
        service.remove_box(args.name)
    print(f"removed box {args.name}")
    return 0


def _connect(args: argparse.Namespace) -> int:
    from console.readmodel import ingest_health

    with store_and_service(args) as (store, service):
        progress = service.ingest_progress(args.name)

        async def follow() -> None:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, stop.set)
            await service.follow(args.name, stop, progress, on_notice=say)

        try:
            if args.follow:
                run(service, follow)
                return 0
            connected = run(service, lambda: service.connect(args.name, progress))
        finally:
            progress.done()
        health = ingest_health(store).get(args.name)
    print(
        f"{args.name}: {connected}"
        + (f"; {health.line} (see the quarantine and lost_events tables)" if health else "")
    )
    return 0


def _detach(args: argparse.Namespace) -> int:
    with service_for(args) as service:
        detached = run(service, lambda: service.detach(args.name))
    if detached:
        print(
            f"{args.name}: detached; the box no longer keeps events for this campaign "
            f"(`campaign box connect {args.name}` attaches it again)"
        )
    else:
        print(f"{args.name}: this campaign was not attached to the box's journal; nothing changed")
    return 0


def _trust(args: argparse.Namespace) -> int:
    from console.readmodel import box_named

    with store_and_service(args) as (store, service):
        box = box_named(store, args.name)
        key = run(service, lambda: service.presented_key(args.name))
        say(f"box {box.name} ({box.ssh_target}) presents {key.kind} {key.fingerprint}")
        if box.host_key == key.line and box.host_key_source in ("tofu", "known_hosts"):
            print("this key is already trusted")
            return 0
        question = f"trust {key.fingerprint} for box {box.name}? compare it with the provider's console first"
        if not confirm(question, args.yes):
            say("not trusted")
            return 1
        service.trust(args.name, key, replace=args.replace)
    print(f"trusted {key.fingerprint} for box {args.name}")
    return 0


def _price_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--price-per-hour", type=price_per_hour_arg, metavar="USD")
    p.add_argument(
        "--price-basis",
        choices=PRICE_BASES,
        help="what the price is: own (default: the month's price per hour, divided by utilisation), list (a box "
        "bought on the cost model, priced on the basis economics is asked for), vast_on_demand (rented by the hour)",
    )
    p.add_argument(
        "--price-source",
        dest="price_provenance",
        metavar="TEXT",
        help="where the price comes from, shown beside it (e.g. 'Scan list, Sept 2026')",
    )


def _placement_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--serving-env",
        metavar="DIR",
        help="prefix of the serving environment on the box (its bin/ has vllm)",
    )
    p.add_argument("--model-root", metavar="DIR", help="directory of local checkpoints on the box")
    p.add_argument(
        "--agent-home", metavar="DIR", help="the agent's directory on the box (default ~/.campaign-agent)"
    )


def _set(args: argparse.Namespace) -> int:
    from console.service.boxes import SETTABLE

    with service_for(args) as service:
        values = service.set_box(args.name, **{n: getattr(args, n) for n in SETTABLE})
    print(f"box {args.name}: " + ", ".join(f"{k.replace('_', '-')} = {v}" for k, v in values.items()))
    return 0


def _setup(args: argparse.Namespace) -> int:
    with service_for(args) as service:
        done = run(
            service,
            lambda: service.setup_box(
                args.name,
                env_dir=args.env_dir,
                index=args.index,
                lock_path=args.lock,
                dry_run=args.dry_run,
                progress=say,
            ),
        )
    if args.json:
        print_json(asdict(done))
        return 0
    print(done)
    for step in done.steps:
        print("  uv " + " ".join(step))
    return 0


def register(sub: argparse._SubParsersAction[Any], help_text: str) -> None:
    p = sub.add_parser("box", help=help_text, description=help_text)
    boxsub = p.add_subparsers(dest="box_command", metavar="ACTION", required=True)

    add = boxsub.add_parser("add", help="add a box reached over SSH")
    add.add_argument("name")
    add.add_argument("--ssh", required=True, metavar="USER@HOST[:PORT]")
    add.add_argument("--key", metavar="PATH", help="private key file (the path is stored, never the key)")
    add.add_argument("--provider", choices=["vast", "manual"], help="who rents the box out")
    add.add_argument("--instance", metavar="ID", help="the provider's instance id")
    _price_options(add)
    _placement_options(add)
    add.set_defaults(func=_add)

    setp = boxsub.add_parser("set", help="change where a box keeps things, or its price (the local box too)")
    setp.add_argument("name")
    _price_options(setp)
    _placement_options(setp)
    setp.set_defaults(func=_set)

    ls = boxsub.add_parser("list", help="list boxes")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=_list)

    st = boxsub.add_parser(
        "status", help="one box: status, checks, what serves, its timer, rows quarantined or lost"
    )
    st.add_argument("name")
    st.add_argument("--json", action="store_true")
    st.set_defaults(func=_status)

    rm = boxsub.add_parser("rm", help="remove a box from the store")
    rm.add_argument("name")
    rm.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    rm.set_defaults(func=_rm)

    conn = boxsub.add_parser("connect", help="connect, push/restart the agent if needed, ingest its journal")
    conn.add_argument("name")
    conn.add_argument(
        "--follow",
        action="store_true",
        help="keep ingesting and reconnecting until interrupted (Ctrl-C / SIGTERM)",
    )
    conn.set_defaults(func=_connect)

    detach = boxsub.add_parser(
        "detach",
        help="ingest what is pending, then stop the box keeping events for this "
        "campaign (other campaigns on the box keep theirs)",
    )
    detach.add_argument("name")
    detach.set_defaults(func=_detach)

    trust = boxsub.add_parser("trust", help="show the box's host key and trust it (first use)")
    trust.add_argument("name")
    trust.add_argument(
        "--replace",
        action="store_true",
        help="replace a different, previously trusted key (after checking it out of band)",
    )
    trust.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    trust.set_defaults(func=_trust)

    setup = boxsub.add_parser(
        "setup",
        help="build the locked serving env on the box with uv (refuses a driver too old for its CUDA)",
        description="Probe the box; refuse before installing when its driver cannot run the lock's CUDA "
        "(error 804); install the lock's pinned vLLM/torch/FlashInfer with uv through the agent (an env "
        "already at the lock is left as it is); check FlashInfer's cubin/jit-cache match it and torch's CUDA; "
        "set the box's serving env.",
    )
    setup.add_argument("name")
    setup.add_argument(
        "--env-dir", metavar="PATH", help="absolute path of the env on the box (default: its serving env)"
    )
    setup.add_argument(
        "--index",
        metavar="URL",
        help="a flat index of wheels (page or file:// dir) used instead of the lock's",
    )
    setup.add_argument(
        "--lock", metavar="FILE", help="a serving-env lock (default: the shipped recipes/serving-env.lock)"
    )
    setup.add_argument("--dry-run", action="store_true", help="probe and show the uv steps; install nothing")
    setup.add_argument("--json", action="store_true")
    setup.set_defaults(func=_setup)
