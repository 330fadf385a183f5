"""A zero-cost OpenAI-compatible streaming server: the load generator's ceiling is measured against it.

It answers every ``POST /v1/completions`` at once with ``max_tokens`` SSE token events framed exactly
as vLLM's server frames them (one HTTP chunk per event, a usage event, ``[DONE]``), the whole response
in one write, from a cache keyed by (max_tokens, prompt tokens). Whatever rate a client reports against
it is that client's ceiling, not a server's.

With ``--itl-ms X`` it paces instead: the first token at once, then one token event every X ms per
stream, as a real server decodes, so a client can be measured at a realistic rate (40 tokens a second
per stream at 25 ms) and must then keep up without saturating a core.

    python testbed/zero_server.py [--port 0] [--processes N] [--cpus 1,2,3] [--model NAME] [--itl-ms X]

Prints ``listening on http://127.0.0.1:PORT`` once ready. Binds 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import socket
import sys

MAX_TOKENS = re.compile(rb'"max_tokens"\s*:\s*(\d+)')
CONTENT_LENGTH = re.compile(rb"(?im)^content-length\s*:\s*(\d+)")
SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\ntransfer-encoding: chunked\r\n\r\n"
)


def chunk(event: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(event), event)


def stream_body(model: str, max_tokens: int, prompt_tokens: int) -> bytes:
    """The full chunked SSE response vLLM would send for a completion of ``max_tokens`` tokens."""
    return (
        SSE_HEAD + b"".join(chunk(e) for e in stream_events(model, max_tokens, prompt_tokens)) + b"0\r\n\r\n"
    )


def stream_events(model: str, max_tokens: int, prompt_tokens: int) -> list[bytes]:
    """The SSE events of that response, each as one HTTP chunk carries it: the tokens, usage, [DONE]."""
    head = '{"id":"cmpl-zero","object":"text_completion","created":0,"model":' + json.dumps(model) + ","

    def token(finish: str | None) -> bytes:
        choice = {"index": 0, "text": " tok", "logprobs": None, "finish_reason": finish, "stop_reason": None}
        return (
            "data: "
            + head
            + '"choices":['
            + json.dumps(choice, separators=(",", ":"))
            + '],"usage":null}\n\n'
        ).encode()

    usage = {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + max_tokens,
        "completion_tokens": max_tokens,
    }
    events = [token(None)] * (max_tokens - 1) + [token("length")]
    events.append(
        (
            "data: " + head + '"choices":[],"usage":' + json.dumps(usage, separators=(",", ":")) + "}\n\n"
        ).encode()
    )
    events.append(b"data: [DONE]\n\n")
    return events


def json_response(status: str, body: object) -> bytes:
    data = json.dumps(body).encode()
    return b"HTTP/1.1 %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (
        status.encode(),
        len(data),
        data,
    )


def prompt_tokens(body: bytes) -> int:
    """Ids in a token-id prompt, words in a text prompt: counting is the only work done per request."""
    start = body.find(b'"prompt":')
    if start < 0:
        return 0
    rest = body[start + 9 :].lstrip()
    if rest.startswith(b"["):
        return rest[: rest.find(b"]")].count(b",") + 1
    try:
        text, _ = json.JSONDecoder().raw_decode(rest.decode())
    except ValueError:
        return 0
    return len(str(text).split())


class ZeroProtocol(asyncio.Protocol):
    cache: dict[tuple[int, int], bytes] = {}
    paced: dict[tuple[int, int], list[bytes]] = {}
    model = "zero"
    itl_s = 0.0
    """Seconds between token events of a stream; 0 answers each request in one write."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.buf = b""
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            m = CONTENT_LENGTH.search(self.buf, 0, end)
            length = int(m.group(1)) if m else 0
            if len(self.buf) < end + 4 + length:
                return
            head, body = self.buf[:end], self.buf[end + 4 : end + 4 + length]
            self.buf = self.buf[end + 4 + length :]
            request_line = head.split(b"\r\n", 1)[0]
            if self.itl_s and request_line.startswith(b"POST /v1/completions"):
                self.pace(self.events(body))
            else:
                self.transport.write(self.answer(request_line, body))

    def events(self, body: bytes) -> list[bytes]:
        """The response's chunks, head first and the chunked body's end last (cached like ``answer``)."""
        key = self.key(body)
        events = self.paced.get(key)
        if events is None:
            chunks = [chunk(e) for e in stream_events(self.model, max(key[0], 1), key[1])]
            tokens, tail = chunks[:-2], b"".join(chunks[-2:]) + b"0\r\n\r\n"
            # The usage event, [DONE] and the body's end go with the last token, as vLLM sends them.
            events = [SSE_HEAD + tokens[0], *tokens[1:]]
            events[-1] += tail
            self.paced[key] = events
        return events

    def pace(self, events: list[bytes], i: int = 0) -> None:
        """Write event ``i`` now and schedule the next one ``itl_s`` later (the client sends its next
        request on this connection only after the last one, as a closed loop does)."""
        if self.transport.is_closing():
            return
        self.transport.write(events[i])
        if i + 1 < len(events):
            asyncio.get_running_loop().call_later(self.itl_s, self.pace, events, i + 1)

    @staticmethod
    def key(body: bytes) -> tuple[int, int]:
        m = MAX_TOKENS.search(body)
        return int(m.group(1)) if m else 16, prompt_tokens(body)

    def answer(self, request_line: bytes, body: bytes) -> bytes:
        method, _, rest = request_line.partition(b" ")
        path = rest.split(b" ", 1)[0]
        if method == b"GET" and path == b"/v1/models":
            return json_response(
                "200 OK",
                {
                    "object": "list",
                    "data": [{"id": self.model, "object": "model", "root": None, "max_model_len": 1 << 20}],
                },
            )
        if method == b"GET" and path == b"/health":
            return b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"
        if method != b"POST" or path != b"/v1/completions":
            return json_response("404 Not Found", {"error": {"message": f"no route {request_line.decode()}"}})
        key = self.key(body)
        response = self.cache.get(key)
        if response is None:
            response = self.cache[key] = stream_body(self.model, max(key[0], 1), key[1])
        return response


async def serve(sock: socket.socket) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(ZeroProtocol, sock=sock)
    stop = loop.create_future()
    loop.add_signal_handler(signal.SIGTERM, stop.set_result, None)
    loop.add_signal_handler(signal.SIGINT, stop.set_result, None)
    async with server:
        await stop


def listening_socket(port: int) -> socket.socket:
    """A non-blocking socket listening on 127.0.0.1, made before any fork so every acceptor shares it."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(4096)
    sock.setblocking(False)
    return sock


def pin(cpus: list[int], i: int) -> None:
    """Pin this process, acceptor ``i``, to its CPU of ``cpus`` round-robin (none given: not pinned)."""
    if cpus:
        os.sched_setaffinity(0, {cpus[i % len(cpus)]})


def announce(sock: socket.socket) -> None:
    print(f"listening on http://127.0.0.1:{sock.getsockname()[1]}", flush=True)


def fork_acceptor(sock: socket.socket, cpus: list[int], i: int) -> int:
    """Acceptor ``i`` as a child process, which serves ``sock`` until SIGTERM and then exits; its pid."""
    pid = os.fork()
    if pid == 0:
        pin(cpus, i)
        asyncio.run(serve(sock))
        os._exit(0)
    return pid


def wait_for(children: list[int]) -> None:
    """Pass SIGTERM on to the acceptors and wait until each has exited."""

    def forward(signum: int, frame: object) -> None:
        for c in children:
            os.kill(c, signal.SIGTERM)

    signal.signal(signal.SIGTERM, forward)
    for c in children:
        while True:
            try:
                os.waitpid(c, 0)
                break
            except InterruptedError:
                continue


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--model", default="zero")
    p.add_argument("--processes", type=int, default=1, help="forked acceptors sharing the listening socket")
    p.add_argument("--cpus", help="comma-separated CPUs to pin the processes to, round-robin")
    p.add_argument("--itl-ms", type=float, default=0.0, help="pace each stream: one token event every X ms")
    args = p.parse_args(argv)
    ZeroProtocol.model = args.model
    ZeroProtocol.itl_s = args.itl_ms / 1000
    sock = listening_socket(args.port)
    cpus = [int(c) for c in args.cpus.split(",")] if args.cpus else []
    if args.processes == 1:  # this process is the one acceptor
        pin(cpus, 0)
        announce(sock)
        asyncio.run(serve(sock))
        return 0
    children = [fork_acceptor(sock, cpus, i) for i in range(args.processes)]
    announce(sock)
    wait_for(children)
    return 0


if __name__ == "__main__":
    sys.exit(main())
