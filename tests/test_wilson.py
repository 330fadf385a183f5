"""The Wilson 95% interval (console/quality/stats.py): the write-up's figures, and what any interval must be."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from console.quality.stats import wilson, wilson_text


@pytest.mark.parametrize(
    ("right", "n", "low", "high"),
    [(292, 403, 0.679, 0.766), (59, 80, 0.632, 0.821), (46, 48, 0.860, 0.988)],
)
def test_the_write_ups_intervals(right: int, n: int, low: float, high: float) -> None:
    bounds = wilson(right, n)
    assert bounds is not None
    assert (round(bounds[0], 3), round(bounds[1], 3)) == (low, high)


def test_text_and_edges() -> None:
    assert wilson_text(292, 403) == "0.725 [0.679, 0.766]"
    assert wilson(0, 0) is None and wilson_text(0, 0) == "-"
    none_right, all_right = wilson(0, 10), wilson(10, 10)
    assert none_right is not None and none_right[0] == 0.0 and 0.0 < none_right[1] < 0.35
    assert all_right is not None and all_right[1] == 1.0 and 0.65 < all_right[0] < 1.0
    with pytest.raises(ValueError, match="not a proportion"):
        wilson(11, 10)


@given(n=st.integers(1, 100_000), share=st.floats(0.0, 1.0))
def test_inside_0_1_and_contains_the_proportion(n: int, share: float) -> None:
    right = round(share * n)
    bounds = wilson(right, n)
    assert bounds is not None
    low, high = bounds
    assert 0.0 <= low <= right / n <= high <= 1.0


@given(n=st.integers(2, 20_000), share=st.floats(0.0, 1.0), factor=st.integers(2, 50))
def test_narrows_as_the_items_grow(n: int, share: float, factor: int) -> None:
    right = round(share * n)
    small, large = wilson(right, n), wilson(right * factor, n * factor)
    assert small is not None and large is not None
    assert large[1] - large[0] < small[1] - small[0]


@given(n=st.integers(1, 10_000), right=st.floats(0.0, 1.0))
def test_partial_scores_read_as_that_many_right(n: int, right: float) -> None:
    bounds = wilson(right * n, n)
    assert bounds is not None and bounds[0] <= right <= bounds[1]
