"""One greedy generation on one server, through the ``openai`` SDK (the serving environment has it).

The server side is kldiff's (agents/kldiff/client.py ``Side``: the SDK clients, no retries, one-line
errors, the served-model check); this adds the one request specdiff makes of vLLM:
``POST /v1/completions`` with the prompt text, ``temperature`` 0, a fixed ``seed``, ``max_tokens`` and
vLLM's ``return_token_ids`` extra, which answers the generated token ids beside the text. The ids are
what is compared: two different ids can decode to the same text.
"""

from __future__ import annotations

from dataclasses import dataclass

from agents.kldiff.client import ServerError, Side


@dataclass(frozen=True)
class Generated:
    token_ids: tuple[int, ...]
    text: str


def generate(side: Side, prompt: str, max_tokens: int, seed: int) -> Generated:
    """The server's greedy continuation of ``prompt``: its token ids and text."""
    response = side._call(
        "/v1/completions",
        lambda: side.api.completions.create(
            model=side.model,
            prompt=prompt,
            max_tokens=max_tokens,
            temperature=0.0,
            seed=seed,
            extra_body={"return_token_ids": True},
        ),
    )
    choices = list(getattr(response, "choices", None) or [])
    if len(choices) != 1:
        raise ServerError(f"{side.url} answered {len(choices)} choices for one prompt")
    ids = getattr(choices[0], "token_ids", None)
    if not isinstance(ids, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in ids):
        raise ServerError(
            f"{side.url} returned no token_ids for a completion; specdiff needs vLLM's return_token_ids "
            "extra (an OpenAI-compatible server without it cannot be compared token for token)"
        )
    return Generated(tuple(ids), str(getattr(choices[0], "text", "") or ""))
