"""lm-evaluation-harness output written with ``--log_samples``, read with the standard library.

The format is lm-evaluation-harness 0.4's (lm_eval/result_schema.py, lm_eval/loggers/evaluation_tracker.py
in EleutherAI/lm-evaluation-harness): ``--output_path DIR`` writes ``DIR/<model>/results_<date>.json`` and,
with ``--log_samples``, one ``samples_<task>_<date>.jsonl`` per task beside it. A samples file holds one
JSON object per document and filter: ``doc_id``, ``doc``, ``target``, ``arguments``, ``resps``,
``filtered_resps``, ``filter``, ``metrics`` (the metric names), the three hashes, and one key per metric
holding the document's score (``"exact_match": 1.0``). The results file gives each task's metrics as
``"metric,filter"`` keys, its ``configs`` (with ``generation_kwargs``), the run's ``config`` (model,
``gen_kwargs``), ``date`` (UNIX seconds) and ``lm_eval_version``.

Which score: ``--metric NAME[,FILTER]`` for the tasks that log it; by default (and for the other tasks)
the task's first metric in the results file, under its filter. Truncation and output tokens: lm-eval logs neither a generation's token count nor its finish
reason, so its items carry both as unknown (docs/quality.md).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from console.quality.harness import (
    HarnessFileError,
    HarnessRun,
    digest,
    load_json,
    read_file,
    text,
    unit_score,
)
from console.store.quality import QualityItem
from console.store.served import thinking_setting

HARNESS = "lm-eval"
_MODEL_ARG = re.compile(r"(?:^|,)\s*(?:model|pretrained)=([^,]+)")


def is_lm_eval(data: Any) -> bool:
    """An lm-eval results file: per-task ``results`` beside ``configs`` or ``versions``."""
    return (
        isinstance(data, dict)
        and isinstance(data.get("results"), dict)
        and ("configs" in data or "versions" in data)
    )


def read_lm_eval(path: Path, metric: str | None = None) -> HarnessRun:
    results_path, sample_paths = _locate(path)
    files = [p for p in (results_path, *sample_paths) if p is not None]
    data = {p: read_file(p) for p in files}  # each file read once: what is parsed is what is digested
    results: dict[str, Any] = load_json(results_path, data[results_path]) if results_path else {}
    if results_path and not is_lm_eval(results):
        raise HarnessFileError(f"{results_path}: not an lm-eval results file (no 'results' and 'configs')")
    items: list[QualityItem] = []
    metrics: dict[str, str] = {}
    logged: set[str] = set()
    for sample_path in sample_paths:
        task = _task_of(sample_path)
        rows = _rows(sample_path, data[sample_path])
        if not rows:
            continue
        name, flt = _metric(task, results.get("results", {}).get(task, {}), rows, metric, sample_path)
        metrics[task] = f"{name},{flt}"
        logged.update(_logged(rows))
        seen: set[str] = set()
        for line, row in rows:
            if row.get("filter", "none") != flt or name not in row:
                continue
            doc = str(row.get("doc_id"))
            if doc in seen:
                raise HarnessFileError(
                    f"{sample_path.name}:{line}: doc_id {doc} appears twice under filter {flt}"
                )
            seen.add(doc)
            score = unit_score(row[name], f"{sample_path.name}:{line} ({name})")
            items.append(QualityItem(task, doc, score, None, None))
    if metric and metric not in metrics.values() and metric.partition(",")[0] not in logged:
        raise HarnessFileError(
            f"{path}: no task logs a metric {metric.partition(',')[0]!r}; they log "
            f"{', '.join(sorted(logged)) or 'none'}"
        )
    if not items:
        raise HarnessFileError(
            f"{path}: the samples files list no scored document", "lm_eval writes them with --log_samples"
        )
    config: Mapping[str, Any] = results.get("config") or {}
    generation = {t: (results.get("configs", {}).get(t) or {}).get("generation_kwargs") for t in metrics}
    sampling = {"gen_kwargs": config.get("gen_kwargs"), "generation_kwargs": generation}
    model_args = config.get("model_args")
    date = results.get("date")
    return HarnessRun(
        harness=HARNESS,
        harness_version=results.get("lm_eval_version"),
        tasks=tuple(metrics),
        metric="; ".join(f"{t}: {m}" for t, m in metrics.items())
        if len(set(metrics.values())) > 1
        else next(iter(metrics.values())),
        model=results.get("model_name") or _model_name(model_args),
        t_ms=int(date * 1000) if isinstance(date, int | float) else None,
        sampling=sampling,
        thinking=thinking_setting(
            *(g for g in generation.values() if g), _as_dict(config.get("gen_kwargs")), _as_dict(model_args)
        ),
        items=tuple(items),
        unscored=0,
        files=tuple(str(p) for p in files),
        digest=digest((p.name, data[p]) for p in files),
    )


def _date_id(path: Path) -> str:
    """``2026-09-05T01-27-00.123456`` of ``results_<date>.json`` and ``samples_<task>_<date>.jsonl``."""
    return path.stem.rsplit("_", 1)[-1]


def _task_of(sample_path: Path) -> str:
    """The task of ``samples_<task>_<date>.jsonl`` (lm_eval.utils.get_file_task_name)."""
    name = sample_path.name
    return name[name.find("_") + 1 : name.rfind("_")]


def _locate(path: Path) -> tuple[Path | None, list[Path]]:
    """The results file (None when only samples are given) and the samples files of one run."""
    if path.is_dir():
        found = sorted([*path.glob("results_*.json"), *path.glob("*/results_*.json")])
        if len(found) > 1:
            raise HarnessFileError(
                f"{path} holds {len(found)} lm-eval runs ({', '.join(p.name for p in found[:4])}"
                f"{', ...' if len(found) > 4 else ''})",
                "give one results_*.json",
            )
        if not found:
            samples = sorted([*path.glob("samples_*.jsonl"), *path.glob("*/samples_*.jsonl")])
            if not samples:
                raise HarnessFileError(
                    f"{path}: no lm-eval results_*.json or samples_*.jsonl in it",
                    "run lm_eval with --output_path DIR --log_samples",
                )
            if len({_date_id(p) for p in samples}) > 1:
                raise HarnessFileError(f"{path}: samples of several lm-eval runs", "give one results_*.json")
            return None, samples
        path = found[0]
    if path.suffix == ".jsonl":
        results = path.parent / f"results_{_date_id(path)}.json"
        return (results if results.is_file() else None), sorted(
            path.parent.glob(f"samples_*_{_date_id(path)}.jsonl")
        )
    samples = sorted(path.parent.glob(f"samples_*_{_date_id(path)}.jsonl"))
    if not samples:
        raise HarnessFileError(
            f"{path}: no samples_<task>_{_date_id(path)}.jsonl beside it, so no per-item scores",
            "run lm_eval with --log_samples",
        )
    return path, samples


def _rows(path: Path, data: bytes) -> list[tuple[int, dict[str, Any]]]:
    rows = []
    lines = text(path, data).splitlines()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise HarnessFileError(f"{path.name}:{number}: not JSON ({exc.msg})") from exc
        if not isinstance(row, dict) or "doc_id" not in row:
            raise HarnessFileError(f"{path.name}:{number}: not an lm-eval sample (no doc_id)")
        rows.append((number, row))
    return rows


def _metric(
    task: str,
    task_results: Mapping[str, Any],
    rows: list[tuple[int, dict[str, Any]]],
    wanted: str | None,
    where: Path,
) -> tuple[str, str]:
    """(metric, filter) whose per-document values are the items' scores: ``wanted`` where this task logs it,
    else the task's first metric in the results file."""
    logged = _logged(rows)
    name, _, flt = (wanted or "").partition(",")
    filters = logged.get(name, set())
    if flt in filters or (not flt and len(filters) == 1):
        return name, flt or next(iter(filters))
    if filters:
        raise HarnessFileError(
            f"{where.name}: task {task} logs {name} under filters {', '.join(sorted(filters))}",
            f"name one: --metric {name},{sorted(filters)[0]}",
        )
    for key in task_results:
        name, sep, flt = key.partition(",")
        if sep and not name.endswith("_stderr") and flt in logged.get(name, set()):
            return name, flt
    if not logged:
        raise HarnessFileError(f"{where.name}: task {task}'s samples carry no metric value")
    first = next(iter(logged))
    return first, sorted(logged[first])[0]


def _logged(rows: list[tuple[int, dict[str, Any]]]) -> dict[str, set[str]]:
    """Each metric the samples carry, with the filters it is logged under."""
    logged: dict[str, set[str]] = {}
    for _, row in rows:
        for name in row.get("metrics") or [
            k for k, v in row.items() if k not in _FIXED and isinstance(v, int | float)
        ]:
            logged.setdefault(name, set()).add(row.get("filter", "none"))
    return logged


_FIXED = frozenset(
    {
        "doc_id",
        "doc",
        "target",
        "arguments",
        "resps",
        "filtered_resps",
        "filter",
        "metrics",
        "doc_hash",
        "prompt_hash",
        "target_hash",
    }
)
"""The keys every sample has; any other numeric key is a metric (files written before ``metrics`` was)."""


def _model_name(model_args: Any) -> str | None:
    if isinstance(model_args, dict):
        value = model_args.get("model") or model_args.get("pretrained")
        return str(value) if value else None
    if isinstance(model_args, str):
        match = _MODEL_ARG.search(model_args)
        return match.group(1).strip() if match else None
    return None


def _as_dict(value: Any) -> dict[str, Any] | None:
    """``gen_kwargs``/``model_args`` as a dict: lm-eval keeps the command line's ``k=v,k=v`` text."""
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        pairs = (part.split("=", 1) for part in value.split(",") if "=" in part)
        return {k.strip(): v.strip() for k, v in pairs}
    return None
