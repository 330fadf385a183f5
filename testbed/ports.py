"""Loopback ports for the servers tests start, taken below the kernel's ephemeral range.

A port the kernel lent to a bind(0) is free only until the kernel lends it again: every outgoing
connection of the machine (a client, sshd's forwards, another test's requests) takes its local port from
the ephemeral range, so on a busy machine a launch given such a port, or the one after it, found it taken
("Address already in use"). Below that range the kernel never hands a port out by itself; what another
listener holds is seen here, and the random start keeps concurrent runs apart.
"""

from __future__ import annotations

import contextlib
import random
import socket
from pathlib import Path

LOWEST = 20000
RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def _ephemeral_floor() -> int:
    try:
        return int(RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default range starts there


def free_ports(n: int) -> int:
    """The first of ``n`` consecutive loopback ports that nothing listens on now."""
    top = _ephemeral_floor() - n
    if top <= LOWEST:
        raise RuntimeError(
            f"the ephemeral port range starts at {top + n}: no room below it for test servers; "
            f"raise it in {RANGE_FILE}"
        )
    for base in random.sample(range(LOWEST, top), min(500, top - LOWEST)):
        try:
            with contextlib.ExitStack() as stack:
                for port in range(base, base + n):
                    sock = stack.enter_context(socket.socket())
                    sock.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
    raise RuntimeError(f"no {n} consecutive free loopback ports between {LOWEST} and {top + n}")


def free_port() -> int:
    return free_ports(1)
