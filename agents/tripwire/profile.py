"""The vendor serving profile as request fields: which go top-level, which through ``extra_body``.

The console resolves a profile (``console.recipes`` ``ServingProfile.to_dict()``: ``request`` and
``extra_body`` already split) and passes it as JSON; the box has no recipes. ``extra_body`` is the
OpenAI client's name for fields it does not know (top_k, min_p, chat_template_kwargs...): on the wire
they are top-level JSON fields like the rest, and they are recorded separately so the output shows the
model was sampled the vendor's way (campaign rule 9).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OPENAI_FIELDS = frozenset(
    {
        "temperature",
        "top_p",
        "presence_penalty",
        "frequency_penalty",
        "seed",
        "stop",
        "max_tokens",
        "max_completion_tokens",
        "logit_bias",
        "n",
    }
)


class ProfileError(ValueError):
    """A profile that cannot be used: the message says where it came from and what to pass."""


@dataclass(frozen=True)
class RequestProfile:
    name: str | None
    request: dict[str, Any] = field(default_factory=dict)
    extra_body: dict[str, Any] = field(default_factory=dict)
    reasoning_parser: str | None = None


def from_dict(data: dict[str, Any], name: str | None = None) -> RequestProfile:
    if not isinstance(data, dict):
        raise ProfileError(f"profile must be a JSON object, got {type(data).__name__}")
    if "request" in data or "extra_body" in data:
        request, extra = dict(data.get("request") or {}), dict(data.get("extra_body") or {})
    else:  # a raw profile: sampling + chat_template_kwargs
        sampling = dict(data.get("sampling") or {})
        request = {k: v for k, v in sampling.items() if k in OPENAI_FIELDS}
        extra = {k: v for k, v in sampling.items() if k not in OPENAI_FIELDS}
        if data.get("chat_template_kwargs"):
            extra["chat_template_kwargs"] = dict(data["chat_template_kwargs"])
    return RequestProfile(name or data.get("name"), request, extra, data.get("reasoning_parser"))


def load(name: str | None, profile_json: str | None) -> RequestProfile:
    """The resolved profile from --profile-json (inline JSON or @file), labelled ``name``; none: no profile.

    The box never reads recipes: the console resolves the arm's profile and sends it whole.
    """
    if profile_json:
        text = profile_json
        if text.startswith("@"):
            try:
                text = Path(text[1:]).read_text(encoding="utf-8")
            except OSError as exc:
                raise ProfileError(f"--profile-json {profile_json}: {exc}") from exc
        try:
            return from_dict(json.loads(text), name)
        except ValueError as exc:
            raise ProfileError(f"--profile-json: not valid JSON ({exc})") from exc
    return RequestProfile(name)
