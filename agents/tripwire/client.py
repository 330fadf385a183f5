"""Chat requests for the tripwire through the ``openai`` SDK.

Why the SDK: it is the one client for every request where speed does not matter (the load generator
keeps its own raw streaming client: docs/facts.md measured the SDK's streaming objects 11x slower, which twenty
requests never notice). The agent itself is stdlib-only and a box's system Python has no ``openai``, but
the serving environment always has it (vLLM depends on it), so the tripwire runs under the serving
environment's Python (``agents/jobs.py`` starts it with the ``python`` its command names). ``openai`` is
imported when a client is made, so the rest of the agent imports this module without it.
"""

from __future__ import annotations

import platform
import sys
import time
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


class ClientError(RuntimeError):
    """No client can be made: the message says which Python this is and what to do."""


def make_client(base_url: str, api_key: str | None, timeout_s: float) -> Any:
    """An ``openai.OpenAI`` client for the server at ``base_url``, shared by the request threads.

    No retries: a failed request is a graded fact ("HTTP 500: engine dead"), not something to hide.
    """
    try:
        import openai
    except ImportError as exc:
        raise ClientError(
            f"the openai package is not importable by {sys.executable} (Python {platform.python_version()}); "
            f"run the tripwire under the serving environment's python (vLLM installs openai), or install it: "
            f"{sys.executable} -m pip install openai"
        ) from exc
    return openai.OpenAI(
        base_url=base_url.rstrip("/") + "/v1", api_key=api_key or "EMPTY", timeout=timeout_s, max_retries=0
    )


def chat(client: Any, model: str, prompt: str, profile: RequestProfile, max_tokens: int) -> ChatResult:
    """One chat completion with the profile's request fields and ``extra_body`` (top_k, min_p,
    chat_template_kwargs...: fields the SDK does not know, sent top-level on the wire all the same)."""
    import openai

    fields = {"max_tokens": max_tokens, **profile.request}
    t = time.monotonic()
    try:
        response = client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": prompt}],
            extra_body=profile.extra_body or None,
            **fields,
        )
    except openai.APIStatusError as exc:
        detail = exc.response.text[:300]
        return ChatResult(seconds=time.monotonic() - t, error=f"HTTP {exc.status_code}: {detail}")
    except openai.APIError as exc:
        return ChatResult(seconds=time.monotonic() - t, error=f"{type(exc).__name__}: {exc}")
    seconds = time.monotonic() - t
    if not response.choices:
        return ChatResult(seconds=seconds, error=f"unexpected response: {response.model_dump_json()[:300]}")
    choice = response.choices[0]
    message = choice.message
    reasoning = getattr(message, "reasoning_content", None) or getattr(message, "reasoning", None)
    return ChatResult(
        content=message.content or "",
        reasoning_content=reasoning or None,
        finish_reason=choice.finish_reason,
        completion_tokens=response.usage.completion_tokens if response.usage else None,
        seconds=seconds,
    )
