"""Programmatic scoring of the house suite's answers, one rule per family; no model judges another model.

- maths: the last ``\\boxed{...}`` equals the reference answer as MATH's grading compares them: both in one
  spelling (``maths_answer``: spaces, ``\\left``/``\\right``, ``\\dfrac``, degrees, dollars, ``\\text{}`` and
  thousands commas dropped, a short ``x =`` taken off), then equal as exact rational numbers when the reference is
  one (``0.5`` is ``\\frac{1}{2}``; a decimal never stands for an irrational closed form), else equal as
  strings; without a box, the last number against a numeric reference;
- code: the last fenced code block (else the whole answer), run after the item's own prompt (HumanEval's
  signature, imports and helpers, so an answer that repeats only the function still has them), passes the
  item's tests in the sandbox (console/quality/suites/sandbox.py);
- tools: the calls (the server's ``tool_calls``, else JSON in the answer) match the item's answer set as the
  Berkeley function-calling leaderboard's AST checker does: same functions, every required parameter, no
  parameter outside the set, each value among the allowed ones (strings compared after BFCL's
  standardisation: case, spaces and ``,./-_*^`` ignored; ``""`` allowed means the parameter may be left out),
  parallel calls in any order;
- long-context: the needle's value appears in the answer;
- knowledge: the chosen letter (``Answer: X``) for ten-option questions; for short answers (SimpleQA, which
  grades with a model) a normalised alias match instead: an alias as whole words in an answer of at most 40
  words (a list of guesses is not an answer), case, punctuation, articles, accents and thousands commas
  ignored; where the answer is a number, any other number in the answer (not in the question) makes it wrong
  ("3 or 4" is a guess);
- instructions: every IFEval instruction of the item holds for a non-empty answer, as IFEval's strict
  accuracy judges it (console/quality/suites/checkers.py).

Only the answer is scored: a reasoning parser's ``reasoning_content`` never is, and a leading
``<think>...</think>`` block left in the content by a server without one is dropped first.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from console.quality.suites.checkers import follows, words
from console.quality.suites.sandbox import run_tests

_THINK = re.compile(r"^\s*(?:<think>)?.*?</think>\s*", re.DOTALL)
_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{")
_NUMBER = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?(?:\s*/\s*\d+)?")
_THOUSANDS = re.compile(r"(?<![\d.,])\d{1,3}(?:,\d{3})+(?![\d,])")
"""A number written with thousands commas (``1,170``; never ``3,5``, which is two numbers)."""
_FRAC = re.compile(r"^(-?)\\?[dt]?frac\{(-?\d+)\}\{(\d+)\}$")
_LATEX_DROP = re.compile(r"\\left|\\right|\\!|\\[,;: ]|\^\{?\\circ\}?|\\\$|\$|\\%|%")
_TEXT = re.compile(r"\\(?:text|textbf|mbox|mathrm)\{([^{}]*)\}")
_SHORT_LHS = re.compile(r"^[a-zA-Z]\w?=(?!.*=)")
_FENCE = re.compile(r"```[a-zA-Z0-9_+-]*\n(.*?)```", re.DOTALL)
_LETTER = re.compile(r"answer\s*(?:is)?\s*[:=]?\s*\(?\**([A-J])\b", re.IGNORECASE)
_STANDARDIZE = re.compile(r"[ ,./\-_*^]")
_ARTICLES = re.compile(r"\b(?:a|an|the)\b")


def answer_text(content: str) -> str:
    """The answer without a chain of thought left in it (no reasoning parser on the server)."""
    return _THINK.sub("", content, count=1) if "</think>" in content else content


def number(text: str) -> Fraction | None:
    """``text`` as an exact rational (``99/100``, ``1,170``, ``0.99``, ``-3``, ``\\frac{3}{4}``); None when it is
    not one (``3,5`` and ``3 5`` are not 35)."""
    cleaned = re.sub(r"\s*/\s*", "/", text.replace("\\$", "").replace("$", "")).strip().rstrip(".")
    cleaned = _THOUSANDS.sub(lambda m: m.group(0).replace(",", ""), cleaned)
    frac = _FRAC.match(cleaned)
    if frac:
        cleaned = f"{frac.group(1)}{frac.group(2)}/{frac.group(3)}"
    try:
        return Fraction(cleaned)
    except (ValueError, ZeroDivisionError):
        return None


def last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` (or ``\\fbox{...}``), braces inside it kept; None when the text
    has none, or its last box is never closed."""
    starts = [m.end() for m in _BOX.finditer(text)]
    if not starts:
        return None
    depth = 1
    for i in range(starts[-1], len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[starts[-1] : i]
    return None


def maths_answer(text: str) -> str:
    """A contest-maths answer in one spelling, as MATH's grading (hendrycks/math ``is_equiv``) spells both sides
    before comparing them: no spaces (but one between two digits: ``1 0`` is not 10), no ``\\left``/``\\right``,
    thin spaces, degrees, dollars or percent signs, ``\\dfrac``/``\\tfrac`` read as ``\\frac``, ``\\text{...}`` as
    its text, ``\\sqrt12`` as ``\\sqrt{12}``, ``\\frac12`` as ``\\frac{1}{2}``, thousands commas dropped, a
    trailing full stop and a one- or two-letter ``x =`` in front taken off."""
    s = _TEXT.sub(r"\1", text)
    s = re.sub(r"\\[dt]frac", r"\\frac", _LATEX_DROP.sub("", s))
    s = re.sub(r"(?<!\d)\s+|\s+(?!\d)", "", re.sub(r"(?<=\d)\s+(?=\d)", " ", s)).rstrip(".")
    s = re.sub(r"\\sqrt(\d+|[^\W\d])", r"\\sqrt{\1}", s)
    s = re.sub(r"\\frac(\d)(\d)", r"\\frac{\1}{\2}", s)
    s = _THOUSANDS.sub(lambda m: m.group(0).replace(",", ""), s)
    return _SHORT_LHS.sub("", s)


def same_maths_answer(got: str, want: str) -> bool:
    """``got`` is ``want``: equal rationals when ``want`` is a number, else the same spelling (``maths_answer``)."""
    g, w = maths_answer(got), maths_answer(want)
    exact = number(w)
    return number(g) == exact if exact is not None else g == w


def score_maths(content: str, expected: str) -> float:
    text = answer_text(content)
    boxed = last_boxed(text)
    if boxed is not None:
        return float(same_maths_answer(boxed, expected))
    last, want = _NUMBER.findall(text)[-1:], number(expected)
    return float(bool(last) and want is not None and number(last[0]) == want)


def code_of(content: str) -> str:
    blocks = _FENCE.findall(answer_text(content))
    return blocks[-1] if blocks else answer_text(content)


def score_code(content: str, tests: str, setup: str = "") -> float:
    return float(run_tests(f"{setup}\n{code_of(content)}", tests).passed)


def score_needle(content: str, value: str) -> float:
    return float(re.search(rf"(?<!\d){re.escape(value)}(?!\d)", answer_text(content)) is not None)


def chosen_letter(content: str) -> str | None:
    text = answer_text(content).strip()
    found = _LETTER.findall(text)
    if found:
        return str(found[-1]).upper()
    bare = re.fullmatch(r"\(?([A-J])\)?[.)]?", text)
    return str(bare.group(1)) if bare else None


def normalize(text: str) -> str:
    """Lower case words without punctuation, articles, accents or thousands commas: the spelling short answers
    are matched in."""
    folded = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    folded = _THOUSANDS.sub(lambda m: m.group(0).replace(",", ""), folded)
    text = re.sub(r"[^\w\s]", " ", folded.lower())
    return " ".join(_ARTICLES.sub(" ", text).split())


def score_short(content: str, aliases: Sequence[str], question: str = "") -> float:
    text = answer_text(content)
    if len(words(text)) > 40:
        return 0.0
    padded = f" {normalize(text)} "
    if not any(f" {normalize(a)} " in padded for a in aliases):
        return 0.0
    numbers = {a for a in map(normalize, aliases) if a.isdigit()}
    if numbers:  # a number answer: another number beside it (not the question's own) is a second guess
        asked = set(normalize(question).split())
        return float(all(w in numbers or w in asked for w in padded.split() if w.isdigit()))
    return 1.0


def score_instructions(
    content: str, instructions: Sequence[str], kwargs: Sequence[Mapping[str, Any]]
) -> float:
    text = answer_text(content)
    return float(bool(text.strip()) and follows(text, instructions, kwargs))


# -- tools (BFCL-style) ---------------------------------------------------------------------------


def calls_of(content: str, tool_calls: Sequence[Mapping[str, Any]] | None) -> list[tuple[str, Any]] | None:
    """The calls as (name, arguments): the server's parsed ``tool_calls``, else a JSON object or list in the
    answer (``{"name": ..., "arguments": {...}}``); None when there are none to read."""
    if tool_calls:
        out: list[tuple[str, Any]] = []
        for call in tool_calls:
            fn = call.get("function") or {}
            args = fn.get("arguments")
            try:
                out.append((str(fn.get("name")), json.loads(args) if isinstance(args, str) else args))
            except ValueError:
                return None
        return out
    text = answer_text(content).strip()
    fenced = _FENCE.findall(text)
    if fenced:
        text = fenced[-1].strip()
    start = min((i for i in (text.find("["), text.find("{")) if i >= 0), default=-1)
    if start < 0:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(text[start:])
    except ValueError:
        return None
    values = value if isinstance(value, list) else [value]
    calls = []
    for v in values:
        if not isinstance(v, dict) or "name" not in v:
            return None
        calls.append((str(v["name"]), v.get("arguments", v.get("parameters", {}))))
    return calls


def _standard(value: Any) -> Any:
    if isinstance(value, str):
        return _STANDARDIZE.sub("", value.lower())
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, list):
        return [_standard(v) for v in value]
    return value


def call_matches(
    name: str, args: Any, expected: Mapping[str, Mapping[str, Sequence[Any]]], required: Sequence[str]
) -> bool:
    """One call against one possible answer ``{function: {param: [allowed values]}}``."""
    if name not in expected or not isinstance(args, dict):
        return False
    allowed = expected[name]
    if any(p not in args for p in required) or any(p not in allowed for p in args):
        return False
    for param, values in allowed.items():
        if param not in args:
            if "" not in values:
                return False
            continue
        if _standard(args[param]) not in [_standard(v) for v in values if v != ""]:
            return False
    return True


def score_tools(
    content: str,
    tool_calls: Sequence[Mapping[str, Any]] | None,
    answer: Sequence[Mapping[str, Mapping[str, Sequence[Any]]]],
    required: Mapping[str, Sequence[str]],
) -> float:
    calls = calls_of(content, tool_calls)
    if calls is None or len(calls) != len(answer):
        return 0.0
    left = list(answer)
    for name, args in calls:  # parallel calls match in any order, each answer used once
        hit = next(
            (i for i, a in enumerate(left) if call_matches(name, args, a, required.get(name, ()))), None
        )
        if hit is None:
            return 0.0
        left.pop(hit)
    return 1.0
