"""Divergence of two next-token distributions known only by their top-k log-probabilities.

A server returns, per position, the log-probabilities of its k most likely tokens (vLLM's prompt
log-probabilities also list the token that really came next, whatever its rank). The two sides' sets
differ, so KL needs a rule for a token one side did not list. The rule here (``MISSING_TOKEN_METHOD``,
also in docs/kldiff.md):

- Both distributions are compared over the union of the tokens either side listed, plus one "rest of
  the vocabulary" bucket per side.
- A side's residual mass is 1 minus the sum of the probabilities it listed. A union token that side did
  not list gets an even share of that residual, ``residual / (missing + 1)`` (the ``+ 1`` keeps a share
  for the rest of the vocabulary), capped at the side's k-th probability: a token outside the top k
  cannot be likelier than the k-th. What is left of the residual is the side's rest bucket.
- KL(a || b) is summed over the union and the rest bucket, natural log; a probability below
  ``FLOOR`` counts as ``FLOOR`` (float rounding can leave a side with no residual at all).

Merging the unlisted tokens into one bucket can only lower KL (coarsening never raises it), so apart
from the even-share estimate the figure is a lower bound of the full-vocabulary KL. The same rule for
every pair keeps pairs comparable with their control, which is what a verdict reads.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from agents.loadgen.metrics import percentile

FLOOR = 1e-12
TOP_OVERLAP = 5
MISSING_TOKEN_METHOD = (
    "union of both sides' listed tokens plus one rest-of-vocabulary bucket per side; a token one side did not "
    "list gets min(that side's residual mass / (missing tokens + 1), that side's k-th probability), the rest "
    "of the residual is the bucket; KL(a||b) in nats over union + bucket, probabilities floored at 1e-12"
)


@dataclass(frozen=True)
class Listed:
    """One side's view of one position: the tokens it listed and the k-th (smallest top-k) log-probability."""

    logprobs: Mapping[int, float]
    kth_logprob: float
    top: tuple[int, ...]
    """Its top-k token ids, most likely first (ties broken by token id)."""

    @classmethod
    def of(cls, entries: Mapping[int, tuple[float, int | None]], k: int) -> Listed:
        """From ``{token id: (logprob, rank)}``; entries ranked beyond ``k`` (the real next token) count as
        listed but not as top-k."""
        if not entries:
            raise ValueError("a position with no log-probabilities")
        ranked = sorted(entries, key=lambda t: (-entries[t][0], t))
        top = tuple(t for t in ranked if (entries[t][1] or 0) <= k)[:k] or tuple(ranked[:1])
        return cls({t: lp for t, (lp, _) in entries.items()}, min(entries[t][0] for t in top), top)


@dataclass(frozen=True)
class Position:
    kl: float
    top1_agree: bool
    top_overlap: float
    missing: int
    """Union tokens either side did not list (filled by the rule above)."""


def _completed(side: Listed, union: Iterable[int]) -> tuple[dict[int, float], float, int]:
    """Probabilities over ``union`` with the missing ones filled in, the rest bucket, and how many were missing."""
    probs = {t: math.exp(lp) for t, lp in side.logprobs.items()}
    missing = [t for t in union if t not in probs]
    residual = max(0.0, 1.0 - sum(probs.values()))
    share = min(residual / (len(missing) + 1), math.exp(side.kth_logprob)) if missing else 0.0
    for t in missing:
        probs[t] = share
    return probs, residual - share * len(missing), len(missing)


def _term(p: float, q: float) -> float:
    return 0.0 if p <= 0.0 else p * (math.log(max(p, FLOOR)) - math.log(max(q, FLOOR)))


def compare(a: Listed, b: Listed) -> Position:
    """KL(a || b), top-1 agreement and top-5 overlap at one position."""
    union = set(a.logprobs) | set(b.logprobs)
    pa, rest_a, missing_a = _completed(a, union)
    pb, rest_b, missing_b = _completed(b, union)
    kl = sum(_term(pa[t], pb[t]) for t in union) + _term(rest_a, rest_b)
    n = min(TOP_OVERLAP, len(a.top), len(b.top))
    overlap = len(set(a.top[:n]) & set(b.top[:n])) / n
    # Rounding can leave a sum of two normalised distributions a hair below zero: KL is never negative.
    return Position(max(0.0, kl), a.top[0] == b.top[0], overlap, missing_a + missing_b)


@dataclass(frozen=True)
class Summary:
    positions: int
    top1_agreement: float
    top5_overlap: float
    mean_kl: float
    p50_kl: float
    p99_kl: float
    max_kl: float
    missing_per_position: float


def summarize(positions: Sequence[Position]) -> Summary:
    if not positions:
        raise ValueError("no positions to compare")
    kls = sorted(p.kl for p in positions)
    n = len(positions)
    return Summary(
        positions=n,
        top1_agreement=sum(p.top1_agree for p in positions) / n,
        top5_overlap=sum(p.top_overlap for p in positions) / n,
        mean_kl=sum(kls) / n,
        p50_kl=percentile(kls, 50) or 0.0,
        p99_kl=percentile(kls, 99) or 0.0,
        max_kl=kls[-1],
        missing_per_position=sum(p.missing for p in positions) / n,
    )
