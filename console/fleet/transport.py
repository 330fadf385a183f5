"""How the console reaches a box: over one SSH connection, or directly on the console's own machine.

Both transports offer the same few primitives (open an agent channel, run an argv, write a file, forward
a port), so the agent push, ingest and commands have one code path for rented boxes and the ``local``
box. Remote commands are argv lists quoted once here, at the SSH boundary; nothing else builds a shell line.
"""

from __future__ import annotations

import asyncio
import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import asyncssh

from agents.environ import allowed_env
from agents.protocol import MAX_LINE
from console.errors import Unreachable
from console.fleet.hostkeys import HostKeyChanged, Policy, fetch_host_key, key_line
from console.fleet.wire import AgentChannel
from console.store.boxes import Box


class RemoteCommandError(Unreachable):
    """A command run on the box exited non-zero; the message carries its argv, exit code and stderr."""


@dataclass(frozen=True)
class SshSettings:
    """Timeouts are what keep one dead box from blocking the others (asyncssh's keepalive is off by default)."""

    connect_timeout: float = 15.0
    keepalive_interval: float = 5.0
    keepalive_count_max: int = 3
    command_timeout: float = 60.0


class Transport(Protocol):
    async def open_channel(self, socket_path: str) -> AgentChannel: ...
    async def run(self, argv: list[str], timeout: float | None = None) -> str: ...
    async def home(self) -> str: ...
    async def write_file(self, path: str, data: bytes, mode: int) -> None: ...
    async def rename(self, src: str, dst: str) -> None: ...
    async def forward(self, port: int) -> int: ...
    async def wait_closed(self) -> None: ...
    def close(self) -> None: ...


def _check(argv: list[str], rc: int | None, stderr: str) -> None:
    if rc != 0:
        raise RemoteCommandError(f"{shlex.join(argv)} exited {rc}: {stderr.strip()[-400:] or 'no stderr'}")


async def _presented(host: str, port: int, timeout: float) -> str | None:
    """The fingerprint of the key the host presents now, or None when it cannot be read."""
    try:
        return (await fetch_host_key(host, port, timeout)).get_fingerprint()
    except (OSError, asyncssh.Error, TimeoutError):
        return None


class SshTransport:
    """One asyncssh connection; every channel (ingest, each command, SFTP, forwards) is multiplexed on it."""

    def __init__(self, conn: asyncssh.SSHClientConnection, settings: SshSettings):
        self.conn = conn
        self.settings = settings
        self._listeners: dict[int, asyncssh.SSHListener] = {}

    @classmethod
    async def connect(cls, box: Box, policy: Policy, settings: SshSettings) -> SshTransport:
        assert box.host and box.port
        try:
            conn = await asyncssh.connect(
                box.host,
                box.port,
                username=box.ssh_user,
                known_hosts=policy.known_hosts,
                client_keys=[box.key_path] if box.key_path else (),
                connect_timeout=settings.connect_timeout,
                login_timeout=settings.connect_timeout,
                keepalive_interval=settings.keepalive_interval,
                keepalive_count_max=settings.keepalive_count_max,
                config=None,
                # Nothing of the console's environment crosses (no SendEnv/SetEnv, whatever a config says),
                # and no agent forwarding: the box never sees the operator's API keys or SSH agent.
                env={},
                send_env=[],
                agent_forwarding=False,
            )
        except asyncssh.HostKeyNotVerifiable as exc:
            presented = await _presented(box.host, box.port, settings.connect_timeout)
            raise HostKeyChanged(box.name, " or ".join(policy.trusted), presented) from exc
        except (asyncssh.KeyExchangeFailed, asyncssh.ConnectionLost, ConnectionResetError) as exc:
            # A key of another type: the client offers only the trusted key's algorithms, the host has no such
            # key, and the handshake dies ("no matching host key type found") before any key is compared.
            # Ask the host what it presents now: a key the operator never trusted is a changed host key.
            presented = await _presented(box.host, box.port, settings.connect_timeout)
            if presented is not None and presented not in policy.trusted:
                raise HostKeyChanged(box.name, " or ".join(policy.trusted), presented) from exc
            raise
        except TimeoutError as exc:
            raise TimeoutError(
                f"{box.ssh_target}: no SSH handshake within {settings.connect_timeout:g} s (connect timeout); "
                "the host accepts TCP but does not speak SSH, or is unreachable: check the port and the box"
            ) from exc
        return cls(conn, settings)

    def host_key_line(self) -> str:
        key = self.conn.get_server_host_key()
        assert key is not None
        return key_line(key)

    async def open_channel(self, socket_path: str) -> AgentChannel:
        # The receive window bounds the longest line asyncssh can read (its default, 2 MiB, closed the
        # channel on a 3 MiB batch of 8-GPU samples): it must hold a whole reply of MAX_LINE.
        reader, writer = await self.conn.open_unix_connection(socket_path, encoding=None, window=MAX_LINE + 1)
        return AgentChannel(reader, writer)

    async def run(self, argv: list[str], timeout: float | None = None) -> str:
        result = await self.conn.run(
            shlex.join(argv), timeout=timeout or self.settings.command_timeout, stdin=asyncssh.DEVNULL
        )
        _check(argv, result.exit_status, str(result.stderr or ""))
        return str(result.stdout or "")

    async def home(self) -> str:
        async with self.conn.start_sftp_client() as sftp:
            return await sftp.realpath(".")

    async def write_file(self, path: str, data: bytes, mode: int) -> None:
        async with (
            self.conn.start_sftp_client() as sftp,
            sftp.open(path, "wb", asyncssh.SFTPAttrs(permissions=mode)) as f,
        ):
            await f.write(data)

    async def rename(self, src: str, dst: str) -> None:
        async with self.conn.start_sftp_client() as sftp:
            await sftp.posix_rename(src, dst)

    async def forward(self, port: int) -> int:
        """A local port that reaches ``127.0.0.1:port`` on the box (servers there bind loopback only)."""
        if port not in self._listeners:
            self._listeners[port] = await self.conn.forward_local_port("127.0.0.1", 0, "127.0.0.1", port)
        return self._listeners[port].get_port()

    def close(self) -> None:
        self.conn.close()

    async def wait_closed(self) -> None:
        await self.conn.wait_closed()


class LocalTransport:
    """The console's own machine: same agent, same protocol, a direct unix socket instead of SSH.

    Every command, the agent daemon included, runs with the box allowlist (agents/environ.py), not the
    console's environment: the console holds provider API keys that no agent or server may inherit.
    """

    def __init__(self) -> None:
        self._closed = asyncio.Event()

    async def open_channel(self, socket_path: str) -> AgentChannel:
        reader, writer = await asyncio.open_unix_connection(socket_path, limit=MAX_LINE)
        return AgentChannel(reader, writer)

    async def run(self, argv: list[str], timeout: float | None = None) -> str:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=allowed_env(os.environ),
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise
        _check(argv, proc.returncode, err.decode(errors="replace"))
        return out.decode(errors="replace")

    async def home(self) -> str:
        return str(Path.home())

    async def write_file(self, path: str, data: bytes, mode: int) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)

    async def rename(self, src: str, dst: str) -> None:
        os.replace(src, dst)

    async def forward(self, port: int) -> int:
        return port

    def close(self) -> None:
        self._closed.set()

    async def wait_closed(self) -> None:
        await self._closed.wait()
