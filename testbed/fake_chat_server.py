"""A real HTTP chat-completions server on 127.0.0.1 that answers the tripwire's prompts in a chosen way.

Modes (per item id, with a default): ``correct``, ``wrong``, ``degenerate`` (a sentence loop),
``digits`` (the "111 222 333 444" pattern that fooled the write-up's first tripwire), ``right-then-digits``
(the expected answer, then "111 222 333"), ``counting`` (the right answer, then "1 2 3 ... 42"), ``bang`` ("!!!!"),
``leak-tags`` (chain of thought then ``</think>`` in the content, no reasoning_content: no parser),
``leak-prose`` ("We need to answer..." reasoning without tags), ``parsed`` (reasoning_content split
out by a parser, clean answer), ``truncated`` (thinking cut off by max_tokens), ``http-500``.
Every request body is kept in ``requests`` so tests can check what the client sent (extra_body fields).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agents.tripwire.items import ITEMS

BY_PROMPT = {item.prompt: item for item in ITEMS}


Answer = tuple[str, str | None, str]
"""(content, reasoning_content, finish_reason)."""

DIGITS = " ".join(str(d) * 3 for d in range(1, 10)) + " " + " ".join(str(d) * 4 for d in range(1, 10))

ANSWERS: dict[str, Callable[[str], Answer]] = {
    "correct": lambda expected: (f"The answer is {expected}.", None, "stop"),
    "wrong": lambda expected: ("I believe the answer is 7 and the place is Atlantis.", None, "stop"),
    "degenerate": lambda expected: ("The answer is the answer is the answer. " * 30, None, "length"),
    "digits": lambda expected: (DIGITS, None, "length"),
    "right-then-digits": lambda expected: (f"{expected} 111 222 333", None, "length"),
    "counting": lambda expected: (f"{expected} " + " ".join(str(n) for n in range(1, 43)), None, "length"),
    "bang": lambda expected: ("!" * 200, None, "length"),
    "leak-tags": lambda expected: (
        f"Okay, the user asks a question. Let me work it out carefully.\n</think>\n\n{expected}",
        None,
        "stop",
    ),
    "leak-prose": lambda expected: (
        "We need to answer user's request. The question is simple; compute it and reply briefly.\n\n"
        f"Answer: {expected}",
        None,
        "stop",
    ),
    "parsed": lambda expected: (
        expected,
        "The user wants a short answer. Recall the fact and state it.",
        "stop",
    ),
    "truncated": lambda expected: (
        "<think>\nLet me think about this step by step. First, consider",
        None,
        "length",
    ),
}
"""Each mode's answer to a question whose expected answer is given (``http-500`` answers no question)."""


def answer_for(mode: str, expected: str) -> Answer:
    """(content, reasoning_content, finish_reason) for one mode."""
    if mode not in ANSWERS:
        raise ValueError(f"unknown fake-server mode {mode!r}")
    return ANSWERS[mode](expected)


class _Server(ThreadingHTTPServer):
    request_queue_size = 128  # the tripwire opens 20 connections at once
    daemon_threads = True


class FakeChatServer:
    def __init__(
        self,
        default: str = "correct",
        modes: dict[str, str] | None = None,
        model: str = "fake",
        max_model_len: int = 40960,
    ) -> None:
        self.default = default
        self.max_model_len = max_model_len
        self.modes = dict(modes or {})
        self.model = model
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:
                # vLLM's /health: 200 once it serves (agents/tripwire/ready.py waits on it)
                if self.path == "/health":
                    return self._send(200, {})
                if self.path != "/v1/models":
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                self._send(
                    200,
                    {"object": "list", "data": [{"id": server.model, "max_model_len": server.max_model_len}]},
                )

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                item = BY_PROMPT.get(body["messages"][-1]["content"])
                mode = server.modes.get(item.id, server.default) if item else "wrong"
                if self.path != "/v1/chat/completions" or body.get("model") != server.model:
                    return self._send(
                        404, {"error": {"message": f"no model {body.get('model')!r} at {self.path}"}}
                    )
                if mode == "http-500":
                    return self._send(500, {"error": {"message": "engine dead"}})
                content, reasoning, finish = answer_for(mode, item.expect[0] if item else "")
                message: dict[str, Any] = {"role": "assistant", "content": content}
                if reasoning is not None:
                    message["reasoning_content"] = reasoning
                self._send(
                    200,
                    {
                        "id": "chatcmpl-fake",
                        "object": "chat.completion",
                        "model": server.model,
                        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                        "usage": {
                            "prompt_tokens": 20,
                            "completion_tokens": len(content.split()),
                            "total_tokens": 20 + len(content.split()),
                        },
                    },
                )

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._httpd = _Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def __enter__(self) -> FakeChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
