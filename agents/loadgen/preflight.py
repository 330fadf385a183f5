"""Before the timed run: is the model served, do the lengths fit, what is the vocabulary.

Standard-library HTTP (urllib) is fine here: a handful of control requests, nothing timed.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from agents.loadgen.prompts import Vocab, VocabError, vocab_from_dir


class PreflightError(RuntimeError):
    """The server cannot run this benchmark as asked; the message says what and how to fix it."""


@dataclass(frozen=True)
class ServedModel:
    name: str
    root: str | None
    max_model_len: int | None


def served_model(base_url: str, model: str, api_key: str | None, timeout_s: float = 30) -> ServedModel:
    request = urllib.request.Request(base_url.rstrip("/") + "/v1/models")
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            listing = json.load(response)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise PreflightError(
            f"{base_url}/v1/models: {exc}; is the server up and is --base-url right?"
        ) from exc
    models = {m.get("id"): m for m in listing.get("data", []) if isinstance(m, dict)}
    if model not in models:
        raise PreflightError(
            f"{base_url} does not serve model {model!r}; it serves {sorted(map(str, models))}: pass one as --model"
        )
    entry = models[model]
    return ServedModel(model, entry.get("root"), entry.get("max_model_len"))


def find_vocab(tokenizer: str | None, served: ServedModel, vocab_size: int | None) -> Vocab:
    """--vocab-size, else --tokenizer DIR, else the served model's root directory if it is on this box."""
    if vocab_size is not None:
        return Vocab(vocab_size, frozenset(), "--vocab-size")
    if tokenizer:
        return vocab_from_dir(Path(tokenizer))
    if served.root and Path(served.root).is_dir():
        return vocab_from_dir(Path(served.root))
    raise VocabError(
        f"cannot find the vocabulary of {served.name!r}: the server's model root {served.root!r} is not a "
        "directory on this machine; pass --tokenizer DIR (the model directory) or --vocab-size N"
    )


def check_lengths(served: ServedModel, input_len: int, output_len: int) -> None:
    if input_len < 1 or output_len < 1:
        raise PreflightError(
            f"input length {input_len} and output length {output_len} must both be at least 1"
        )
    if served.max_model_len and input_len + output_len > served.max_model_len:
        raise PreflightError(
            f"input {input_len} + output {output_len} tokens exceed the server's max_model_len "
            f"{served.max_model_len}; pick a shorter shape or serve with a larger --max-model-len"
        )
