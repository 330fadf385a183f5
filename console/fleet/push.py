"""Getting the right agent running on a box: push over SFTP, verify, rename, (re)start.

The agent is one zipapp whose version is a hash of its content (``agents.package``). The push writes a
temporary name, checks the sha256 the box computes against ours, and renames atomically, so a half-copied
agent is never started. A running agent of the same version is left alone; a stale one is asked to exit
(``shutdown_agent`` leaves its arms running; the new daemon re-adopts them from its journal).
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import secrets
import zipfile
from dataclasses import dataclass

import asyncssh

from agents.private import REFUSED
from agents.protocol import HelloResult
from console.errors import Unreachable
from console.fleet.transport import RemoteCommandError, Transport
from console.fleet.wire import AgentChannel, ChannelClosed

AGENT_FILE = "agent.pyz"
SOCKET_FILE = "agent.sock"
DEFAULT_HOME = "~/.campaign-agent"
UNREACHABLE = (OSError, asyncssh.ChannelOpenError, ChannelClosed, TimeoutError)
"""What 'no agent answers on that socket' looks like, locally and over SSH."""


class AgentStartError(Unreachable):
    """The agent did not come up on the box; the message says what the box answered."""


@dataclass(frozen=True)
class AgentBuild:
    version: str
    payload: bytes

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.payload).hexdigest()


def current_build() -> AgentBuild:
    """The agent this console ships, versioned by what is inside the archive (not a cached guess).

    The version is read back from the archive itself so that the pushed bytes and the version the
    console expects the daemon to report can never disagree, even if the sources change meanwhile.
    """
    from agents.package import VERSION_FILE, build_zipapp

    payload = build_zipapp()
    with zipfile.ZipFile(io.BytesIO(payload)) as archive:
        version = archive.read(f"agents/{VERSION_FILE}").decode().strip()
    return AgentBuild(version, payload)


@dataclass
class AgentHome:
    path: str

    @property
    def socket(self) -> str:
        return f"{self.path}/{SOCKET_FILE}"

    @property
    def agent(self) -> str:
        return f"{self.path}/{AGENT_FILE}"


async def resolve_home(transport: Transport, configured: str | None) -> AgentHome:
    """The agent directory as an absolute path (a unix socket cannot be opened through ``~``)."""
    path = configured or DEFAULT_HOME
    if path.startswith("~"):
        path = (await transport.home()).rstrip("/") + path[1:]
    return AgentHome(path)


async def hello(transport: Transport, home: AgentHome, timeout: float = 10.0) -> HelloResult | None:
    """The running agent's hello, or None when nothing answers on its socket."""
    try:
        channel: AgentChannel = await asyncio.wait_for(transport.open_channel(home.socket), timeout)
    except UNREACHABLE:
        return None
    try:
        return await channel.call("hello", answer=HelloResult, timeout=timeout)
    except UNREACHABLE:
        return None
    finally:
        channel.close()


async def push(transport: Transport, home: AgentHome, build: AgentBuild) -> None:
    """Temp name, sha256 checked on the box, atomic rename: a half-written agent is never started."""
    await transport.run(["mkdir", "-p", "-m", "700", home.path])
    tmp = f"{home.agent}.tmp-{secrets.token_hex(4)}"
    await transport.write_file(tmp, build.payload, 0o600)
    out = await transport.run(["sha256sum", tmp])
    remote = out.split()[0] if out.split() else ""
    if remote != build.sha256:
        await transport.run(["rm", "-f", tmp])
        raise AgentStartError(
            f"agent upload corrupted: the box computed sha256 {remote or '(nothing)'} for {tmp}, expected "
            f"{build.sha256}; the temporary file was removed, nothing was started (check the disk on the box)"
        )
    await transport.rename(tmp, home.agent)


async def _wait(transport: Transport, home: AgentHome, up: bool, timeout: float) -> HelloResult | None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        answer = await hello(transport, home)
        if (answer is not None) == up:
            return answer
        if loop.time() > deadline:
            raise AgentStartError(
                f"the agent in {home.path} did not {'start' if up else 'stop'} within {timeout:g} s; "
                f"see {home.path}/agent.log on the box"
            )
        await asyncio.sleep(0.1)


async def _start(
    transport: Transport, home: AgentHome, python: str, timeout: float, interval_s: float
) -> None:
    """Start the daemon; it detaches itself (setsid, stdio to files) and returns once it answers.

    A daemon that was just asked to exit may still hold its pidfile lock for a moment after its socket
    went quiet, so "already running" is retried until ``timeout``. A clean loader path keeps a container
    image's compat libraries out of the agent. An agent that refused its home says why in one line, and
    that line alone is the error: the operator must act on the box, the argv would only bury it.
    """
    argv = [
        "env",
        "-u",
        "LD_LIBRARY_PATH",
        "-u",
        "LD_PRELOAD",
        python,
        home.agent,
        "daemon",
        "--home",
        home.path,
        "--interval",
        repr(float(interval_s)),
    ]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            await transport.run(argv, timeout=timeout)
            return
        except RemoteCommandError as exc:
            refused = str(exc).partition(REFUSED)
            if refused[
                1
            ]:  # the agent's one-line reason (agents/private.py) is the error, not the argv around it
                raise AgentStartError(refused[1] + refused[2]) from exc
            if "already running" not in str(exc) or loop.time() > deadline:
                raise AgentStartError(f"the agent did not start in {home.path}: {exc}") from exc
            await asyncio.sleep(0.2)


async def ensure_agent(
    transport: Transport,
    home: AgentHome,
    build: AgentBuild,
    python: str = "python3",
    timeout: float = 30.0,
    interval_s: float = 1.0,
) -> tuple[HelloResult, str]:
    """Make the shipped agent version run in ``home``; returns (hello, what was done). ``interval_s``: the
    started agent's tick (sampling, launch supervision, jobs, timers); one already running keeps its own."""
    running = await hello(transport, home)
    if running is not None and running.get("version") == build.version:
        return running, "already running"
    await push(transport, home, build)
    action = "started"
    if running is not None:
        channel = await transport.open_channel(home.socket)
        try:
            await channel.call("shutdown_agent")
        except UNREACHABLE:
            pass  # it exited before answering: that is what we asked for
        finally:
            channel.close()
        await _wait(transport, home, up=False, timeout=timeout)
        action = f"replaced stale agent {running.get('version')}"
    await _start(transport, home, python, timeout, interval_s)
    answer = await _wait(transport, home, up=True, timeout=timeout)
    assert answer is not None
    if answer.get("version") != build.version:
        raise AgentStartError(
            f"agent in {home.path} reports version {answer.get('version')} after the push of {build.version}; "
            "another console may be pushing to this box"
        )
    return answer, action
