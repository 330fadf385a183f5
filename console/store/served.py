"""What a measured row was served with: the server's reasoning parser, whether thinking was on, the sampling sent.

The write-up's house-default-vs-vendor table (0.558 against 0.732 on the same Qwen3.8-27B weights) turns on
these three, and "enable_thinking defaults differ per model, so a naive table compares some models thinking
and others not" (campaign rule 9). So every bench, tripwire and quality row keeps them as they were sent, not as
the recipe reads today. ``thinking`` is one of:

- the switch the request sent (``enable_thinking=False``, ``reasoning_effort=high``: the first found);
- ``... (server default)``: the switch the server was started with (``--default-chat-template-kwargs``);
- ``model default: on`` / ``off`` / ``not stated``: nothing switched it, so the model's own default held,
  as the arm's profile states it (``thinking_default``);
- ``NOT_APPLICABLE``: the load generator's ``/v1/completions`` renders no chat template, so nothing switches it.

``sampling`` is a JSON object of the sampling fields sent; ``{}`` means none, so the server's defaults held.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

THINKING_KEYS = ("enable_thinking", "reasoning_effort", "reasoning_tokens", "thinking")
"""Generation settings that switch or size a model's reasoning; the first found is kept as ``thinking``."""
NOT_SAMPLING = frozenset(
    {
        "max_tokens",
        "max_completion_tokens",
        "min_tokens",
        "ignore_eos",
        "stream",
        "stream_options",
        "chat_template_kwargs",
        "n",
        "stop",
    }
)
"""Request fields that set lengths, framing or the template, not how tokens are drawn."""
NOT_APPLICABLE = "not applicable: /v1/completions renders no chat template"
COMPLETIONS = "/v1/completions"


def thinking_setting(*settings: Mapping[str, Any] | None) -> str | None:
    """``enable_thinking=False``, ``reasoning_effort=high``...: the first reasoning switch in the settings
    sent (also inside ``chat_template_kwargs`` and ``extra_body``), None when none says."""
    for s in settings:
        if not isinstance(s, Mapping):
            continue
        for key in THINKING_KEYS:
            if s.get(key) is not None:
                return f"{key}={s[key]}"
        nested = thinking_setting(s.get("chat_template_kwargs"), s.get("extra_body"))
        if nested:
            return nested
    return None


def thinking(sent: Iterable[Mapping[str, Any] | None], server_kwargs: str | None, default: Any) -> str:
    """Whether thinking was on and what decided it (see the module's list). ``server_kwargs`` is the server's
    ``--default-chat-template-kwargs`` JSON; ``default`` the profile's ``thinking_default`` (None: not stated)."""
    switch = thinking_setting(*sent)
    if switch:
        return switch
    try:
        server = json.loads(server_kwargs) if server_kwargs else None
    except ValueError:
        server = None
    switch = thinking_setting(server if isinstance(server, Mapping) else None)
    if switch:
        return f"{switch} (server default)"
    if isinstance(default, bool):
        return f"model default: {'on' if default else 'off'}"
    return "model default: not stated"


def sampling_sent(*fields: Mapping[str, Any] | None) -> dict[str, Any]:
    """The sampling fields among the request's top-level fields and ``extra_body``: ``{}`` when none was sent."""
    out: dict[str, Any] = {}
    for f in fields:
        if isinstance(f, Mapping):
            out.update({k: v for k, v in f.items() if k not in NOT_SAMPLING})
    return out
