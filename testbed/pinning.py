"""Pin a child process to CPUs through ``taskset`` in its argv rather than a ``preexec_fn``: code run between
fork and exec is unsafe in a process with threads (the test process has the console's service thread), and
taskset sets the affinity, then execs the command under the same pid."""

from __future__ import annotations

from collections.abc import Iterable


def on_cpus(argv: list[str], cpus: Iterable[int] | None) -> list[str]:
    """``argv`` run on ``cpus`` only (every CPU when None or empty)."""
    chosen = sorted(set(cpus or ()))
    return ["taskset", "-c", ",".join(map(str, chosen)), *argv] if chosen else argv
