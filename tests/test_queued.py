"""Queued work: the write-up's open items land in state.db with the words and list files that queued them, the
handover lists them under "Queued / open", and no reader shows one as a result or a failure."""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.economics import economics_table
from console.readmodel import bench_rows, economics_inputs, failed_launches, fleet, launches
from console.readmodel.model import ReadModel
from console.readmodel.queued import overflowing_profiles, queued_work
from console.recipes import load_catalog
from console.report import build_report
from console.store import Store
from console.store.queued import QUEUED_KINDS, QueuedError, QueuedItem
from ops.demo import DemoDataError, build_demo, load_queued
from tests.support.demo import copy_seed

LISTS = ("box/lists/control600w.txt", "box/lists/fix600w.txt", "box/lists/thinkmode6000.txt")


def _section(report: str, title: str) -> str:
    start = report.index(f"## {title}\n")
    end = report.find("\n## ", start + 1)
    return report[start : end if end > 0 else None]


def test_the_demo_report_lists_the_queued_work_with_its_lists_and_words(demo: Path) -> None:
    with Store(demo, read_only=True) as store:
        report = build_report(store, now_ms=store.clock())
    queued = _section(report, "Queued / open")
    rows = [line for line in queued.splitlines() if line.startswith("| seed-") or line.startswith("| – |")]
    assert len(rows) >= 10, queued
    for name in LISTS:
        assert sum(f"| {name} |" in r for r in rows) >= 1, name
    assert sum("| box/lists/thinkmode6000.txt |" in r for r in rows) == 2  # thinking on, thinking off
    tp8 = [r for r in rows if "-tp8 |" in r]
    assert len(tp8) == 2 and all("Both are queued at TP8 there" in r for r in tp8)
    assert any("TP2 × 2 without expert parallelism: not reached before the cut-off." in r for r in rows)
    assert any("| repeat | qwen3.8-27b-nvfp4-b12x |" in r and "third repeat" in r for r in rows)
    assert any("our own 403-item run is missing" in r for r in rows)
    # The models the node cannot hold, beside the open work.
    for profile in ("kimi-k3-w4a4", "glm-5.3-4bit", "qwen3.8-2.4t-a95b", "deepseek-v4-pro-0813"):
        line = next(line for line in queued.splitlines() if line.startswith(f"| {profile} |"))
        assert "does not fit 4 x 96 GB" in line and "overflows the node" in line
    # A queued item is not an open failure.
    failures = _section(report, "Open failures")
    assert "tp8" not in failures and "think-on" not in failures and "official-template" not in failures
    assert "glm-5.3-flash-dp4-ep-ssm-bf16" in failures  # a refusal is


def test_a_queued_arm_is_never_a_result_a_launch_or_a_failure(demo: Path) -> None:
    with Store(demo, read_only=True) as store:
        items = queued_work(store)
        queued_arms = {q.arm for q in items if q.kind == "launch" and q.arm is not None}
        assert len(queued_arms) == 7
        assert not queued_arms & {r.arm for r in bench_rows(store)}
        assert not queued_arms & {r.arm for r in launches(store, None)}
        assert not queued_arms & {r.arm for r in failed_launches(store, None)}
        rows, _ = economics_table(economics_inputs(store))
        assert rows and not queued_arms & {r.arm for r in rows}
        assert not queued_arms & {arm for b in fleet(store, store.clock()) for arm in b.serving}
        catalog = load_catalog()
        entries = {e.name: e for e in ReadModel(store).arms({a: None for a in catalog.arms})}
        for arm in queued_arms:
            assert entries[arm].in_recipes and entries[arm].latest is None  # listed, never launched
        # The Arms view: every arm the demo launched is a recipe, none "(not in recipes)".
        assert [name for name, e in entries.items() if not e.in_recipes] == []
        # A repeat or an eval of an arm that ran keeps that arm's figures as they were.
        assert {q.kind for q in items} == set(QUEUED_KINDS)
        assert all(q.imported and q.sentence and q.section for q in items)


def test_the_perf3_refusals_are_failed_launches_with_the_write_ups_reasons(demo: Path) -> None:
    with Store(demo, read_only=True) as store:
        reasons = {r.arm: r.failure_reason or "" for r in failed_launches(store, None)}
    assert "192 slots at TP1 whatever the SSM dtype" in reasons["glm-5.3-flash-dp4-ep-ssm-bf16"]
    assert reasons["glm-5.3-flash-dp4-ep-fp8kv"] == "FP8 KV for MLA is Hopper-only"
    assert reasons["glm-5.3-flash-dp4-ep-prefill32k"] == "a 32k prefill chunk out of memory"


def test_a_second_import_replaces_the_queued_work(tmp_path: Path) -> None:
    with Store(tmp_path / "state.db") as store:
        build_demo(store)
        first = queued_work(store)
        build_demo(store)
        second = queued_work(store)
    assert [(q.arm, q.box, q.what) for q in first] == [(q.arm, q.box, q.what) for q in second]
    assert len(second) == len(load_queued())


def test_overflow_is_judged_only_where_a_box_knows_its_gpus(tmp_path: Path) -> None:
    with Store(tmp_path / "state.db") as store:
        assert overflowing_profiles(store, load_catalog()) == []  # only this machine: no GPUs to judge


def test_the_store_refuses_an_item_without_its_kind_or_words(tmp_path: Path) -> None:
    item = QueuedItem(model="m", kind="launch", what="w", sentence="s", section="x")
    with Store(tmp_path / "state.db") as store:
        with pytest.raises(QueuedError, match="kind 'later' is not one of launch, repeat, eval"):
            store.queued.add_imported(1, [replace(item, kind="later")])
        with pytest.raises(QueuedError, match="give the sentence that queued it"):
            store.queued.add_imported(1, [replace(item, sentence="  ")])
        assert store.rows("SELECT * FROM queued_work") == []


def _break(seed: Path, name: str, old: str, new: str) -> None:
    text = (seed / name).read_text(encoding="utf-8")
    assert old in text, old
    (seed / name).write_text(text.replace(old, new, 1), encoding="utf-8")


def test_queued_data_is_checked_against_arms_tsv(tmp_path: Path) -> None:
    seed = copy_seed(tmp_path)
    # A queued arm without its item: the arms.tsv row is named.
    _break(
        seed, "queued_work.tsv", "glm-5.3-flash-tp8\tseed-5090x8-400w", "glm-5.3-flash-tp8\tseed-pro6000-600w"
    )
    with pytest.raises(DemoDataError, match=r"queued_work.tsv:\d+: a queued launch of glm-5.3-flash-tp8 on "):
        load_queued(seed)
    seed = copy_seed(tmp_path / "2")
    lines = (seed / "queued_work.tsv").read_text(encoding="utf-8").splitlines(keepends=True)
    (seed / "queued_work.tsv").write_text(
        "".join(x for x in lines if not x.startswith("glm-5.3-flash-tp8\t"))
    )
    with pytest.raises(
        DemoDataError, match=r"arms.tsv:\d+: arm glm-5.3-flash-tp8 on seed-5090x8-400w is queued but"
    ):
        load_queued(seed)
    # A figure for a queued arm: the throughput row is refused.
    seed = copy_seed(tmp_path / "3")
    lines = (seed / "throughput.tsv").read_text(encoding="utf-8").splitlines()
    columns = next(x for x in lines if x.strip() and not x.startswith("#")).split("\t")
    row = {"arm": "glm-5.3-flash-tp8", "box": "seed-5090x8-400w", "shape": "router", "concurrency": "1024"}
    with (seed / "throughput.tsv").open("a", encoding="utf-8") as f:
        f.write("\t".join(row.get(c, "1") for c in columns) + "\n")
    with (
        Store(tmp_path / "state.db") as store,
        pytest.raises(DemoDataError, match="a queued arm has no figures"),
    ):
        build_demo(store, data_dir=seed)
    # An unknown launch state.
    seed = copy_seed(tmp_path / "4")
    _break(seed, "arms.tsv", "\tqueued\t", "\tpostponed\t")
    with (
        Store(tmp_path / "state2.db") as store,
        pytest.raises(DemoDataError, match="launch_state 'postponed'"),
    ):
        build_demo(store, data_dir=seed)


ARMS_HEADER = "arm\tbox\tmodel\ttp\treplicas\tlaunch_state\tfailure_reason\n"
QUEUED_HEADER = "arm\tbox\tmodel\tkind\tlist\twhat\tsentence\tsection\n"
CELL = st.characters(
    blacklist_characters="\t\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029", blacklist_categories=["Cs"]
)
"""Any character a TSV cell can hold: not a tab, and nothing str.splitlines() reads as a line end."""


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    kind=st.text(alphabet=CELL, max_size=12) | st.sampled_from(QUEUED_KINDS),
    sentence=st.text(alphabet=CELL, max_size=30),
)
def test_a_queued_row_parses_or_is_refused_at_its_line(kind: str, sentence: str) -> None:
    """Any kind and sentence text: a row is one item with exactly those words, or a one-line error naming
    queued_work.tsv and its line, never a crash or a silently different item."""
    with tempfile.TemporaryDirectory() as tmp:
        seed = Path(tmp)
        (seed / "arms.tsv").write_text(ARMS_HEADER + "a\tb\tM\t1\t1\tstopped\t\n", encoding="utf-8")
        (seed / "queued_work.tsv").write_text(
            "# header\n" + QUEUED_HEADER + f"a\tb\tM\t{kind}\t\tthe item\t{sentence}\tsomewhere\n",
            encoding="utf-8",
        )
        kind_ok = kind.strip() in ("repeat", "eval")  # a launch needs a queued arms.tsv row; this one ran
        if kind_ok and sentence.strip():
            [item] = load_queued(seed)
            assert (item.kind, item.sentence, item.arm, item.box) == (
                kind.strip(),
                sentence.strip(),
                "a",
                "b",
            )
        else:
            with pytest.raises(DemoDataError, match=r"^queued_work.tsv:3: "):
                load_queued(seed)
