"""A real loopback HTTP server whose /v1/completions answers follow a script, one mode per request in turn.

Modes: 'split' (vLLM's framing written a few bytes at a time, so every byte boundary is a read boundary
somewhere in a run), 'short' (stops early), 'http400', 'error-event', 'stall' (three tokens, then nothing
until the client gives up). tests/test_loadgen.py runs it as its own process (tests/support/listening.py
says why).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
from typing import IO, Any


def chunked(events: list[bytes]) -> bytes:
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    return head + b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events) + b"0\r\n\r\n"


def stream(n: int, finish: str, prompt: int) -> bytes:
    events = [
        b'data: {"choices":[{"index":0,"text":"x","finish_reason":%s}],"usage":null}\n\n'
        % (b'"%s"' % finish.encode() if i == n - 1 else b"null")
        for i in range(n)
    ]
    events.append(
        b'data: {"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d}}\n\n' % (prompt, n)
    )
    events.append(b"data: [DONE]\n\n")
    return chunked(events)


class Script:
    def __init__(self, modes: list[str], bodies: IO[str]) -> None:
        self.modes = modes
        self.count = 0
        self.bodies = bodies

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                break
            lengths = [
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length")
            ]
            raw = await reader.readexactly(lengths[0]) if lengths else b""
            if head.startswith(b"GET /v1/models"):
                data = json.dumps(
                    {"data": [{"id": "scripted", "root": None, "max_model_len": 4096}]}
                ).encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                    % (len(data), data)
                )
                continue
            body = json.loads(raw)
            self.bodies.write(json.dumps(body) + "\n")
            self.bodies.flush()
            mode = self.modes[self.count % len(self.modes)]
            self.count += 1
            await self.answer(mode, body, reader, writer)
            await writer.drain()
        writer.close()

    async def answer(
        self, mode: str, body: dict[str, Any], reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        out, prompt = body["max_tokens"], len(body["prompt"])
        if mode == "http400":
            data = b'{"error":{"message":"This model\'s maximum context length is 8 tokens"}}'
            writer.write(
                b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                % (len(data), data)
            )
        elif mode == "error-event":
            writer.write(chunked([b'data: {"error":{"message":"engine died"}}\n\n', b"data: [DONE]\n\n"]))
        elif mode == "short":
            writer.write(stream(max(1, out // 2), "stop", prompt))
        elif mode == "stall":
            writer.write(stream(out, "length", prompt).split(b"\r\n\r\n")[0] + b"\r\n\r\n")
            writer.write(
                b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in [b'data: {"choices":[{"text":"x"}]}\n\n'] * 3)
            )
            await writer.drain()
            await reader.read()  # until the client drops the connection
        else:  # split
            payload = stream(out, "length", prompt)
            pos = 0
            while pos < len(payload):
                step = random.randint(1, 7)
                writer.write(payload[pos : pos + step])
                await writer.drain()
                await asyncio.sleep(0)
                pos += step


async def serve(modes: list[str], bodies_path: str) -> None:
    with open(bodies_path, "a", encoding="utf-8") as bodies:
        server = await asyncio.start_server(Script(modes, bodies).handle, "127.0.0.1", 0)
        print(f"listening on {server.sockets[0].getsockname()[1]}", flush=True)
        async with server:
            await server.serve_forever()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--script", required=True, help="modes, comma-separated, taken in turn per request")
    p.add_argument("--bodies", required=True, help="append every completion request's JSON body here")
    args = p.parse_args()
    asyncio.run(serve(args.script.split(","), args.bodies))


if __name__ == "__main__":
    main()
