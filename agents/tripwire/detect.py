"""Reading a response: degenerate repetition, leaked reasoning, and the answer to grade.

Repetition (write-up: "do not trust a tripwire that only checks for !!!!"): a broken arm's output takes many
forms, so several detectors run, and any one firing makes the output degenerate whatever else it holds
("Paris 111 222 333" is degenerate although it names Paris):
- repeated word 6-grams over the whole text (a phrase or sentence loop) and a low distinct-token ratio
  (a few tokens cycling);
- a unit of 1 to 128 tokens repeated back to back ("Paris Paris Paris Paris", a sentence three times):
  a loop at any scale, even inside a long and otherwise healthy text;
- repetition of structure where every token differs: runs of tokens that are each one repeated character
  ("111 222 333 444": the GLM output that passed the write-up's first tripwire), numbers counting up or
  multiplying ("1 2 3 ... 42"), and a token shape repeated ("1a 2b 3c 4d 5e 6f", letters as ``a``, digits
  as ``9``);
- a short run of characters repeated ten or more times ("!!!!!!!!!!", "abababab...").
None of the 20 items asks for a list, so no correct answer needs any of these (tests/test_tripwire.py
grades every item's expected answer, bare and in a sentence, as clean).

Reasoning: with no reasoning parser, vLLM returns the chain of thought as the answer (campaign rule 9; 306 of
403 responses began "We need answer user's request"). Qwen3-family templates put the opening <think> in
the prompt, so often only </think> appears. The answer graded is what follows the last </think>; without
tags, leaked reasoning is recognised by its opening phrases and the graded answer is its final lines.
"""

from __future__ import annotations

import operator
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

TOKEN = re.compile(r"\w+|[^\w\s]+")
SAME_CHAR_TOKEN = re.compile(r"^(\w)\1+$")
NUMBER_TOKEN = re.compile(r"^\d{1,12}$")
LIST_SEPARATOR = re.compile(r"^[,;.:/|\u2026\u2013\u2014-]+$")
"""What may stand between the numbers of a count ("1, 2, 3", "1 - 2 - 3"); an operator ("1 + 2") ends it."""
UNIT_LOOP = re.compile(r"(.{1,8}?)\1{9,}", re.DOTALL)
LAYOUT_CHARS = set("-=_*#|.~ \t\n")
"""Markdown rules and table separators repeat characters legitimately."""
REASONING_OPENERS = re.compile(
    r"^\s*(we need to|we need answer|we need|we are asked|we have to|the user (asks|is asking|wants|says)"
    r"|user asks|okay,? (so|let's|let me)|ok,? (so|let's)|alright,? (so|let's)|let me (think|see|figure)"
    r"|let's (think|see|figure|compute|solve)|hmm)",
    re.IGNORECASE,
)

MIN_TOKENS_NGRAM = 24
MIN_TOKENS_DISTINCT = 40
REPEATED_FRACTION = 0.30
"""Share of 6-gram positions that repeat an earlier 6-gram: natural prose stays far below it."""
DISTINCT_RATIO = 0.25
SAME_CHAR_RUN = 3
"""Tokens in a row that are each one repeated character, at least two of them different ("111 222 333")."""
COUNTING_RUN = 8
"""Numbers in a row in arithmetic or geometric progression ("1 2 3 4 5 6 7 8", "2 4 8 16 ... 256")."""
MAX_LOOP_UNIT = 128
LOOP_REPEATS = 3
"""Back-to-back copies of a unit of three tokens or more; a unit of one or two tokens needs one more
("ha ha ha" and "no, no, no" are speech, a fourth copy is a loop)."""
SHAPE_REPEATS = 6
"""Back-to-back copies of a token shape with both letters and digits ("1a 2b 3c 4d 5e 6f", "x1: y, x2: y");
numbers alone are the counting detector's, and a few numbered items ("b(1), a(2), n(3)") stay below it."""
SHORT_ANSWER_CHARS = 400
TAIL_LINES = 3


def repetition(text: str) -> list[str]:
    """Why ``text`` is degenerate, one reason per detector that fired; empty when it reads as normal."""
    tokens = TOKEN.findall(text.lower())
    words = [t for t in tokens if not LIST_SEPARATOR.match(t) and re.search(r"\w", t)]
    structure = [*_same_char_run(words), *_counting(tokens)]
    reasons = [*_ngram_repeats(words), *structure]
    loop = _loop(tokens, lambda unit: any(re.search(r"\w", t) for t in unit), LOOP_REPEATS + 1, LOOP_REPEATS)
    if loop:
        unit, count = loop
        reasons.append(f"token loop: {' '.join(unit)[:80]!r} repeated {count} times in a row")
    shapes = [_shape(t) for t in tokens]
    shape_loop = _loop(
        shapes,
        lambda unit: any("9" in t for t in unit) and any("a" in t for t in unit),
        SHAPE_REPEATS,
        SHAPE_REPEATS,
    )
    if shape_loop and not loop and not structure:  # the more specific reason already says it
        unit, count = shape_loop
        reasons.append(f"shape loop: tokens shaped {' '.join(unit)[:80]!r} repeated {count} times in a row")
    for m in UNIT_LOOP.finditer(text):
        if not set(m.group(1)) <= LAYOUT_CHARS:
            reasons.append(
                f"character loop: {m.group(1)!r} repeated {len(m.group(0)) // len(m.group(1))} times"
            )
            break
    return reasons


def _ngram_repeats(tokens: list[str]) -> list[str]:
    """Over words only: punctuation would make a short spelled-out answer ("b, a, n, a, n, a") look
    like a loop."""
    reasons = []
    if len(tokens) >= MIN_TOKENS_NGRAM:
        grams = Counter(tuple(tokens[i : i + 6]) for i in range(len(tokens) - 5))
        positions = len(tokens) - 5
        repeats = sum(c - 1 for c in grams.values() if c > 1)
        if repeats / positions >= REPEATED_FRACTION:
            gram, count = grams.most_common(1)[0]
            reasons.append(
                f"repeated 6-grams: {repeats / positions:.0%} of positions repeat, "
                f"{' '.join(gram)!r} x{count}"
            )
    if len(tokens) >= MIN_TOKENS_DISTINCT:
        ratio = len(set(tokens)) / len(tokens)
        if ratio < DISTINCT_RATIO:
            reasons.append(f"distinct-token ratio {ratio:.2f} over {len(tokens)} tokens")
    return reasons


def _same_char_run(words: list[str]) -> list[str]:
    best: list[str] = []
    run: list[str] = []
    for word in words:
        run = [*run, word] if SAME_CHAR_TOKEN.match(word) else []
        if len(set(run)) >= 2 and len(run) > len(best):
            best = run
    if len(best) >= SAME_CHAR_RUN:
        return [
            f"structured repeat: {len(best)} tokens in a row, each one repeated character "
            f"({' '.join(best[:4])!r})"
        ]
    return []


def _counting(tokens: list[str]) -> list[str]:
    """Numbers one after another (only list separators between them) that count or multiply."""
    best: list[int] = []
    run: list[int] = []
    for token in [*tokens, "end"]:
        if NUMBER_TOKEN.match(token):
            run.append(int(token))
        elif not LIST_SEPARATOR.match(token):
            best = max(best, _longest_progression(run), key=len)
            run = []
    if len(best) >= COUNTING_RUN:
        return [
            f"counting: {len(best)} numbers in progression in a row ({', '.join(map(str, best[:3]))} ... "
            f"{best[-1]})"
        ]
    return []


def _longest_progression(numbers: list[int]) -> list[int]:
    """The longest stretch of ``numbers`` with one constant step, or one constant whole ratio."""
    best = numbers[:2]
    for steady in (_same_step, _same_ratio):
        start = 0
        for i in range(2, len(numbers)):
            if not steady(*numbers[i - 2 : i + 1]):
                start = i - 1
            if i + 1 - start > len(best):
                best = numbers[start : i + 1]
    return best


def _same_step(a: int, b: int, c: int) -> bool:
    return b - a == c - b


def _same_ratio(a: int, b: int, c: int) -> bool:
    return 0 not in (a, b) and a != b and b * b == a * c and (b % a == 0 or a % b == 0)


def _shape(token: str) -> str:
    return re.sub(r"\d", "9", re.sub(r"[^\W\d_]", "a", token))


def _loop(
    seq: list[str], counts: Callable[[list[str]], bool], short_repeats: int, repeats: int
) -> tuple[list[str], int] | None:
    """The shortest unit that ``counts`` accepts repeated back to back ``repeats`` times or more
    (``short_repeats`` for a unit of one or two items), with how many times; None when there is none."""
    for size in range(1, min(MAX_LOOP_UNIT, len(seq) // 2) + 1):
        need = short_repeats if size <= 2 else repeats
        if len(seq) < size * need:
            break
        same = bytes(map(operator.eq, seq, seq[size:]))  # 1 where an item equals the one ``size`` later
        run = b"\x01" * (size * (need - 1))
        at = same.find(run)
        while at >= 0:
            if counts(seq[at : at + size]):
                end = at + len(run)
                while end < len(same) and same[end]:
                    end += 1
                return seq[at : at + size], (end - at + size) // size
            at = same.find(run, at + 1)
    return None


@dataclass(frozen=True)
class Reading:
    answer: str
    """The part of the response that is graded."""
    reasoning_leak: str | None
    """Why the content is judged to contain chain of thought, or None."""
    unfinished_thinking: bool


def read_answer(content: str, reasoning_content: str | None) -> Reading:
    """Separate the answer from any chain of thought that leaked into ``content``."""
    text = content or ""
    if "</think>" in text:
        leak = (
            None
            if reasoning_content
            else "the answer holds </think>: no reasoning parser split the thinking out"
        )
        return Reading(text.rsplit("</think>", 1)[1].strip(), leak, False)
    if "<think>" in text:
        leak = "the answer holds <think> with no </think>: the thinking never finished"
        return Reading("", leak, True)
    if not reasoning_content and REASONING_OPENERS.match(text):
        lines = [line for line in text.strip().splitlines() if line.strip()]
        opener = text.strip().split("\n", 1)[0][:60]
        return Reading("\n".join(lines[-TAIL_LINES:]), f"the answer opens like reasoning: {opener!r}", False)
    return Reading(text.strip(), None, False)


def matches(answer: str, expect: tuple[str, ...], case: bool) -> bool:
    """An expected answer in a short answer, or in the last lines of a long one (its conclusion)."""
    region = answer
    if len(answer) > SHORT_ANSWER_CHARS:
        lines = [line for line in answer.splitlines() if line.strip()]
        region = "\n".join(lines[-TAIL_LINES:])
    region = region.replace("**", "")
    flags = 0 if case else re.IGNORECASE
    return any(re.search(rf"(?<![\w.]){pattern}(?![\w]|\.\d)", region, flags) for pattern in expect)
