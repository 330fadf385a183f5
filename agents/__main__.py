"""``python -m agents`` / ``python3 agent.pyz``: the agent's command line on the box.

Subcommands: ``daemon`` (start detached, or ``--foreground``), ``call`` (stdio <-> unix socket proxy,
for SSH exec when streamlocal forwarding is off), ``version``, ``probe --json`` and ``sample --json``
(usable by hand on a box, no daemon needed), ``build`` (write the zipapp), and ``loadgen`` / ``tripwire`` /
``kldiff`` / ``specdiff`` which hand their arguments to those packages.
"""

from __future__ import annotations

import argparse
import io
import json
import socket
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agents.gpu import SOURCES
from agents.protocol import PatchProbe, ProbeArgs, check


def _daemon_options(ns: argparse.Namespace) -> dict[str, Any]:
    options: dict[str, Any] = {
        "disk_floor_bytes": int(ns.disk_floor_mb * 1024 * 1024),
        "sample_interval_s": ns.interval,
        "gpu_source": ns.gpu_source,
    }
    if ns.boot_id_file:
        options["boot_id_file"] = ns.boot_id_file
    if ns.shutdown_cmd:
        argv = json.loads(ns.shutdown_cmd)
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise SystemExit(
                '--shutdown-cmd must be a JSON list of strings, e.g. ["sudo","shutdown","-h","now"]'
            )
        options["shutdown_argv"] = argv
    return options


def _proxy(home: Path) -> int:
    """Relay stdin lines to the daemon's socket and its replies to stdout, until both sides are done."""
    from agents.daemon import SOCKET_NAME

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(home / SOCKET_NAME))
    except OSError as exc:
        print(
            f"agent call: cannot reach {home / SOCKET_NAME}: {exc}; is the daemon running?", file=sys.stderr
        )
        return 3

    def pump_in() -> None:
        stdin = sys.stdin.buffer
        while True:
            chunk = stdin.read1(1 << 16) if isinstance(stdin, io.BufferedReader) else stdin.read(1 << 16)
            if not chunk:
                break
            sock.sendall(chunk)
        sock.shutdown(socket.SHUT_WR)

    threading.Thread(target=pump_in, daemon=True).start()
    out = sys.stdout.buffer
    while True:
        chunk = sock.recv(1 << 16)
        if not chunk:
            break
        out.write(chunk)
        out.flush()
    return 0


# Subcommands that parse their own arguments: everything after the name goes to their ``main``.
_PASSTHROUGH = ("loadgen", "tripwire", "kldiff", "specdiff")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agent", description="campaign-console box agent")
    sub = parser.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("daemon", help="start the agent daemon (detached unless --foreground)")
    d.add_argument("--home", required=True, type=Path, help="agent home: journal, socket, launch logs")
    d.add_argument("--foreground", action="store_true", help="do not detach (for debugging)")
    d.add_argument(
        "--disk-floor-mb", type=float, default=512, help="stop writing samples below this free space"
    )
    d.add_argument("--interval", type=float, default=1.0, help="sampling period in seconds")
    d.add_argument("--shutdown-cmd", help="JSON argv the watchdog runs to power the box off")
    d.add_argument(
        "--gpu-source", choices=SOURCES, default="auto", help="force the GPU reader (default: auto)"
    )
    d.add_argument(
        "--boot-id-file",
        type=Path,
        help="where the watchdog reads the kernel's per-boot id "
        "(default: /proc/sys/kernel/random/boot_id; a changed id means the box rebooted)",
    )
    c = sub.add_parser("call", help="relay protocol lines between stdio and the daemon socket")
    c.add_argument("--home", required=True, type=Path)
    sub.add_parser("version", help="print this agent's content version")
    p = sub.add_parser("probe", help="print the box probe (no daemon needed)")
    p.add_argument("--json", action="store_true", required=True)
    p.add_argument("--serving-python", help="the Python of the serving environment (for cuInit(0))")
    p.add_argument("--console-t-ms", type=int)
    p.add_argument("--disk-path", help="where free disk is measured (default: current directory)")
    p.add_argument("--gpu-source", choices=SOURCES, default="auto")
    p.add_argument(
        "--patches",
        type=_patch_list,
        default=[],
        metavar="JSON",
        help='engine patches to look for: [{"name": ..., "module": ... or null, "file": ... or null}]',
    )
    s = sub.add_parser("sample", help="print one GPU sample (no daemon needed)")
    s.add_argument("--json", action="store_true", required=True)
    s.add_argument("--gpu-source", choices=SOURCES, default="auto")
    b = sub.add_parser("build", help="write the agent zipapp")
    b.add_argument("--out", required=True, type=Path)
    return parser


def _cmd_daemon(ns: argparse.Namespace) -> int:
    """Start the daemon; a refusal is one line on stderr and exit 1, which the console reports as is."""
    from agents import daemon
    from agents.private import UnsafeHome

    try:
        if ns.foreground:
            return daemon.run_foreground(ns.home.resolve(), **_daemon_options(ns))
        print(daemon.dumps(daemon.detach(ns.home.resolve(), **_daemon_options(ns))))
    except UnsafeHome as exc:  # one line, as it is: the console shows it as the box's error (fleet/push.py)
        print(exc, file=sys.stderr)
        return 1
    except (daemon.AlreadyRunning, RuntimeError) as exc:
        print(f"agent daemon: {exc}", file=sys.stderr)
        return 1
    return 0


def _cmd_call(ns: argparse.Namespace) -> int:
    return _proxy(ns.home.resolve())


def _cmd_version(ns: argparse.Namespace) -> int:
    from agents.package import agent_version

    print(agent_version())
    return 0


def _patch_list(text: str) -> list[PatchProbe]:
    """``--patches``: a JSON list of PatchProbe objects, checked against the contract (agents/protocol.py)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from exc
    problem = check({"patches": value}, ProbeArgs, "--patches")
    if problem:
        raise argparse.ArgumentTypeError(problem.replace("--patches.patches", "--patches", 1))
    return list(value)


def _cmd_probe(ns: argparse.Namespace) -> int:
    from agents.probe import probe

    report = probe(
        ns.console_t_ms, ns.serving_python, ns.disk_path, gpu_source=ns.gpu_source, patches=ns.patches
    )
    print(json.dumps(report, indent=2))
    return 0


def _cmd_sample(ns: argparse.Namespace) -> int:
    from agents.gpu import sample_once

    warnings: list[str] = []
    source, rows = sample_once(lambda where, msg: warnings.append(f"{where}: {msg}"), ns.gpu_source)
    print(json.dumps({"source": source, "gpus": rows, "warnings": warnings}, indent=2))
    return 0


def _cmd_build(ns: argparse.Namespace) -> int:
    from agents.package import build_zipapp

    ns.out.write_bytes(build_zipapp())
    print(ns.out)
    return 0


_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "daemon": _cmd_daemon,
    "call": _cmd_call,
    "version": _cmd_version,
    "probe": _cmd_probe,
    "sample": _cmd_sample,
    "build": _cmd_build,
}


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in _PASSTHROUGH:
        import importlib

        return int(importlib.import_module(f"agents.{args[0]}").main(args[1:]) or 0)
    ns = _parser().parse_args(args)
    command = _COMMANDS.get(ns.cmd)
    return command(ns) if command else 2


if __name__ == "__main__":
    sys.exit(main())
