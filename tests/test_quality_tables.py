"""The write-up's quality tables as demo data and through the CLI: the house-default against vendor-recipe pair
(seed-gaps F16) and the RTX 5090 quality rows with gpt-oss-120b's 124-item run re-bound to its box (F23).

Everything is read from a demo state.db built by ops/demo.py from ops/data/seed/, as a newcomer gets it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.cli import main
from console.economics import economics_table
from console.readmodel import economics_inputs, eval_runs, quality_runs
from console.readmodel.quality import served_difference
from console.store import Store
from ops.demo import DemoDataError, _sampling, read_tsv
from tests.support.demo import runs_by_label

BOX_5090 = "seed-5090x8-400w"
SEED_BOX = "seed-pro6000-600w"
HOUSE, VENDOR = "Qwen3.8-27B NVFP4, house default", "Qwen3.8-27B NVFP4, vendor recipe"


@pytest.fixture(scope="module")
def db(demo: Path) -> Path:
    """The demo campaign's state.db (tests/conftest.py)."""
    return demo


def test_house_default_against_vendor_recipe_reproduces_the_table(db: Path) -> None:
    """F16: both runs are bound to the gittensor NVFP4 arm on the 5090 box with what they were served with,
    and carry the table's overall and truncation; the vendor column's six families are the 5090 NVFP4 row."""
    runs = runs_by_label(db)
    house, vendor = runs[HOUSE], runs[VENDOR]
    for r in (house, vendor):
        assert (r.arm, r.box, r.items) == ("qwen3.8-27b-nvfp4-b12x", BOX_5090, 403)
    assert (house.accuracy, house.truncation_rate) == (0.558, 0.248)
    assert (vendor.accuracy, vendor.truncation_rate) == (0.732, 0.139)
    assert (house.reasoning_parser, vendor.reasoning_parser) == ("none", "qwen3")
    assert vendor.sampling == {"temperature": 1.0, "top_p": 0.95, "top_k": 20, "min_p": 0}
    assert vendor.thinking == "enable_thinking=True"
    assert house.published_families == {
        "instructions": 0.317,
        "code": 0.413,
        "maths": 0.525,
        "tools": 0.829,
        "long_ctx": 0.917,
    }
    assert vendor.published_families == {
        "instructions": 0.833,
        "code": 0.733,
        "maths": 0.625,
        "tools": 0.9,
        "long_ctx": 0.979,
        "knowledge": 0.429,
    }
    row = next(e for e in eval_runs(Store(db)) if (e.arm, e.box) == ("qwen3.8-27b-nvfp4-b12x", BOX_5090))
    assert row.overall == vendor.accuracy
    assert row.families == {
        "maths": 0.625,
        "code": 0.733,
        "tools": 0.9,
        "long_ctx": 0.979,
        "knowledge": 0.429,
        "instructions": 0.833,
    }


def test_compare_says_how_the_pair_was_served_before_anything_else(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`quality compare` prints the served-differently line first; the write-up printed no item split for this
    pair, so no paired verdict follows it, only the figures side by side (tests/test_seed_quality_figures.py)."""
    runs = runs_by_label(db)
    house, vendor = runs[HOUSE].id, runs[VENDOR].id
    assert main(["--db", str(db), "quality", "compare", str(house), str(vendor)]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines()[0] == (
        "served differently: reasoning parser none vs qwen3; "
        "sampling temperature=0.6 vs min_p=0, temperature=1.0, top_k=20, top_p=0.95; "
        "thinking model default: on vs enable_thinking=True"
    )
    assert "no split was published for these two" in captured.out


def test_compare_of_runs_served_alike_or_unrecorded_has_no_served_line(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A published pair whose serving the write-up does not give gets a verdict and no served line."""
    runs = runs_by_label(db)
    a = runs["Qwen3.8-27B FP8 b12x, repeat A"].id
    b = runs["Qwen3.8-27B FP8 b12x, repeat B"].id
    assert main(["--db", str(db), "quality", "compare", str(a), str(b), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["served_differently"] is None and out["verdict"]
    house = runs[HOUSE]
    assert served_difference(house, house) is None
    assert served_difference(house, runs["Qwen3.8-27B FP8 b12x, repeat A"]) is None


def test_the_5090_quality_rows_are_bound_to_their_arms(db: Path) -> None:
    """F23: 'Does four-bit cost quality?' prints two 8x RTX 5090 rows; each is the arm's eval with its six
    families, and its quality run with truncation."""
    evals = {(e.arm, e.box): e for e in eval_runs(Store(db))}
    fp8 = evals[("qwen3.8-27b-fp8-tp2", BOX_5090)]
    assert (fp8.overall, fp8.items) == (0.740, 403)
    assert fp8.families == {
        "maths": 0.700,
        "code": 0.733,
        "tools": 0.814,
        "long_ctx": 0.979,
        "knowledge": 0.443,
        "instructions": 0.867,
    }
    assert evals[("qwen3.8-27b-nvfp4-b12x", BOX_5090)].overall == 0.732
    runs = runs_by_label(db)
    tp2 = runs["Qwen3.8-27B FP8 official TP2, 8x RTX 5090"]
    assert (tp2.arm, tp2.box, tp2.accuracy, tp2.truncation_rate) == (
        "qwen3.8-27b-fp8-tp2",
        BOX_5090,
        0.740,
        0.114,
    )
    assert runs[VENDOR].truncation_rate == 0.139


def test_gpt_oss_120b_accuracy_is_the_5090_box_s_124_items(db: Path) -> None:
    """F23: the 0.742 run is the 5090 box's 124 items, so the 600 W gpt-oss-120b row borrows it and leaves
    the frontier, which the write-up drew with '0.742 (124)'."""
    evals = [e for e in eval_runs(Store(db)) if e.model == "gpt-oss-120b"]
    assert [(e.arm, e.box, e.items, e.overall) for e in evals] == [
        ("gpt-oss-120b-tp4x2", BOX_5090, 124, 0.742)
    ]
    rows, _ = economics_table(economics_inputs(Store(db)), utilisation=0.7)
    gpt = next(r for r in rows if (r.box, r.arm) == (SEED_BOX, "gpt-oss-120b-mxfp8"))
    assert (gpt.accuracy_basis, gpt.accuracy_box, gpt.on_frontier) == ("borrowed", BOX_5090, False)
    assert "accuracy borrowed from gpt-oss-120b-tp4x2 on seed-5090x8-400w" in gpt.marks


def test_published_sampling_must_be_a_json_object(tmp_path: Path) -> None:
    """A bad sampling cell is a one-line error naming the file and line."""
    for cell, says in (("{temperature", "is not JSON"), ("[1, 2]", "is not a JSON object")):
        (tmp_path / "q.tsv").write_text(f"run\tsampling\nx\t{cell}\n", encoding="utf-8")
        (c,) = read_tsv(tmp_path / "q.tsv")
        with pytest.raises(DemoDataError, match=f"q.tsv:2: sampling .* {says}"):
            _sampling(c)


def test_the_report_shows_the_served_differently_table(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """F16: `campaign report` prints the write-up's house-default against vendor-recipe table (a figure a row)
    under the line that says how the two runs were served differently."""
    assert main(["--db", str(db), "report"]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = lines.index("## Same weights, served differently")
    assert lines[at + 2].startswith("qwen3.8-27b-nvfp4-b12x on seed-5090x8-400w: served differently: ")
    assert lines[at + 4] == f"|  | {HOUSE} | {VENDOR} |"
    rows = {
        line.split(" | ")[0].strip("| "): line.strip("|").split(" | ")[1:] for line in lines[at + 6 : at + 18]
    }
    assert {k: [v.strip() for v in vs] for k, vs in rows.items()} == {
        "reasoning parser": ["none", "qwen3"],
        "thinking": ["model default: on", "enable_thinking=True"],
        "sampling": ['{"temperature": 0.6}', '{"min_p": 0, "temperature": 1.0, "top_k": 20, "top_p": 0.95}'],
        "items": ["403", "403"],
        "overall [95%]": ["0.558 [0.509, 0.606]", "0.732 [0.687, 0.773]"],
        "code": ["0.413", "0.733"],
        "instructions": ["0.317", "0.833"],
        "long_ctx": ["0.917", "0.979"],
        "maths": ["0.525", "0.625"],
        "tools": ["0.829", "0.900"],
        "knowledge": ["–", "0.429"],
        "truncation rate": ["0.248", "0.139"],
    }


def test_the_four_quantisers_common_runs_and_the_ladder_rungs(db: Path) -> None:
    """F21 (data): the four builds on the 388 items all four scored, and the ladder's maths/code per rung."""
    runs = {r.arm: r for r in quality_runs(Store(db)) if r.items == 388 and r.box == SEED_BOX}
    assert {arm: r.accuracy for arm, r in runs.items()} == {
        "qwen3.8-27b-nvfp4-b12x": 0.762,
        "qwen3.8-27b-fp8-b12x": 0.802,
        "qwen3.8-27b-nvfp4-redhat-auto": 0.801,
        "qwen3.8-27b-nvfp4-unsloth-auto": 0.786,
    }
    tokens = {arm: r.provenance or "" for arm, r in runs.items()}
    assert "9,300 tokens on average, 3% hitting the 32,768 cap" in tokens["qwen3.8-27b-fp8-b12x"]
    assert "12,100 tokens on average, 26%" in tokens["qwen3.8-27b-nvfp4-redhat-auto"]
    assert "13,900 tokens on average, 35%" in tokens["qwen3.8-27b-nvfp4-b12x"]
    parent = next(r for r in quality_runs(Store(db)) if r.arm == "qwen3.8-27b-bf16")
    assert "14,300 tokens on average, 19%" in (parent.provenance or "")
    rungs = {
        (e.arm, e.box): (e.families.get("maths"), e.families.get("code"))
        for e in eval_runs(Store(db))
        if e.model == "Qwen3.8-27B"
    }
    assert rungs[("qwen3.8-27b-bf16", SEED_BOX)] == (0.8, 0.813)
    assert rungs[("qwen3.8-27b-nvfp4-qat-b12x", SEED_BOX)] == (0.812, 0.813)
    assert rungs[("qwen3.8-27b-fp8-b12x", SEED_BOX)] == (0.863, 0.72)
    assert rungs[("qwen3.8-27b-nvfp4-b12x", "seed-pro6000-400w")] == (0.662, 0.733)


def test_quality_table_common_reproduces_the_four_quantisers(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """F21: `quality table --model Qwen3.8-27B --common` prints the write-up's four rows: build, kernel line,
    out tok/s (router, concurrency 1,024), quality over every item scored, on the 388 common items, and maths
    on them. FP8's all-scored figure is the table's 0.789, marked, with a line naming quality.tsv's 0.779 over
    403 items once its timed-out items were completed."""
    assert main(["--db", str(db), "quality", "table", "--model", "Qwen3.8-27B", "--common"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "Qwen3.8-27B on seed-pro6000-600w: quality over every item each run scored"
    header = lines[2].split()
    assert header[-11:] == [
        *("SCORED)", "QUALITY", "(388", "COMMON)", "MATHS", "(COMMON)"),
        *("MATHS", "TOKENS", "MATHS", "AT", "CAP"),
    ]
    rows = [line.split()[:-2] for line in lines[3:7]]
    assert [r[-4:] for r in rows] == [
        ["0.725", "(403)", "0.762", "0.785"],
        ["3,148", "0.789*", "0.802", "0.938"],
        ["0.772", "(403)", "0.801", "0.862"],
        ["0.752", "(403)", "0.786", "0.862"],
    ]
    assert [r[-5] for r in rows] == ["5,161", "checkpoint)", "2,048", "2,048"]
    assert lines[7:] == [
        "* FP8 (Qwen's release), 4 replicas: 0.789 as 'Four quantisers of one model' prints it; 0.779 over 403 "
        "items in the task-accuracy table (footnote 1: 0.789 before the timed-out items were completed)"
    ]
    assert "B12xNvFp4 W4A4 (b12x)" in lines[3] and "B12xFp8BlockScaledMM" in lines[4]
    assert (
        "auto: FP8 attention + dequant MLP" in lines[5] and "RedHatAI" in lines[5] and "unsloth" in lines[6]
    )
    assert main(["--db", str(db), "quality", "table", "--model", "Qwen3.8-27B", "--json"]) == 0
    table = json.loads(capsys.readouterr().out)
    assert (table["items"], [r["maths_common"] for r in table["rows"]]) == (388, [0.785, 0.938, 0.862, 0.862])


def test_quality_table_without_common_items_is_one_line(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A model with no runs bound to an arm, or no two builds on the same common items, is refused in one line."""
    assert main(["--db", str(db), "quality", "table", "--model", "No-Such-Model"]) == 2
    assert capsys.readouterr().err.strip().count("\n") == 0
    assert main(["--db", str(db), "quality", "table", "--model", "GLM-5.3-Flash", "--common"]) == 2
    assert "no two builds of GLM-5.3-Flash were scored on the same common items" in capsys.readouterr().err


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=60, deadline=None)
@given(value=_JSON)
def test_sampling_cell_reads_any_json_object_and_refuses_the_rest(
    tmp_path_factory: pytest.TempPathFactory, value: object
) -> None:
    """Hypothesis: a JSON object in the cell comes back equal; any other JSON value is the one-line error."""
    path = tmp_path_factory.mktemp("sampling") / "q.tsv"
    path.write_text(f"run\tsampling\nx\t{json.dumps(value)}\n", encoding="utf-8")
    (c,) = read_tsv(path)
    if isinstance(value, dict):
        assert _sampling(c) == value
    else:
        with pytest.raises(DemoDataError, match="is not a JSON object") as e:
            _sampling(c)
        assert "\n" not in str(e.value)
