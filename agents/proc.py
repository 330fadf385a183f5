"""Process identity from /proc: a pid alone is not an identity, (pid, start time) is.

Why: a restarted agent re-adopts its servers by pid, and signals a process group on kill. Pids are
reused; checking the kernel's start time (field 22 of /proc/<pid>/stat, in clock ticks since boot)
before adopting or signalling means the agent never kills a stranger that inherited a dead server's pid.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path


def stat(pid: int) -> tuple[str, int, int] | None:
    """(state letter, process group id, start time in ticks) of a live pid, or None."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name (field 2) is in parentheses and may contain spaces: split after the last ")".
    rest = raw[raw.rfind(")") + 2 :].split()
    return rest[0], int(rest[2]), int(rest[19])


def start_ticks(pid: int) -> int | None:
    info = stat(pid)
    return info[2] if info else None


def alive(pid: int, ticks: int | None) -> bool:
    """The same process (not a zombie, not a reused pid) still runs."""
    info = stat(pid)
    if info is None or info[0] in ("Z", "X"):
        return False
    return ticks is None or info[2] == ticks


def group_members(pgid: int, not_before: int | None = None) -> dict[int, int]:
    """pid -> start ticks of every live process in process group ``pgid``.

    ``not_before``: the leader's start ticks; a member older than the leader cannot be ours (the
    group id was reused), so it is left out.
    """
    out: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        info = stat(int(entry))
        if (
            info is not None
            and info[1] == pgid
            and info[0] not in ("Z", "X")
            and (not_before is None or info[2] >= not_before)
        ):
            out[int(entry)] = info[2]
    return out


def signal_group(pgid: int, ticks: int | None, sig: signal.Signals) -> bool:
    """Signal a launch's process group, only if its leader is still the process we started.

    When the leader has already exited its group may live on (engine workers): each remaining member
    of the group is signalled instead, still by pid + start time.
    """
    if alive(pgid, ticks):
        try:
            os.killpg(pgid, sig)
            return True
        except ProcessLookupError:
            return False
    sent = False
    for pid, member_ticks in group_members(pgid, ticks).items():
        sent = signal_pid(pid, member_ticks, sig) or sent
    return sent


def signal_pid(pid: int, ticks: int | None, sig: signal.Signals) -> bool:
    if not alive(pid, ticks):
        return False
    try:
        os.kill(pid, sig)
        return True
    except ProcessLookupError:
        return False


def on_exit(pid: int, then: Callable[[], None]) -> None:
    """Call ``then`` (on a thread of its own) once the child ``pid`` has exited, leaving it to be reaped by
    whoever polls it (``WNOWAIT``): the agent's loop notices an exit at once rather than at its next tick."""

    def wait() -> None:
        with contextlib.suppress(ChildProcessError):  # already reaped by a poll: it has exited all the same
            os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        then()

    threading.Thread(target=wait, name=f"exit-{pid}", daemon=True).start()
