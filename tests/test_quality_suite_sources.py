"""The house suite's vendored items (console/quality/suites/seed6/, PROVENANCE.md there): every item names its
source completely, and for every item, not a sample, its family's scorer accepts the source's own reference
answer and rejects a wrong one: MATH's own worked solution (its last box read as a model's is), HumanEval's
canonical solution (run against the item's tests in the sandbox), BFCL's possible answer, MMLU-Pro's letter,
SimpleQA's answer as its CSV spells it, and for IFEval the reference response that IFEval's own implementation
judged as following every instruction, then that response with each of its instructions broken in turn."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from importlib import resources
from typing import Any

import pytest

from console.quality.suites import house, scoring

ITEMS = house.fixed_items()
RECORDS = {
    r["id"]: r
    for f in ("maths", "code", "tools", "knowledge", "instructions")
    for r in house.records(f"{f}.jsonl")
}
COMMIT = re.compile(r"[0-9a-f]{40}")


def _provenance() -> str:
    return (
        resources.files("console.quality.suites")
        .joinpath("seed6", "PROVENANCE.md")
        .read_text(encoding="utf-8")
    )


def test_every_item_names_its_dataset_origin_licence_and_own_id() -> None:
    provenance = _provenance()
    for item in ITEMS:
        src = item.source
        assert src["dataset"] and src["licence"] and src["source_id"] and src["path"], item.item_id
        if "repo" in src:
            assert COMMIT.fullmatch(src["commit"]), item.item_id
            assert f"{src['repo']}@{src['commit']}" in provenance, item.item_id
        else:
            assert src["package"] and src["version"], item.item_id
            assert f"{src['package']} {src['version']}" in provenance, item.item_id
        assert src["dataset"] in provenance and src["licence"] in provenance, item.item_id
        assert "sha256" not in src or src["sha256"] in provenance, item.item_id
    # No item is the repository's own any more: v3 vendored contest maths and SimpleQA's short answers.
    assert {i.family for i in ITEMS if "authored" in i.source} == set()
    assert len({i.item_id for i in ITEMS}) == len(ITEMS) and house.VERSION == 3


def test_maths_is_contest_maths_and_factuality_is_simpleqa() -> None:
    maths = [i for i in ITEMS if i.family == "maths"]
    short = [i for i in ITEMS if i.family == "knowledge" and i.key["kind"] == "short"]
    assert len(maths) >= 8 and {i.source["dataset"] for i in maths} == {
        "MATH (test), MATH-500 split, level 5"
    }
    assert len(short) >= 3 and {i.source["dataset"] for i in short} == {"SimpleQA (test)"}


def test_the_suite_keeps_its_size_and_every_family() -> None:
    def no_count(messages: house.Messages) -> None:
        return None

    families = [i.family for i in house.items(8192, no_count)]
    assert 46 <= len(families) <= 60 and set(families) == set(house.FAMILIES)


# -- reference and wrong answers, per family ---------------------------------------------------------------


def _calls(answer: list[Mapping[str, Mapping[str, list[Any]]]]) -> list[dict[str, Any]]:
    """BFCL's possible answer as calls: each parameter's first allowed value, an optional one ("" first) left out."""
    calls = []
    for call in answer:
        ((name, params),) = call.items()
        args = {p: values[0] for p, values in params.items() if values[0] != ""}
        calls.append({"name": name, "arguments": args})
    return calls


def _wrong_calls(item: house.SuiteItem) -> list[dict[str, Any]]:
    calls = _calls(item.key["answer"])
    first = calls[0]
    required = item.key["required"][first["name"]]
    first["arguments"][required[0]] = "not-an-allowed-value"
    return calls


def _reference(item: house.SuiteItem) -> str:
    r = RECORDS[item.item_id]
    match item.family:
        case "maths":
            return str(r["solution"])
        case "code":
            return f"```python\n{r['prompt']}{r['canonical_solution']}```"
        case "tools":
            return json.dumps(_calls(r["answer"]))
        case "knowledge" if r["kind"] == "choice":
            return f"Answer: {r['answer']}"
        case "knowledge":
            return str(r["answer"])
        case _:
            return str(r["reference"]["response"])


def _off_by_one(answer: str) -> str:
    """A wrong answer beside ``answer``: the next number, or the expression plus one."""
    exact = scoring.number(scoring.maths_answer(answer))
    return f"{answer}+1" if exact is None else str(exact + 1)


OTHER_SHORT = {
    i.item_id: str(RECORDS[i.item_id]["aliases"][0]) for i in ITEMS if i.key.get("kind") == "short"
}


def _wrongs(item: house.SuiteItem) -> list[str]:
    r = RECORDS[item.item_id]
    match item.family:
        case "maths":
            wrong = f"\\boxed{{{_off_by_one(r['answer'])}}}"
            return [wrong, f"{r['solution']} On second thoughts, {wrong}.", "\\boxed{}"]
        case "code":
            return [f"```python\n{r['prompt']}    return None\n```"]
        case "tools":
            return [json.dumps(_wrong_calls(item)), json.dumps(_calls(r["answer"])[1:])]
        case "knowledge" if r["kind"] == "choice":
            return [f"Answer: {'ABCDEFGHIJ'['ABCDEFGHIJ'.index(r['answer']) - 1]}"]
        case "knowledge":
            alias = str(r["aliases"][0])
            others = [a for k, a in OTHER_SHORT.items() if k != item.item_id]
            guess = [f"{alias} or {int(alias) + 1}"] if alias.isdigit() else [alias[:-1]]
            return ["I am not sure.", others[0], *guess]
        case _:
            response = str(r["reference"]["response"])
            return [BREAK[i](response, k) for i, k in zip(r["instruction_id_list"], r["kwargs"], strict=True)]


def _without(pattern: str, text: str) -> str:
    return re.sub(pattern, "", text, flags=re.IGNORECASE)


BREAK: dict[str, Callable[[str, Mapping[str, Any]], str]] = {
    "punctuation:no_comma": lambda r, k: r + ", and so on",
    "change_case:english_lowercase": lambda r, k: r + " Capital",
    "change_case:english_capital": lambda r, k: r + " lower",
    "length_constraints:number_words": lambda r, k: (
        " ".join(r.split()[: int(k["num_words"]) // 2])
        if k["relation"] == "at least"
        else r + " word" * int(k["num_words"])
    ),
    "length_constraints:number_paragraphs": lambda r, k: r + "\n***\nOne paragraph too many.",
    "detectable_format:number_bullet_lists": lambda r, k: r + "\n* one bullet too many",
    "detectable_format:title": lambda r, k: _without(r"<<|>>", r),
    "detectable_format:json_format": lambda r, k: r + " and some prose",
    "detectable_format:number_highlighted_sections": lambda r, k: r.replace("*", ""),
    "detectable_format:multiple_sections": lambda r, k: _without(str(k["section_spliter"]), r),
    "detectable_format:constrained_response": lambda r, k: r.replace("My answer is", "I say"),
    "detectable_content:postscript": lambda r, k: _without(r"p\.\s?p\.\s?s|p\.\s?s\.", r),
    "detectable_content:number_placeholders": lambda r, k: r.replace("[", "(").replace("]", ")"),
    "startend:end_checker": lambda r, k: r + " One more thing.",
    "startend:quotation": lambda r, k: r.strip().strip('"'),
    "keywords:existence": lambda r, k: _without(str(k["keywords"][0]), r),
    "keywords:forbidden_words": lambda r, k: f"{r} {k['forbidden_words'][0]}",
    "keywords:frequency": lambda r, k: (
        _without(str(k["keyword"]), r)
        if k["relation"] == "at least"
        else r + f" {k['keyword']}" * int(k["frequency"])
    ),
    "keywords:letter_frequency": lambda r, k: (
        _without(str(k["letter"]), r)
        if k["let_relation"] == "at least"
        else r + str(k["letter"]) * int(k["let_frequency"])
    ),
    "combination:two_responses": lambda r, k: r.replace("******", ""),
    "combination:repeat_prompt": lambda r, k: "Sure. " + r,
}
"""For each IFEval instruction the suite takes, an edit of a following response that breaks it."""


@pytest.mark.parametrize("item", ITEMS, ids=[i.item_id for i in ITEMS])
def test_the_scorer_accepts_the_sources_answer_and_rejects_a_wrong_one(item: house.SuiteItem) -> None:
    assert item.score(_reference(item)) == 1.0
    for wrong in _wrongs(item):
        assert item.score(wrong) == 0.0, wrong[:200]
