"""The house suite ``seed6``: six capability families, fixed items with stable ids, one fixed seed.

The write-up's own suite (seed-gaps F8) had contest maths, code run against its tests in a sandbox, tool
calling matched against the Berkeley function-calling answer sets, synthetic long-context retrieval calibrated
to the served window, ten-option knowledge questions with short-answer factuality, and instruction following
with IFEval's checkers, from "ungated public sources", "the same items and seed across configurations so arms
are directly pairable". This is that design at about fifty items, vendored from the public sources
(console/quality/suites/seed6/PROVENANCE.md; every item keeps its dataset, repository and commit or package and
version, licence and the source's own id; scripts/vendor_seed6.py draws them): contest maths from MATH (level
5 of the MATH-500 split), HumanEval code, BFCL v4 tool calls with their possible answers, MMLU-Pro ten-option
questions with SimpleQA short answers, and IFEval instructions. The long-context items are built by code from
``SEED`` and sized to the launch's ``max_model_len`` (the same window gives the same text), so two runs against
one configuration pair item by item. ``VERSION`` changes whenever an item does; the stored suite name carries
it, so runs of different versions never share a noise floor and never pair, even on an item id both versions
keep (v1 was the authored set, v2 the vendored one with GSM8K maths and three authored short answers, v3 has
contest maths and SimpleQA).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from console.quality.suites import scoring

NAME = "seed6"
VERSION = 3
SEED = 6
FAMILIES = ("maths", "code", "tools", "long-context", "knowledge", "instructions")

LONG_CONTEXT = (
    ("long-context-1", 0.25, 0.5),
    ("long-context-2", 0.5, 0.2),
    ("long-context-3", 0.75, 0.8),
    ("long-context-4", 0.9, 0.5),
)
"""(id, share of the window the prompt fills, depth of the needle in it)."""
CHARS_PER_TOKEN = 3.0
"""Where the server cannot count tokens (no ``/tokenize``), a cautious guess: English text runs near 4."""

Messages = tuple[Mapping[str, str], ...]
CountTokens = Callable[[Messages], int | None]


@dataclass(frozen=True)
class SuiteItem:
    """One item: its family and stable id, the chat messages sent, and what scoring compares against."""

    family: str
    item_id: str
    messages: Messages
    key: Mapping[str, Any] = field(default_factory=dict)
    source: Mapping[str, Any] = field(default_factory=dict)
    """Where a vendored item comes from (dataset, repository and commit or package and version, licence,
    the source's own id); empty for a generated one."""

    def score(self, content: str, tool_calls: Sequence[Mapping[str, Any]] | None = None) -> float:
        """The item's score (0 or 1) for an answer, by its family's rule (console/quality/suites/scoring.py)."""
        k = self.key
        match self.family:
            case "maths":
                return scoring.score_maths(content, k["answer"])
            case "code":
                return scoring.score_code(content, k["tests"], k["setup"])
            case "tools":
                return scoring.score_tools(content, tool_calls, k["answer"], k["required"])
            case "long-context":
                return scoring.score_needle(content, k["value"])
            case "knowledge" if k["kind"] == "choice":
                return float(scoring.chosen_letter(content) == k["answer"])
            case "knowledge":
                return scoring.score_short(content, k["aliases"], k["question"])
            case _:
                return scoring.score_instructions(content, k["instructions"], k["kwargs"])


def suite_label() -> str:
    """The suite as stored with every run (runs of one label share one noise floor)."""
    return f"{NAME} v{VERSION}"


def records(name: str) -> list[dict[str, Any]]:
    """The rows of one of the suite's data files (console/quality/suites/seed6/NAME)."""
    text = resources.files("console.quality.suites").joinpath(NAME).joinpath(name).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _user(text: str) -> Messages:
    return ({"role": "user", "content": text},)


def fixed_items() -> list[SuiteItem]:
    """Every item of the fixed families, in file order."""
    items = [
        SuiteItem(
            "maths",
            r["id"],
            _user(f"{r['question']}\n\nSolve the problem. Give the final answer as \\boxed{{ANSWER}}."),
            {"answer": r["answer"]},
            r["source"],
        )
        for r in records("maths.jsonl")
    ]
    items += [
        SuiteItem(
            "code",
            r["id"],
            _user(
                f"Complete this Python function:\n\n```python\n{r['prompt']}```\n\n"
                "Reply with the complete function in one ```python code block."
            ),
            {"tests": f"{r['test']}\n\ncheck({r['entry_point']})\n", "setup": r["prompt"]},
            r["source"],
        )
        for r in records("code.jsonl")
    ]
    for r in records("tools.jsonl"):
        system = (
            "You can call these functions (JSON schema):\n"
            + json.dumps(r["functions"], indent=1)
            + '\n\nTo call functions, reply with only a JSON list of calls, each {"name": NAME, "arguments": '
            "{...}}, and nothing else."
        )
        items.append(
            SuiteItem(
                "tools",
                r["id"],
                ({"role": "system", "content": system}, {"role": "user", "content": r["question"]}),
                {
                    "answer": r["answer"],
                    "required": {f["name"]: f["parameters"].get("required", []) for f in r["functions"]},
                },
                r["source"],
            )
        )
    for r in records("knowledge.jsonl"):
        if r["kind"] == "choice":
            options = "\n".join(f"{'ABCDEFGHIJ'[i]}. {o}" for i, o in enumerate(r["options"]))
            prompt = (
                f"{r['question']}\n\n{options}\n\nReply with 'Answer: X', where X is the letter of the correct "
                "option."
            )
            key: dict[str, Any] = {"kind": "choice", "answer": r["answer"]}
        else:
            prompt, key = (
                f"{r['question']} Answer in a few words.",
                {"kind": "short", "aliases": r["aliases"], "question": r["question"]},
            )
        items.append(SuiteItem("knowledge", r["id"], _user(prompt), key, r["source"]))
    items += [
        SuiteItem(
            "instructions",
            r["id"],
            _user(r["prompt"]),
            {"instructions": r["instruction_id_list"], "kwargs": r["kwargs"]},
            r["source"],
        )
        for r in records("instructions.jsonl")
    ]
    return items


# -- long context --------------------------------------------------------------------------------

_GOODS = ("copper wire", "glass jars", "oak planks", "wool bales", "tea chests", "salt sacks", "iron nails")
_VAULTS = ("amber", "birch", "cobalt", "delta", "ember", "falcon", "granite", "harbor", "indigo", "juniper")


def _haystack(item_id: str, sentences: int, depth: float) -> tuple[str, str, str]:
    """(log text, vault name, code): ``sentences`` filler lines from the item's own random stream (the
    first n lines of a longer log are the same lines), the needle at ``depth``."""
    rng = random.Random(f"{NAME}:{SEED}:{item_id}")
    vault = rng.choice(_VAULTS)
    code = f"{rng.randrange(1_000_000, 10_000_000)}"
    lines = [
        f"Crate {rng.randrange(100, 10_000)} of {rng.choice(_GOODS)} moved from bay {rng.randrange(1, 60)} "
        f"to bay {rng.randrange(1, 60)} at {rng.randrange(24):02d}:{rng.randrange(60):02d}."
        for _ in range(sentences)
    ]
    lines.insert(round(depth * len(lines)), f"The access code of the {vault} vault is {code}.")
    return " ".join(lines), vault, code


def _long_messages(text: str, vault: str) -> Messages:
    return _user(
        "Below is a warehouse log. One line in it gives the access code of a vault.\n\n"
        f"{text}\n\nWhat is the access code of the {vault} vault? Reply with the code only."
    )


def long_context_items(max_model_len: int, count_tokens: CountTokens) -> list[SuiteItem]:
    """The long-context items sized to the window: each prompt fills its share of ``max_model_len`` tokens
    (counted by the server's tokenizer through ``count_tokens``; else estimated from characters)."""

    def count(messages: Messages) -> int:
        counted = count_tokens(messages)
        return counted if counted is not None else int(len(messages[0]["content"]) / CHARS_PER_TOKEN)

    items = []
    for item_id, share, depth in LONG_CONTEXT:
        target = int(share * max_model_len)
        n = max(1, target // 20)
        for _ in range(8):  # scale to the measured length, then step down until it fits
            text, vault, code = _haystack(item_id, n, depth)
            used = max(1, count(_long_messages(text, vault)))
            if used <= target and (used >= 0.9 * target or n == 0):
                break
            n = max(0, min(n - 1, int(n * target / used)) if used > target else int(n * target / used))
        text, vault, code = _haystack(item_id, n, depth)
        items.append(SuiteItem("long-context", item_id, _long_messages(text, vault), {"value": code}))
    return items


def items(max_model_len: int | None, count_tokens: CountTokens) -> list[SuiteItem]:
    """The whole suite for a server of window ``max_model_len`` (None: unknown, no long-context items)."""
    fixed = fixed_items()
    long = long_context_items(max_model_len, count_tokens) if max_model_len else []
    order = {f: i for i, f in enumerate(FAMILIES)}
    return sorted(fixed + long, key=lambda i: order[i.family])
