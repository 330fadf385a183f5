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
from hypothesis import given, settings
from hypothesis import strategies as st

from console.cli import main
from ops.demo import CAPS, Cell, DemoDataError, _caps, _common_figures, _routing, read_tsv
from tests.support.demo import runs_by_label

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
def db(demo: Path) -> Path:
    """The demo campaign's state.db (tests/conftest.py)."""
    return demo


def test_compare_sets_the_house_default_and_vendor_recipe_side_by_side(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """F16: the served-differently line, then the plain statement that no paired verdict is possible without
    per-item results, then the seven figures of the write-up's table, house default against vendor recipe."""
    runs = runs_by_label(db)
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
    runs = runs_by_label(db)
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
    runs = runs_by_label(db)
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


def test_the_four_quantisers_printed_figures_need_their_arm_and_box(tmp_path: Path) -> None:
    """The four-quantisers cells are read beside an arm's eval, so a row without one is a one-line error
    naming the file and line; empty cells are no figure."""
    (tmp_path / "q.tsv").write_text(
        "run\tall_scored\tmaths_tokens\tmaths_at_cap\nx\t0.789\t9300\t0.03\ny\t\t\t\n", encoding="utf-8"
    )
    bare, empty = read_tsv(tmp_path / "q.tsv")
    with pytest.raises(DemoDataError, match=r"q.tsv:2: all_scored, maths_tokens, maths_at_cap need the run"):
        _common_figures(bare, None, "seed-pro6000-600w")
    assert _common_figures(empty, "a", "b") == []
    (figure,) = _common_figures(bare, "qwen3.8-27b-fp8-b12x", "seed-pro6000-600w")
    assert figure.figures == {"quality_all_scored": 0.789, "maths_mean_tokens": 9300, "maths_at_cap": 0.03}


def test_quality_table_prints_the_maths_answer_lengths_and_cap_rates(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """F21: the maths answers' mean length and share at the 32,768 cap are numbers beside each build
    (9,300 and 3% for FP8, 12,100 and 26% RedHat, 13,900 and 35% gittensor; unsloth's are not printed)."""
    assert main(["--db", str(db), "quality", "table", "--model", "Qwen3.8-27B", "--json"]) == 0
    rows = {
        r["arm"]: (r["maths_tokens"], r["maths_at_cap"]) for r in json.loads(capsys.readouterr().out)["rows"]
    }
    assert rows == {
        "qwen3.8-27b-nvfp4-b12x": (13900, 0.35),
        "qwen3.8-27b-fp8-b12x": (9300, 0.03),
        "qwen3.8-27b-nvfp4-redhat-auto": (12100, 0.26),
        "qwen3.8-27b-nvfp4-unsloth-auto": (None, None),
    }


API_RUNS = {
    # run: (provider, routing, precision, caps, items, accuracy, families)
    "Qwen3.8-27B, OpenRouter default routing": (
        "OpenRouter",
        "default",
        "FP8/FP4",
        32768,
        403,
        0.772,
        {"maths": 0.775, "code": 0.76, "knowledge": 0.486},
    ),
    "gpt-oss-120b, OpenRouter default routing": (
        "OpenRouter",
        "default",
        None,
        32768,
        403,
        0.769,
        {"code": 0.787, "tools": 0.9, "knowledge": 0.486},
    ),
    "gpt-oss-20b, OpenRouter default routing": (
        "OpenRouter",
        "default",
        None,
        32768,
        403,
        0.725,
        {"knowledge": 0.429},
    ),
    "DeepSeek-V4-Flash, OpenRouter default routing": (
        "OpenRouter",
        "default",
        "FP4",
        32768,
        403,
        0.784,
        {"long_ctx": 0.833, "maths": 0.875, "knowledge": 0.571, "code": 0.707},
    ),
    "DeepSeek-V4-Flash, DeepSeek endpoint 65k": (
        "DeepSeek",
        "pinned",
        None,
        65536,
        403,
        0.854,
        {"maths": 1.0, "knowledge": 0.686, "code": 0.773},
    ),
    "GLM-5.3-Flash, OpenRouter default routing": (
        "OpenRouter",
        "default",
        None,
        32768,
        403,
        0.824,
        {"maths": 0.812, "code": 0.813, "knowledge": 0.657},
    ),
    "GLM-5.3-Flash, Z.AI endpoint 65k": ("Z.AI", "pinned", "FP8", 65536, 390, 0.859, {}),
    "DeepSeek-V4-Flash, Baidu FP8 pinned": ("Baidu", "pinned", "FP8", 32768, 403, 0.831, {}),
    "Qwen3.8-27B, Darkbloom FP4 pinned": ("Darkbloom", "pinned", "FP4", 32768, 300, 0.727, {}),
    "DeepSeek-V4-Flash, Relace FP4 pinned": ("Relace", "pinned", "FP4", 32768, 130, 0.815, {}),
}


def test_api_runs_carry_provider_precision_routing_caps_and_families(db: Path) -> None:
    """F15: each API run says who served it, how it was routed, at what precision and under which caps, as
    fields (not words in a note), with the family figures the API table prints."""
    runs = runs_by_label(db)
    for label, (provider, routing, precision, cap, items, accuracy, families) in API_RUNS.items():
        r = runs[label]
        assert (r.provider, r.routing, r.precision, r.caps) == (provider, routing, precision, {"*": cap}), (
            label
        )
        assert (r.items, r.accuracy, dict(r.published_families)) == (items, accuracy, families), label
    assert runs["Qwen3.8-27B, OpenRouter default routing"].truncation_rate == 0.070
    listing = runs["DeepSeek-V4-Flash, OpenRouter default routing"]
    node = runs["DeepSeek-V4-Flash TP1 x DP4 + EP"]
    assert (listing.degenerate_rate, listing.truncation_rate) == (0.030, 0.092)
    assert (node.degenerate_rate, node.truncation_rate, node.provider) == (0.0025, 0.042, None)


def test_quality_list_prints_how_each_api_run_was_served(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """F15: `quality list` shows the served-by column, flags the partial runs "stopped (HTTP 402): N items" and
    prints caps, degenerate rate and families under the table."""
    runs = runs_by_label(db)
    assert main(["--db", str(db), "quality", "list"]) == 0
    out = capsys.readouterr().out
    rows = {line.split("  ")[0].strip(): line for line in out.splitlines() if line[:1].isdigit()}
    darkbloom = rows[str(runs["Qwen3.8-27B, Darkbloom FP4 pinned"].id)]
    assert "Darkbloom, pinned routing, FP4" in darkbloom and darkbloom.endswith(
        "stopped (HTTP 402): 300 items"
    )
    relace = rows[str(runs["DeepSeek-V4-Flash, Relace FP4 pinned"].id)]
    assert relace.endswith("stopped (HTTP 402): 130 items")
    assert (
        "OpenRouter, default routing, FP8/FP4"
        in rows[str(runs["Qwen3.8-27B, OpenRouter default routing"].id)]
    )
    deepseek = runs["DeepSeek-V4-Flash, OpenRouter default routing"]
    assert (
        f"run {deepseek.id} ({deepseek.label}): caps all 32768; degenerate 3.0%; by family code 0.707, "
        "knowledge 0.571, long_ctx 0.833, maths 0.875"
    ) in out
    node = runs["DeepSeek-V4-Flash TP1 x DP4 + EP"]
    assert f"run {node.id} ({node.label}): degenerate 0.25%" in out


def test_bad_caps_or_routing_cells_are_one_line_errors(tmp_path: Path) -> None:
    """A caps cell other than the write-up's 32k/65k, or a routing other than default/pinned, names the file
    and line; empty cells are no figure."""
    (tmp_path / "q.tsv").write_text("run\tcaps\trouting\nx\t32K\tauto\ny\t\t\n", encoding="utf-8")
    bad, empty = read_tsv(tmp_path / "q.tsv")
    with pytest.raises(DemoDataError, match=r"q.tsv:2: caps '32K' is not one of 32k, 65k"):
        _caps(bad)
    with pytest.raises(DemoDataError, match=r"q.tsv:2: routing 'auto' is neither 'default' nor 'pinned'"):
        _routing(bad)
    assert (_caps(empty), _routing(empty)) == (None, None)


PROSE_FIGURES = {
    # (arm, shape, concurrency): (column, figure) from the write-up's prose, not its tables
    ("deepseek-v4-flash-dp4-ep-256", "router", "256"): ("out_tok_per_s", "1289"),
    ("glm-5.3-flash-dp2tp2-ep-384", "promptopt", "1024"): ("out_tok_per_s", "2105"),
    ("deepseek-v4-flash-dp4-ep-512", "router", "1024"): ("tpot_ms_p50", "581"),
    ("glm-5.3-flash-fp8-tp4-32", "router", "32"): ("tpot_ms_p50", "51"),
    ("qwen3.8-27b-nvfp4-b12x", "router", "256"): ("per_stream_out_tok_s", "20"),
    ("qwen3.8-27b-nvfp4-b12x", "router", "1024"): ("per_stream_out_tok_s", "5"),
    ("glm-5.3-flash-tp4-256", "router", "256"): ("step_ms", "200"),
    ("glm-5.3-flash-dp4-ep", "router", "1024"): ("step_ms", "93"),
}


def test_export_summary_lists_the_prose_throughput_figures_as_numbers(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """C3: every throughput figure the write-up gives only in its prose is a numeric cell of its row in
    `export summary` (out tok/s, TPOT, decode step, per-stream rate), with "text" in its provenance; the
    two-engine GLM row stays diagnostic only."""
    assert main(["--db", str(db), "export", "summary"]) == 0
    header, *lines = capsys.readouterr().out.splitlines()
    rows = [dict(zip(header.split("\t"), line.split("\t"), strict=True)) for line in lines]
    seen = {}
    for r in rows:
        key = (r["arm"], r["shape"], r["concurrency"])
        if r["box"] == "seed-pro6000-600w" and key in PROSE_FIGURES:
            seen[key] = r
    assert seen.keys() == PROSE_FIGURES.keys()
    for key, (column, figure) in PROSE_FIGURES.items():
        r = seen[key]
        assert float(r[column]) == float(figure), key
        assert "text (" in r["provenance"], key
    assert seen[("glm-5.3-flash-dp2tp2-ep-384", "promptopt", "1024")]["diagnostic_only"] == "yes"
    assert seen[("glm-5.3-flash-dp4-ep", "router", "1024")]["step_ms"] == "93"
    untouched = [r for r in rows if (r["arm"], r["shape"], r["concurrency"]) not in PROSE_FIGURES]
    assert all(r["step_ms"] == r["per_stream_out_tok_s"] == "" for r in untouched)


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=12))
def test_caps_and_routing_cells_take_only_what_the_write_up_prints(text: str) -> None:
    """Any caps or routing cell is one of the values the write-up prints, empty (no figure), or a one-line
    error that names the file and line."""
    c = Cell({"caps": text, "routing": text}, "q.tsv:2")
    cell = c.text("caps")
    for parse, allowed in ((_caps, tuple(CAPS)), (_routing, ("default", "pinned"))):
        if cell is None:
            assert parse(c) is None
        elif cell in allowed:
            assert parse(c) == ({"*": CAPS[cell]} if parse is _caps else cell)
        else:
            with pytest.raises(DemoDataError, match=r"^q.tsv:2: ") as e:
                parse(c)
            assert len(str(e.value).splitlines()) == 1  # the cell is quoted (repr), never a line break
