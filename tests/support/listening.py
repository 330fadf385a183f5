"""Start a test server as its own process and learn where it listens from its first line of output.

Why a process, never a thread of the test process: an asyncio loop on a second thread shares the garbage
collector with the test's own loop. A stream one loop left unclosed can then be finalized on the other
thread: its transport's ``__del__`` closes the socket, the descriptor's number is reused by a connection
that loop accepts, and the stream writer's ``__del__`` (CPython 3.11) removes that number from
that loop's epoll set, so the new connection is never read. A suite run beside two busy loops hung on
this twice. Measured here: a server loop on a thread whose handler left its writers to the collector
never answered 8 to 14 of 3,600 to 7,800 connections in 40 s while the main thread opened connections and
collected garbage; closing its writers, it answered all of 16,000.
A server alone in its process owns its descriptors.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def start_listening(argv: list[str], **popen: Any) -> tuple[subprocess.Popen[str], str]:
    """Run ``argv`` from the repository root (so ``-m tests.support.x`` resolves) until it prints
    ``listening on WHERE``; returns the process and WHERE. Its stdout stays a pipe for later lines."""
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, text=True, **popen)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("listening on "):
        proc.kill()
        proc.wait()
        raise RuntimeError(
            f"{' '.join(argv[1:3])} did not start: it printed {line!r}, exit code {proc.returncode}"
        )
    return proc, line.split()[-1]


def stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
