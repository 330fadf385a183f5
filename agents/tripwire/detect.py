"""Reading a response: degenerate repetition, leaked reasoning, and the answer to grade.

Repetition (seed: "do not trust a tripwire that only checks for !!!!"): three independent detectors,
because a broken arm's output takes different forms:
- repeated word 6-grams (a phrase or sentence loop);
- a low distinct-token ratio (a few tokens cycling);
- structured repeats: runs of tokens that are one character repeated ("111 222 333 444", which passed
  the seed's first tripwire: every token is distinct, so the first two detectors miss it) and a short
  unit repeated ten or more times in a row ("!!!!!!!!!!", "abababababab...").

Reasoning: with no reasoning parser, vLLM returns the chain of thought as the answer (seed rule 9; 306 of
403 responses began "We need answer user's request"). Qwen3-family templates put the opening <think> in
the prompt, so often only </think> appears. The answer graded is what follows the last </think>; without
tags, leaked reasoning is recognised by its opening phrases and the graded answer is its final lines.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

TOKEN = re.compile(r"\w+|[^\w\s]+")
SAME_CHAR_TOKEN = re.compile(r"^(\w)\1+$")
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
SAME_CHAR_RUN = 4
SHORT_ANSWER_CHARS = 400
TAIL_LINES = 3


def repetition(text: str) -> list[str]:
    """Why ``text`` is degenerate, one reason per detector that fired; empty when it reads as normal."""
    reasons = []
    tokens = TOKEN.findall(text.lower())
    if len(tokens) >= MIN_TOKENS_NGRAM:
        grams = Counter(tuple(tokens[i : i + 6]) for i in range(len(tokens) - 5))
        positions = len(tokens) - 5
        repeats = sum(c - 1 for c in grams.values() if c > 1)
        if repeats / positions >= REPEATED_FRACTION:
            gram, count = grams.most_common(1)[0]
            reasons.append(f"repeated 6-grams: {repeats / positions:.0%} of positions repeat, "
                           f"{' '.join(gram)!r} x{count}")
    if len(tokens) >= MIN_TOKENS_DISTINCT:
        ratio = len(set(tokens)) / len(tokens)
        if ratio < DISTINCT_RATIO:
            reasons.append(f"distinct-token ratio {ratio:.2f} over {len(tokens)} tokens")
    run = best = 0
    for token in text.split():
        token = token.strip(".,;:!?()[]\"'")
        run = run + 1 if SAME_CHAR_TOKEN.match(token) else 0
        best = max(best, run)
    if best >= SAME_CHAR_RUN:
        reasons.append(f"structured repeat: {best} tokens in a row of one repeated character (like '111 222 333')")
    for m in UNIT_LOOP.finditer(text):
        if not set(m.group(1)) <= LAYOUT_CHARS:
            reasons.append(f"character loop: {m.group(1)!r} repeated {len(m.group(0)) // len(m.group(1))} times")
            break
    return reasons


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
        leak = None if reasoning_content else "the answer holds </think>: no reasoning parser split the thinking out"
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
