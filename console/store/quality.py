"""The quality ledger's writer: task-accuracy runs scored per item, bound to what they ran against.

A run imported per item is also an aggregate: ``add_run`` writes its ``eval_runs`` row in the same
transaction (the per-task accuracies as its families) and points the run at it, so economics and the
report read task accuracy from one table whatever produced it. A write-up's published runs and pairs
(``campaign demo``) come through ``record_import`` (console/store/results.py) with their import's id.

This module writes; console/readmodel/quality.py reads.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from console.store.jsonutil import dumps

if TYPE_CHECKING:
    from console.store.connection import Connection


@dataclass(frozen=True)
class QualityItem:
    """One scored item of a run, as the harness logged it."""

    task: str
    item_id: str
    score: float  # 0..1; 1 is right
    truncated: bool | None  # None: the harness did not log it
    output_tokens: int | None


@dataclass(frozen=True)
class NewQualityRun:
    """A harness run bound to a launch: the exact arm, layout and kernels, and what the harness sent."""

    label: str
    harness: str
    tasks: tuple[str, ...]
    suite: str
    t_ms: int
    launch_id: str
    box: str
    arm: str
    arm_id: int | None
    recipe_hash: str | None
    model: str | None
    tensor_parallel: int | None
    data_parallel: int | None
    replicas: int | None
    expert_parallel: bool | None
    layout: str | None
    kernel_line: str | None
    reasoning_parser: str | None
    harness_version: str | None
    metric: str
    config_key: str
    sampling: Mapping[str, Any]
    thinking: str | None
    source_file: str
    digest: str
    unscored: int
    configuration: str  # how the arm was served, in words (the eval_runs row's configuration)
    arm_model: str  # the arm's model: what economics matches API prices and bench rows on
    caps: Mapping[str, Any] | None = (
        None  # generation caps sent ({"*": N or "window", family: N}); None: not set
    )
    request_timeout_s: float | None = None  # seconds a request was given; None: the harness's own
    unscored_items: Mapping[str, str] | None = None  # "task/item_id" -> why it has no score (house suites)


@dataclass(frozen=True)
class PublishedRun:
    """A run someone else published: its aggregate figures, no items."""

    label: str
    suite: str
    items: int
    accuracy: float
    arm: str | None = None
    box: str | None = None
    model: str | None = None
    truncation_rate: float | None = None
    mean_output_tokens: float | None = None
    provenance: str | None = None
    reasoning_parser: str | None = None  # what it was served with (console/store/served.py), where published
    thinking: str | None = None
    sampling: dict[str, Any] | None = None
    families: dict[str, float] | None = None  # family accuracies the write-up printed for it
    caps: dict[str, int] | None = None  # the caps it ran under ({"*": 32768}), where published
    provider: str | None = None  # who served an endpoint run: OpenRouter (default routing) or the pinned one
    precision: str | None = None  # FP8, FP4, FP8/FP4 (default routing lands on both)
    routing: str | None = None  # default or pinned
    degenerate_rate: float | None = None  # share of answers that degenerated into repetition
    stopped: str | None = None  # why it ended short of its suite, e.g. "HTTP 402"


@dataclass(frozen=True)
class PublishedPair:
    """A published paired comparison of two published runs (named by label) on their common items."""

    kind: str  # repeat (one configuration twice: it measures the floor) or comparison
    a: str
    b: str
    items: int
    a_only: int
    b_only: int
    a_accuracy: float | None = None
    b_accuracy: float | None = None
    a_truncation: float | None = None
    b_truncation: float | None = None
    a_mean_tokens: float | None = None
    b_mean_tokens: float | None = None
    note: str | None = None
    provenance: str | None = None


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _note(harness: str, tasks: Sequence[str], metric: str, unscored: int) -> str:
    """The aggregate's note: what scored it, and how many items it is short of (seed-gaps F20: a run missing
    its unscored items is flattered)."""
    short = f"; short: {unscored} unscored (flattered)" if unscored else ""
    return (
        f"{harness} {', '.join(tasks)} scored per item ({metric}); `campaign quality list` has the run{short}"
    )


def unscored_key(task: str, item_id: str) -> str:
    """How an unscored item is named in ``quality_runs.unscored_items``."""
    return f"{task}/{item_id}"


@dataclass(frozen=True)
class _Aggregate:
    accuracy: float
    truncation_rate: float | None
    mean_output_tokens: float | None
    families: dict[str, float]


def _aggregate(items: Sequence[QualityItem]) -> _Aggregate:
    by_task: dict[str, list[float]] = {}
    for i in items:
        by_task.setdefault(i.task, []).append(i.score)
    return _Aggregate(
        sum(i.score for i in items) / len(items),
        _mean([float(i.truncated) for i in items if i.truncated is not None]),
        _mean([float(i.output_tokens) for i in items if i.output_tokens is not None]),
        {t: sum(v) / len(v) for t, v in by_task.items()},
    )


class Quality:
    """``store.quality``: quality runs, their items and published pairs."""

    def __init__(self, store: Connection):
        self.store = store

    def find(self, digest: str, launch_id: str, metric: str) -> int | None:
        """The run already imported from the same files, read by the same metric, against the same launch."""
        found = self.store.scalar(
            "SELECT id FROM quality_runs WHERE digest = ? AND launch_id = ? AND metric = ?",
            [digest, launch_id, metric],
        )
        return None if found is None else int(found)

    def add_run(self, run: NewQualityRun, items: Sequence[QualityItem]) -> int:
        """Store a run and its items, and its aggregate as an ``eval_runs`` row; returns the run's id."""
        if not items:
            raise ValueError("a quality run needs at least one scored item")
        agg = _aggregate(items)
        now = self.store.clock()
        with self.store.atomic():
            eval_id = self.store.insert(
                "eval_runs",
                {
                    "box": run.box,
                    "arm": run.arm,
                    "model": run.arm_model,
                    "configuration": run.configuration,
                    "t_ms": run.t_ms,
                    "items": len(items),
                    "overall": agg.accuracy,
                    "families": dumps(agg.families),
                    "note": _note(run.harness, run.tasks, run.metric, run.unscored),
                    "source": "measured",
                    "provenance": f"{run.source_file} (sha256 {run.digest[:12]})",
                },
            )
            run_id = self.store.insert(
                "quality_runs",
                {
                    "launch_id": run.launch_id,
                    "box": run.box,
                    "arm": run.arm,
                    "arm_id": run.arm_id,
                    "recipe_hash": run.recipe_hash,
                    "model": run.model,
                    "tensor_parallel": run.tensor_parallel,
                    "data_parallel": run.data_parallel,
                    "replicas": run.replicas,
                    "expert_parallel": None if run.expert_parallel is None else int(run.expert_parallel),
                    "layout": run.layout,
                    "kernel_line": run.kernel_line,
                    "reasoning_parser": run.reasoning_parser,
                    "harness": run.harness,
                    "harness_version": run.harness_version,
                    "tasks": dumps(list(run.tasks)),
                    "metric": run.metric,
                    "suite": run.suite,
                    "config_key": run.config_key,
                    "sampling": dumps(dict(run.sampling)),
                    "thinking": run.thinking,
                    "label": run.label,
                    "source_file": run.source_file,
                    "digest": run.digest,
                    "t_ms": run.t_ms,
                    "imported_ms": now,
                    "items": len(items),
                    "unscored": run.unscored,
                    "accuracy": agg.accuracy,
                    "truncation_rate": agg.truncation_rate,
                    "mean_output_tokens": agg.mean_output_tokens,
                    "eval_run_id": eval_id,
                    "source": "measured",
                    "caps": None if run.caps is None else dumps(dict(run.caps)),
                    "request_timeout_s": run.request_timeout_s,
                    "unscored_items": None if run.unscored_items is None else dumps(dict(run.unscored_items)),
                },
            )
            self._insert_items(run_id, items)
        return run_id

    def _insert_items(self, run_id: int, items: Sequence[QualityItem]) -> None:
        self.store.db.table("quality_items").insert_all(
            {
                "run_id": run_id,
                "task": i.task,
                "item_id": i.item_id,
                "score": i.score,
                "truncated": None if i.truncated is None else int(i.truncated),
                "output_tokens": i.output_tokens,
            }
            for i in items
        )

    def complete(self, run_id: int, items: Sequence[QualityItem], unscored_items: Mapping[str, str]) -> None:
        """Merge the items a ``--complete`` pass scored into run ``run_id``: they join its items, the ones
        still without a score replace its unscored list, and its aggregates (and its ``eval_runs`` row) are
        computed again over every scored item, in one transaction."""
        with self.store.atomic():
            self._insert_items(run_id, items)
            rows = self.store.rows(
                "SELECT task, item_id, score, truncated, output_tokens FROM quality_items WHERE run_id = ?",
                [run_id],
            )
            every = [
                QualityItem(
                    r["task"],
                    r["item_id"],
                    r["score"],
                    None if r["truncated"] is None else bool(r["truncated"]),
                    r["output_tokens"],
                )
                for r in rows
            ]
            agg = _aggregate(every)
            self.store.db.table("quality_runs").update(
                run_id,
                {
                    "items": len(every),
                    "unscored": len(unscored_items),
                    "unscored_items": dumps(dict(unscored_items)),
                    "accuracy": agg.accuracy,
                    "truncation_rate": agg.truncation_rate,
                    "mean_output_tokens": agg.mean_output_tokens,
                },
            )
            run = self.store.rows(
                "SELECT eval_run_id, harness, tasks, metric FROM quality_runs WHERE id = ?", [run_id]
            )[0]
            if run["eval_run_id"] is not None:
                note = _note(run["harness"], json.loads(run["tasks"]), run["metric"], len(unscored_items))
                self.store.db.table("eval_runs").update(
                    run["eval_run_id"],
                    {
                        "items": len(every),
                        "overall": agg.accuracy,
                        "families": dumps(agg.families),
                        "note": note,
                    },
                )

    def add_published(
        self, runs: Sequence[PublishedRun], pairs: Sequence[PublishedPair], import_id: int
    ) -> None:
        """A write-up's runs and paired comparisons, inside ``record_import``'s transaction."""
        now = self.store.clock()
        ids: dict[str, int] = {}
        for r in runs:
            ids[r.label] = self.store.insert(
                "quality_runs",
                {
                    "box": r.box,
                    "arm": r.arm,
                    "model": r.model,
                    "harness": "published",
                    "tasks": dumps([r.suite]),
                    "suite": r.suite,
                    "label": r.label,
                    "t_ms": now,
                    "imported_ms": now,
                    "items": r.items,
                    "accuracy": r.accuracy,
                    "truncation_rate": r.truncation_rate,
                    "mean_output_tokens": r.mean_output_tokens,
                    "reasoning_parser": r.reasoning_parser,
                    "thinking": r.thinking,
                    "sampling": dumps(r.sampling) if r.sampling is not None else None,
                    "published_families": dumps(r.families) if r.families else None,
                    "caps": dumps(r.caps) if r.caps else None,
                    "provider": r.provider,
                    "precision": r.precision,
                    "routing": r.routing,
                    "degenerate_rate": r.degenerate_rate,
                    "stopped": r.stopped,
                    "source": "imported",
                    "provenance": r.provenance,
                    "import_id": import_id,
                },
            )
        self.store.db.table("quality_pairs").insert_all(
            {
                "kind": p.kind,
                "a_run": ids[p.a],
                "b_run": ids[p.b],
                "items": p.items,
                "a_only": p.a_only,
                "b_only": p.b_only,
                "a_accuracy": p.a_accuracy,
                "b_accuracy": p.b_accuracy,
                "a_truncation": p.a_truncation,
                "b_truncation": p.b_truncation,
                "a_mean_tokens": p.a_mean_tokens,
                "b_mean_tokens": p.b_mean_tokens,
                "note": p.note,
                "provenance": p.provenance,
                "import_id": import_id,
            }
            for p in pairs
        )
