"""Two greedy generations of one prompt, compared token for token."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


def first_divergence(a: Sequence[int], b: Sequence[int]) -> int | None:
    """The index of the first generated token where ``a`` and ``b`` differ; None when they are identical.

    When one is a prefix of the other (one side stopped early, at an end-of-sequence token), they diverge
    where the shorter one ends: the longer one generated a token there and the shorter did not."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


@dataclass(frozen=True)
class Item:
    """One prompt's four captures and how each pair compared (``*_diverge_at``: None when identical)."""

    prompt: str
    spec: tuple[int, ...]
    base: tuple[int, ...]
    control_a: tuple[int, ...]
    control_b: tuple[int, ...]
    spec_text: str
    base_text: str

    @property
    def pair_diverge_at(self) -> int | None:
        return first_divergence(self.spec, self.base)

    @property
    def control_diverge_at(self) -> int | None:
        return first_divergence(self.control_a, self.control_b)

    def to_json(self) -> dict[str, object]:
        return {
            "prompt": self.prompt,
            "spec": list(self.spec),
            "base": list(self.base),
            "control_a": list(self.control_a),
            "control_b": list(self.control_b),
            "spec_text": self.spec_text,
            "base_text": self.base_text,
            "pair_match": self.pair_diverge_at is None,
            "pair_diverge_at": self.pair_diverge_at,
            "control_match": self.control_diverge_at is None,
            "control_diverge_at": self.control_diverge_at,
        }
