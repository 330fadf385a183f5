"""Instruction-following checkers in the manner of IFEval (google-research/instruction_following_eval):
each instruction is a programmatic test of the response text, re-implemented here from its definition, and
an item is right only when every one of its instructions holds (IFEval's prompt-level strict accuracy).

A checker is ``(response, params) -> bool``; ``CHECKERS`` names them for the suite files
(console/quality/suites/seed6/instructions.jsonl), which give each item a list of ``{"check": NAME, ...}``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

Checker = Callable[[str, Mapping[str, Any]], bool]

_WORD = re.compile(r"\b\w+\b")
_SENTENCE_END = re.compile(r"[.!?]+(?:\s|$)")


def words(text: str) -> list[str]:
    return _WORD.findall(text)


def _no_comma(text: str, p: Mapping[str, Any]) -> bool:
    return "," not in text


def _lowercase(text: str, p: Mapping[str, Any]) -> bool:
    return text == text.lower() and any(c.isalpha() for c in text)


def _uppercase(text: str, p: Mapping[str, Any]) -> bool:
    return text == text.upper() and any(c.isalpha() for c in text)


def _min_words(text: str, p: Mapping[str, Any]) -> bool:
    return len(words(text)) >= int(p["n"])


def _max_words(text: str, p: Mapping[str, Any]) -> bool:
    return 0 < len(words(text)) <= int(p["n"])


def _bullets(text: str, p: Mapping[str, Any]) -> bool:
    """Exactly n markdown bullets (``* `` or ``- `` at the start of a line), IFEval's detectable_format."""
    found = re.findall(r"^\s*[*-]\s", text, flags=re.MULTILINE)
    return len(found) == int(p["n"])


def _ends_with(text: str, p: Mapping[str, Any]) -> bool:
    return text.strip().endswith(str(p["phrase"]))


def _keywords(text: str, p: Mapping[str, Any]) -> bool:
    low = text.lower()
    return all(re.search(rf"\b{re.escape(k.lower())}\b", low) for k in p["words"])


def _forbidden(text: str, p: Mapping[str, Any]) -> bool:
    low = text.lower()
    return not any(re.search(rf"\b{re.escape(k.lower())}\b", low) for k in p["words"])


def _title(text: str, p: Mapping[str, Any]) -> bool:
    """A title wrapped in double angular brackets, ``<<like this>>``."""
    return re.search(r"<<[^\n<>]+>>", text) is not None


def _json(text: str, p: Mapping[str, Any]) -> bool:
    """The whole response is JSON (a markdown code fence around it is allowed, as in IFEval)."""
    body = text.strip()
    fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", body, flags=re.DOTALL | re.IGNORECASE)
    try:
        json.loads(fenced.group(1) if fenced else body)
    except ValueError:
        return False
    return True


def _paragraphs(text: str, p: Mapping[str, Any]) -> bool:
    """Exactly n non-empty paragraphs separated by the markdown divider ``***``."""
    parts = re.split(r"\s*\*\*\*\s*", text.strip())
    return len(parts) == int(p["n"]) and all(part.strip() for part in parts)


def _postscript(text: str, p: Mapping[str, Any]) -> bool:
    marker = str(p.get("marker", "P.S."))
    return re.search(rf"^\s*{re.escape(marker)}", text, flags=re.MULTILINE) is not None


def _quoted(text: str, p: Mapping[str, Any]) -> bool:
    body = text.strip()
    return len(body) > 1 and body[0] == '"' and body[-1] == '"'


def _placeholders(text: str, p: Mapping[str, Any]) -> bool:
    return len(re.findall(r"\[[^\[\]\n]+\]", text)) >= int(p["n"])


def _max_sentences(text: str, p: Mapping[str, Any]) -> bool:
    count = len(_SENTENCE_END.findall(text.strip() + " "))
    return 0 < count <= int(p["n"])


def _letter_count(text: str, p: Mapping[str, Any]) -> bool:
    """The letter appears at least n times (IFEval's keywords:letter_frequency, at-least form)."""
    return text.lower().count(str(p["letter"]).lower()) >= int(p["n"])


CHECKERS: dict[str, Checker] = {
    "no_comma": _no_comma,
    "lowercase": _lowercase,
    "uppercase": _uppercase,
    "min_words": _min_words,
    "max_words": _max_words,
    "bullets": _bullets,
    "ends_with": _ends_with,
    "keywords": _keywords,
    "forbidden": _forbidden,
    "title": _title,
    "json": _json,
    "paragraphs": _paragraphs,
    "postscript": _postscript,
    "quoted": _quoted,
    "placeholders": _placeholders,
    "max_sentences": _max_sentences,
    "letter_count": _letter_count,
}


def follows(text: str, checks: Sequence[Mapping[str, Any]]) -> bool:
    """Every instruction of the item holds for ``text``."""
    return all(CHECKERS[c["check"]](text, c) for c in checks)
