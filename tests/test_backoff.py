"""console/backoff.py: the one backoff every retry loop waits through (box links, channel opens, the
provider's HTTP API): exponential, capped, full jitter, reproducible from a seeded ``random.Random``."""

from __future__ import annotations

import random

import pytest

from console.backoff import Backoff


def test_each_delay_lies_in_zero_to_its_capped_ceiling() -> None:
    b = Backoff(0.5, 8.0, random.Random(1))
    for n in range(40):
        top = min(8.0, 0.5 * 2**n)
        assert b.ceiling(n) == top
        d = b.next()
        assert 0.0 <= d <= top, (n, d, top)
    assert b.attempt == 40


def test_the_cap_holds_however_long_it_retries() -> None:
    b = Backoff(0.05, 30.0, random.Random(2))
    delays = [b.next() for _ in range(5000)]  # past 2**1023: base * 2**n would overflow a float
    assert max(delays) <= 30.0
    assert b.ceiling(5000) == 30.0 and b.ceiling(10**9) == 30.0
    assert max(delays[-1000:]) > 25.0  # once capped, the whole window [0, cap] stays in use


def test_reset_starts_again_from_the_base() -> None:
    b = Backoff(0.5, 8.0, random.Random(3))
    for _ in range(10):
        b.next()
    b.reset()
    assert b.attempt == 0
    again = [b.next() for _ in range(3)]
    assert again[0] <= 0.5 and again[1] <= 1.0 and again[2] <= 2.0


def test_full_jitter_spreads_over_the_whole_window() -> None:
    """Not U(base/2, top) and not top: draws for one retry cover [0, top] evenly, the low end included."""
    rng = random.Random(4)
    b = Backoff(0.25, 60.0, rng)
    top = b.ceiling(5)  # 8.0
    draws = [b.delay(5) for _ in range(4000)]
    assert all(0.0 <= d <= top for d in draws)
    assert min(draws) < 0.02 * top and max(draws) > 0.98 * top
    bins = [0] * 10
    for d in draws:
        bins[min(9, int(d / top * 10))] += 1
    assert all(300 <= n <= 500 for n in bins), bins  # ~400 each
    assert abs(sum(draws) / len(draws) - top / 2) < 0.05 * top
    assert len({round(d, 9) for d in draws}) == len(draws)  # never in lockstep


def test_a_seed_replays_the_same_delays() -> None:
    one = Backoff(0.5, 30.0, random.Random(7))
    two = Backoff(0.5, 30.0, random.Random(7))
    assert [one.next() for _ in range(20)] == [two.next() for _ in range(20)]
    assert Backoff(0.5, 30.0, random.Random(7)).delay(3) == Backoff(0.5, 30.0, random.Random(7)).delay(3)


@pytest.mark.parametrize(
    ("base", "cap"), [(0.0, 1.0), (-1.0, 1.0), (2.0, 1.0), (float("nan"), 1.0), (0.5, float("inf"))]
)
def test_refuses_a_window_that_is_no_window(base: float, cap: float) -> None:
    with pytest.raises(ValueError):
        Backoff(base, cap)


def test_retries_count_from_zero() -> None:
    with pytest.raises(ValueError):
        Backoff(0.5, 1.0).ceiling(-1)
