"""Task-harness output files in the formats the harnesses really write, for the quality ledger's tests.

lm-evaluation-harness, 0.4.x (EleutherAI/lm-evaluation-harness at 0.4.13.dev0): ``results_<date>.json``
as ``EvaluationTracker.save_results_aggregated`` writes it under ``<output_path>/<model_name_sanitized>/``
(the keys of lm_eval/result_schema.py ``EvalResults``), and ``samples_<task>_<date>.jsonl`` as
``save_results_samples`` writes the samples ``lm_eval/evaluator.py`` logs: one object per document and
filter, ``arguments`` flattened to ``{"gen_args_N": {"arg_0": ..., "arg_1": ...}}``, ``resps`` and
``filtered_resps`` passed through ``sanitize_list`` (so a loglikelihood pair is two strings), ``target`` as
a string, and one key per metric.

Inspect AI, 0.3.260 (UKGovernmentBEIS/inspect_ai, log schema version 2): an ``EvalLog`` (src/inspect_ai/
log/_log.py) as ``.json`` (the whole log, samples included) or as the ``.eval`` zip of
src/inspect_ai/log/_recorders/eval.py: ``_journal/start.json``, ``_journal/summaries/1.json``,
``samples/<id>_epoch_<n>.json``, ``summaries.json``, ``reductions.json`` and ``header.json``. Inspect
0.3.206 and later compress the zip's entries with Zstandard; earlier ones (and these fixtures) deflate.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DATE_ID = "2026-09-05T01-27-00.123456"
CREATED = "2026-09-05T01:27:00+00:00"
UNTIL = ["Question:", "</s>", "<|im_end|>"]


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _generate_row(task: str, doc_id: int, flt: str, score: float, max_gen_toks: int) -> dict[str, Any]:
    question = f"{task} question {doc_id}: what is {doc_id} + 2?"
    doc = {"question": question, "answer": f"{doc_id} + 2 = {doc_id + 2}\n#### {doc_id + 2}"}
    prompt = f"Question: {question}\nAnswer:"
    answer = str(doc_id + 2) if score else "[invalid]"
    return {
        "doc_id": doc_id,
        "doc": doc,
        "target": doc["answer"],
        "arguments": {
            "gen_args_0": {
                "arg_0": prompt,
                "arg_1": {
                    "until": UNTIL,
                    "do_sample": False,
                    "temperature": 0.0,
                    "max_gen_toks": max_gen_toks,
                },
            }
        },
        "resps": [[f"So the answer is {answer}.\n#### {answer}"]],
        "filtered_resps": [answer],
        "filter": flt,
        "metrics": ["exact_match"],
        "doc_hash": _hash(json.dumps(doc, indent=2)),
        "prompt_hash": _hash(prompt),
        "target_hash": _hash(doc["answer"]),
        "exact_match": score,
    }


def _choice_row(doc_id: int, acc: float) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "id": f"Mercury_{doc_id}",
        "question": f"Which is larger, {doc_id} or {doc_id + 1}?",
        "choices": {"text": [str(doc_id), str(doc_id + 1)], "label": ["A", "B"]},
        "answerKey": "B",
    }
    context = f"Question: {doc['question']}\nAnswer:"
    logliks = [["-2.5", "False"], ["-0.7", "True"]] if acc else [["-0.4", "True"], ["-1.9", "False"]]
    return {
        "doc_id": doc_id,
        "doc": doc,
        "target": "1",
        "arguments": {
            f"gen_args_{i}": {"arg_0": context, "arg_1": f" {c}"}
            for i, c in enumerate(doc["choices"]["text"])
        },
        "resps": [[pair] for pair in logliks],
        "filtered_resps": logliks,
        "filter": "none",
        "metrics": ["acc", "acc_norm"],
        "doc_hash": _hash(json.dumps(doc, indent=2)),
        "prompt_hash": _hash(context),
        "target_hash": _hash("1"),
        "acc": acc,
        "acc_norm": acc,
    }


def write_lm_eval(
    output_path: Path,
    *,
    model: str = "tiny",
    gsm8k: Sequence[float] = (),
    arc_easy: Sequence[float] = (),
    date_id: str = DATE_ID,
    max_gen_toks: int = 256,
    gen_kwargs: str | None = None,
    date: float = 1788658020.5,
) -> Path:
    """``lm_eval --model local-chat-completions --tasks gsm8k,arc_easy --log_samples --output_path DIR``:
    gsm8k's strict-match scores are ``gsm8k`` (flexible-extract finds every answer), arc_easy's acc
    ``arc_easy``. Returns the results file."""
    folder = output_path / model.replace("/", "__")
    folder.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    configs: dict[str, Any] = {}
    if gsm8k:
        rows = [
            _generate_row("gsm8k", i, flt, s if flt == "strict-match" else 1.0, max_gen_toks)
            for i, s in enumerate(gsm8k)
            for flt in ("strict-match", "flexible-extract")
        ]
        (folder / f"samples_gsm8k_{date_id}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        results["gsm8k"] = {
            "alias": "gsm8k",
            "exact_match,strict-match": sum(gsm8k) / len(gsm8k),
            "exact_match_stderr,strict-match": 0.05,
            "exact_match,flexible-extract": 1.0,
            "exact_match_stderr,flexible-extract": 0.0,
        }
        configs["gsm8k"] = {
            "task": "gsm8k",
            "tag": ["math_word_problems"],
            "dataset_path": "gsm8k",
            "dataset_name": "main",
            "test_split": "test",
            "output_type": "generate_until",
            "generation_kwargs": {
                "until": UNTIL,
                "do_sample": False,
                "temperature": 0.0,
                "max_gen_toks": max_gen_toks,
            },
            "num_fewshot": 5,
            "metadata": {"version": 3.0},
        }
    if arc_easy:
        rows = [_choice_row(i, a) for i, a in enumerate(arc_easy)]
        (folder / f"samples_arc_easy_{date_id}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        results["arc_easy"] = {
            "alias": "arc_easy",
            "acc,none": sum(arc_easy) / len(arc_easy),
            "acc_stderr,none": 0.05,
            "acc_norm,none": sum(arc_easy) / len(arc_easy),
            "acc_norm_stderr,none": 0.05,
        }
        configs["arc_easy"] = {
            "task": "arc_easy",
            "dataset_path": "allenai/ai2_arc",
            "dataset_name": "ARC-Easy",
            "output_type": "multiple_choice",
            "num_fewshot": 0,
            "metadata": {"version": 1.0},
        }
    document = {
        "results": results,
        "group_subtasks": {t: [] for t in results},
        "configs": configs,
        "versions": {"gsm8k": 3.0, "arc_easy": 1.0},
        "n-shot": {"gsm8k": 5, "arc_easy": 0},
        "higher_is_better": {"gsm8k": {"exact_match": True}, "arc_easy": {"acc": True, "acc_norm": True}},
        "n-samples": {
            "gsm8k": {"original": 1319, "effective": len(gsm8k)},
            "arc_easy": {"original": 2376, "effective": len(arc_easy)},
        },
        "config": {
            "model": "local-chat-completions",
            "model_args": f"model={model},base_url=http://127.0.0.1:41234/v1/chat/completions,num_concurrent=8",
            "batch_size": 1,
            "batch_sizes": [],
            "device": None,
            "use_cache": None,
            "limit": None,
            "bootstrap_iters": 100000,
            "gen_kwargs": gen_kwargs,
            "random_seed": 0,
            "numpy_seed": 1234,
            "torch_seed": 1234,
            "fewshot_seed": 1234,
        },
        "git_hash": "4e7e0d4",
        "date": date,
        "pretty_env_info": "PyTorch version: N/A",
        "transformers_version": "4.57.1",
        "lm_eval_version": "0.4.12",
        "upper_git_hash": None,
        "task_hashes": {t: _hash(t) for t in results},
        "model_source": "local-chat-completions",
        "model_name": model,
        "model_name_sanitized": model.replace("/", "__"),
        "system_instruction": None,
        "system_instruction_sha": None,
        "fewshot_as_multiturn": False,
        "chat_template": None,
        "chat_template_sha": None,
        "start_time": 812.25,
        "end_time": 975.5,
        "total_evaluation_time_seconds": "163.25",
    }
    path = folder / f"results_{date_id}.json"
    path.write_text(json.dumps(document, indent=2))
    return path


def inspect_sample(
    sample_id: int | str,
    value: Any,
    *,
    model: str = "vllm/tiny",
    output_tokens: int = 120,
    stop_reason: str = "stop",
    limit: dict[str, Any] | None = None,
    epoch: int = 1,
    grader_tokens: int = 0,
) -> dict[str, Any]:
    """One ``EvalSample`` as Inspect writes it; ``value`` None is a sample that errored before scoring."""
    usage = {"input_tokens": 48, "output_tokens": output_tokens, "total_tokens": 48 + output_tokens}
    sample: dict[str, Any] = {
        "id": sample_id,
        "epoch": epoch,
        "input": f"What is {sample_id} + 2?",
        "target": "4",
        "messages": [
            {
                "id": f"m{sample_id}",
                "content": f"What is {sample_id} + 2?",
                "source": "input",
                "role": "user",
            },
            {
                "id": f"a{sample_id}",
                "content": "4",
                "source": "generate",
                "role": "assistant",
                "model": model.split("/", 1)[1],
            },
        ],
        "output": {
            "model": model.split("/", 1)[1],
            "choices": [
                {
                    "message": {
                        "id": f"a{sample_id}",
                        "content": "4",
                        "source": "generate",
                        "role": "assistant",
                        "model": model.split("/", 1)[1],
                    },
                    "stop_reason": stop_reason,
                }
            ],
            "completion": "4",
            "usage": usage,
            "time": 1.25,
        },
        "metadata": {},
        "store": {},
        "events": [],
        "model_usage": {model: usage},
        "total_time": 1.4,
        "working_time": 1.3,
        "uuid": f"uuid-{sample_id}-{epoch}",
        "error_retries": [],
        "attachments": {},
    }
    if grader_tokens:
        sample["model_usage"]["openai/grader"] = {
            "input_tokens": 300,
            "output_tokens": grader_tokens,
            "total_tokens": 300 + grader_tokens,
        }
    if value is None:
        sample["error"] = {
            "message": "RuntimeError('connection reset')",
            "traceback": "...",
            "traceback_ansi": "...",
        }
    else:
        sample["scores"] = {"match": {"value": value, "answer": "4", "explanation": "4", "history": []}}
    if limit is not None:
        sample["limit"] = limit
    return sample


def inspect_log(
    samples: list[dict[str, Any]],
    *,
    model: str = "vllm/tiny",
    task: str = "gsm8k",
    generate: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The whole ``EvalLog`` of an ``inspect eval`` run against an OpenAI-compatible vLLM server."""
    scored = [s for s in samples if "scores" in s]
    spec = {
        "eval_id": "CfYmFw3pkMKVEyRnZPjFHh",
        "run_id": "5iNknTBDwN3BnrXVwsAJAq",
        "created": CREATED,
        "task": task,
        "task_id": "JEPkrAN5K5y4vF4wkkKz3k",
        "task_version": 0,
        "task_file": "inspect_evals/gsm8k/gsm8k.py",
        "task_registry_name": f"inspect_evals/{task}",
        "task_attribs": {},
        "task_args": {},
        "task_args_passed": {},
        "dataset": {
            "name": task,
            "location": "openai/gsm8k",
            "samples": len(samples),
            "sample_ids": [s["id"] for s in samples],
            "shuffled": False,
        },
        "model": model,
        "model_generate_config": generate or {},
        "model_base_url": "http://127.0.0.1:41234/v1",
        "model_args": {},
        "config": {
            "epochs": 1,
            "epochs_reducer": ["mean"],
            "fail_on_error": False,
            "sandbox_cleanup": True,
            "log_samples": True,
            "log_images": True,
            "score_display": True,
        },
        "revision": {
            "type": "git",
            "origin": "https://github.com/UKGovernmentBEIS/inspect_evals",
            "commit": "8d1f2a3",
        },
        "packages": {"inspect_ai": "0.3.260"},
        "scorers": [
            {
                "name": "match",
                "options": {},
                "metrics": [
                    {"name": "inspect_ai/accuracy", "options": {}},
                    {"name": "inspect_ai/stderr", "options": {}},
                ],
                "metadata": {},
            }
        ],
    }
    return {
        "version": 2,
        "status": "success",
        "eval": spec,
        "plan": {"name": "plan", "steps": [{"solver": "generate", "params": {}}], "config": {}},
        "results": {
            "total_samples": len(samples),
            "completed_samples": len(scored),
            "scores": [
                {
                    "name": "match",
                    "scorer": "match",
                    "reducer": "mean",
                    "scored_samples": len(scored),
                    "unscored_samples": len(samples) - len(scored),
                    "params": {},
                    "metrics": {
                        "accuracy": {"name": "accuracy", "value": 0.5, "params": {}},
                        "stderr": {"name": "stderr", "value": 0.1, "params": {}},
                    },
                }
            ],
        },
        "stats": {
            "started_at": CREATED,
            "completed_at": "2026-09-05T01:31:12+00:00",
            "model_usage": {
                model: {
                    "input_tokens": 48 * len(samples),
                    "output_tokens": 120 * len(samples),
                    "total_tokens": 168 * len(samples),
                }
            },
        },
        "samples": samples,
    }


def write_inspect_json(path: Path, log: dict[str, Any]) -> Path:
    path.write_text(json.dumps(log, indent=2))
    return path


def write_inspect_eval(path: Path, log: dict[str, Any], compression: int = zipfile.ZIP_DEFLATED) -> Path:
    """The ``.eval`` zip the recorder writes: journal, samples, summaries, then the header."""
    header = {k: v for k, v in log.items() if k != "samples"}
    summaries = [
        {
            "id": s["id"],
            "epoch": s["epoch"],
            "input": s["input"],
            "target": s["target"],
            "scores": s.get("scores"),
        }
        for s in log["samples"]
    ]
    with zipfile.ZipFile(path, "w", compression=compression) as z:
        z.writestr(
            "_journal/start.json", json.dumps({"version": 2, "eval": log["eval"], "plan": log["plan"]})
        )
        for s in log["samples"]:
            z.writestr(f"samples/{s['id']}_epoch_{s['epoch']}.json", json.dumps(s))
        z.writestr("_journal/summaries/1.json", json.dumps(summaries))
        z.writestr("summaries.json", json.dumps(summaries))
        z.writestr(
            "reductions.json",
            json.dumps(
                [
                    {
                        "scorer": "match",
                        "reducer": "mean",
                        "samples": [
                            {"value": s["scores"]["match"]["value"], "sample_id": s["id"]}
                            for s in log["samples"]
                            if "scores" in s
                        ],
                    }
                ]
            ),
        )
        z.writestr("header.json", json.dumps(header))
    return path
