"""One server's side of a kldiff: tokenize a context, score token ids, through the ``openai`` SDK.

Why the SDK: a handful of requests where speed does not matter, and the serving environment always has
it (vLLM depends on it); the agent starts this tool under that environment's Python (agents/jobs.py).
``openai`` is imported when a client is made, so the rest of the agent imports this module without it.

What is asked of vLLM (its OpenAI-compatible server):
- ``POST /tokenize`` (at the server root, not under ``/v1``) with ``prompt`` or chat ``messages``: the
  token ids, through the server's own tokenizer and chat template;
- ``POST /v1/completions`` with the token ids as ``prompt``, ``max_tokens`` 1 (vLLM refuses 0) and the
  ``prompt_logprobs`` extra: per prompt position, the top-k log-probabilities of the next token plus the
  token that really came next, keyed by token id with its rank (the first position has none). Echo with
  ``logprobs`` would key them by decoded text, where two ids can share a string.
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agents.kldiff.contexts import Context

BATCH = 16
"""Contexts per scoring request: the same batches go to both servers."""


class ServerError(RuntimeError):
    """A server could not be asked, or answered something unusable; the message says which and why."""


def root_url(url: str) -> str:
    """A server's base URL without a trailing ``/`` or ``/v1``: both spellings name the same server."""
    url = url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def _openai() -> Any:
    try:
        import openai
    except ImportError as exc:
        raise ServerError(
            f"the openai package is not importable by {sys.executable} (Python {platform.python_version()}); "
            f"run kldiff under the serving environment's python (vLLM installs openai), or install it: "
            f"{sys.executable} -m pip install openai"
        ) from exc
    return openai


@dataclass
class Side:
    """One server: its root URL, the model name it serves, and the SDK clients for ``/v1`` and the root."""

    url: str
    model: str
    api: Any
    root: Any

    @classmethod
    def connect(cls, url: str, model: str, api_key: str | None, timeout_s: float) -> Side:
        """Clients for the server at ``url`` (no retries: a failed request is a fact to report, not to hide)."""
        openai = _openai()
        base = root_url(url)
        api = openai.OpenAI(
            base_url=base + "/v1", api_key=api_key or "EMPTY", timeout=timeout_s, max_retries=0
        )
        return cls(base, model, api, api.with_options(base_url=base + "/"))

    def _call(self, what: str, request: Any) -> Any:
        openai = _openai()
        try:
            return request()
        except openai.APIStatusError as exc:
            raise ServerError(
                f"{self.url} {what}: HTTP {exc.status_code}: {exc.response.text[:300]}"
            ) from exc
        except openai.APIError as exc:
            raise ServerError(f"{self.url} {what}: {type(exc).__name__}: {exc}") from exc

    def served(self) -> None:
        """Refuse a model name the server does not serve, naming the ones it does."""
        models = self._call("/v1/models", self.api.models.list)
        names = sorted(m.id for m in models.data)
        if self.model not in names:
            raise ServerError(f"{self.url} does not serve model {self.model!r}; it serves {names}")

    def _tokenize(self, body: dict[str, Any]) -> list[int]:
        answer = self._call(
            "/tokenize",
            lambda: self.root.post("/tokenize", body={"model": self.model, **body}, cast_to=object),
        )
        tokens = answer.get("tokens") if isinstance(answer, dict) else None
        if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
            raise ServerError(f"{self.url} /tokenize answered without a token list: {str(answer)[:200]}")
        return tokens

    def tokenize(self, context: Context) -> tuple[list[int], int]:
        """The context's token ids and where its compared positions start (the continuation's first
        token, else the second token: the first has no prediction)."""
        ids = self._tokenize(context.tokenize_body())
        if context.continuation is None:
            return ids, 1
        rest = self._tokenize({"prompt": context.continuation, "add_special_tokens": False})
        return ids + rest, max(1, len(ids))

    def score(
        self, prompts: Sequence[list[int]], top_k: int
    ) -> list[list[dict[int, tuple[float, int | None]]]]:
        """Per prompt, per position from the second on: ``{token id: (logprob, rank)}``."""
        out: list[list[dict[int, tuple[float, int | None]]]] = []
        for start in range(0, len(prompts), BATCH):
            batch = [list(p) for p in prompts[start : start + BATCH]]
            response = self._call(
                "/v1/completions",
                lambda batch=batch: self.api.completions.create(
                    model=self.model,
                    prompt=batch,
                    max_tokens=1,
                    temperature=0.0,
                    extra_body={"prompt_logprobs": top_k},
                ),
            )
            choices = sorted(response.choices, key=lambda c: c.index)
            if len(choices) != len(batch):
                raise ServerError(f"{self.url} answered {len(choices)} choices for {len(batch)} prompts")
            for choice, prompt in zip(choices, batch, strict=True):
                out.append(self._positions(choice, len(prompt)))
        return out

    def _positions(self, choice: Any, length: int) -> list[dict[int, tuple[float, int | None]]]:
        listed = getattr(choice, "prompt_logprobs", None)
        if not isinstance(listed, list) or len(listed) != length:
            raise ServerError(
                f"{self.url} returned no prompt_logprobs for a {length}-token prompt; this tool needs "
                "vLLM's prompt_logprobs extra (an OpenAI-compatible server without it cannot be compared)"
            )
        positions = []
        for entry in listed[1:]:
            if not isinstance(entry, dict) or not entry:
                raise ServerError(f"{self.url} returned an empty prompt_logprobs entry")
            positions.append({int(t): (float(v["logprob"]), v.get("rank")) for t, v in entry.items()})
        return positions
