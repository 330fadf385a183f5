"""Prompts of an exact length in tokens, built from token ids (no tokenizer library needed).

vLLM's ``/v1/completions`` takes ``prompt`` as a list of token ids and adds nothing to it, so a list of
N ids is exactly N prompt tokens; every response's ``usage.prompt_tokens`` is checked against it anyway.
Ids are drawn from the model's vocabulary minus its special tokens, read from ``tokenizer.json`` /
``config.json`` with the json module. The shared prefix is built once per run from the run's seed, and
each request gets a unique suffix whose first ids encode its index, so no two prompts of a run share
more than the prefix and repeat runs (a new seed) get no prefix-cache hits from earlier runs.
"""

from __future__ import annotations

import json
import random
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

POOL_MIN = 1 << 16
"""Random ids pre-drawn per run; a request's suffix is a slice of this pool after its unique ids."""


class VocabError(ValueError):
    """The vocabulary could not be determined: says where it looked and what to pass instead."""


@dataclass(frozen=True)
class Vocab:
    size: int
    special_ids: frozenset[int]
    source: str

    def allowed(self) -> list[int]:
        return [i for i in range(self.size) if i not in self.special_ids]


def _read_json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise VocabError(f"{path}: unreadable {what} ({exc}); pass --vocab-size N instead") from exc


def _tokenizer_vocab(tok: dict[str, Any]) -> tuple[int, set[int]]:
    """Vocabulary size and special ids of a ``tokenizer.json``: its model's vocab plus the added tokens."""
    size = 0
    special: set[int] = set()
    vocab = (tok.get("model") or {}).get("vocab")
    if isinstance(vocab, dict) and vocab:
        size = max(vocab.values()) + 1
    elif isinstance(vocab, list) and vocab:  # unigram models list [piece, score] pairs
        size = len(vocab)
    for added in tok.get("added_tokens") or []:
        if added.get("special"):
            special.add(int(added["id"]))
        size = max(size, int(added["id"]) + 1)
    return size, special


def _config_size(text_cfg: dict[str, Any], size: int) -> int:
    """The tokenizer's size capped at the config's ``vocab_size``, or that alone without a tokenizer."""
    vocab_size = text_cfg.get("vocab_size")
    if isinstance(vocab_size, int):
        # The embedding table may be padded past the tokenizer: ids beyond it decode to nothing.
        return min(size, vocab_size) if size else vocab_size
    return size


def _config_special_ids(text_cfg: dict[str, Any]) -> set[int]:
    """The config's bos/eos/pad ids, each given as one id or a list of them."""
    special: set[int] = set()
    for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
        value = text_cfg.get(key)
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, int):
                special.add(v)
    return special


def _check_usable(directory: Path, size: int, special: set[int]) -> None:
    """Refuse a vocabulary that was not found, or that leaves fewer than two ids to draw prompts from."""
    if size <= 0:
        raise VocabError(
            f"{directory}: no tokenizer.json or config.json with a vocabulary; "
            "pass --tokenizer DIR (the model directory) or --vocab-size N"
        )
    if size - len(special) < 2:
        raise VocabError(
            f"{directory}: vocabulary of {size} ids leaves nothing after {len(special)} special ids"
        )


def vocab_from_dir(directory: Path) -> Vocab:
    """Vocabulary size and special ids of a Hugging Face model or tokenizer directory."""
    size = 0
    special: set[int] = set()
    tok_file = directory / "tokenizer.json"
    cfg_file = directory / "config.json"
    if tok_file.exists():
        size, special = _tokenizer_vocab(_read_json(tok_file, "tokenizer"))
    if cfg_file.exists():
        cfg = _read_json(cfg_file, "config")
        text_cfg = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else cfg
        size = _config_size(text_cfg, size)
        special |= _config_special_ids(text_cfg)
    _check_usable(directory, size, special)
    return Vocab(size, frozenset(special), str(directory))


@dataclass(frozen=True)
class PromptPlan:
    """Everything a worker needs to build request ``i`` of a run, deterministically from the seed."""

    seed: int
    input_len: int
    prefix_len: int
    allowed: tuple[int, ...]
    prefix: tuple[int, ...]
    pool: tuple[int, ...]
    prefix_json: bytes = field(default=b"", repr=False, compare=False)
    """The prefix's ids as JSON list items, each followed by a comma (encoded once per run)."""
    pool_json: bytes = field(default=b"", repr=False, compare=False)
    """The pool's ids the same way, so a request's slice of the pool is one slice of these bytes."""
    pool_offsets: array[int] = field(default_factory=lambda: array("I"), repr=False, compare=False)
    """Where each pool id starts in ``pool_json``, and its length at the end (len(pool) + 1 entries)."""

    @classmethod
    def build(cls, vocab: Vocab, seed: int, input_len: int, prefix_len: int) -> PromptPlan:
        """``input_len`` unique tokens per request after ``prefix_len`` shared ones."""
        if prefix_len < 0 or input_len < 1:
            raise ValueError(f"prefix length {prefix_len} must be >= 0 and input length {input_len} >= 1")
        rng = random.Random(seed)
        allowed = tuple(vocab.allowed())
        prefix = tuple(rng.choices(allowed, k=prefix_len))
        pool = tuple(rng.choices(allowed, k=max(POOL_MIN, 2 * input_len)))
        items = [b"%d," % i for i in pool]
        offsets = array("I", [0])
        for item in items:
            offsets.append(offsets[-1] + len(item))
        prefix_json = b"".join(b"%d," % i for i in prefix)
        return cls(seed, input_len, prefix_len, allowed, prefix, pool, prefix_json, b"".join(items), offsets)

    def unique_ids(self, index: int) -> list[int]:
        """The request's index written in base len(allowed): distinct for every index, never empty."""
        base = len(self.allowed)
        digits = [self.allowed[index % base]]
        index //= base
        while index:
            digits.append(self.allowed[index % base])
            index //= base
        return digits

    def _suffix(self, index: int) -> tuple[list[int], int, int]:
        """Request ``index``'s unique ids and where its slice of the pool starts and ends."""
        head = self.unique_ids(index)[: self.input_len]
        rest = self.input_len - len(head)
        start = random.Random(self.seed * 1_000_003 + index).randrange(len(self.pool) - rest + 1)
        return head, start, start + rest

    def ids(self, index: int) -> list[int]:
        head, start, end = self._suffix(index)
        return [*self.prefix, *head, *self.pool[start:end]]

    def prompt_json(self, index: int) -> bytes:
        """The prompt as the JSON list that goes into the request body (the same ids as ``ids``).

        Why from pre-encoded bytes: formatting 1,024 ids per request took 94 us of the client's core, the
        largest cost of a request at ``--input-len 1024`` (cProfile, bench/loadgen_ceiling.py); the prefix and
        the pool are encoded once, so a request formats only its few unique ids and copies one slice."""
        head, start, end = self._suffix(index)
        off = self.pool_offsets
        items = self.prefix_json + b"".join(b"%d," % i for i in head) + self.pool_json[off[start] : off[end]]
        return b"[" + items[:-1] + b"]"
