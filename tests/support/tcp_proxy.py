"""A loopback TCP proxy the tests can cut: every ``drop()`` aborts all live connections at once.

It stands between the console and a box's sshd, so a test kills "the SSH link" exactly as a flaky network
does (RST mid-stream, mid-transaction, mid-ack), without touching either end. It runs its own event loop
in a thread so it works the same whether the console runs in the test's loop or in a subprocess.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading


class TcpProxy:
    def __init__(self, target_port: int, host: str = "127.0.0.1"):
        self.target = (host, target_port)
        self.port = 0
        self.drops = 0
        self._writers: set[asyncio.StreamWriter] = set()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, name="tcp-proxy", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the proxy did not start")

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self._writers.update((writer, up_writer))
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        self._writers.difference_update((writer, up_writer))

    def drop(self) -> int:
        """Abort every connection through the proxy now (no FIN: a reset, like a dead link)."""
        def abort() -> int:
            victims = list(self._writers)
            for w in victims:
                w.transport.abort()
            self._writers.clear()
            return len(victims) // 2

        cut = asyncio.run_coroutine_threadsafe(_call(abort), self._loop).result(10)
        self.drops += 1
        return cut

    def close(self) -> None:
        self.drop()
        self._loop.call_soon_threadsafe(self._server.close)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


async def _call(fn):  # type: ignore[no-untyped-def]
    return fn()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, asyncio.IncompleteReadError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    with contextlib.suppress(OSError, RuntimeError):
        writer.close()
