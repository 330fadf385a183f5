"""The quality ledger as records: runs, the noise floor of a suite, and paired comparisons.

Two runs are compared only on the items both scored (the campaign write-up's rows "are comparable only on the
items both scored"), and the difference is read against the noise floor measured from repeats of one
configuration on the same suite: published repeats (the write-up's noise-floor table) and stored runs
that share a configuration key (same arm argv, harness, tasks, model and generation settings). The
arithmetic is console/quality/stats.py; the wording is the records' (QualityComparison.verdict).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from console.errors import InputError
from console.quality.stats import Paired
from console.readmodel.campaign import published_figures
from console.readmodel.records import (
    FamilyScore,
    NoiseFloor,
    QualityComparison,
    QualityLedger,
    QualityRun,
    RepeatPair,
)
from console.store import Store

_RUN_COLUMNS = (
    "id",
    "label",
    "harness",
    "harness_version",
    "suite",
    "metric",
    "launch_id",
    "box",
    "arm",
    "model",
    "layout",
    "kernel_line",
    "reasoning_parser",
    "thinking",
    "config_key",
    "t_ms",
    "items",
    "unscored",
    "accuracy",
    "truncation_rate",
    "mean_output_tokens",
    "source",
    "provenance",
    "source_file",
    "eval_run_id",
)


class NoSuchQualityRun(InputError, KeyError):
    def __init__(self, run_id: int):
        super().__init__(
            f"no quality run {run_id} in this state.db", "`campaign quality list` shows the runs"
        )

    def __str__(self) -> str:  # KeyError would quote the message
        return InputError.__str__(self)


def _run(r: dict[str, Any], families: tuple[FamilyScore, ...] = ()) -> QualityRun:
    return QualityRun(
        **{c: r[c] for c in _RUN_COLUMNS},
        tasks=tuple(json.loads(r["tasks"])),
        sampling=json.loads(r["sampling"]) if r["sampling"] else {},
        caps=json.loads(r["caps"]) if r["caps"] else None,
        request_timeout_s=r["request_timeout_s"],
        unscored_items=json.loads(r["unscored_items"]) if r["unscored_items"] else {},
        families=families,
        published_families=json.loads(r["published_families"]) if r["published_families"] else {},
        provider=r["provider"],
        precision=r["precision"],
        routing=r["routing"],
        degenerate_rate=r["degenerate_rate"],
        stopped=r["stopped"],
    )


def _families(store: Store, run_id: int | None = None) -> dict[int, tuple[FamilyScore, ...]]:
    """Each run's items per task (its families), with the sum of their scores: one query for every run."""
    found: dict[int, list[FamilyScore]] = {}
    for r in store.rows(
        "SELECT run_id, task, COUNT(*) AS n, SUM(score) AS right FROM quality_items"
        + (" WHERE run_id = ?" if run_id is not None else "")
        + " GROUP BY run_id, task ORDER BY run_id, task",
        [run_id] if run_id is not None else [],
    ):
        found.setdefault(r["run_id"], []).append(FamilyScore(r["task"], r["n"], float(r["right"])))
    return {k: tuple(v) for k, v in found.items()}


def quality_runs(store: Store) -> list[QualityRun]:
    """Every run, by suite, then measured before published, then in the order they ran."""
    families = _families(store)
    return [
        _run(r, families.get(r["id"], ()))
        for r in store.rows("SELECT * FROM quality_runs ORDER BY suite, source = 'imported', t_ms, id")
    ]


def quality_run(store: Store, run_id: int) -> QualityRun:
    rows = store.rows("SELECT * FROM quality_runs WHERE id = ?", [run_id])
    if not rows:
        raise NoSuchQualityRun(run_id)
    return _run(rows[0], _families(store, run_id).get(run_id, ()))


def sweep_quality_run(store: Store, launch_ids: list[str], suite: str) -> QualityRun | None:
    """The run of ``suite`` bound to one of ``launch_ids`` (a sweep arm's launches over its attempts): an
    eval a resumed sweep does not run again. The newest, where there are several."""
    if not launch_ids:
        return None
    marks = ", ".join("?" * len(launch_ids))
    rows = store.rows(
        f"SELECT id FROM quality_runs WHERE suite = ? AND launch_id IN ({marks}) ORDER BY t_ms DESC, id DESC",
        [suite, *launch_ids],
    )
    return quality_run(store, rows[0]["id"]) if rows else None


def _common_items(store: Store, a: int, b: int) -> list[dict[str, Any]]:
    return store.rows(
        """SELECT a.score AS a_score, b.score AS b_score, a.truncated AS a_truncated, b.truncated AS b_truncated,
                  a.output_tokens AS a_tokens, b.output_tokens AS b_tokens
           FROM quality_items a JOIN quality_items b ON b.task = a.task AND b.item_id = a.item_id
           WHERE a.run_id = ? AND b.run_id = ?""",
        [a, b],
    )


def _mean(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def noise_floor(store: Store, suite: str) -> NoiseFloor | None:
    """The floor of ``suite`` from every repeat pair on it; None when it has none."""
    repeats: list[RepeatPair] = []
    for r in store.rows(
        """SELECT p.*, a.label AS a_label, b.label AS b_label FROM quality_pairs p
           JOIN quality_runs a ON a.id = p.a_run JOIN quality_runs b ON b.id = p.b_run
           WHERE p.kind = 'repeat' AND a.suite = ? ORDER BY p.id""",
        [suite],
    ):
        repeats.append(RepeatPair(r["a_label"], r["b_label"], _published(r)))
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in store.rows(
        "SELECT id, label, config_key FROM quality_runs WHERE suite = ? AND config_key IS NOT NULL ORDER BY t_ms, id",
        [suite],
    ):
        groups.setdefault(r["config_key"], []).append(r)
    for runs in groups.values():
        for a, b in combinations(runs, 2):
            paired = Paired.of_scores(
                (i["a_score"], i["b_score"]) for i in _common_items(store, a["id"], b["id"])
            )
            if paired.n:
                repeats.append(RepeatPair(a["label"], b["label"], paired))
    return NoiseFloor(suite, tuple(repeats)) if repeats else None


def _published(r: dict[str, Any]) -> Paired:
    return Paired.of_counts(r["items"], r["a_only"], r["b_only"], r["a_accuracy"], r["b_accuracy"])


def _sampling_words(sampling: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(sampling.items())) or "server defaults"


def _served_known(r: QualityRun) -> bool:
    """A measured run recorded what it was served with (no parser stored means none); a published run only
    where the write-up said (its parser or thinking given)."""
    return r.harness != "published" or r.reasoning_parser is not None or r.thinking is not None


def served_difference(a: QualityRun, b: QualityRun) -> str | None:
    """How two runs were served differently (reasoning parser, sampling, thinking), None when alike.

    The write-up's house default against the vendor recipe (0.558 against 0.732 on the same weights) is a
    difference of serving, not of the model, so a comparison says so before its verdict. A run that did not
    record its serving (a published run the write-up says nothing about) shows no difference.
    """
    if not (_served_known(a) and _served_known(b)):
        return None
    parts = []
    if (a.reasoning_parser or "none") != (b.reasoning_parser or "none"):
        parts.append(f"reasoning parser {a.reasoning_parser or 'none'} vs {b.reasoning_parser or 'none'}")
    if a.sampling != b.sampling:
        parts.append(f"sampling {_sampling_words(a.sampling)} vs {_sampling_words(b.sampling)}")
    if a.thinking is not None and b.thinking is not None and a.thinking != b.thinking:
        parts.append(f"thinking {a.thinking} vs {b.thinking}")
    return "served differently: " + "; ".join(parts) if parts else None


def served_pairs(runs: Iterable[QualityRun]) -> list[tuple[QualityRun, QualityRun, str]]:
    """Runs of one arm on one box (and one suite) served differently, each pair with its difference: the
    write-up's house-default against vendor-recipe table, wherever the data holds one."""
    groups: dict[tuple[str, str, str], list[QualityRun]] = {}
    for r in runs:
        if r.arm and r.box:
            groups.setdefault((r.arm, r.box, r.suite), []).append(r)
    return [
        (a, b, words)
        for group in groups.values()
        for a, b in combinations(group, 2)
        if (words := served_difference(a, b)) is not None
    ]


def compare_runs(store: Store, a_id: int, b_id: int) -> QualityComparison:
    """Run ``a_id`` against ``b_id`` on their common items; refused when there are none to pair."""
    if a_id == b_id:
        raise InputError(f"quality run {a_id} compared with itself", "give two different runs")
    a, b = quality_run(store, a_id), quality_run(store, b_id)
    floor = noise_floor(store, a.suite) if a.suite == b.suite else None
    if a.per_item and b.per_item:
        if _versions_of_one_suite(a.suite, b.suite):
            raise InputError(
                f"quality runs {a.id} and {b.id} are {a.suite} and {b.suite}: items of two versions of a suite "
                "do not pair, even under one id",
                "compare two runs of the same version (run the suite again on the older launch)",
            )
        items = _common_items(store, a.id, b.id)
        if not items:
            raise InputError(
                f"quality runs {a.id} and {b.id} share no scored item (task and item id)",
                "compare runs of the same tasks",
            )
        return QualityComparison(
            a,
            b,
            Paired.of_scores((i["a_score"], i["b_score"]) for i in items),
            "items",
            floor,
            _mean(i["a_truncated"] for i in items),
            _mean(i["b_truncated"] for i in items),
            _mean(i["a_tokens"] for i in items),
            _mean(i["b_tokens"] for i in items),
        )
    comparison = _published_split(store, a, b, floor)
    if comparison is None:
        raise InputError(
            f"quality runs {a.id} and {b.id} cannot be paired: {_unpaired_why(a, b)}",
            "`campaign quality pairs` lists the published comparisons",
        )
    return comparison


_SUITE_VERSION = re.compile(r"(.+) v(\d+)")
"""A versioned suite's stored name (``seed6 v3``, console/quality/suites/house.py ``suite_label``)."""


def _versions_of_one_suite(a: str, b: str) -> bool:
    """``a`` and ``b`` name different versions of one suite. Their runs never pair: a new version keeps the ids of
    the items it leaves alone, but may score them differently, and a verdict on the few items the two share
    would read as a comparison on the suite."""
    va, vb = _SUITE_VERSION.fullmatch(a), _SUITE_VERSION.fullmatch(b)
    return va is not None and vb is not None and va.group(1) == vb.group(1) and va.group(2) != vb.group(2)


def _published_split(
    store: Store, a: QualityRun, b: QualityRun, floor: NoiseFloor | None
) -> QualityComparison | None:
    """The split the write-up published for ``a`` and ``b`` (either way round), None when it printed none."""
    for first, second in ((a, b), (b, a)):
        rows = store.rows(
            "SELECT * FROM quality_pairs WHERE a_run = ? AND b_run = ? ORDER BY id LIMIT 1",
            [first.id, second.id],
        )
        if rows:
            comparison = _pair(rows[0], first, second, floor)
            return comparison if first is a else comparison.swapped()
    return None


def _unpaired_why(a: QualityRun, b: QualityRun) -> str:
    return (
        f"{'a published run has' if a.per_item or b.per_item else 'published runs have'} no items, and no split "
        "was published for these two"
    )


def _family_figures(r: QualityRun) -> Mapping[str, float]:
    """A run's accuracy per family: as published, else as scored per item."""
    return r.published_families or {f.family: f.accuracy for f in r.families}


def _share(value: float | None) -> str | None:
    return None if value is None else f"{value:.3f}"


def _parser(r: QualityRun) -> str:
    return r.reasoning_parser or ("none" if _served_known(r) else "not recorded")


def _sampling_json(r: QualityRun) -> str:
    return json.dumps(dict(r.sampling), sort_keys=True) if r.sampling else "{}"


def side_by_side_rows(a: QualityRun, b: QualityRun) -> tuple[tuple[str, str | None, str | None], ...]:
    """Two runs' figures a row each, the runs as columns, as the write-up's house-default against
    vendor-recipe table reads: how each was served, its items, overall (95% Wilson), each family either
    run has, and its truncation rate. None: the run does not give that figure."""
    fa, fb = _family_figures(a), _family_figures(b)
    return (
        ("reasoning parser", _parser(a), _parser(b)),
        ("thinking", a.thinking or "not recorded", b.thinking or "not recorded"),
        ("sampling", _sampling_json(a), _sampling_json(b)),
        ("items", str(a.items), str(b.items)),
        ("overall [95%]", a.accuracy_text, b.accuracy_text),
        *((f, _share(fa.get(f)), _share(fb.get(f))) for f in dict.fromkeys([*fa, *fb])),
        ("truncation rate", _share(a.truncation_rate), _share(b.truncation_rate)),
    )


@dataclass(frozen=True)
class SideBySide:
    """Two runs no item split pairs (a published run has no per-item results and the write-up printed no
    split for them): their figures side by side and no verdict, since a paired verdict needs the items
    both runs scored. The write-up's house default against vendor recipe is such a pair."""

    a: QualityRun
    b: QualityRun
    rows: tuple[tuple[str, str | None, str | None], ...]
    why: str


def compare_or_side_by_side(store: Store, a_id: int, b_id: int) -> QualityComparison | SideBySide:
    """``compare_runs``, except that two runs without items to pair and without a published split are set
    side by side, figure by figure, instead of refused."""
    a, b = quality_run(store, a_id), quality_run(store, b_id)
    if a.id == b.id or (a.per_item and b.per_item):
        return compare_runs(store, a_id, b_id)
    floor = noise_floor(store, a.suite) if a.suite == b.suite else None
    split = _published_split(store, a, b, floor)
    return split if split is not None else SideBySide(a, b, side_by_side_rows(a, b), _unpaired_why(a, b))


def _pair(r: dict[str, Any], a: QualityRun, b: QualityRun, floor: NoiseFloor | None) -> QualityComparison:
    """A published pair, its A and B as stored; figures it does not print are the runs' own."""
    return QualityComparison(
        a,
        b,
        _published(r),
        "published",
        floor,
        _either(r["a_truncation"], a.truncation_rate),
        _either(r["b_truncation"], b.truncation_rate),
        _either(r["a_mean_tokens"], a.mean_output_tokens),
        _either(r["b_mean_tokens"], b.mean_output_tokens),
        r["kind"],
        r["note"],
    )


def _either(value: float | None, fallback: float | None) -> float | None:
    return fallback if value is None else value


def published_comparisons(store: Store) -> list[QualityComparison]:
    """Every published pair (repeats first), each read against its suite's floor."""
    runs = {r.id: r for r in quality_runs(store)}
    floors: dict[str, NoiseFloor | None] = {}
    out = []
    for r in store.rows("SELECT * FROM quality_pairs ORDER BY kind = 'comparison', id"):
        a, b = runs[r["a_run"]], runs[r["b_run"]]
        if a.suite not in floors:
            floors[a.suite] = noise_floor(store, a.suite)
        out.append(_pair(r, a, b, floors[a.suite] if a.suite == b.suite else None))
    return out


def quality_ledger(store: Store) -> QualityLedger:
    """Runs scored per item, every published comparison, and the floor of each suite that has one."""
    runs = quality_runs(store)
    floors = [
        f for f in (noise_floor(store, s) for s in dict.fromkeys(r.suite for r in runs)) if f is not None
    ]
    return QualityLedger(
        tuple(r for r in runs if r.per_item), tuple(published_comparisons(store)), tuple(floors)
    )


COMMON_TABLE = "Four quantisers of one model"
"""The write-up's table of one model's builds on their common items; its printed 'quality (all scored)' cells
are published figures under this name (ops/demo.py)."""


@dataclass(frozen=True)
class CommonRow:
    """One build of a model on the items every build scored: the write-up's "four quantisers" row."""

    arm: str
    box: str
    build: str | None  # the throughput row's configuration, in words
    kernel_line: str | None
    out_tok_s: float | None  # its best router row (the write-up's router at concurrency 1,024)
    concurrency: int | None
    all_scored: float | None  # over every item it scored: as COMMON_TABLE prints it, else the arm's eval_runs
    all_items: int | None  # None where the printed figure does not say over how many
    all_scored_note: str | None  # where the printed figure and the arm's eval differ: both, and why
    common: float  # accuracy on the common items
    maths_common: float | None
    maths_tokens: float | None = None  # mean maths answer length, as printed
    maths_at_cap: float | None = None  # share of maths answers hitting the cap, as printed


@dataclass(frozen=True)
class CommonTable:
    """Builds of one model compared on the ``items`` items all of them scored, on one box."""

    model: str
    box: str
    items: int
    rows: tuple[CommonRow, ...]


def common_table(store: Store, model: str) -> CommonTable:
    """The model's runs on the largest set of common items several builds (arms) of one box share.

    The write-up gives quality "over every item the run scored, and over the 388 items all four runs scored
    ... which is the only column on which the builds are comparable"; the common column is the runs of one
    item count below the suite's full size, bound to distinct arms of one box.
    """
    runs = [r for r in quality_runs(store) if r.model == model and r.arm and r.box]
    if not runs:
        raise InputError(
            f"no quality run of model {model!r} bound to an arm", "`campaign quality list` shows the runs"
        )
    table = _common_table(store, model, runs)
    if table is None:
        raise InputError(
            f"no two builds of {model} were scored on the same common items",
            "the common column needs runs of one item count on several arms of one box",
        )
    return table


def common_tables(store: Store) -> list[CommonTable]:
    """The common-items table of every model that has one (the report's section)."""
    by_model: dict[str, list[QualityRun]] = {}
    for r in quality_runs(store):
        if r.model and r.arm and r.box:
            by_model.setdefault(r.model, []).append(r)
    return [t for m, runs in by_model.items() if (t := _common_table(store, m, runs)) is not None]


def _common_table(store: Store, model: str, runs: list[QualityRun]) -> CommonTable | None:
    full = max(r.items for r in runs)
    groups: dict[tuple[str, int], dict[str, QualityRun]] = {}
    for r in runs:
        if r.items < full:
            groups.setdefault((r.box or "", r.items), {}).setdefault(r.arm or "", r)
    shared = [(k, v) for k, v in groups.items() if len(v) > 1]
    if not shared:
        return None
    (box, items), by_arm = max(shared, key=lambda kv: (len(kv[1]), kv[0][1]))
    printed = {f.arm: f.figures for f in published_figures(store, COMMON_TABLE) if f.box == box}
    rows = []
    for arm, r in by_arm.items():
        bench = store.rows(
            """SELECT configuration, kernel_line, out_tok_per_s, concurrency FROM bench_runs
               WHERE arm = ? AND box = ? AND shape = 'router' AND out_tok_per_s IS NOT NULL
               ORDER BY out_tok_per_s DESC LIMIT 1""",
            [arm, box],
        )
        ev = store.rows(
            "SELECT overall, items, note FROM eval_runs WHERE arm = ? AND box = ? ORDER BY overall DESC, id LIMIT 1",
            [arm, box],
        )
        b = bench[0] if bench else {}
        figures = printed.get(arm, {})
        all_scored, all_items, note = _all_scored(figures.get("quality_all_scored"), ev[0] if ev else None)
        rows.append(
            CommonRow(
                arm=arm,
                box=box,
                build=b.get("configuration"),
                kernel_line=b.get("kernel_line") or r.kernel_line,
                out_tok_s=b.get("out_tok_per_s"),
                concurrency=b.get("concurrency"),
                all_scored=all_scored,
                all_items=all_items,
                all_scored_note=note,
                common=r.accuracy,
                maths_common=r.published_families.get("maths"),
                maths_tokens=figures.get("maths_mean_tokens"),
                maths_at_cap=figures.get("maths_at_cap"),
            )
        )
    rows.sort(key=lambda x: -(x.out_tok_s or 0))
    return CommonTable(model, box, items, tuple(rows))


def _all_scored(
    printed: float | None, ev: Mapping[str, Any] | None
) -> tuple[float | None, int | None, str | None]:
    """A build's quality over every item it scored: the table's printed figure, else its eval's; where both
    exist and differ, a note that names both and the eval's own account of why (the write-up's FP8 row: 0.789
    in the four-quantisers table, 0.779 in the task-accuracy table once its timed-out items were completed)."""
    if printed is None:
        return (ev["overall"], ev["items"], None) if ev else (None, None, None)
    if ev is None or abs(ev["overall"] - printed) < 5e-4:
        return printed, ev["items"] if ev else None, None
    why = f" ({ev['note']})" if ev["note"] else ""
    return (
        printed,
        None,
        f"{printed:.3f} as '{COMMON_TABLE}' prints it; {ev['overall']:.3f} over {ev['items']} items in the "
        f"task-accuracy table{why}",
    )
