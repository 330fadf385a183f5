"""Chat requests for the tripwire over the standard library (the box has no openai package).

Twenty requests, not a load test: urllib in a few threads is enough, and one code path is tested.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from agents.tripwire.profile import RequestProfile


@dataclass
class ChatResult:
    content: str = ""
    reasoning_content: str | None = None
    finish_reason: str | None = None
    completion_tokens: int | None = None
    seconds: float = 0.0
    error: str | None = None


def request_body(model: str, prompt: str, profile: RequestProfile, max_tokens: int) -> dict[str, Any]:
    return {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        **profile.request,
        **profile.extra_body,
    }


def chat(base_url: str, body: dict[str, Any], timeout_s: float, api_key: str | None) -> ChatResult:
    request = urllib.request.Request(
        base_url.rstrip("/") + "/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **({"Authorization": f"Bearer {api_key}"} if api_key else {})},
        method="POST",
    )
    t = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            data = json.load(response)
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode("utf-8", "replace")[:300]
        return ChatResult(seconds=time.monotonic() - t, error=f"HTTP {exc.code}: {detail}")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return ChatResult(seconds=time.monotonic() - t, error=f"{type(exc).__name__}: {exc}")
    seconds = time.monotonic() - t
    try:
        choice = data["choices"][0]
        message = choice["message"]
    except (KeyError, IndexError, TypeError):
        return ChatResult(seconds=seconds, error=f"unexpected response: {json.dumps(data)[:300]}")
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    return ChatResult(
        content=message.get("content") or "",
        reasoning_content=reasoning or None,
        finish_reason=choice.get("finish_reason"),
        completion_tokens=(data.get("usage") or {}).get("completion_tokens"),
        seconds=seconds,
    )
