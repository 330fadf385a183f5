"""The economics as the campaign write-up published it, through the CLI on the demo database.

Each test reads the write-up's printed figures from ops/data/seed/ (econ_*.tsv, cost_model.toml,
api_prices.tsv, aa_index.tsv, throughput.tsv) and checks what `campaign export costbases`, `campaign export
economics [--basis B] [--per-hour]`, `campaign compare` and `campaign report` print against them: the cost
bases and the basis named on every figure, the per-hour API table, the fully-loaded ratio and the break-even
beside the published ones, published against computed with the reason, the accuracy-borrowing rules, the
API's accuracy beside its price, the intelligence index, the figures quoted only in prose and both columns of
the "measured both ways" table.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import re
import shutil
from importlib import resources
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.cli import main
from console.economics import CostModel, EconomicsRow, economics_table
from console.errors import InputError
from console.readmodel import economics_inputs, quality_runs
from console.readmodel.campaign import arm_precision
from console.readmodel.records import EvalRow
from console.recipes import load_catalog
from console.service import Service
from console.store import Store
from console.tui.app import ConsoleApp
from ops.demo import SEED_DIR, build_demo, read_tsv
from testbed import tui_fixture as F
from testbed.tui_pilot import press, settle, table_rows, text_of

SEED_BOX = "seed-pro6000-600w"
COST = CostModel.from_toml(SEED_DIR / "cost_model.toml")
REPO = Path(__file__).resolve().parents[1]


def _as_printed(value: float, printed: str) -> bool:
    """Equal at the precision the write-up printed (half-up on the shown digits)."""
    places = len(printed.split(".")[1]) if "." in printed else 0
    return bool(abs(value - float(printed)) <= 0.5 * 10**-places + 1e-9)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("published") / "state.db"
    build_demo(Store(path))
    return path


def _csv(capsys: pytest.CaptureFixture[str], *argv: str) -> list[dict[str, str]]:
    assert main([*argv, "--format", "csv"]) == 0
    return list(csv.DictReader(io.StringIO(capsys.readouterr().out)))


def _economics(db: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> list[dict[str, str]]:
    return _csv(capsys, "--db", str(db), "export", "economics", *extra)


# G1 ------------------------------------------------------------------------------------------------------


def test_costbases_reproduce_the_ten_printed_rows(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`campaign export costbases`: every row of the cost-basis table at its printed precision, from
    cost_model.toml's parameters."""
    rows = _csv(capsys, "--db", str(db), "export", "costbases")
    table = [r for r in rows if r["gbp_per_node_hour"]]
    printed = read_tsv(SEED_DIR / "econ_cost_bases.tsv")
    assert len(table) == len(printed) == 10
    for mine, theirs in zip(table, printed, strict=True):
        assert mine["basis"] == theirs.need("basis")
        assert (mine["utilisation"] or None) == (
            None if theirs.text("utilisation") is None else f"{float(theirs.need('utilisation')):g}"
        )
        assert mine["gbp_per_node_hour"] == theirs.need("gbp_per_node_hour")
        assert mine["usd_per_node_hour"] == theirs.need("usd_per_node_hour")
    assert table[0]["label"] == "Scan list, nothing resold, no relief"


def test_every_figure_names_its_basis(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Export economics names the basis ("Scan list, 70 %: $4.40/h") and takes --basis; a box's price says
    where it comes from; the fourth box is priced at Scan list as the write-up priced it."""
    assert main(["--db", str(db), "export", "economics", "--format", "csv"]) == 0
    out, err = capsys.readouterr()
    assert "node cost basis: Scan list, 70 %: $4.40/h" in err
    rows = list(csv.DictReader(io.StringIO(out)))
    listed = {r["node_basis"] for r in rows if r["box"] in (SEED_BOX, "seed-pro6000-600w-b")}
    assert listed == {"Scan list, 70 %: $4.40/h"}
    rented = next(r for r in rows if r["box"] == "seed-pro6000-400w")
    assert rented["node_basis"] == "Vast on-demand: $6.20/h"
    assert "Vast on-demand reference" in rented["price_provenance"]
    assert "not this host's price" in rented["price_provenance"]
    fully = _economics(db, capsys, "--basis", "fully_loaded")
    seed = next(r for r in fully if r["box"] == SEED_BOX)
    assert seed["node_basis"] == "fully loaded, 70 %: $1.77/h"
    assert _as_printed(float(seed["node_usd_per_hour"]), "1.77")
    assert next(r for r in fully if r["box"] == "seed-pro6000-400w")["node_usd_per_hour"] == "6.2"
    assert main(["--db", str(db), "export", "economics", "--basis", "spot"]) == 2
    assert "invalid choice: 'spot'" in capsys.readouterr().err


# G9 ------------------------------------------------------------------------------------------------------


def test_fully_loaded_factor_and_break_even_beside_the_published() -> None:
    """$4.40 / $1.77 = 2.486 (the footnote's "x 2.5"); the break-even fill at 20 % use is 85.2 % by the
    zero-cost definition (83.9 % without storage), printed beside the write-up's 86.6 %."""
    assert round(COST.fully_loaded_factor(0.7), 3) == 2.486
    even = COST.break_even()
    assert (round(even.fill, 3), round(even.fill_without_storage, 3), even.utilisation) == (0.852, 0.839, 0.2)
    assert even.text.startswith("86.6 % (published; computed 85.2 % by the resale fill at which")
    assert COST.published_fully_loaded_multiplier == 2.5


def test_costbases_print_the_break_even_and_the_multiplier(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = {r["basis"]: r for r in _csv(capsys, "--db", str(db), "export", "costbases")}
    assert rows["break_even_fill"]["note"].startswith("86.6 % (published; computed 85.2 % by ")
    assert "= 85.2 % (83.9 % without storage)" in rows["break_even_fill"]["note"]
    assert rows["fully_loaded_multiplier"]["note"].startswith(
        "x2.5 (published; computed x2.486 = $4.40 / $1.77"
    )


def test_nothing_hard_codes_the_published_figures() -> None:
    """2.5 and 86.6 live in cost_model.toml only: the code computes its figures and reads the published ones."""
    code = [*sorted((REPO / "console" / "economics").glob("*.py")), REPO / "ops" / "export.py"]
    for path in code:
        text = path.read_text()
        assert not re.search(r"(?<![\d.])(86\.6|0\.866|2\.5|2\.486)(?![\d])", text), path


def test_fully_loaded_ratio_column(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """api_over_node_fully_loaded = ratio x (list 70 % / fully loaded 70 %): DeepSeek DP4 + EP 2.4x -> 6.0x,
    the one-card models' 4-22x -> 10-54x."""
    rows = _economics(db, capsys)
    ds = next(
        r
        for r in rows
        if (r["box"], r["arm"], r["api_provider"])
        == (SEED_BOX, "deepseek-v4-flash-dp4-ep-512", "market-median")
    )
    assert (f"{float(ds['api_over_node']):.1f}", f"{float(ds['api_over_node_fully_loaded']):.1f}") == (
        "2.4",
        "6.0",
    )
    one_card = {
        c.need("arm")
        for c in read_tsv(SEED_DIR / "econ_frontier.tsv")
        if c.need("node_check", int) and c.need("arm").split("-")[0] in ("qwen3.8", "muse", "gemma", "gpt")
    }
    median = {}
    for r in rows:
        if (
            r["box"] == SEED_BOX
            and r["arm"] in one_card
            and r["api_provider"] in ("openrouter-list", "market-median")
        ):
            median[r["arm"]] = r  # the market median where a model has one, else the list tier
    ratios = sorted(float(r["api_over_node"]) for r in median.values())
    fully = sorted(float(r["api_over_node_fully_loaded"]) for r in median.values())
    assert (f"{ratios[0]:.0f}", f"{ratios[-1]:.0f}") == ("4", "22")
    assert (f"{fully[0]:.0f}", f"{fully[-1]:.0f}") == ("10", "54")


# G2 ------------------------------------------------------------------------------------------------------

PER_HOUR = read_tsv(SEED_DIR / "econ_per_hour.tsv")


def test_per_hour_reproduces_every_consistent_row(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`campaign export economics --per-hour`: each consistent row of 'The same hour of output, bought from an
    API' as printed, at OpenRouter list (Artificial Analysis for Flash-Next); the two gpt-oss rows show the
    corrected figure with the reason."""
    rows = _economics(db, capsys, "--per-hour")
    checked = 0
    for c in PER_HOUR:
        key = (c.need("arm"), c.need("box"), c.need("shape"), c.need("concurrency"))
        mine = next(
            r
            for r in rows
            if (r["arm"], r["box"], r["shape"], r["concurrency"]) == key
            and r["api_provider"] in ("openrouter-list", "artificial-analysis")
        )
        assert mine["published"], key
        if not c.need("consistent", int):
            assert c.need("note") in mine["note"] and "published " in mine["note"], key
            continue
        checked += 1
        assert _as_printed(float(mine["in_mtok_per_node_hour"]), c.need("in_m")), key
        assert _as_printed(float(mine["out_mtok_per_node_hour"]), c.need("out_m")), key
        assert _as_printed(float(mine["api_bill_usd"]), c.need("api_bill")), key
        assert _as_printed(float(mine["api_over_node"]), c.need("ratio_list70")), key
        assert _as_printed(float(mine["api_over_node_fully_loaded"]), c.need("ratio_fully70")), key
        assert mine["note"] == "", key
    assert checked == sum(1 for c in PER_HOUR if c.need("consistent", int)) >= 8
    gpt = next(
        r for r in rows if (r["arm"], r["shape"]) == ("gpt-oss-120b-mxfp8", "promptopt") and r["api_provider"]
    )
    assert gpt["published"].startswith("1063 + 71 M") and "computed 992 + 71 M" in gpt["note"]
    assert "billed again as input" in gpt["note"]


# G3 ------------------------------------------------------------------------------------------------------

FRONTIER = read_tsv(SEED_DIR / "econ_frontier.tsv")


def _table(db: Path) -> list[EconomicsRow]:
    return economics_table(economics_inputs(Store(db)), utilisation=0.7)[0]


def test_published_beside_computed_with_the_reason(db: Path) -> None:
    """Every node_check = 1 row of the frontier table matches its printed node $/M; every other row carries
    both figures and the reason econ_frontier.tsv records."""
    rows = _table(db)
    for c in FRONTIER:
        mine = next(r for r in rows if (r.box, r.arm) == (c.need("box"), c.need("arm")))
        assert mine.published_node_per_mtok == c.need("node_per_m", float)
        if c.need("node_check", int):
            assert _as_printed(mine.node_per_mtok, c.need("node_per_m")), c.need("arm")
            assert mine.published_note is None, c.need("arm")
        elif not _as_printed(mine.node_per_mtok, c.need("node_per_m")):
            assert mine.published_note == (
                f"published ${c.need('node_per_m', float):.3f}, computed ${mine.node_per_mtok:.3f}: {c.need('reason')}"
            )


def test_router_only_rows_are_marked_and_the_seeds_exceptions_price_as_it_did(db: Path) -> None:
    rows = _table(db)
    bf16 = next(r for r in rows if (r.box, r.arm) == (SEED_BOX, "qwen3.8-27b-bf16"))
    assert "router only: promptopt not measured" in bf16.marks
    # The GLM two-engine layout at router + promptopt (2,105 from the prose): $0.054 as the write-up priced it.
    dp2 = next(r for r in rows if (r.box, r.arm) == (SEED_BOX, "glm-5.3-flash-dp2tp2-ep-384"))
    assert dp2.rows == "router C1024 + promptopt C1024" and _as_printed(dp2.node_per_mtok, "0.054")
    assert dp2.diagnostic_only and not dp2.on_frontier
    # The fourth box at Scan list, not at the Vast reference: $0.093 router only.
    eager = next(
        r for r in rows if (r.box, r.arm) == ("seed-pro6000-600w-b", "glm-5.3-flash-dp2tp2-ep-eager-triton")
    )
    assert _as_printed(eager.node_per_mtok, "0.093") and eager.node_basis == "Scan list, 70 %: $4.40/h"
    assert eager.shapes_note == "router only: promptopt not measured"


def test_borrowing_prefers_the_same_profile(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """qwen3.8-27b-nvfp4-flashinfer-b12x serves the gittensor checkpoint: it borrows gittensor's 0.725, not the
    BF16 parent's 0.806; the eager GLM probe borrows TP4's 0.794, not the MTP run's 0.809."""
    rows = _economics(db, capsys)
    fib = next(r for r in rows if (r["box"], r["arm"]) == (SEED_BOX, "qwen3.8-27b-nvfp4-flashinfer-b12x"))
    assert (fib["accuracy"], fib["accuracy_arm"], fib["accuracy_basis"]) == (
        "0.725",
        "qwen3.8-27b-nvfp4-b12x",
        "borrowed",
    )
    eager = next(r for r in rows if r["arm"] == "glm-5.3-flash-dp2tp2-ep-eager-triton")
    assert (eager["accuracy"], eager["accuracy_arm"]) == ("0.794", "glm-5.3-flash-tp4-256")


def test_precision_change_cannot_borrow_and_stays_off_the_frontier_until_paired(db: Path) -> None:
    """An arm whose KV cache dtype differs from its control's: no borrowed accuracy, the reason printed, off
    the frontier; with its own accuracy still held until a paired comparison against the control exists."""
    store = Store(db)
    inputs = economics_inputs(store)
    control = "glm-5.3-flash-dp4-ep"
    precision = arm_precision(load_catalog())
    assert control in precision, "the recipes define the GLM DP4 + EP control"
    variant = "glm-5.3-flash-dp4-ep-fp8kv-under-test"
    precision[variant] = dataclasses.replace(precision[control], arm=variant, kv_cache_dtype="fp8")
    bench = [
        dataclasses.replace(r, arm=variant) for r in inputs.bench if (r.box, r.arm) == (SEED_BOX, control)
    ]
    assert bench
    inputs = dataclasses.replace(inputs, bench=(*inputs.bench, *bench), arm_precision=precision)
    held = f"precision changed: needs its own paired quality run against {control}"
    row = next(r for r in economics_table(inputs)[0] if r.arm == variant)
    assert (row.accuracy, row.held, row.on_frontier) == (None, held, False)
    assert held in row.marks
    # Its own (unbeatable) accuracy: still held off the frontier without a pair against the control.
    own = dataclasses.replace(
        next(e for e in inputs.evals if e.arm == control), arm=variant, overall=0.999, id=-1
    )
    inputs = dataclasses.replace(inputs, evals=(own, *inputs.evals))
    row = next(r for r in economics_table(inputs)[0] if r.arm == variant)
    assert (row.accuracy, row.accuracy_basis, row.held, row.on_frontier, row.place) == (
        0.999,
        "measured",
        held,
        False,
        "held",
    )
    paired = dataclasses.replace(inputs, quality_pairs=frozenset({(variant, control), (control, variant)}))
    row = next(r for r in economics_table(paired)[0] if r.arm == variant)
    assert (row.held, row.on_frontier) == (None, True)
    assert isinstance(own, EvalRow)


# F15 -----------------------------------------------------------------------------------------------------


def test_api_accuracy_beside_each_api_price(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The frontier table's "API accuracy, same items": 0.772 beside every Qwen3.8-27B price, and the column
    as printed for every configuration of econ_frontier.tsv."""
    rows = _economics(db, capsys)
    qwen = [r for r in rows if r["model"] == "Qwen3.8-27B" and r["api_provider"]]
    assert qwen and {r["api_accuracy"] for r in qwen} == {"0.772"}
    for c in FRONTIER:
        mine = [
            r for r in rows if (r["box"], r["arm"]) == (c.need("box"), c.need("arm")) and r["api_provider"]
        ]
        listed = {
            r["api_accuracy"]
            for r in mine
            if r["api_provider"] != "deepseek" and r["api_provider"] != "baidu"
        }
        assert listed == {c.text("api_accuracy") or ""}, c.need("arm")
    runs = {r.label: r for r in quality_runs(Store(db))}
    partial = runs["Qwen3.8-27B, Darkbloom FP4 pinned"]
    assert (partial.items, partial.accuracy) == (300, 0.727)
    assert partial.short == "stopped (HTTP 402): 300 items"
    assert runs["DeepSeek-V4-Flash, Relace FP4 pinned"].short == "stopped (HTTP 402): 130 items"
    assert runs["Qwen3.8-27B, OpenRouter default routing"].precision == "FP8/FP4"


# A6 ------------------------------------------------------------------------------------------------------


def test_model_index_in_report_exports(db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "RESUME.md"
    assert main(["--db", str(db), "report", "-o", str(out)]) == 0
    text = out.read_text()
    assert "GLM-5.3-Flash (46)" in text.split("## Task accuracy")[1].split("\n## ")[0]
    assert "gpt-oss-20b (-)" in text
    summary = _csv(capsys, "--db", str(db), "export", "summary")
    index = {r["model"]: r["aa_index"] for r in summary}
    assert index["Nemotron-3.5-Lightning-30B"] == "16 (estimate)"
    assert (index["GLM-5.3-Flash"], index["gpt-oss-20b"], index["Laguna-S-2.1"]) == ("46", "-", "")
    economics = _economics(db, capsys)
    assert {r["aa_index"] for r in economics if r["model"] == "DeepSeek-V4-Flash"} == {"41"}
    entry = economics_inputs(Store(db)).model_index["GLM-5.3-Flash"]
    assert (entry.version, entry.as_of, entry.index_name) == (
        "v4.2",
        "2026-09-05",
        "Artificial Analysis Intelligence Index",
    )
    assert "aa_index.tsv" in entry.provenance


def test_report_names_the_basis_and_the_fully_loaded_ratio(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "RESUME.md"
    assert main(["--db", str(db), "report", "--basis", "committed", "-o", str(out)]) == 0
    text = out.read_text()
    assert "node cost Scan committed, 70 %: $3.30/h" in text
    against = text.split("### Against the API")[1].split("\n## ")[0]
    assert "Break-even resale fill: 86.6 % (published; computed 85.2 % by" in against
    assert "| deepseek-v4-flash-dp4-ep-512 | market-median | $0.081 | 0.784 (403) |" in against


# C3 ------------------------------------------------------------------------------------------------------


def test_prose_figures_are_rows_with_text_provenance(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = _csv(capsys, "--db", str(db), "export", "summary")

    def one(arm: str, shape: str, c: str) -> dict[str, str]:
        key = (SEED_BOX, arm, shape, c)
        return next(r for r in rows if (r["box"], r["arm"], r["shape"], r["concurrency"]) == key)

    first_box = one("deepseek-v4-flash-dp4-ep-256", "router", "256")
    assert first_box["out_tok_per_s"] == "1289" and first_box["provenance"].count("text (the whole row")
    promptopt = one("glm-5.3-flash-dp2tp2-ep-384", "promptopt", "1024")
    assert (promptopt["out_tok_per_s"], promptopt["diagnostic_only"]) == ("2105", "yes")
    ds = one("deepseek-v4-flash-dp4-ep-512", "router", "1024")
    assert ds["tpot_ms_p50"] == "581" and "text (tpot_ms_p50" in ds["provenance"]
    assert one("glm-5.3-flash-fp8-tp4-32", "router", "32")["tpot_ms_p50"] == "51"
    assert "93 ms" in one("glm-5.3-flash-dp4-ep", "router", "1024")["provenance"]
    assert "200 ms" in one("glm-5.3-flash-tp4-256", "router", "256")["provenance"]
    assert "per stream 20 out tok/s" in one("qwen3.8-27b-nvfp4-b12x", "router", "256")["provenance"]


# C6 ------------------------------------------------------------------------------------------------------


def test_compare_across_the_two_boxes_prints_both_readings(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """gpt-oss-120b on the 600 W box against two TP4 groups on the 5090 box: 6.1x from the 600 W table and
    8.4x from the both-ways column (which repeats gpt-oss-20b's figures), TTFT 1.0 s or 0.7 s against 324 s."""
    assert main(["--db", str(db), "compare", "gpt-oss-120b-mxfp8", "gpt-oss-120b-tp4x2"]) == 0
    out = capsys.readouterr().out
    router = [line for line in out.splitlines() if line.strip().startswith("router:")]
    assert len(router) == 2
    assert (
        router[0].strip().startswith("router: 6.1x (9,948 out tok/s C2048, TTFT 1.0 s on seed-pro6000-600w")
    )
    assert router[0].endswith("TTFT 1.0 s vs 324 s")
    assert (
        router[1].strip().startswith("router: 8.4x (13,752 out tok/s C2048, TTFT 0.7 s on seed-pro6000-600w")
    )
    assert "(gpt-oss-120b measured both ways)" in router[1] and router[1].endswith("TTFT 0.7 s vs 324 s")
    assert "router/judge/TTFT equal gpt-oss-20b's 600 W rows" in out
    # The both-ways column is read beside the rows, never priced: gpt-oss-120b's frontier point is unchanged.
    row = next(r for r in _table(db) if (r.box, r.arm) == (SEED_BOX, "gpt-oss-120b-mxfp8"))
    assert _as_printed(row.node_per_mtok, "0.006") and row.rows == "router C2048 + promptopt C2048"


# The TUI --------------------------------------------------------------------------------------------------


async def test_economics_view_names_the_basis_and_shows_the_per_hour_table(db: Path, tmp_path: Path) -> None:
    """`5` Economics: the top bar names the basis, `b` cycles it, `h` shows the per-hour table with the
    write-up's printed row beside each configuration's computed one; the AA index and the API's accuracy
    are in the table."""
    app = ConsoleApp(
        db,
        read_only=True,
        clock=lambda: F.NOW,
        local_tz=ZoneInfo("Europe/London"),
        actions=F.FixedActions(read_only=True),
        keys_path=tmp_path / "no-keys.toml",
        refresh_s=None,
    )
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        await press(pilot, "5")
        assert "Scan list, 70 %: $4.40/h" in text_of(app, "#topbar")
        rows = {(r[6], r[0], r[4]): r for r in table_rows(app, "#economics-table")}
        qat = rows[(SEED_BOX, "qwen3.8-27b-nvfp4-qat-b12x", "$0.412 openrouter-list")]
        assert (qat[9], qat[11]) == ("0.772", "Qwen3.8-27B (41)")
        await press(pilot, "b")
        assert "Scan committed, 70 %: $3.30/h" in text_of(app, "#topbar")
        await press(pilot, "h")
        hours = table_rows(app, "#economics-table")
        muse = next(
            r
            for r in hours
            if r[0] == "muse-glimmer-30b-bf16" and r[1] == "router C1024" and "openrouter" in r[3]
        )
        assert muse[2] == "87 + 11" and muse[8] == "87 + 11 M, $38, 9x, 22x"
        assert "billed again as input" in text_of(app, "#economics-chart")


def _with(data: Path, name: str, *lines: str) -> None:
    path = data / name
    path.write_text(path.read_text().rstrip("\n") + "\n" + "\n".join(lines) + "\n")


def test_precision_rule_through_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The glm_perf3 FP8-KV arm of the recipes, given throughput as if it had served: `export economics` gives
    it no borrowed accuracy and the reason; with its own accuracy it stays off the frontier until a paired
    comparison against glm-5.3-flash-dp4-ep exists in the data, and then it stands on its own figures."""
    with resources.as_file(SEED_DIR) as seed:
        data = Path(shutil.copytree(seed, tmp_path / "seed"))
    arm, control = "glm-5.3-flash-dp4-ep-fp8kv", "glm-5.3-flash-dp4-ep"
    _with(
        data,
        "throughput.tsv",
        *(
            f"{arm}\t{SEED_BOX}\t{shape}\t1024\t{out}\t\t\t0\t0\ta test's figure: the arm never served\t\t\t\t"
            for shape, out in (("router", 1100), ("promptopt", 4000))
        ),
    )
    held = f"precision changed: needs its own paired quality run against {control}"

    def economics(db: Path) -> dict[str, str]:
        rows = _economics(db, capsys)
        return next(r for r in rows if (r["box"], r["arm"]) == (SEED_BOX, arm))

    first = tmp_path / "first.db"
    build_demo(Store(first), data_dir=data)
    row = economics(first)
    assert (row["accuracy"], row["held"], row["on_frontier"]) == ("", held, "no")
    _with(
        data,
        "quality.tsv",
        f"{arm}\t{SEED_BOX}\tGLM-5.3-Flash\t46\ta test's run\t403\t0.990\t\t\t\t\t\t\t",
    )
    second = tmp_path / "second.db"
    build_demo(Store(second), data_dir=data)
    row = economics(second)
    assert (row["accuracy"], row["accuracy_basis"], row["held"], row["on_frontier"]) == (
        "0.99",
        "measured",
        held,
        "no",
    )
    _with(
        data,
        "quality_runs.tsv",
        f"fp8kv test run\t{arm}\t{SEED_BOX}\tGLM-5.3-Flash\tseed 403-item suite\t403\t0.990\t\t\ta test's run",
    )
    _with(
        data,
        "quality_pairs.tsv",
        "comparison\tfp8kv test run\tGLM-5.3-Flash NVFP4 TP1 x DP4 + EP\t403\t80\t2\t0.990\t0.792\t\t\t\t\ttest\t",
    )
    third = tmp_path / "third.db"
    build_demo(Store(third), data_dir=data)
    row = economics(third)
    assert (row["held"], row["on_frontier"]) == ("", "yes")


@settings(max_examples=200, deadline=None)
@given(
    monthly=st.floats(100, 10_000),
    discount=st.floats(0, 0.5),
    eris=st.floats(0, 0.4),
    qualifying=st.floats(0, 1),
    resale=st.floats(0.1, 5),
    take=st.floats(0, 0.5),
    gpus=st.integers(1, 16),
    storage=st.floats(0, 100),
    use=st.floats(0.05, 0.95),
)
def test_break_even_fill_zeroes_the_fully_loaded_cost(
    monthly: float,
    discount: float,
    eris: float,
    qualifying: float,
    resale: float,
    take: float,
    gpus: int,
    storage: float,
    use: float,
) -> None:
    """The computed break-even is what its definition says for any parameters: at that resale fill the
    fully-loaded node costs nothing at that use (and the factor is list over fully loaded, to the cent)."""
    cost = dataclasses.replace(
        COST,
        monthly_gbp=monthly,
        commitment_discount=discount,
        eris_per_gbp=eris,
        eris_qualifying=qualifying,
        resale_usd_per_gpu_hour=resale,
        resale_platform_take=take,
        gpus=gpus,
        storage_gbp_per_month=storage,
    )
    even = cost.break_even(use)
    at_even = dataclasses.replace(cost, resale_fill=even.fill)
    assert at_even.gbp_per_active_hour("fully_loaded", use) == pytest.approx(0, abs=1e-6 * monthly)
    assert even.fill >= even.fill_without_storage


def test_an_operator_says_what_a_box_price_is(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`box set/add --price-basis --price-source`: the 400 W box, bought at Scan list like the others, prices
    as they do and says where its price comes from; `own` returns it to a price per hour of the month."""
    db = tmp_path / "state.db"
    build_demo(Store(db))
    source = "Scan list, as the write-up priced the 600 W boxes"
    argv = ["--db", str(db), "box", "set", "seed-pro6000-400w", "--price-per-hour", "3.082"]
    assert main([*argv, "--price-basis", "list", "--price-source", source]) == 0
    assert "price-basis = list" in capsys.readouterr().out
    row = next(r for r in _economics(db, capsys) if r["box"] == "seed-pro6000-400w")
    assert row["node_basis"] == "Scan list, 70 %: $4.40/h" and row["price_provenance"] == source
    assert main([*argv, "--price-basis", "own"]) == 0
    capsys.readouterr()
    row = next(r for r in _economics(db, capsys) if r["box"] == "seed-pro6000-400w")
    assert row["node_basis"] == "own price $3.08/h, 70 %: $4.40/h"
    with Store(db, read_only=True) as store:
        assert store.scalar("SELECT price_basis FROM boxes WHERE name = 'seed-pro6000-400w'") is None
    add = ["--db", str(db), "box", "add", "rented", "--ssh", "me@10.0.0.9", "--price-per-hour", "6.2"]
    assert main([*add, "--price-basis", "vast_on_demand", "--price-source", "Vast on-demand, 4 x $1.55"]) == 0
    with Store(db, read_only=True) as store:
        got = store.rows("SELECT price_basis, price_provenance FROM boxes WHERE name = 'rented'")
        assert got == [{"price_basis": "vast_on_demand", "price_provenance": "Vast on-demand, 4 x $1.55"}]
    capsys.readouterr()
    assert main([*argv, "--price-basis", "spot"]) == 2
    assert "invalid choice: 'spot'" in capsys.readouterr().err
    with Store(db) as store, pytest.raises(InputError, match="--price-basis 'spot': use one of own, list"):
        Service(store).set_box("seed-pro6000-400w", price_basis="spot")
