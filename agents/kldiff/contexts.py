"""The token contexts both servers score: the built-in set, or the operator's file.

A context is a prompt (plain text, or chat ``messages`` rendered by the server's own chat template) and
optionally a fixed ``continuation``. With a continuation only its positions are compared (the prompt
only sets the scene); without one, every position after the first is. The built-in set is the
tripwire's twenty questions as whole conversations, each answered correctly: natural text a chat model
is in its element on, already carried by the agent, and (for the test model) text it was trained on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.tripwire.items import ITEMS


class ContextError(ValueError):
    """A contexts file or argument that cannot be used; the message names the entry and the fix."""


@dataclass(frozen=True)
class Context:
    prompt: str | None = None
    messages: tuple[dict[str, str], ...] | None = None
    continuation: str | None = None

    def tokenize_body(self) -> dict[str, Any]:
        """The prompt part as a vLLM ``/tokenize`` request body (without ``model``)."""
        if self.messages is not None:
            # A conversation that ends with the user waits for the assistant: render that turn's opening.
            waiting = self.messages[-1].get("role") == "user"
            return {"messages": list(self.messages), "add_generation_prompt": waiting}
        return {"prompt": self.prompt, "add_special_tokens": True}


def default_contexts() -> list[Context]:
    return [
        Context(
            messages=(
                {"role": "user", "content": item.prompt},
                {"role": "assistant", "content": item.expect[0]},
            )
        )
        for item in ITEMS
    ]


def parse(value: Any, where: str) -> list[Context]:
    """Contexts from decoded JSON: a list whose entries are a string (a prompt) or an object with
    ``prompt`` or ``messages`` and optionally ``continuation``."""
    if not isinstance(value, list) or not value:
        raise ContextError(f"{where}: expected a non-empty JSON list of contexts")
    out = []
    for i, given in enumerate(value):
        at = f"{where} entry {i}"
        entry = {"prompt": given} if isinstance(given, str) else given
        if not isinstance(entry, dict) or ("prompt" in entry) == ("messages" in entry):
            raise ContextError(
                f"{at}: give a string, or an object with exactly one of 'prompt' and 'messages'"
            )
        continuation = entry.get("continuation")
        if continuation is not None and (not isinstance(continuation, str) or not continuation):
            raise ContextError(f"{at}: 'continuation' must be a non-empty string")
        if "prompt" in entry:
            if not isinstance(entry["prompt"], str) or not entry["prompt"]:
                raise ContextError(f"{at}: 'prompt' must be a non-empty string")
            out.append(Context(prompt=entry["prompt"], continuation=continuation))
            continue
        messages = entry["messages"]
        if (
            not isinstance(messages, list)
            or not messages
            or not all(
                isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
                for m in messages
            )
        ):
            raise ContextError(f"{at}: 'messages' must be a non-empty list of {{role, content}} strings")
        out.append(Context(messages=tuple(messages), continuation=continuation))
    return out


def load(path: str | None, inline: str | None) -> list[Context]:
    """``--contexts FILE`` (JSON), else ``--contexts-json TEXT`` (what the agent is given), else the built-in set."""
    if path is not None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ContextError(f"--contexts {path}: {exc.strerror or exc}") from exc
        where = path
    elif inline is not None:
        text, where = inline, "--contexts-json"
    else:
        return default_contexts()
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ContextError(f"{where}: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from exc
    return parse(value, where)
