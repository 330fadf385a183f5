"""Open-loop arrivals: when each timed request of a rate-paced run is released (standard library only).

Why a schedule and not a closed loop: a closed loop sends the next request the moment one ends, so the load
is whatever the server can absorb at C streams; a product's users arrive on their own clock. A rate R
(requests/s) with burstiness K releases requests at gamma-distributed intervals of shape K and mean 1/R, as
``vllm bench serve --request-rate R --burstiness K`` paces them: K = 1 is a Poisson process, K below 1 is
burstier, above 1 smoother (the intervals' coefficient of variation is 1/sqrt(K)). The run's concurrency
is then a cap: a request whose time has come waits for a free slot (agents/loadgen/worker.py).

The intervals are drawn from the run's seed, so a run is reproducible, and the offsets are scaled so the
last request is released at exactly n/R seconds (vLLM's benchmark rescales its delays the same way): the
span of the schedule, and so the rate a run asks for, does not drift with the seed; the shape of the
intervals (their CV) is unchanged by the scaling.
"""

from __future__ import annotations

import math
import random


def arrival_offsets(n: int, rate: float, burstiness: float, seed: int) -> list[float]:
    """Seconds from the timed phase's start at which each of ``n`` requests is released, ascending: the
    cumulative sums of ``n`` gamma(shape=burstiness, mean=1/rate) intervals drawn from ``seed``, scaled so
    the last is n/rate. ``rate`` and ``burstiness`` must be finite and above 0 (a ValueError otherwise)."""
    if n < 1:
        raise ValueError(f"{n} requests: a schedule needs at least 1")
    for name, value in (("request rate", rate), ("burstiness", burstiness)):
        if not math.isfinite(value) or value <= 0:
            raise ValueError(f"{name} {value}: must be a finite number above 0")
    draw = random.Random(f"arrivals:{seed}")  # its own stream: the prompts draw from the seed too
    scale = 1.0 / (rate * burstiness)
    offsets, t = [], 0.0
    for _ in range(n):
        t += draw.gammavariate(burstiness, scale)
        offsets.append(t)
    factor = (n / rate) / offsets[-1] if offsets[-1] > 0 else 1.0
    return [o * factor for o in offsets]
