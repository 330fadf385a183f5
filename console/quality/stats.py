"""Paired comparison of two task-accuracy runs on the items both scored, and the suite's noise floor.

The write-up's lesson: a repeat of one configuration moved its aggregate by up to 0.022 and flipped 15 to
50 of 403 items, so two runs are only compared on the items both scored, and a difference is read
against the spread of repeats before it is called a finding (docs/quality.md has the method).

- The split counts the items only A got fully right (McNemar's b) against those only B got right (c).
  An exact two-sided binomial (McNemar) test asks whether b:c is a coin toss.
- The aggregate difference is the mean of the per-item score differences, with a paired 95% interval
  (normal, from the per-item differences' variance). For right/wrong scores it needs only n, b and c,
  so a write-up's published split is compared by the same arithmetic as two stored runs.
- The noise floor is the largest aggregate gap between repeats of one configuration; a difference at
  most that large is a tie whatever its p-value.

Pure arithmetic: no store, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

Z95 = 1.959963984540054
"""The two-sided 95% normal quantile."""

RIGHT = 1.0 - 1e-9
"""A score at least this counts as right: partial credit (Inspect's 0.5) is not right."""

TIE, A_AHEAD, B_AHEAD, UNKNOWN = "tie", "a", "b", "unknown"


@dataclass(frozen=True)
class Paired:
    """Two runs on their common items: how many, who alone got which right, and the score differences."""

    n: int
    a_only: int  # items A got right and B did not (McNemar's b)
    b_only: int  # items B got right and A did not (c)
    sum_diff: float  # sum over the items of score A - score B
    sum_sq_diff: float  # sum of the squared differences
    a_mean: float | None = None  # mean score on the common items, where known
    b_mean: float | None = None

    @classmethod
    def of_scores(cls, pairs: Iterable[tuple[float, float]]) -> Paired:
        """From (score A, score B) per common item."""
        n = a_only = b_only = 0
        sum_a = sum_b = sum_diff = sum_sq = 0.0
        for a, b in pairs:
            n += 1
            sum_a, sum_b = sum_a + a, sum_b + b
            a_only += a >= RIGHT > b
            b_only += b >= RIGHT > a
            sum_diff += a - b
            sum_sq += (a - b) ** 2
        return cls(n, a_only, b_only, sum_diff, sum_sq, sum_a / n if n else None, sum_b / n if n else None)

    @classmethod
    def of_counts(
        cls, n: int, a_only: int, b_only: int, a_mean: float | None = None, b_mean: float | None = None
    ) -> Paired:
        """From a published split of right/wrong items: every difference is +1, -1 or 0."""
        if n < 1 or a_only < 0 or b_only < 0 or a_only + b_only > n:
            raise ValueError(f"a split of {a_only} to {b_only} cannot come from {n} common items")
        return cls(n, a_only, b_only, float(a_only - b_only), float(a_only + b_only), a_mean, b_mean)

    @property
    def diff(self) -> float:
        """Mean score of A minus mean score of B on the common items."""
        return self.sum_diff / self.n if self.n else 0.0

    @property
    def split(self) -> str:
        return f"{self.a_only} to {self.b_only}"

    @property
    def interval(self) -> tuple[float, float] | None:
        """The paired 95% interval of ``diff``; None below two items (no variance to speak of)."""
        if self.n < 2:
            return None
        variance = max(0.0, (self.sum_sq_diff - self.n * self.diff**2) / (self.n - 1))
        half = Z95 * math.sqrt(variance / self.n)
        return self.diff - half, self.diff + half

    @property
    def p_value(self) -> float:
        return mcnemar_exact(self.a_only, self.b_only)

    def swapped(self) -> Paired:
        """The same pair read from B's side."""
        return Paired(
            self.n, self.b_only, self.a_only, -self.sum_diff, self.sum_sq_diff, self.b_mean, self.a_mean
        )


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value: the chance of a split at least this lopsided from a fair coin."""
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1))
    return min(1.0, 2 * tail / (1 << n))


def noise_floor(repeats: Iterable[Paired]) -> float | None:
    """The largest aggregate gap between repeats of one configuration; None when there are none."""
    gaps = [abs(p.diff) for p in repeats if p.n]
    return max(gaps) if gaps else None


def decide(p: Paired, floor: float | None) -> str:
    """``tie`` inside the floor, ``a``/``b`` for the side ahead outside it, ``unknown`` without a floor."""
    if floor is None:
        return UNKNOWN
    if abs(p.diff) <= floor + 1e-12:
        return TIE
    return A_AHEAD if p.diff > 0 else B_AHEAD


def wilson(successes: float, n: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval of a proportion (95% by default); None for no items.

    The write-up quotes its accuracies with Wilson intervals (per family roughly +-0.10, the aggregate
    +-0.045): unlike the normal interval it stays inside [0, 1] and does not collapse to a point at 0 or n
    right. ``successes`` may be a sum of partial scores (0..1 each); it is read as that many right items.
    """
    if n <= 0:
        return None
    if not 0.0 <= successes <= n:
        raise ValueError(f"{successes} right of {n} items is not a proportion")
    p = successes / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    low, high = max(0.0, centre - half), min(1.0, centre + half)
    # At none or all right the interval ends exactly at 0 or 1 (rounding would leave 1 - 1e-16), and it always
    # holds p itself.
    return (0.0 if p == 0 else min(low, p)), (1.0 if p == 1 else max(high, p))


def wilson_text(successes: float, n: int) -> str:
    """``0.725 [0.679, 0.766]``: an accuracy with its Wilson 95% interval, as every list prints it."""
    bounds = wilson(successes, n)
    if bounds is None:
        return "-"
    return f"{successes / n:.3f} [{bounds[0]:.3f}, {bounds[1]:.3f}]"
