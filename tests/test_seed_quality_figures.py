"""The write-up's quality figures as the console prints them from the demo (seed-gaps F15, F16, F21).

Everything is read from a demo state.db that ops/demo.py builds from ops/data/seed/, as a newcomer gets it:
the house-default against vendor-recipe pair set side by side by `quality compare` (no item split exists for
it), and the four quantisers' table in the report with FP8's printed 0.789 named against the 0.779 of the
task-accuracy table.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.cli import main
from console.readmodel import quality_runs
from console.readmodel.records import QualityRun
from console.store import Store
from ops.demo import DemoDataError, _all_scored, build_demo, read_tsv

HOUSE, VENDOR = "Qwen3.8-27B NVFP4, house default", "Qwen3.8-27B NVFP4, vendor recipe"
SEVEN = {
    "overall [95%]": ("0.558 [0.509, 0.606]", "0.732 [0.687, 0.773]"),
    "instructions": ("0.317", "0.833"),
    "code": ("0.413", "0.733"),
    "maths": ("0.525", "0.625"),
    "tools": ("0.829", "0.900"),
    "long_ctx": ("0.917", "0.979"),
    "truncation rate": ("0.248", "0.139"),
}


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("seed_quality_figures") / "state.db"
    build_demo(Store(path))
    return path


def _runs(db: Path) -> dict[str, QualityRun]:
    return {r.label: r for r in quality_runs(Store(db))}


def test_compare_sets_the_house_default_and_vendor_recipe_side_by_side(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """F16: the served-differently line, then the plain statement that no paired verdict is possible without
    per-item results, then the seven figures of the write-up's table, house default against vendor recipe."""
    runs = _runs(db)
    house, vendor = runs[HOUSE].id, runs[VENDOR].id
    assert main(["--db", str(db), "quality", "compare", str(house), str(vendor)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("served differently: reasoning parser none vs qwen3; ")
    assert lines[3].startswith("no paired verdict: without per-item results the runs cannot be paired")
    for name, (a, b) in SEVEN.items():
        row = next(line for line in lines[5:] if line.strip().startswith(name + " "))
        cells = [*a.split(), *b.split()]
        assert row.split()[-len(cells) :] == cells, name
    assert not any(line.startswith("verdict") for line in lines)


def test_compare_side_by_side_as_json_has_no_verdict(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The JSON names the basis, gives every figure of both runs and no verdict; order A/B follows the call."""
    runs = _runs(db)
    vendor, house = runs[VENDOR].id, runs[HOUSE].id
    assert main(["--db", str(db), "quality", "compare", str(vendor), str(house), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["basis"], out["verdict"]) == ("side by side", None)
    assert out["served_differently"].startswith("served differently: reasoning parser qwen3 vs none")
    figures = {f["figure"]: (f["a"], f["b"]) for f in out["figures"]}
    for name, (house_figure, vendor_figure) in SEVEN.items():
        assert figures[name] == (vendor_figure, house_figure), name
    assert figures["knowledge"] == ("0.429", None)  # the house-default table prints no knowledge figure


def test_two_runs_with_a_published_split_still_get_a_verdict(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Side by side is only for pairs nothing pairs: a published split still gives its paired verdict."""
    runs = _runs(db)
    a, b = runs["Qwen3.8-27B FP8 b12x, repeat A"].id, runs["Qwen3.8-27B FP8 b12x, repeat B"].id
    assert main(["--db", str(db), "quality", "compare", str(a), str(b), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["basis"] == "published" and out["verdict"]


def test_report_shows_the_four_quantisers_with_fp8_s_two_figures(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """F21: the report's common-items section reproduces the write-up's four rows (out tok/s, quality over
    every item scored, over the 388 common items, maths on them) and names why FP8's 0.789 is not
    quality.tsv's 0.779."""
    assert main(["--db", str(db), "report"]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = lines.index("## Qwen3.8-27B builds on their 388 common items (seed-pro6000-600w)")
    assert lines[at + 2] == (
        "| build | kernel line | out tok/s | quality (all scored) | quality (388 common) | maths (common) |"
    )
    rows = [[c.strip() for c in line.strip("|").split("|")][2:] for line in lines[at + 4 : at + 8]]
    assert rows == [
        ["5,161", "0.725", "0.762", "0.785"],
        ["3,148", "0.789*", "0.802", "0.938"],
        ["2,048", "0.772", "0.801", "0.862"],
        ["2,048", "0.752", "0.786", "0.862"],
    ]
    assert lines[at + 9].startswith(
        "\\* FP8 (Qwen's release), 4 replicas: 0.789 as 'Four quantisers of one model'"
    )
    assert "0.779 over 403 items in the task-accuracy table" in lines[at + 9]


def test_a_printed_all_scored_figure_needs_its_arm_and_box(tmp_path: Path) -> None:
    """The four-quantisers cell is read beside an arm's eval, so a row without one is a one-line error
    naming the file and line; an empty cell is no figure."""
    (tmp_path / "q.tsv").write_text("run\tall_scored\nx\t0.789\ny\t\n", encoding="utf-8")
    bare, empty = read_tsv(tmp_path / "q.tsv")
    with pytest.raises(DemoDataError, match=r"q.tsv:2: all_scored 0.789 needs the run's arm and box"):
        _all_scored(bare, None, "seed-pro6000-600w")
    assert _all_scored(empty, "a", "b") == []
    (figure,) = _all_scored(bare, "qwen3.8-27b-fp8-b12x", "seed-pro6000-600w")
    assert figure.figures == {"quality_all_scored": 0.789}
