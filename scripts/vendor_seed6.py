"""Rebuild the house suite's vendored items (console/quality/suites/seed6/) from copies of their public sources.

    python scripts/vendor_seed6.py SOURCES_DIR

Nothing is downloaded here or at run time: SOURCES_DIR holds the source files exactly as their repositories
or packages ship them (console/quality/suites/seed6/PROVENANCE.md names each one, with its commit or
version, and how to bring it), under the names in ``SOURCES`` below. Each family takes a fixed number of
items by a seeded draw (``random.Random(f"seed6 v{VERSION} {family}")``) from the source's items that pass
the family's filter (short items, so the suite stays quick on a CPU server; only what the scorers can judge),
and writes them in source order with the source's own id and provenance. The short-answer knowledge items
and the long-context family are not drawn here (PROVENANCE.md says why).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a file from a checkout: the suite is the checkout's
    sys.path.insert(0, str(ROOT))

from console.quality.suites import house  # noqa: E402  (after the path above)
from console.quality.suites.checkers import CHECKERS  # noqa: E402
from console.quality.suites.sandbox import run_tests  # noqa: E402

OUT = ROOT / "console" / "quality" / "suites" / "seed6"
COUNTS = {"maths": 10, "code": 8, "tools": 8, "knowledge": 8, "instructions": 10}

GSM8K = {
    "dataset": "GSM8K (test)",
    "repo": "openai/grade-school-math",
    "commit": "3101c7d5072418e28b9008a6636bde82a006892c",
    "path": "grade_school_math/data/test.jsonl",
    "licence": "MIT",
}
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
    "gsm8k": "gsm8k_test.jsonl  (openai/grade-school-math grade_school_math/data/test.jsonl)",
    "humaneval": "HumanEval.jsonl  (openai/human-eval data/HumanEval.jsonl.gz, unzipped)",
    "bfcl": "bfcl_eval/data/  (the bfcl-eval wheel's data folder, with possible_answer/)",
    "mmlu-pro": "mmlu/CATEGORY.json  (TIGER-AI-Lab/MMLU-Pro eval_results/gpt4o/CATEGORY_result.json)",
    "ifeval": "ifeval_input.jsonl, ifeval_gpt4.jsonl, ifeval_strict.jsonl  (the three IFEval data files)",
}


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _draw(family: str, candidates: list[dict[str, Any]], k: int, tag: str = "") -> list[dict[str, Any]]:
    """``k`` of the candidates by the family's seeded draw, kept in source order."""
    rng = random.Random(f"{house.NAME} v{house.VERSION} {family}{tag}")
    chosen = {id(c) for c in rng.sample(candidates, k)}
    return [c for c in candidates if id(c) in chosen]


def maths(src: Path) -> list[dict[str, Any]]:
    rows = [(n, r) for n, r in enumerate(_jsonl(src / "gsm8k_test.jsonl"), start=1)]
    fit = [{"n": n, **r} for n, r in rows if len(r["question"]) <= 300]
    return [
        {
            "id": f"maths-gsm8k-{r['n']:04d}",
            "question": r["question"],
            "answer": r["answer"].split("####")[-1].strip().replace(",", ""),
            "source": {**GSM8K, "source_id": f"line {r['n']}"},
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
    authored = [r for r in _jsonl(OUT / "knowledge.jsonl") if r["kind"] == "short"]
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
    ] + authored


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
