"""HTTP/1.1 keep-alive client protocol for streamed completions, with minimal work per SSE event.

Why not decode each event: at tens of thousands of events a second one Python core spent on
``json.loads`` per event becomes the ceiling (FACTS.md: `vllm bench serve` 110k tok/s, the openai client
9.6k). Here each socket read costs one ``perf_counter`` and one C-level ``bytes.count`` of ``b"\\ndata:"``;
the read's time stamps every event in it (exactly what vLLM's client does when a read carries several
events). Only the last events of a response are decoded, from a bounded tail, for ``usage`` and
``finish_reason``.

Why the count is exact: an SSE event starts a line, so it follows a ``\\n`` (the previous event's blank
line, or the ``\\r\\n`` of an HTTP chunk header), while JSON text never holds a raw newline, so
``\\ndata:`` cannot occur inside a payload. Matches straddling two reads are counted from the last five
bytes of the previous read. The end of a chunked body is ``\\r\\n0\\r\\n\\r\\n``, which SSE payloads cannot
contain either. This assumes, as vLLM's server (uvicorn) does, that an event is never split across two
HTTP chunks; a response where that breaks ends as a failed request with a parse error, not a wrong number.
"""

from __future__ import annotations

import asyncio
import socket
import time
from array import array
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

EVENT = b"\ndata:"
EDGE = len(EVENT) - 1
CHUNKED_END = b"\r\n0\r\n\r\n"
TAIL = 16384
"""Bytes kept from the end of a stream: room for the last token event, the usage event and [DONE]."""
MAX_HEAD = 65536

HEAD, STREAM, BODY_LENGTH, BODY_CHUNKED, BODY_CLOSE = range(5)

API_PREFIX = "/v1"
"""What the OpenAI API adds to a server's root: the load generator asks ``<root>/v1/models`` and
``<root>/v1/completions``."""


def server_root(base_url: str) -> str:
    """The server's root (``http://HOST:PORT``, with any path prefix a proxy adds) from a ``--base-url`` typed
    either way: the root, as vLLM's docs and this load generator give it, or the API base the openai client
    and ``vllm bench serve --base-url`` users paste (``http://HOST:PORT/v1``), with or without a trailing
    slash. Taken as given, the API base made the preflight ask for ``/v1/v1/models``. ValueError, in one
    line, for what no request could be sent to: not http (the wire here is plain TCP to the box's
    loopback), no host, a port out of range, a query or fragment."""
    text = base_url.strip()
    try:
        url = urlsplit(text)
        port = url.port
    except ValueError as exc:
        raise ValueError(
            f"--base-url {base_url!r}: {exc}; expected http://HOST:PORT or http://HOST:PORT/v1"
        ) from exc
    if url.scheme != "http" or not url.hostname or port == 0:
        raise ValueError(
            f"--base-url {base_url!r}: expected http://HOST:PORT or http://HOST:PORT/v1 "
            "(servers bind the box's loopback; https is not spoken here)"
        )
    if url.query or url.fragment:
        raise ValueError(
            f"--base-url {base_url!r}: a query or fragment has no place in a server's address; "
            "give http://HOST:PORT or http://HOST:PORT/v1"
        )
    path = url.path.rstrip("/")
    while path.endswith(API_PREFIX):  # the API base, /v1 (each /v1 is the API's, never a proxy's prefix)
        path = path[: -len(API_PREFIX)].rstrip("/")
    return urlunsplit(("http", url.netloc, path, "", ""))


@dataclass
class Exchange:
    """One request/response on a connection: what the worker needs to compute metrics from."""

    start: float = 0.0
    status: int = 0
    times: array[float] = field(default_factory=lambda: array("d"))
    """perf_counter of each read that carried at least one SSE event.

    Arrays, not lists: a request keeps one stamp and one count per read until the run's result, in the
    worker and then in the parent; lists held 40 bytes per read (a float object and two pointers), these
    hold 12. With the pooled ITL list (metrics.itl_gaps) a token event went from 220 bytes of a run's peak
    to 68 (memory.EVENT_BYTES), so a long-output run fits three times the concurrency in the same memory."""
    counts: array[int] = field(default_factory=lambda: array("I"))
    """Events in each of those reads (same index as ``times``)."""
    tail: bytes = b""
    """The last bytes of the stream, or the whole body of a non-streamed response."""
    error: str | None = None


class StreamConnection(asyncio.Protocol):
    """One keep-alive connection carrying one exchange at a time (one concurrency slot)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._ex: Exchange | None = None
        self._done: asyncio.Future[Exchange] | None = None
        self._state = HEAD
        self._buf = b""
        self._edge = b""
        self._remaining = 0
        self._keep_alive = True

    @classmethod
    async def open(cls, host: str, port: int) -> StreamConnection:
        loop = asyncio.get_running_loop()
        _, proto = await loop.create_connection(cls, host, port)
        return proto

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def usable(self) -> bool:
        return (
            not self.closed
            and self._keep_alive
            and self.transport is not None
            and not self.transport.is_closing()
        )

    def send(self, request: bytes) -> asyncio.Future[Exchange]:
        """Write one request; the future resolves with the finished exchange (never raises)."""
        assert self.transport is not None and self._done is None
        self._done = asyncio.get_running_loop().create_future()
        self._ex = Exchange()
        self._state = HEAD
        self._buf = b""
        self._ex.start = time.perf_counter()
        self.transport.write(request)
        return self._done

    def stalled(self, after_s: float) -> None:
        """The request's time ran out: give it up, saying how far its response got (nothing, part of a
        header, a stream that stopped, a body cut short), which tells a dead server from a slow one."""
        self.abort(f"no complete response within {after_s:g} s: {self._progress()}")

    def _progress(self) -> str:
        ex = self._ex
        if ex is None:
            return "no request pending"
        if self._state == HEAD:
            return (
                f"{len(self._buf)} bytes of a response header, not its end"
                if self._buf
                else "no response yet"
            )
        if self._state == STREAM:
            return (
                f"HTTP {ex.status} stream stopped after {sum(ex.counts)} events, last bytes {ex.tail[-24:]!r}"
            )
        return f"HTTP {ex.status} body cut short after {len(self._buf)} bytes"

    def abort(self, reason: str) -> None:
        """Give up on the current exchange (timeout) and drop the connection."""
        self._finish(reason)
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    def data_received(self, data: bytes) -> None:
        if self._state == STREAM:  # the hot path: one stamp, one count, a bounded tail
            ex = self._ex
            assert ex is not None
            t = time.perf_counter()
            n = data.count(EVENT) + (self._edge + data[:EDGE]).count(EVENT)
            if n:
                ex.times.append(t)
                ex.counts.append(n)
            # A copy of the last TAIL bytes, never the read itself: a read holds up to 256 KiB, and keeping
            # it held that much per stream until the response ended (memory.STREAM_BYTES counts TAIL).
            tail = data[-TAIL:] if len(data) >= TAIL else (ex.tail + data)[-TAIL:]
            ex.tail = tail
            self._edge = tail[-EDGE:]
            if tail.endswith(CHUNKED_END):
                self._finish(None)
            return
        if self._ex is None:
            self._keep_alive = False  # bytes nobody asked for: the stream is out of step
            return
        if self._state == HEAD:
            self._on_head(data)
        elif self._state == BODY_LENGTH:
            self._buf += data
            if len(self._buf) >= self._remaining:
                self._ex.tail = self._buf[: self._remaining]
                self._finish(None)
        elif self._state == BODY_CHUNKED:
            self._buf += data
            if self._buf.endswith(b"0\r\n\r\n") and (
                self._buf == b"0\r\n\r\n" or self._buf.endswith(CHUNKED_END)
            ):
                self._ex.tail = dechunk(self._buf)
                self._finish(None)
        else:  # BODY_CLOSE
            self._buf += data

    def _on_head(self, data: bytes) -> None:
        ex = self._ex
        assert ex is not None
        self._buf += data
        end = self._buf.find(b"\r\n\r\n")
        if end < 0:
            if len(self._buf) > MAX_HEAD:
                self.abort(f"response header larger than {MAX_HEAD} bytes")
            return
        head, rest = self._buf[:end].decode("latin-1"), self._buf[end + 4 :]
        lines = head.split("\r\n")
        try:
            ex.status = int(lines[0].split(" ", 2)[1])
        except (IndexError, ValueError):
            self.abort(f"not an HTTP response: {lines[0][:80]!r}")
            return
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip().lower()
        self._keep_alive = headers.get("connection") != "close"
        chunked = "chunked" in headers.get("transfer-encoding", "")
        self._buf = b""
        if ex.status == 200 and chunked and headers.get("content-type", "").startswith("text/event-stream"):
            self._state = STREAM
            self._edge = b"\n"  # a stream may open with an event straight after the chunk header
            ex.tail = b"\r\n"  # lets an empty body's terminator match CHUNKED_END
        elif chunked:
            self._state = BODY_CHUNKED
        elif "content-length" in headers:
            self._state = BODY_LENGTH
            self._remaining = int(headers["content-length"])
        else:
            self._state = BODY_CLOSE
            self._keep_alive = False
        if rest or self._state == BODY_LENGTH and self._remaining == 0:
            self.data_received(rest)

    def _finish(self, error: str | None) -> None:
        done, ex = self._done, self._ex
        self._done = self._ex = None
        self._state = HEAD
        if done is not None and ex is not None and not done.done():
            ex.error = error
            done.set_result(ex)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._state == BODY_CLOSE and self._ex is not None:
            self._ex.tail = self._buf
            self._finish(None)
        elif self._ex is not None:
            self._finish(f"connection closed by the server mid-response ({exc or 'EOF'})")


def dechunk(body: bytes) -> bytes:
    """Decode a complete chunked body (used only off the hot path: error bodies)."""
    out = []
    pos = 0
    while True:
        eol = body.find(b"\r\n", pos)
        if eol < 0:
            break
        size = int(body[pos:eol].split(b";", 1)[0] or b"0", 16)
        if size == 0:
            break
        out.append(body[eol + 2 : eol + 2 + size])
        pos = eol + 2 + size + 2
    return b"".join(out)
