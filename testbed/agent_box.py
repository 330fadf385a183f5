"""Drive a real agent daemon process from tests: start it in a tmp home, talk over its unix socket.

Why a helper: every agent test needs the same moves (start detached with a fake ``nvidia-smi`` on
PATH, send protocol requests, wait for journal events) and the fleet/checks tests can reuse them.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from testbed.fake_nvidia_smi import install

ROOT = Path(__file__).resolve().parent.parent
_ids = itertools.count(1)


def bin_with_fake_smi(tmp: Path, fixture: Path | str) -> Path:
    """A directory holding only ``nvidia-smi`` (answering from ``fixture``), for the front of PATH."""
    bin_dir = tmp / "smi-bin"
    install(bin_dir, fixture)
    return bin_dir


def write_fixture_variant(
    tmp: Path, name: str, change: Callable[[dict[str, Any]], None], base: str = "h200"
) -> Path:
    """A copy of a real fixture with one fault applied (an [N/A] value, a field this driver lacks...)."""
    fx = json.loads((ROOT / "tests" / "fixtures" / "gpus" / f"{base}.json").read_text())
    change(fx)
    fx["source"] = f"variant of {base}.json for a test: {name}. " + fx["source"]
    path = tmp / f"{name}.json"
    path.write_text(json.dumps(fx))
    return path


class AgentBox:
    """One agent daemon (a real detached process) in ``home``."""

    def __init__(
        self,
        home: Path,
        path_prefix: list[Path] | None = None,
        env: dict[str, str] | None = None,
        interval_s: float = 0.25,
        extra_args: list[str] | None = None,
    ) -> None:
        self.home = home
        self.env = dict(os.environ)
        self.env["PYTHONPATH"] = str(ROOT)
        if path_prefix is not None:
            self.env["PATH"] = os.pathsep.join([*map(str, path_prefix), "/usr/bin", "/bin"])
        self.env.update(env or {})
        self.interval_s = interval_s
        self.extra_args = extra_args or []
        self.pid: int | None = None

    def start(self, check: bool = True) -> subprocess.CompletedProcess[str]:
        argv = [
            sys.executable,
            "-m",
            "agents",
            "daemon",
            "--home",
            str(self.home),
            "--interval",
            str(self.interval_s),
            *self.extra_args,
        ]
        proc = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=60, cwd=ROOT)
        if check:
            assert proc.returncode == 0, proc.stderr + (self.home / "agent.log").read_text(errors="replace")
            self.pid = json.loads(proc.stdout)["pid"]
        return proc

    def request(
        self,
        op: str,
        args: dict[str, Any] | None = None,
        command_id: str | None = None,
        timeout: float = 60.0,
    ) -> dict[str, Any]:
        """One request/response over the socket; returns the whole response (ok, result | error)."""
        message = {"v": 1, "id": command_id or f"t{next(_ids)}", "op": op, "args": args or {}}
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(str(self.home / "agent.sock"))
            s.sendall(json.dumps(message).encode() + b"\n")
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = s.recv(1 << 20)
                assert chunk, f"agent closed the connection before answering {op}"
                buf += chunk
        reply: dict[str, Any] = json.loads(buf)
        return reply

    def ok(self, op: str, args: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        reply = self.request(op, args, **kw)
        assert reply["ok"], reply
        result: dict[str, Any] = reply["result"]
        return result

    def events(self, after: int = 0) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        while True:
            got = self.ok("events", {"after": after, "limit": 5000})["events"]
            if not got:
                return out
            out += got
            after = got[-1]["seq"]

    def wait_for(
        self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 30.0, what: str = "event"
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for event in self.events():
                if predicate(event):
                    return event
            time.sleep(0.1)
        kinds = [(e["kind"], e.get("state"), e.get("message")) for e in self.events()][-30:]
        raise AssertionError(f"no {what} within {timeout} s; last events: {kinds}")

    def kill_hard(self) -> None:
        """SIGKILL the daemon (a crash): its arms keep running."""
        assert self.pid is not None
        os.kill(self.pid, signal.SIGKILL)
        _wait_gone(self.pid)

    def kill_launches(self) -> None:
        """SIGKILL the process group of every launch the journal knows: a failed test leaves no server."""
        import sqlite3

        db = self.home / "journal.db"
        if not db.exists():
            return
        with sqlite3.connect(db) as conn:
            pids = [r[0] for r in conn.execute("SELECT pid FROM launches WHERE pid IS NOT NULL")]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)

    def stop(self) -> None:
        """Shut the daemon down, then make sure none of its launches outlive the test."""
        self.shutdown()
        self.kill_launches()

    def shutdown(self) -> None:
        """Ask the daemon to exit (its launches keep running, as in production)."""
        if self.pid is None:
            return
        with contextlib.suppress(OSError):
            self.request("shutdown_agent", timeout=10)
        if not _wait_gone(self.pid, 10):
            os.kill(self.pid, signal.SIGKILL)
            _wait_gone(self.pid)
        self.pid = None


def stop_agent(home: Path, timeout: float = 10.0) -> None:
    """Stop the agent daemon of an agent home (its pidfile names it), if one runs, and wait until it is gone;
    for tests whose CLI or service started a daemon themselves (it outlives them by design)."""
    pidfile = home / "agent.pid"
    text = pidfile.read_text().split() if pidfile.exists() else []
    if not text or not text[0].isdigit():
        return
    pid = int(text[0])
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    _wait_gone(pid, timeout)


def _wait_gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except FileNotFoundError:
            return True
        if stat[stat.rfind(")") + 2] == "Z":
            return True
        time.sleep(0.05)
    return False
