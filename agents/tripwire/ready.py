"""Wait for a loading server to serve, while watching that it is still there.

Why: a sweep sends the tripwire with the launch, so the client's own start (a Python, ``openai`` imported,
0.5 s of CPU each) overlaps the server's load instead of following it, when every arm of a queue becomes
ready at once and eight such starts share the box's cores (README, Sweep over boxes). The client then waits
here for what the agent's own ready check waits for (agents/local_http.py ``serves``), and gives up the
moment the server's process is gone: a client left polling a dead launch's port would tripwire whatever
listens there next.
"""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Callable

from agents import proc
from agents.local_http import serves

POLL_S = 0.2
"""A check is one refused connection while the server loads: cheap, and the verdict follows readiness closely."""


class NotServing(RuntimeError):
    """The server did not serve: its process ended, or the wait ran out. The message says which, in one line."""


def until_serving(
    base_url: str,
    wait_s: float,
    pid: int | None,
    start_ticks: int | None,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> float:
    """Block until ``base_url`` answers ``/health`` and ``/v1/models``; the seconds waited. ``NotServing`` once
    the process ``pid`` (with its kernel start time) is gone or ``wait_s`` passed."""
    url = urllib.parse.urlsplit(base_url)
    started = clock()
    while True:
        if pid is not None and not proc.alive(pid, start_ticks):  # first: whatever answers then is not it
            raise NotServing(
                f"the server at {base_url} (pid {pid}) ended before it served; no request was sent"
            )
        if serves(url.port or 80, url.hostname or "127.0.0.1"):
            return clock() - started
        waited = clock() - started
        if waited >= wait_s:
            raise NotServing(
                f"the server at {base_url} did not serve within {wait_s:g} s; no request was sent"
            )
        sleep(min(POLL_S, max(0.0, wait_s - waited)))
