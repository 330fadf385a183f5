"""The house suite's answer parsers as properties (console/quality/suites/scoring.py): the contest-maths reader
(the last box, MATH's normalisation, exact rationals) and the short-answer matcher (SimpleQA's answers by a
normalised match), against the false-positive paths the write-up's review found in its own scorers: a decimal
approximation of an irrational closed form taken as right, "3 or 5" read as 35, and an answer that lists
guesses scored as if it were one."""

from __future__ import annotations

import math
from fractions import Fraction

from hypothesis import assume, given
from hypothesis import strategies as st

from console.quality.suites import scoring

INTEGERS = st.integers(-(10**9), 10**9)
WORDS = st.lists(
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=3, max_size=9), min_size=1, max_size=4
)


@given(n=INTEGERS)
def test_an_integer_answer_reads_in_every_spelling_and_its_neighbour_does_not(n: int) -> None:
    for spelled in (f"{n}", f"{n:,}", f"\\${n}", f"{n}^\\circ", f"x = {n}", f"\\text{{{n}}}."):
        assert scoring.score_maths(f"So the answer is \\boxed{{{spelled}}}", str(n)) == 1.0, spelled
    assert scoring.score_maths(f"\\boxed{{{n + 1}}}", str(n)) == 0.0
    assert (
        scoring.score_maths(f"\\boxed{{{n}}} at first, but \\boxed{{{n + 1}}}", str(n)) == 0.0
    )  # the last box


@given(p=st.integers(-5000, 5000), q=st.integers(2, 5000))
def test_a_fraction_is_read_exactly_and_a_rounded_decimal_is_not_it(p: int, q: int) -> None:
    value = Fraction(p, q)
    assume(value.denominator > 1)
    want = f"\\frac{{{value.numerator}}}{{{value.denominator}}}"
    for spelled in (want, want.replace("\\frac", "\\dfrac"), f"{value.numerator}/{value.denominator}"):
        assert scoring.score_maths(f"\\boxed{{{spelled}}}", want) == 1.0, spelled
    rounded = f"{float(value):.4f}"
    assert scoring.score_maths(f"\\boxed{{{rounded}}}", want) == float(Fraction(rounded) == value)


@given(k=st.integers(2, 10_000), places=st.integers(1, 12))
def test_a_decimal_never_stands_for_an_irrational_closed_form(k: int, places: int) -> None:
    assume(math.isqrt(k) ** 2 != k)
    approx = f"{math.sqrt(k):.{places}f}"
    assert scoring.score_maths(f"\\boxed{{{approx}}}", f"\\sqrt{{{k}}}") == 0.0
    assert scoring.score_maths(f"\\boxed{{\\sqrt {k}}}", f"\\sqrt{{{k}}}") == 1.0


@given(a=st.integers(1, 999), b=st.integers(0, 99))
def test_two_numbers_are_never_read_as_one(a: int, b: int) -> None:
    joined = str(int(f"{a}{b}"))
    for text in (f"\\boxed{{{a},{b}}}", f"\\boxed{{{a} {b}}}", f"It is {a},{b}", f"either {a} or {b}"):
        assert scoring.score_maths(text, joined) == 0.0, text


@given(text=st.text(max_size=200), want=st.sampled_from(["130", "\\frac{3}{56}", "(-\\infty, 2)", "1,-2"]))
def test_the_maths_reader_takes_any_text(text: str, want: str) -> None:
    assert scoring.score_maths(text, want) in (0.0, 1.0)
    assert scoring.score_maths(f"\\boxed{{{want}}}", want) == 1.0
    assert scoring.same_maths_answer(text, text)


@given(n=st.integers(0, 10**7), other=st.integers(0, 10**7))
def test_a_count_is_matched_in_any_grouping_and_a_second_guess_is_wrong(n: int, other: int) -> None:
    assume(other != n)
    question = "How many medals did she win at the 1998 games?"
    assert scoring.score_short(f"She won {n:,} medals.", [str(n)], question) == 1.0
    assert scoring.score_short(f"{n} (at the 1998 games)", [f"{n:,}"], question) == 1.0
    assert scoring.score_short(f"{n} or {other}", [str(n)], question) == 0.0
    assert scoring.score_short(f"{other}", [str(n)], question) == 0.0


@given(alias=WORDS, before=WORDS, after=WORDS)
def test_a_name_is_matched_as_whole_words_in_a_short_answer_only(
    alias: list[str], before: list[str], after: list[str]
) -> None:
    name = " ".join(w.capitalize() for w in alias)
    assert scoring.score_short(f"{' '.join(before)}: {name.upper()}! {' '.join(after)}", [name]) == 1.0
    assert scoring.score_short(f"{name}{after[0]}", [name]) == 0.0  # a longer word is another word
    too_long = f"{name} " + "or perhaps someone else " * 10  # 41 words
    assert scoring.score_short(too_long, [name]) == 0.0
    accented = name.replace("e", "é").replace("a", "à")
    assert scoring.score_short(f"It was {accented}.", [name]) == 1.0
    assert scoring.normalize(scoring.normalize(accented)) == scoring.normalize(name)
