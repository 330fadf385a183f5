"""Rebuild the house suite's vendored items (console/quality/suites/seed6/) from copies of their public sources.

    python scripts/vendor_seed6.py SOURCES_DIR

Nothing is downloaded here or at run time: SOURCES_DIR holds the source files exactly as their repositories
or packages ship them (console/quality/suites/seed6/PROVENANCE.md names each one, with its commit or
version, and how to bring it), under the names in ``SOURCES`` below. Each family takes a fixed number of
items by a seeded draw (``random.Random(f"seed6 v{N} {family}")``, N the suite version that last changed the
family: ``DRAWN_IN``) from the source's items that pass the family's filter (short items, so the suite stays
quick on a CPU server; only what the scorers can judge), and writes them in source order with the source's
own id and provenance. The long-context family is not drawn here (it is generated from the launch's window).
"""

from __future__ import annotations

import argparse
import ast
import csv
import hashlib
import json
import random
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a file from a checkout: the suite is the checkout's
    sys.path.insert(0, str(ROOT))

from console.quality.suites import house  # noqa: E402  (after the path above)
from console.quality.suites.checkers import CHECKERS  # noqa: E402
from console.quality.suites.sandbox import run_tests  # noqa: E402
from console.quality.suites.scoring import score_maths, score_short  # noqa: E402

OUT = ROOT / "console" / "quality" / "suites" / "seed6"
COUNTS = {"maths": 10, "code": 8, "tools": 8, "knowledge": 8, "knowledge short": 6, "instructions": 10}
DRAWN_IN = {"maths": 3, "code": 2, "tools": 2, "knowledge": 2, "knowledge short": 3, "instructions": 2}
"""The suite version whose seed drew each family's items: a version bump redraws only the families it changes,
so the others keep their items and this script still rebuilds them byte for byte."""

MATH = {
    "dataset": "MATH (test), MATH-500 split, level 5",
    "repo": "openai/prm800k",
    "commit": "7ecc794703b2877f63226f2477a49b34f9b25163",
    "path": "prm800k/math_splits/test.jsonl",
    "sha256": "35dc41080a3680858b27fa7e0533d2d547825316fc5dafe5d316f4ccc5a06132",
    "licence": "MIT",
}
SIMPLEQA = {
    "dataset": "SimpleQA (test)",
    "repo": "figlin/Pipeline-for-PromptHallucinationReductions",
    "commit": "924c31f00c806d62d532cf623fa3b8b3ce2d6d06",
    "path": "data/simple_qa_test_set.csv",
    "sha256": "feee3f7e7db3617e94e8fcf1977b756ec420ef8568f4e0fcbbe0e92e9d5fc032",
    "licence": "MIT",
}
_NAME = re.compile(r"[^\W\d_]+(?:[ '-][^\W\d_]+){0,3}")
SIMPLEQA_ANSWERS = {
    "Person": _NAME,
    "Place": _NAME,
    "Other": _NAME,
    "Number": re.compile(r"\d{1,3}(?:,\d{3})+|\d+"),
    "Date": re.compile(r"\d{4}"),
}
"""The SimpleQA answers a normalised match can judge, by the row's ``answer_type``: a name of at most four
words (no list, no "and", no parenthesised alternative), a bare count, a year. Full dates are left out: their
spellings vary (24 July 1869, July 24th, 1869) and SimpleQA's model grader reads them all."""
HUMANEVAL = {
    "dataset": "HumanEval",
    "repo": "openai/human-eval",
    "commit": "6d43fb980f9fee3c892a914eda09951f772ad10d",
    "path": "data/HumanEval.jsonl.gz",
    "licence": "MIT",
}
BFCL = {"dataset": "BFCL v4", "package": "bfcl-eval", "version": "2026.3.23", "licence": "Apache-2.0"}
BFCL_CATEGORIES = {"simple_python": 3, "multiple": 2, "parallel": 2, "parallel_multiple": 1}
MMLU_PRO = {
    "dataset": "MMLU-Pro (test)",
    "repo": "TIGER-AI-Lab/MMLU-Pro",
    "commit": "ff991b5b7f14a383fd41da3987447ab6c08bf138",
    "licence": "Apache-2.0",
}
MMLU_PRO_CATEGORIES = [
    "biology",
    "business",
    "chemistry",
    "computer_science",
    "economics",
    "engineering",
    "health",
    "history",
    "law",
    "math",
    "other",
    "philosophy",
    "physics",
    "psychology",
]
IFEVAL = {
    "dataset": "IFEval",
    "repo": "Podtech-AI/IFEval",
    "commit": "5bdf377eb9cc20f16d377dc5c38413cee22550a6",
    "path": "data/input_data.jsonl",
    "licence": "Apache-2.0",
}
IFEVAL_REFERENCE = "data/input_response_data_gpt4_20231107_145030.jsonl"
IFEVAL_VERDICTS = "data/test_output/eval_results_strict.jsonl"

SOURCES = {
    "math": "math500_test.jsonl  (openai/prm800k prm800k/math_splits/test.jsonl, a git-LFS object)",
    "humaneval": "HumanEval.jsonl  (openai/human-eval data/HumanEval.jsonl.gz, unzipped)",
    "bfcl": "bfcl_eval/data/  (the bfcl-eval wheel's data folder, with possible_answer/)",
    "mmlu-pro": "mmlu/CATEGORY.json  (TIGER-AI-Lab/MMLU-Pro eval_results/gpt4o/CATEGORY_result.json)",
    "ifeval": "ifeval_input.jsonl, ifeval_gpt4.jsonl, ifeval_strict.jsonl  (the three IFEval data files)",
    "simpleqa": "simple_qa_test_set.csv  (SimpleQA's test set, as openai/simple-evals reads it)",
}


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _draw(family: str, candidates: list[dict[str, Any]], k: int, tag: str = "") -> list[dict[str, Any]]:
    """``k`` of the candidates by the family's seeded draw, kept in source order."""
    rng = random.Random(f"{house.NAME} v{DRAWN_IN[family]} {family}{tag}")
    chosen = {id(c) for c in rng.sample(candidates, k)}
    return [c for c in candidates if id(c) in chosen]


def _sha256_checked(path: Path, expected: str) -> bytes:
    """The file's bytes, refused unless they are the ones PROVENANCE.md names."""
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != expected:
        raise SystemExit(
            f"{path}: not the file PROVENANCE.md names (sha256 {expected[:12]}...); bring that one"
        )
    return data


def maths(src: Path) -> list[dict[str, Any]]:
    """MATH's hardest level (competition problems: AMC 10/12, AIME and the like) from the MATH-500 split, short
    and without an [asy] figure, whose own worked solution the suite's scorer marks right: the reference
    answer is read from the solution's last box exactly as a model's is."""
    text = _sha256_checked(src / "math500_test.jsonl", MATH["sha256"]).decode("utf-8")
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    fit = [
        r
        for r in rows
        if r["level"] == 5
        and len(r["problem"]) <= 400
        and "[asy]" not in r["problem"]
        and score_maths(r["solution"], r["answer"]) == 1.0
    ]
    return [
        {
            "id": "maths-math-"
            + r["unique_id"].removeprefix("test/").removesuffix(".json").replace("/", "-").replace("_", "-"),
            "question": r["problem"],
            "answer": r["answer"],
            "solution": r["solution"],
            "source": {**MATH, "source_id": r["unique_id"]},
        }
        for r in _draw("maths", fit, COUNTS["maths"])
    ]


def code(src: Path) -> list[dict[str, Any]]:
    rows = _jsonl(src / "HumanEval.jsonl")
    fit = [r for r in rows if len(r["prompt"]) <= 600 and len(r["test"]) <= 1200]
    out = []
    for r in _draw("code", fit, COUNTS["code"]):
        tests = f"{r['test']}\n\ncheck({r['entry_point']})\n"
        if not run_tests(r["prompt"] + r["canonical_solution"], tests).passed:
            raise SystemExit(f"{r['task_id']}: its canonical solution fails in the sandbox")
        out.append(
            {
                "id": f"code-{r['task_id'].replace('/', '-').lower()}",
                "prompt": r["prompt"],
                "entry_point": r["entry_point"],
                "test": r["test"],
                "canonical_solution": r["canonical_solution"],
                "source": {**HUMANEVAL, "source_id": r["task_id"]},
            }
        )
    return out


def _scalar_answers(answer: list[dict[str, dict[str, list[Any]]]]) -> bool:
    """Every allowed value is a scalar or a list of scalars (the scorer compares no nested dicts)."""
    values = [v for call in answer for params in call.values() for vs in params.values() for v in vs]
    flat = [x for v in values for x in (v if isinstance(v, list) else [v])]
    return all(not isinstance(x, dict | list) for x in flat)


def tools(src: Path) -> list[dict[str, Any]]:
    out = []
    for category, k in BFCL_CATEGORIES.items():
        name = f"BFCL_v4_{category}.json"
        questions = _jsonl(src / "bfcl_eval" / "data" / name)
        answers = {
            a["id"]: a["ground_truth"] for a in _jsonl(src / "bfcl_eval" / "data" / "possible_answer" / name)
        }
        fit = [
            q
            for q in questions
            if len(q["question"]) == 1
            and len(q["question"][0]) == 1
            and len(q["question"][0][0]["content"]) <= 300
            and len(json.dumps(q["function"], indent=1)) <= 1400
            and _scalar_answers(answers[q["id"]])
        ]
        for q in _draw("tools", fit, k, f" {category}"):
            out.append(
                {
                    "id": f"tools-{q['id']}",
                    "question": q["question"][0][0]["content"],
                    "functions": q["function"],
                    "answer": answers[q["id"]],
                    "source": {
                        **BFCL,
                        "path": f"bfcl_eval/data/{name}",
                        "answer_path": f"bfcl_eval/data/possible_answer/{name}",
                        "source_id": q["id"],
                    },
                }
            )
    return out


def knowledge(src: Path) -> list[dict[str, Any]]:
    fit = []
    for category in MMLU_PRO_CATEGORIES:
        spaced = category.replace("_", " ")
        for r in json.loads((src / "mmlu" / f"{spaced}.json").read_text(encoding="utf-8")):
            if len(r["options"]) == 10 and len(r["question"]) <= 300 and len(json.dumps(r["options"])) <= 600:
                fit.append({**r, "path": f"eval_results/gpt4o/{spaced}_result.json"})
    fit.sort(key=lambda r: int(r["question_id"]))
    return [
        {
            "id": f"knowledge-mmlu-pro-{r['question_id']}",
            "kind": "choice",
            "question": r["question"],
            "options": r["options"],
            "answer": r["answer"],
            "source": {**MMLU_PRO, "path": r["path"], "source_id": f"question_id {r['question_id']}"},
        }
        for r in _draw("knowledge", fit, COUNTS["knowledge"])
    ] + short_answers(src)


def short_answers(src: Path) -> list[dict[str, Any]]:
    """SimpleQA questions of at most 200 characters whose answer a normalised match can judge
    (``SIMPLEQA_ANSWERS``), the answer without SimpleQA's stray spaces and full stops as the one alias."""
    text = _sha256_checked(src / "simple_qa_test_set.csv", SIMPLEQA["sha256"]).decode("utf-8")
    fit = []
    for n, r in enumerate(csv.DictReader(text.splitlines()), start=1):
        answer = r["answer"].strip().rstrip(".").strip()
        kind = ast.literal_eval(r["metadata"])["answer_type"]
        if len(r["problem"]) <= 200 and SIMPLEQA_ANSWERS[kind].fullmatch(answer) and " and " not in answer:
            fit.append({"n": n, "kind": kind, "alias": answer, **r})
    out = []
    for r in _draw("knowledge short", fit, COUNTS["knowledge short"]):
        if score_short(r["alias"], [r["alias"]], r["problem"]) != 1.0:
            raise SystemExit(f"SimpleQA row {r['n']}: its own answer does not match itself")
        out.append(
            {
                "id": f"knowledge-simpleqa-{r['n']:04d}",
                "kind": "short",
                "question": r["problem"],
                "aliases": [r["alias"]],
                "answer": r["answer"],
                "answer_type": r["kind"],
                "source": {**SIMPLEQA, "source_id": f"row {r['n']}"},
            }
        )
    return out


def instructions(src: Path) -> list[dict[str, Any]]:
    """IFEval items whose every instruction has a checker here, short to answer (no 300-word essays), and
    whose reference response (IFEval's own GPT-4 file) the reference implementation judged as following
    every instruction: that response is kept as the item's reference answer."""
    responses = {r["prompt"]: r["response"] for r in _jsonl(src / "ifeval_gpt4.jsonl")}
    verdicts = {r["prompt"]: r["follow_all_instructions"] for r in _jsonl(src / "ifeval_strict.jsonl")}
    fit = [
        r
        for r in _jsonl(src / "ifeval_input.jsonl")
        if all(i in CHECKERS for i in r["instruction_id_list"])
        and len(r["prompt"]) <= 400
        and all(int(k.get("num_words", 0)) <= 200 for k in r["kwargs"])
        and verdicts.get(r["prompt"]) is True
        and len(responses[r["prompt"]]) <= 3000
    ]
    fit.sort(key=lambda r: int(r["key"]))
    return [
        {
            "id": f"instructions-ifeval-{r['key']}",
            "prompt": r["prompt"],
            "instruction_id_list": r["instruction_id_list"],
            "kwargs": r["kwargs"],
            "reference": {
                "response": responses[r["prompt"]],
                "path": IFEVAL_REFERENCE,
                "verdicts": IFEVAL_VERDICTS,
            },
            "source": {**IFEVAL, "source_id": f"key {r['key']}"},
        }
        for r in _draw("instructions", fit, COUNTS["instructions"])
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "sources", type=Path, help="folder of the source files: " + "; ".join(SOURCES.values())
    )
    src = parser.parse_args().sources
    families = {
        "maths": maths,
        "code": code,
        "tools": tools,
        "knowledge": knowledge,
        "instructions": instructions,
    }
    for family, build in families.items():
        rows = build(src)
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        (OUT / f"{family}.jsonl").write_text(text, encoding="utf-8")
        print(f"{family}: {len(rows)} items")


if __name__ == "__main__":
    main()
