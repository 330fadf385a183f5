"""A loopback TCP proxy the tests can cut: every ``drop()`` aborts all live connections at once.

It stands between the console and a box's sshd, so a test kills "the SSH link" exactly as a flaky network
does (cut mid-stream, mid-transaction, mid-ack), without touching either end. It runs as its own process
(tests/support/listening.py says why) and takes one command per line on its stdin: ``drop`` answers
``dropped N``, the number of proxied connections it cut; end of input stops it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import subprocess
import sys

from tests.support.listening import start_listening, stop


class TcpProxy:
    """The test's handle on a proxy process in front of ``host:target_port``; ``port`` is where to connect."""

    def __init__(self, target_port: int, host: str = "127.0.0.1"):
        self._proc, port = start_listening(
            [sys.executable, "-m", "tests.support.tcp_proxy", "--host", host, "--port", str(target_port)],
            stdin=subprocess.PIPE,
        )
        self.port = int(port)
        self.drops = 0

    def drop(self) -> int:
        """Abort every connection through the proxy now: buffered bytes are discarded and both sockets closed
        at once, as a dead link leaves them."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write("drop\n")
        self._proc.stdin.flush()
        answer = self._proc.stdout.readline()
        if not answer.startswith("dropped "):
            raise RuntimeError(f"the proxy did not drop its connections: it printed {answer!r}")
        self.drops += 1
        return int(answer.split()[1])

    def close(self) -> None:
        self.drop()
        stop(self._proc)


class Proxy:
    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.writers: set[asyncio.StreamWriter] = set()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self.writers.update((writer, up_writer))
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        self.writers.difference_update((writer, up_writer))

    def drop(self) -> int:
        victims = list(self.writers)
        for w in victims:
            w.transport.abort()
        self.writers.clear()
        return len(victims) // 2


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, asyncio.IncompleteReadError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    with contextlib.suppress(OSError, RuntimeError):
        writer.close()


async def serve(host: str, port: int) -> None:
    proxy = Proxy(host, port)
    server = await asyncio.start_server(proxy.handle, "127.0.0.1", 0)
    print(f"listening on {server.sockets[0].getsockname()[1]}", flush=True)
    commands = asyncio.StreamReader()
    await asyncio.get_running_loop().connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(commands), sys.stdin
    )
    async with server:
        while line := await commands.readline():
            if line.strip() == b"drop":
                print(f"dropped {proxy.drop()}", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--host", default="127.0.0.1", help="where the proxied service listens")
    p.add_argument("--port", type=int, required=True, help="its port")
    args = p.parse_args()
    asyncio.run(serve(args.host, args.port))


if __name__ == "__main__":
    main()
