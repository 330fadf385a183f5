"""The prompts every server of a specdiff generates from: the built-in set, or the operator's file.

A prompt is plain text sent to ``/v1/completions`` as it is (no chat template: the comparison is of the
engine's greedy decoding, and a template would only add a place for two servers to differ). The built-in
set is twelve prompts, as many as the write-up's control was read on; most carry text that repeats
(lists, code, counting), which is what a prompt-lookup (ngram) or trained drafter proposes from, so the
speculative path is exercised rather than idle.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DEFAULT_PROMPTS = (
    "The capital of France is Paris. The capital of Italy is Rome. The capital of Spain is",
    "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,",
    "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n\n\ndef mul(a, b):\n",
    "Monday, Tuesday, Wednesday, Thursday, Friday, Saturday, Sunday. Monday, Tuesday,",
    "Question: What is 17 times 23?\nAnswer:",
    "The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the",
    "<ul>\n  <li>apple</li>\n  <li>banana</li>\n  <li>cherry</li>\n  <li>",
    "Write a short poem about the sea.\n\n",
    "SELECT name, price FROM products WHERE price > 10 ORDER BY price; SELECT name, price FROM",
    "To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer",
    "for i in range(10):\n    print(i)\nfor j in range(10):\n    print(j)\nfor k in range(10):\n",
    "Translate to French: good morning. Bonjour. Translate to French: good night.",
)
MAX_PROMPTS = 10_000
"""More is a task benchmark's job, not a greedy comparison's: refused with the fix."""


class PromptsError(ValueError):
    """A prompts file or argument that cannot be used; the message names the entry and the fix."""


def parse(value: Any, where: str) -> list[str]:
    """Prompts from decoded JSON: a non-empty list whose entries are a non-empty string or an object with a
    non-empty ``prompt`` string (other keys are refused: nothing else of a request is the operator's)."""
    if not isinstance(value, list) or not value:
        raise PromptsError(
            f'{where}: expected a non-empty JSON list of prompts (strings or {{"prompt": ...}})'
        )
    if len(value) > MAX_PROMPTS:
        raise PromptsError(f"{where}: {len(value)} prompts, over {MAX_PROMPTS}; give fewer")
    out = []
    for i, entry in enumerate(value):
        at = f"{where} entry {i}"
        given = entry
        if isinstance(entry, dict):
            extra = sorted(str(k) for k in entry if k != "prompt")
            if extra:
                raise PromptsError(f"{at}: unknown key {extra[0]!r}; an object has only 'prompt'")
            given = entry.get("prompt")
        if not isinstance(given, str) or not given.strip():
            raise PromptsError(f'{at}: a prompt must be a non-empty string (or {{"prompt": "..."}})')
        out.append(given)
    return out


def load(path: str | None, inline: str | None) -> list[str]:
    """``--prompts FILE`` (JSON), else ``--prompts-json TEXT`` (what the agent is given), else the built-in set."""
    if path is not None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise PromptsError(f"--prompts {path}: {getattr(exc, 'strerror', None) or exc}") from exc
        where = path
    elif inline is not None:
        text, where = inline, "--prompts-json"
    else:
        return list(DEFAULT_PROMPTS)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PromptsError(f"{where}: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from exc
    return parse(value, where)
