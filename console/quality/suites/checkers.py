"""Instruction-following checkers of IFEval (google-research/instruction_following_eval), re-implemented from
the reference's ``check_following`` rules: an item carries IFEval's own ``instruction_id_list`` and ``kwargs``
(console/quality/suites/seed6/instructions.jsonl, vendored from IFEval's input data), and it is right only
when every one of its instructions holds (IFEval's prompt-level strict accuracy).

``CHECKERS`` is keyed by IFEval's instruction id; a checker is ``(response, kwargs) -> bool`` with the
reference's keyword names. The instructions whose reference needs nltk's sentence splitter or tokenizer or
langdetect (``length_constraints:number_sentences``, ``language:response_language``,
``change_case:capital_word_frequency``, ``length_constraints:nth_paragraph_first_word``) are not here, and
the suite takes no item that uses them; for ``change_case:english_lowercase`` / ``english_capital`` the case
rule is checked and the reference's extra "and langdetect says English" is not.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

Checker = Callable[[str, Mapping[str, Any]], bool]

_WORD = re.compile(r"\w+")


def words(text: str) -> list[str]:
    """Words as IFEval counts them (nltk's ``RegexpTokenizer(r"\\w+")``)."""
    return _WORD.findall(text)


def _relation(count: int, relation: str, threshold: int) -> bool:
    """IFEval's two comparison relations: "less than" is strict, "at least" is inclusive."""
    if relation == "less than":
        return count < threshold
    if relation == "at least":
        return count >= threshold
    raise ValueError(f"unknown IFEval relation {relation!r}: use 'less than' or 'at least'")


def _no_comma(text: str, p: Mapping[str, Any]) -> bool:
    return "," not in text


def _lowercase(text: str, p: Mapping[str, Any]) -> bool:
    return text.islower()


def _capital(text: str, p: Mapping[str, Any]) -> bool:
    return text.isupper()


def _number_words(text: str, p: Mapping[str, Any]) -> bool:
    return _relation(len(words(text)), str(p["relation"]), int(p["num_words"]))


def _number_paragraphs(text: str, p: Mapping[str, Any]) -> bool:
    """Paragraphs split by the markdown divider ``***``; an empty one counts against the answer unless it
    is the first or the last (a divider at either end)."""
    parts = re.split(r"\s?\*\*\*\s?", text)
    count = len(parts)
    for i, part in enumerate(parts):
        if not part.strip():
            if i not in (0, len(parts) - 1):
                return False
            count -= 1
    return count == int(p["num_paragraphs"])


def _bullets(text: str, p: Mapping[str, Any]) -> bool:
    """Exactly n markdown bullets: lines starting ``*`` (not ``**``) or ``-``."""
    stars = re.findall(r"^\s*\*[^\*].*$", text, flags=re.MULTILINE)
    dashes = re.findall(r"^\s*-.*$", text, flags=re.MULTILINE)
    return len(stars) + len(dashes) == int(p["num_bullets"])


def _title(text: str, p: Mapping[str, Any]) -> bool:
    """A non-empty title wrapped in double angular brackets, ``<<like this>>``."""
    return any(t.lstrip("<").rstrip(">").strip() for t in re.findall(r"<<[^\n]+>>", text))


def _json(text: str, p: Mapping[str, Any]) -> bool:
    """The whole response is JSON (a markdown code fence around it is allowed)."""
    body = text.strip()
    for fence in ("```json", "```Json", "```JSON", "```"):
        body = body.removeprefix(fence)
    try:
        json.loads(body.removesuffix("```").strip())
    except ValueError:
        return False
    return True


def _highlights(text: str, p: Mapping[str, Any]) -> bool:
    """At least n non-empty ``*highlighted*`` spans (a ``**bold**`` span counts too)."""
    single = [h for h in re.findall(r"\*[^\n\*]*\*", text) if h.strip("*").strip()]
    double = [
        h for h in re.findall(r"\*\*[^\n\*]*\*\*", text) if h.removeprefix("**").removesuffix("**").strip()
    ]
    return len(single) + len(double) >= int(p["num_highlights"])


def _sections(text: str, p: Mapping[str, Any]) -> bool:
    """At least n sections, each opened by the splitter word and a number (``SECTION 1``)."""
    parts = re.split(r"\s?" + str(p["section_spliter"]) + r"\s?\d+\s?", text)
    return len(parts) - 1 >= int(p["num_sections"])


_CONSTRAINED = ("My answer is yes.", "My answer is no.", "My answer is maybe.")


def _constrained(text: str, p: Mapping[str, Any]) -> bool:
    return any(option in text.strip() for option in _CONSTRAINED)


def _postscript(text: str, p: Mapping[str, Any]) -> bool:
    marker = str(p["postscript_marker"])
    if marker == "P.P.S":
        pattern = r"\s*p\.\s?p\.\s?s.*$"
    elif marker == "P.S.":
        pattern = r"\s*p\.\s?s\..*$"
    else:
        pattern = r"\s*" + marker.lower() + r".*$"
    return re.search(pattern, text.lower(), flags=re.MULTILINE) is not None


def _placeholders(text: str, p: Mapping[str, Any]) -> bool:
    return len(re.findall(r"\[.*?\]", text)) >= int(p["num_placeholders"])


def _end_checker(text: str, p: Mapping[str, Any]) -> bool:
    return text.strip().strip('"').lower().endswith(str(p["end_phrase"]).strip().lower())


def _quotation(text: str, p: Mapping[str, Any]) -> bool:
    body = text.strip()
    return len(body) > 1 and body[0] == '"' and body[-1] == '"'


def _existence(text: str, p: Mapping[str, Any]) -> bool:
    return all(re.search(k, text, flags=re.IGNORECASE) for k in p["keywords"])


def _forbidden(text: str, p: Mapping[str, Any]) -> bool:
    return not any(re.search(rf"\b{w}\b", text, flags=re.IGNORECASE) for w in p["forbidden_words"])


def _frequency(text: str, p: Mapping[str, Any]) -> bool:
    found = len(re.findall(str(p["keyword"]), text, flags=re.IGNORECASE))
    return _relation(found, str(p["relation"]), int(p["frequency"]))


def _letter_frequency(text: str, p: Mapping[str, Any]) -> bool:
    found = text.lower().count(str(p["letter"]))
    return _relation(found, str(p["let_relation"]), int(p["let_frequency"]))


def _two_responses(text: str, p: Mapping[str, Any]) -> bool:
    """Exactly two different responses separated by ``******`` (an empty part only at either end)."""
    parts = text.split("******")
    valid = []
    for i, part in enumerate(parts):
        if part.strip():
            valid.append(part.strip())
        elif i not in (0, len(parts) - 1):
            return False
    return len(valid) == 2 and valid[0] != valid[1]


def _repeat_prompt(text: str, p: Mapping[str, Any]) -> bool:
    return text.strip().lower().startswith(str(p["prompt_to_repeat"]).strip().lower())


CHECKERS: dict[str, Checker] = {
    "punctuation:no_comma": _no_comma,
    "change_case:english_lowercase": _lowercase,
    "change_case:english_capital": _capital,
    "length_constraints:number_words": _number_words,
    "length_constraints:number_paragraphs": _number_paragraphs,
    "detectable_format:number_bullet_lists": _bullets,
    "detectable_format:title": _title,
    "detectable_format:json_format": _json,
    "detectable_format:number_highlighted_sections": _highlights,
    "detectable_format:multiple_sections": _sections,
    "detectable_format:constrained_response": _constrained,
    "detectable_content:postscript": _postscript,
    "detectable_content:number_placeholders": _placeholders,
    "startend:end_checker": _end_checker,
    "startend:quotation": _quotation,
    "keywords:existence": _existence,
    "keywords:forbidden_words": _forbidden,
    "keywords:frequency": _frequency,
    "keywords:letter_frequency": _letter_frequency,
    "combination:two_responses": _two_responses,
    "combination:repeat_prompt": _repeat_prompt,
}


def follows(text: str, instructions: Sequence[str], kwargs: Sequence[Mapping[str, Any]]) -> bool:
    """Every instruction of the item holds for ``text`` (IFEval's ``instruction_id_list`` and ``kwargs``)."""
    return all(CHECKERS[i](text, k) for i, k in zip(instructions, kwargs, strict=True))
