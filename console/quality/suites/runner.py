"""Send a suite's items to an OpenAI-compatible chat server and score the answers, under a token cap and a
request timeout (the write-up's F20 policy).

- **Caps**: each item's ``max_tokens`` is its family's cap (``--cap code=20480``), else the run's
  (``--cap 32768``), never more than the window minus the prompt; with no cap given, the window minus the
  prompt ("cap generation just under the context window and let the time budget be the only limit"). The
  prompt is counted by the server (vLLM's ``/tokenize``, which also reports ``max_model_len``); a server
  that cannot count gets no ``max_tokens`` where no cap is given (vLLM then applies the same rule itself).
- **Timeout**: one request may take ``timeout_s`` (default an hour, the write-up's). An item that runs out
  of time, or whose request fails, is **unscored** with the reason: excluded from the accuracy, never
  counted wrong, and re-run by ``campaign quality run --complete``.
- **Truncation**: an answer the server stopped at the cap (``finish_reason`` ``length``) is scored as it
  stands and flagged truncated.

The request carries the arm's vendor profile: its sampling fields and ``chat_template_kwargs`` top-level
(console/recipes/model.py ``ServingProfile.request_params``). Requests use the standard library's HTTP
client in worker threads, ``concurrency`` at a time.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from console.bounds import MAX_TOKENS
from console.errors import InputError
from console.quality.suites.house import FAMILIES, Messages, SuiteItem

DEFAULT_TIMEOUT_S = 3600.0
"""One hour per request: the write-up lost its hardest items to a 600 s default and moved to this."""
WINDOW = "window"
"""How a cap of "the window minus the prompt" is written in the stored caps."""
CAP_WHERE = "--cap"
CAP_HELP = "give a token count (--cap 32768) or a family's (--cap code=20480)"


@dataclass(frozen=True)
class Caps:
    """Generation caps: one for every family (None: the window minus the prompt) and per-family overrides."""

    default: int | None = None
    by_family: Mapping[str, int] = field(default_factory=dict)

    def cap(self, family: str) -> int | None:
        return self.by_family.get(family, self.default)

    def to_json(self) -> dict[str, Any]:
        """As stored with the run: ``{"*": 32768 or "window", "code": 20480}``."""
        return {"*": WINDOW if self.default is None else self.default, **dict(sorted(self.by_family.items()))}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Caps:
        top = data.get("*", WINDOW)
        return cls(None if top == WINDOW else int(top), {k: int(v) for k, v in data.items() if k != "*"})

    @staticmethod
    def parse_one(text: str, families: Sequence[str]) -> tuple[str | None, int]:
        """One ``--cap`` value: ``N`` (every family) or ``FAMILY=N``; a bad one is refused in one line."""
        family, _, count = text.rpartition("=")
        if family and family not in families:
            raise InputError(
                f"{CAP_WHERE} {text!r}: no family {family!r} (the suite's are {', '.join(families)})",
                CAP_HELP,
            )
        return family or None, MAX_TOKENS.parse(count)

    @classmethod
    def of(cls, values: Sequence[tuple[str | None, int]]) -> Caps:
        """From parsed ``--cap`` values; a later one for the same family wins."""
        default: int | None = None
        by_family: dict[str, int] = {}
        for family, tokens in values:
            if family is None:
                default = tokens
            else:
                by_family[family] = tokens
        return cls(default, by_family)


def parse_cap(text: str) -> tuple[str | None, int]:
    """A ``--cap`` value of the house suite (``quality run`` and ``sweep run`` both take it)."""
    return Caps.parse_one(text, FAMILIES)


@dataclass(frozen=True)
class Endpoint:
    """Where the items go: the server's root URL (no ``/v1``), the served model, and the profile's fields."""

    base_url: str
    model: str
    request: Mapping[str, Any] = field(default_factory=dict)  # sampling and chat_template_kwargs, top-level
    timeout_s: float = DEFAULT_TIMEOUT_S


@dataclass(frozen=True)
class ItemResult:
    family: str
    item_id: str
    score: float | None  # None: unscored (``reason`` says why)
    truncated: bool | None
    output_tokens: int | None
    reason: str | None = None
    max_tokens: int | None = None  # what was sent; None: none (the server's own rule)
    answer: str | None = None  # the content as it came (kept in the run's file, not in the store)


def _post(url: str, body: Mapping[str, Any], timeout_s: float) -> dict[str, Any]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        data = json.loads(response.read())
    if not isinstance(data, dict):
        raise ValueError(f"not a JSON object: {str(data)[:100]}")
    return data


class Client:
    """Blocking calls to one server (each runs in a worker thread)."""

    def __init__(self, endpoint: Endpoint):
        self.endpoint = endpoint
        self.root = endpoint.base_url.rstrip("/").removesuffix("/v1")

    def tokenize(self, messages: Messages) -> tuple[int, int | None] | None:
        """(prompt tokens, the server's max_model_len) by vLLM's ``/tokenize``; None where it has none."""
        try:
            data = _post(
                f"{self.root}/tokenize",
                {"model": self.endpoint.model, "messages": list(messages), "add_generation_prompt": True},
                60.0,
            )
        except (OSError, ValueError, http.client.HTTPException):
            return None
        count, window = data.get("count"), data.get("max_model_len")
        if not isinstance(count, int):
            return None
        return count, window if isinstance(window, int) else None

    def window(self) -> int | None:
        """The server's ``max_model_len`` (vLLM reports it with ``/tokenize`` and on ``/v1/models``)."""
        probe = self.tokenize(({"role": "user", "content": "hi"},))
        if probe is not None and probe[1] is not None:
            return probe[1]
        try:
            with urllib.request.urlopen(f"{self.root}/v1/models", timeout=60.0) as response:
                models = json.loads(response.read()).get("data") or []
        except (OSError, ValueError, AttributeError, http.client.HTTPException):
            return None
        lens = [m.get("max_model_len") for m in models if m.get("id") == self.endpoint.model]
        return lens[0] if lens and isinstance(lens[0], int) else None

    def ask(self, item: SuiteItem, caps: Caps, window: int | None) -> ItemResult:
        """One item: the request under its cap and the timeout, then its score (or why it has none)."""
        cap = caps.cap(item.family)
        max_tokens = cap
        if window is not None:
            counted = self.tokenize(item.messages)
            if counted is not None:
                room = window - counted[0]
                if room < 1:
                    return ItemResult(
                        item.family,
                        item.item_id,
                        None,
                        None,
                        None,
                        f"prompt of {counted[0]} tokens fills the window",
                    )
                max_tokens = room if cap is None else min(cap, room)
        body: dict[str, Any] = {"model": self.endpoint.model, "messages": list(item.messages)}
        body.update(self.endpoint.request)
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        timeout = self.endpoint.timeout_s
        try:
            data = _post(f"{self.root}/v1/chat/completions", body, timeout)
        except TimeoutError:
            return self._unscored(item, f"timed out after {timeout:g} s", max_tokens)
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:200]
            return self._unscored(item, f"HTTP {exc.code}: {detail}", max_tokens)
        except (OSError, ValueError, http.client.HTTPException) as exc:  # refused, reset, cut short, not JSON
            if isinstance(getattr(exc, "reason", None), TimeoutError):
                return self._unscored(item, f"timed out after {timeout:g} s", max_tokens)
            return self._unscored(item, f"{type(exc).__name__}: {exc}"[:200], max_tokens)
        choices = data.get("choices") or []
        if not choices:
            return self._unscored(item, f"no choices in the response: {json.dumps(data)[:150]}", max_tokens)
        message = choices[0].get("message") or {}
        content = message.get("content") or ""
        usage = data.get("usage") or {}
        tokens = usage.get("completion_tokens")
        return ItemResult(
            item.family,
            item.item_id,
            item.score(content, message.get("tool_calls")),
            choices[0].get("finish_reason") == "length",
            tokens if isinstance(tokens, int) else None,
            None,
            max_tokens,
            content,
        )

    @staticmethod
    def _unscored(item: SuiteItem, reason: str, max_tokens: int | None) -> ItemResult:
        return ItemResult(item.family, item.item_id, None, None, None, reason, max_tokens)


async def run_items(
    endpoint: Endpoint, items: Sequence[SuiteItem], caps: Caps, window: int | None, concurrency: int = 8
) -> list[ItemResult]:
    """Every item against the server, ``concurrency`` in flight; results in item order."""
    client = Client(endpoint)
    gate = asyncio.Semaphore(concurrency)

    async def one(item: SuiteItem) -> ItemResult:
        async with gate:
            return await asyncio.to_thread(client.ask, item, caps, window)

    return list(await asyncio.gather(*(one(i) for i in items)))
