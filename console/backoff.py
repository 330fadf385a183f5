"""The console's one backoff: exponential, capped, with full jitter.

Every retry loop of the console waits through it: a box link reconnecting, a command whose channel open the
agent refused, an HTTP request the provider answered with 429 or 5xx. Full jitter (retry n waits a uniform
draw in ``[0, min(cap, base * 2**n)]``) spreads the clients that failed together (a fleet of links after a
network blip, a sweep's replicas opening channels at once) over the whole window instead of bunching them
at its edge, which is what makes them not fail together again.
"""

from __future__ import annotations

import math
import random


class Backoff:
    """Exponential backoff with full jitter: retry ``n`` (from 0) waits ``uniform(0, min(cap, base * 2**n))``.

    ``next`` draws the delay of the next retry and counts it; ``reset`` starts again from ``base`` (after a
    success). ``delay(n)`` draws the delay of retry ``n`` without counting, for a caller that numbers its own
    attempts. The draws come from ``rng``: a seeded ``random.Random`` makes them reproducible.
    """

    def __init__(self, base: float, cap: float, rng: random.Random | None = None):
        if not (math.isfinite(base) and base > 0):
            raise ValueError(f"backoff base {base!r}: expected a positive number of seconds")
        if not (math.isfinite(cap) and cap >= base):
            raise ValueError(f"backoff cap {cap!r}: expected a number of seconds at least the base ({base})")
        self.base, self.cap = float(base), float(cap)
        self.rng = rng if rng is not None else random.Random()
        self.attempt = 0
        # The first retry whose ceiling is the cap: from it on the ceiling is cap without computing
        # base * 2**n, which overflows a float past n = 1023 (a link retrying every 30 s for nine hours).
        self._capped_from = max(0, math.ceil(math.log2(self.cap / self.base)))

    def ceiling(self, attempt: int) -> float:
        """The most retry ``attempt`` (from 0) may wait: ``min(cap, base * 2**attempt)``."""
        if attempt < 0:
            raise ValueError(f"retry {attempt}: retries are counted from 0")
        if attempt >= self._capped_from:
            return self.cap
        return min(self.cap, math.ldexp(self.base, attempt))  # base * 2**attempt, exactly

    def delay(self, attempt: int) -> float:
        """A delay for retry ``attempt`` (from 0), drawn uniformly in ``[0, ceiling(attempt)]``."""
        return self.rng.uniform(0.0, self.ceiling(attempt))

    def next(self) -> float:
        """The delay before the next retry; each call counts one retry more."""
        delay = self.delay(self.attempt)
        self.attempt += 1
        return delay

    def reset(self) -> None:
        """Start again from ``base``: the thing retried worked."""
        self.attempt = 0
