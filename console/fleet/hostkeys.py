"""Host-key policy: the operator's known_hosts first, else trust-on-first-use that the operator confirms.

asyncssh has no "accept-new" mode and ``known_hosts=None`` switches checking off, so the policy lives
here. A key the store pinned (``tofu`` after ``campaign box trust``, or ``known_hosts`` remembered from the
operator's file) is the only key accepted; a different key is refused loudly and the box is marked
``host-key-changed``. An unknown key is recorded as ``pending`` and nothing connects until the operator
compares its fingerprint and confirms.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import asyncssh

from console.errors import Unreachable
from console.store.boxes import Box

DEFAULT_KNOWN_HOSTS = Path("~/.ssh/known_hosts")
PINNED_SOURCES = ("tofu", "known_hosts")


class HostKeyProblem(Unreachable):
    """The box cannot be connected to until the operator acts on its host key; retrying will not help."""


class HostKeyUnknown(HostKeyProblem):
    def __init__(self, box: str, fingerprint: str):
        super().__init__(
            f"box {box}: host key {fingerprint} is not in known_hosts nor trusted yet; compare it with the "
            f"provider's console, then run `campaign box trust {box}`"
        )
        self.fingerprint = fingerprint


class HostKeyChanged(HostKeyProblem):
    def __init__(self, box: str, trusted: str, presented: str | None):
        super().__init__(
            f"box {box}: HOST KEY CHANGED -- trusted {trusted}, the host now presents {presented or 'another key'}; "
            "connection refused (a rebuilt box or someone in the middle). Verify the new key out of band, then "
            f"`campaign box trust {box} --replace`"
        )
        self.trusted = trusted
        self.presented = presented


@dataclass(frozen=True)
class Policy:
    """What ``asyncssh.connect(known_hosts=...)`` gets, and where that trust came from."""

    known_hosts: asyncssh.SSHKnownHosts
    source: str  # 'tofu' | 'known_hosts' (pinned in the store) | 'known_hosts_file' (operator's file)
    trusted: list[str]  # fingerprints, for the refusal message


def host_pattern(host: str, port: int) -> str:
    return host if port == 22 else f"[{host}]:{port}"


def fingerprint(key_line: str) -> str:
    return asyncssh.import_public_key(key_line).get_fingerprint()


def policy_for(box: Box, known_hosts_file: Path | None) -> Policy | None:
    """The trust to connect with, or None when the key is unknown (TOFU must ask the operator)."""
    assert box.host and box.port
    if box.host_key and box.host_key_source in PINNED_SOURCES:
        pinned = asyncssh.import_known_hosts(f"{host_pattern(box.host, box.port)} {box.host_key}\n")
        return Policy(pinned, box.host_key_source, [fingerprint(box.host_key)])
    if known_hosts_file is not None:
        path = known_hosts_file.expanduser()
        if path.is_file():
            known = asyncssh.read_known_hosts(str(path))
            trusted = known.match(box.host, box.host, box.port)[0]
            if trusted:
                return Policy(known, "known_hosts_file", [k.get_fingerprint() for k in trusted])
    return None


def key_line(key: asyncssh.SSHKey) -> str:
    """The OpenSSH public-key line (``ssh-ed25519 AAAA...``) without a comment."""
    kind, data = key.export_public_key("openssh").decode().split()[:2]
    return f"{kind} {data}"


async def fetch_host_key(host: str, port: int, timeout: float) -> asyncssh.SSHKey:
    """The key the host presents, without authenticating (for TOFU and for the changed-key message)."""
    try:
        key = await asyncio.wait_for(asyncssh.get_server_host_key(host, port), timeout)
    except TimeoutError as exc:
        raise TimeoutError(
            f"{host}:{port}: no SSH host key within {timeout:g} s; the host accepts TCP but does not speak SSH, "
            "or is unreachable: check the port and the box"
        ) from exc
    if key is None:
        raise ConnectionError(f"{host}:{port} presented no host key")
    return key


async def presented_key(box: Box, timeout: float) -> tuple[str, str]:
    """(key line, fingerprint) the box presents now: what ``campaign box trust`` shows the operator."""
    host, port = box.ssh_address()
    key = await fetch_host_key(host, port, timeout)
    return key_line(key), key.get_fingerprint()


def check_trust(box: Box, line: str, replace: bool) -> None:
    """Refuse to re-pin a box whose trusted key differs, unless the operator said ``--replace``."""
    if box.host_key_source in PINNED_SOURCES and box.host_key and box.host_key != line and not replace:
        raise HostKeyChanged(box.name, fingerprint(box.host_key), fingerprint(line))
