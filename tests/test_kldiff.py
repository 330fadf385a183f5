"""Logit-level divergence without a server: the KL rule on top-k lists, the contexts, the verdict rule against
the write-up's table, the rows the journal ingest writes, the demo import, the export and the Divergence view.
The same pieces against real CPU vLLM servers are tests/test_kldiff_vllm.py."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from agents.kldiff.client import root_url
from agents.kldiff.contexts import ContextError, default_contexts, load, parse
from agents.kldiff.divergence import FLOOR, Listed, compare, summarize
from agents.tripwire.items import ITEMS
from console.cli import main
from console.readmodel import KldiffVerdict, kldiff_run, kldiff_runs
from console.report import build_report
from console.service import KldiffOptions, Service
from console.store import Box, Store
from console.store.kldiff import KldiffError
from console.tui.app import ConsoleApp
from ops.demo import SEED_DIR, read_tsv
from ops.export import KLDIFF_COLUMNS
from testbed import tui_fixture as F
from testbed.tui_pilot import press, table_rows, text_of

T0 = 1_788_658_020_000


def side(probs: dict[int, float], k: int | None = None) -> Listed:
    """A server's listing: the top ``k`` of ``probs`` with ranks (all of them by default)."""
    ranked = sorted(probs, key=lambda t: -probs[t])
    k = k or len(ranked)
    return Listed.of({t: (math.log(probs[t]), i + 1) for i, t in enumerate(ranked[:k])}, k)


def exact_kl(p: dict[int, float], q: dict[int, float]) -> float:
    return sum(p[t] * math.log(p[t] / q[t]) for t in p)


# -- the rule on top-k lists -----------------------------------------------------------------------------
def test_identical_listings_agree_exactly() -> None:
    p = {1: 0.5, 2: 0.3, 3: 0.15, 4: 0.05}
    position = compare(side(p, 3), side(p, 3))
    assert (
        position.kl == 0.0 and position.top1_agree and position.top_overlap == 1.0 and position.missing == 0
    )


def test_full_listings_give_the_exact_kl() -> None:
    p = {1: 0.5, 2: 0.3, 3: 0.2}
    q = {1: 0.4, 2: 0.4, 3: 0.2}
    assert compare(side(p), side(q)).kl == pytest.approx(exact_kl(p, q), abs=1e-12)


def test_a_token_one_side_did_not_list_gets_its_share_of_the_residual_capped_at_the_kth() -> None:
    # a lists {1: 0.6, 2: 0.3} (residual 0.1); b lists {1: 0.5, 3: 0.4} (residual 0.1).
    a = Listed.of({1: (math.log(0.6), 1), 2: (math.log(0.3), 2)}, 2)
    b = Listed.of({1: (math.log(0.5), 1), 3: (math.log(0.4), 2)}, 2)
    # a lacks token 3: share = min(0.1 / 2, 0.3) = 0.05, rest 0.05; b lacks token 2 likewise: 0.05, rest 0.05.
    pa = {1: 0.6, 2: 0.3, 3: 0.05, "rest": 0.05}
    pb = {1: 0.5, 2: 0.05, 3: 0.4, "rest": 0.05}
    position = compare(a, b)
    assert position.kl == pytest.approx(sum(pa[t] * math.log(pa[t] / pb[t]) for t in pa), abs=1e-12)
    assert position.missing == 2 and position.top1_agree
    # The cap: a side whose k-th token is rare cannot give an unlisted token more than that.
    peaked = Listed.of({1: (math.log(0.5), 1), 2: (math.log(0.01), 2)}, 2)  # residual 0.49, k-th 0.01
    wide = Listed.of({1: (math.log(0.5), 1), 3: (math.log(0.3), 2)}, 2)
    kl_capped = compare(wide, peaked).kl
    pw = {1: 0.5, 3: 0.3, 2: min(0.2 / 2, 0.3), "rest": 0.2 - 0.1}
    pp = {1: 0.5, 2: 0.01, 3: 0.01, "rest": 0.49 - 0.01}
    assert kl_capped == pytest.approx(sum(pw[t] * math.log(pw[t] / pp[t]) for t in pw), abs=1e-12)


def test_the_real_next_token_counts_as_listed_not_as_top_k_and_kl_is_never_negative() -> None:
    a = Listed.of({1: (math.log(0.7), 1), 2: (math.log(0.2), 2), 9: (math.log(0.001), 57)}, 2)
    assert a.top == (1, 2) and a.kth_logprob == pytest.approx(math.log(0.2))
    # Sums a hair over 1 (rounding on the server) leave no residual: floored, finite, not negative.
    over = Listed.of({1: (math.log(0.7000001), 1), 2: (math.log(0.3), 2)}, 2)
    under = Listed.of({1: (math.log(0.7), 1), 5: (math.log(0.3), 2)}, 2)
    assert 0.0 <= compare(over, over).kl < 1e-9
    assert math.isfinite(compare(under, over).kl) and compare(under, over).kl > 0.3 * math.log(0.3 / 0.15)
    assert FLOOR > 0


def test_summary_figures() -> None:
    p, q = {1: 0.6, 2: 0.4}, {1: 0.4, 2: 0.6}
    positions = [compare(side(p), side(p))] * 3 + [compare(side(p), side(q))]
    summary = summarize(positions)
    assert summary.positions == 4 and summary.top1_agreement == 0.75
    assert summary.mean_kl == pytest.approx(exact_kl(p, q) / 4) and summary.p50_kl == 0.0
    assert summary.max_kl == pytest.approx(exact_kl(p, q)) and 0 < summary.p99_kl <= summary.max_kl
    with pytest.raises(ValueError):
        summarize([])


# -- contexts and URLs -------------------------------------------------------------------------------------
def test_contexts_default_file_and_refusals(tmp_path: Path) -> None:
    built_in = default_contexts()
    assert len(built_in) == len(ITEMS) and built_in[0].messages is not None
    assert built_in[0].tokenize_body() == {
        "messages": list(built_in[0].messages),
        "add_generation_prompt": False,
    }
    asking = parse([{"messages": [{"role": "user", "content": "Hi?"}], "continuation": "Hello"}], "x")[0]
    assert asking.tokenize_body()["add_generation_prompt"] is True and asking.continuation == "Hello"
    assert parse(["plain text"], "x")[0].tokenize_body() == {
        "prompt": "plain text",
        "add_special_tokens": True,
    }
    path = tmp_path / "contexts.json"
    path.write_text(json.dumps([{"prompt": "def f(x):", "continuation": " return x"}]))
    assert load(str(path), None)[0].continuation == " return x"
    for bad, why in (
        ([], "non-empty JSON list"),
        ([{"prompt": "a", "messages": []}], "exactly one of"),
        ([{"prompt": ""}], "'prompt' must be"),
        ([{"messages": [{"role": "user"}]}], "'messages' must"),
        ([{"prompt": "a", "continuation": 3}], "'continuation' must"),
    ):
        with pytest.raises(ContextError, match=why):
            parse(bad, "f.json")
    path.write_text("[{")
    with pytest.raises(ContextError, match=r"contexts.json: not JSON .* line 1"):
        load(str(path), None)
    with pytest.raises(ContextError, match="no-such"):
        load(str(tmp_path / "no-such.json"), None)


def test_a_base_url_with_or_without_v1_names_the_same_server() -> None:
    assert {
        root_url(u) for u in ("http://h:8100", "http://h:8100/", "http://h:8100/v1", "http://h:8100/v1/")
    } == {"http://h:8100"}


def test_the_agent_starts_kldiff_with_its_flags_and_the_contexts_as_json() -> None:
    from agents.jobs import tool_argv

    argv = tool_argv(
        "kldiff",
        {
            "kldiff_id": "k",
            "a": "http://127.0.0.1:1",
            "b": "http://127.0.0.1:2",
            "model": "m",
            "contexts": ["hello"],
            "top_k": 5,
            "arm_a": "not a flag",
            "python": "/x/python",
        },
    )
    assert argv == [
        "--a",
        "http://127.0.0.1:1",
        "--b",
        "http://127.0.0.1:2",
        "--model",
        "m",
        "--contexts-json",
        '["hello"]',
        "--top-k",
        "5",
        "--json",
        "--quiet",
    ]


# -- the verdict rule ----------------------------------------------------------------------------------------
def test_every_row_of_the_seed_table_reproduces_its_verdict() -> None:
    floors: dict[str, float] = {}
    checked = 0
    for c in read_tsv(SEED_DIR / "kldiff.tsv"):
        mean = c.need("mean_kl", float)
        if c.need("role") == "control":
            floors[c.need("label")] = mean
        control = c.text("control")
        verdict = KldiffVerdict.of(c.need("role"), mean, floors[control] if control else None)
        printed = c.text("as_printed")
        if printed:
            assert verdict.text.startswith(printed), (c.where, verdict.text, printed)
            checked += 1
    assert checked == 7  # the write-up's four rows, the gpt-oss pair and both controls


def test_verdict_words_and_order() -> None:
    floor = 0.0184
    below, just, times = (KldiffVerdict.of("pair", m, floor) for m in (0.00158, 0.02555, 0.14515))
    assert (below.word, just.word, times.word) == ("below floor", "just above", "7x floor")
    assert below.rank < just.rank < times.rank and times.times == 7
    assert KldiffVerdict.of("pair", floor, floor).kind == "below"  # at the floor is not above it
    assert KldiffVerdict.of("pair", 2 * floor, floor).text == "excess KL +0.018, as large as the floor"
    assert KldiffVerdict.of("pair", 3 * floor, floor).text == "excess KL +0.037, twice the floor"
    assert KldiffVerdict.of("pair", 30 * floor, floor).text == "excess KL +0.534, 29 times the floor"
    exact = KldiffVerdict.of("pair", 0.00003, 0.0)
    assert (
        exact.kind == "exact-floor"
        and exact.rank == times.rank
        and "+3.0e-05 over an exact floor" in exact.text
    )
    assert KldiffVerdict.of("pair", 0.0, 0.0).kind == "below"
    assert (
        KldiffVerdict.of("pair", 0.1, None).kind == "none"
        and "no control" in KldiffVerdict.of("pair", 0.1, None).text
    )
    assert KldiffVerdict.of("control", 0.0184, None).text == "the noise floor"


# -- rows from the journal -----------------------------------------------------------------------------------
FIGURES = {
    "contexts": 20,
    "positions": 995,
    "positions_available": 995,
    "top_k": 20,
    "top5_overlap": 0.98,
    "p50_kl": 0.0,
    "p99_kl": 0.1,
    "missing_token_method": "union ...",
    "model": "m",
    "model_b": "m",
}


KERNELS = {  # the linear kernel each arm's engine selected, as vLLM prints it (tests/fixtures/vllm_logs/kernel-lines.tsv)
    "qwen-b12x": "Using B12xNvFp4LinearKernel for NVFP4 GEMM",
    "qwen-flashinfer": "Using FlashInferB12xNvFp4LinearKernel for NVFP4 GEMM",
}


def _launches(box: str, *arms: tuple[str, str]) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for launch_id, arm in arms:
        events += [
            {"kind": "launch_state", "launch_id": launch_id, "arm": arm, "state": "serving", "port": 8100},
            {"kind": "kernel_line", "launch_id": launch_id, "category": "linear", "line": KERNELS[arm]},
            {
                "kind": "kernel_line",
                "launch_id": launch_id,
                "category": "config",
                "line": "KernelConfig(...)",
            },
        ]
    return events


def _batch(store: Store, box: str, events: list[dict[str, Any]]) -> dict[str, str]:
    """Ingest ``events`` as the box's next journal seqs (the sequence continues the cursor)."""
    first = store.ingest.cursor(box) + 1
    report = store.ingest.batch(
        box, [{"v": 1, "seq": first + i, "t_ms": T0 + i, **e} for i, e in enumerate(events)]
    )
    return report.journal_only


def _command(store: Store, run_id: str, **args: object) -> None:
    store.commands.add(run_id, "pro-a", "kldiff", {"kldiff_id": run_id, **args})


@pytest.fixture
def measured(tmp_path: Path) -> Iterator[Store]:
    store = Store(tmp_path / "state.db", clock=lambda: T0)
    store.boxes.add(Box(name="pro-a", host="203.0.113.7", ssh_user="root"))
    _batch(
        store,
        "pro-a",
        _launches("pro-a", ("L1", "qwen-b12x"), ("L2", "qwen-b12x"), ("L3", "qwen-flashinfer")),
    )
    _command(store, "K0", launch_a="L1", launch_b="L2", arm_a="qwen-b12x", arm_b="qwen-b12x", role="control")
    _command(
        store,
        "K1",
        launch_a="L1",
        launch_b="L3",
        arm_a="qwen-b12x",
        arm_b="qwen-flashinfer",
        role="pair",
        control_run_id="K0",
        contexts=[{"prompt": "the operator's own context list"}],
    )
    journal_only = _batch(
        store,
        "pro-a",
        [
            {
                "kind": "kldiff_result",
                "kldiff_id": "K0",
                "launch_id": "L1",
                "result": {**FIGURES, "top1_agreement": 0.9615, "mean_kl": 0.0184},
            },
            {
                "kind": "kldiff_result",
                "kldiff_id": "K1",
                "launch_id": "L1",
                "result": {**FIGURES, "top1_agreement": 0.8190, "mean_kl": 0.14515},
            },
        ],
    )
    assert journal_only == {}
    yield store
    store.close()


def test_ingest_writes_the_pair_beside_its_control_and_kernels(measured: Store) -> None:
    control, pair = kldiff_run(measured, "K0"), kldiff_run(measured, "K1")
    assert control is not None and pair is not None
    assert control.role == "control" and control.verdict.text == "the noise floor"
    assert (pair.arm_a, pair.arm_b, pair.launch_a, pair.launch_b) == (
        "qwen-b12x",
        "qwen-flashinfer",
        "L1",
        "L3",
    )
    assert (pair.kernel_a, pair.kernel_b) == (
        KERNELS["qwen-b12x"],
        KERNELS["qwen-flashinfer"],
    )  # config left out
    assert pair.contexts == 20 and pair.positions == 995  # the tool's count, not the command's context list
    assert (pair.control_id, pair.control_mean_kl, pair.control_top1_agreement) == (
        control.id,
        0.0184,
        0.9615,
    )
    assert pair.excess_kl == pytest.approx(0.12675)
    assert pair.verdict.text == "excess KL +0.127, seven times the floor"
    assert (
        pair.recorded_verdict is None
    )  # judged by the service once it has the row (tests/test_kldiff_vllm.py)
    assert (
        json.loads(measured.scalar("SELECT raw FROM kldiff_runs WHERE run_id = 'K1'"))["mean_kl"] == 0.14515
    )


def test_a_failed_run_is_a_failed_command_and_a_bad_row_stays_in_the_journal(measured: Store) -> None:
    _command(measured, "K2", launch_a="L1", launch_b="L3", arm_a="a", arm_b="b", control_run_id="K-missing")
    _command(measured, "K3", launch_a="L1", launch_b="L3", arm_a="a", arm_b="b")
    journal_only = _batch(
        measured,
        "pro-a",
        [
            {
                "kind": "kldiff_result",
                "kldiff_id": "K2",
                "launch_id": "L1",
                "result": {**FIGURES, "mean_kl": 0.1},
            },
            {
                "kind": "kldiff_result",
                "kldiff_id": "K3",
                "launch_id": "L1",
                "result": {"error": "the servers tokenize context 0 differently"},
            },
        ],
    )
    assert "control run K-missing is not in this state.db" in journal_only["kldiff_result"]
    assert kldiff_run(measured, "K2") is None and kldiff_run(measured, "K3") is None
    command = measured.commands.get("K3")
    assert command.state == "failed" and "tokenize context 0 differently" in (command.error or "")
    with pytest.raises(KldiffError, match="negative"):
        measured.kldiff.add_run({"arm_a": "a", "arm_b": "b", "raw": {"mean_kl": -0.1}})


def test_the_handover_reads_each_measured_pair_against_its_floor(measured: Store) -> None:
    text = build_report(measured, now_ms=T0 + 3_600_000, operator_tz="UTC")
    section = text.split("## Logit-level divergence (measured)")[1].split("\n## ")[0]
    row = next(line for line in section.splitlines() if "qwen-flashinfer" in line)
    assert "| qwen-b12x | qwen-flashinfer |" in row and KERNELS["qwen-flashinfer"] in row
    assert "| 81.9% | 0.1452 | 0.0184 | excess KL +0.127, seven times the floor |" in row
    assert (
        sum("| qwen-b12x |" in line for line in section.splitlines()) == 1
    )  # the control is the floor column
    assert "(imported" not in text
    # A pair measured after the handover's instant is not in it: a report is reproducible.
    assert "Logit-level divergence" not in build_report(measured, now_ms=T0 - 1, operator_tz="UTC")


async def test_the_service_refuses_a_pair_it_cannot_measure(measured: Store, tmp_path: Path) -> None:
    measured.boxes.add(Box(name="pro-b", host="203.0.113.8", ssh_user="root"))
    _batch(
        measured,
        "pro-b",
        _launches("pro-b", ("L9", "qwen-b12x"))
        + [{"kind": "launch_state", "launch_id": "L8", "arm": "qwen-b12x", "state": "stopped"}],
    )
    service = Service(measured)
    try:
        for a, b, control, why in (
            ("L1", "L9", None, "on one box"),
            ("L1", "L1", None, "twice"),
            ("L1", "L8", None, "not serving"),
            ("L1", "L3", ("L2", "L9"), "on one box"),
            ("L1", "nope", None, "no launch 'nope'"),
        ):
            with pytest.raises(Exception, match=why):
                await service.kldiff(a, b, control, KldiffOptions())
    finally:
        await service.close()
    assert measured.scalar("SELECT count(*) FROM commands WHERE op = 'kldiff' AND id NOT LIKE 'K%'") == 0


def test_the_cli_checks_a_contexts_file_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "s.db")
    bad = tmp_path / "contexts.json"
    bad.write_text(json.dumps([{"prompt": ""}]))
    assert main(["--db", db, "kldiff", "L1", "L2", "--contexts", str(bad)]) == 2
    assert "'prompt' must be a non-empty string" in capsys.readouterr().err


# -- the demo, the export, the view --------------------------------------------------------------------------
def test_the_demo_imports_the_seed_tables_with_their_verdicts(demo: Path) -> None:
    with Store(demo, read_only=True) as store:
        runs = kldiff_runs(store)
    assert len(runs) == 10 and {r.source for r in runs} == {"imported"}
    by_pair = {(r.model, r.arm_a, r.arm_b, r.box): r for r in runs}
    nvfp4 = by_pair[("Qwen3.8-27B", "qwen3.8-27b-nvfp4-b12x", "qwen3.8-27b-fp8-b12x", "seed-pro6000-600w")]
    assert (nvfp4.top1_agreement, nvfp4.mean_kl, nvfp4.control_mean_kl, nvfp4.positions) == (
        0.8190,
        0.14515,
        0.0184,
        104,
    )
    assert (
        nvfp4.kernel_a == "B12xNvFp4 W4A4 (b12x)"
        and nvfp4.kernel_b == "B12xFp8BlockScaledMM (FP8 checkpoint)"
    )
    assert all(r.recorded_verdict == r.verdict.text for r in runs)
    ladder = {r.arm_b: r.verdict.text for r in runs if r.box == "seed-pro6000-400w" and r.role == "pair"}
    assert ladder == {
        "qwen3.8-27b-nvfp4-qat-b12x": "excess KL +0.076, thirteen times the floor",
        "qwen3.8-27b-fp8-b12x": "excess KL +0.012, twice the floor",
        "qwen3.8-27b-nvfp4-b12x": "excess KL +0.091, fifteen times the floor",
    }
    gptoss = next(r for r in runs if r.model == "gpt-oss" and r.role == "pair")
    assert (gptoss.top5_overlap, gptoss.control_top1_agreement, gptoss.box) == (0.965, 0.988, None)
    assert gptoss.verdict.text == "excess KL +0.054, ten times the floor"


def test_export_kldiff(demo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--db", str(demo), "export", "kldiff", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 10 and list(rows[0]) == list(KLDIFF_COLUMNS)
    kernels = next(r for r in rows if r["arm_b"] == "qwen3.8-27b-nvfp4-flashinfer-b12x")
    assert kernels["verdict"] == "below the floor" and kernels["control_mean_kl"] == 0.0184
    assert main(["--db", str(demo), "export", "kldiff"]) == 0
    header, *lines = capsys.readouterr().out.splitlines()
    cells = dict(
        zip(header.split("\t"), next(x for x in lines if "flashinfer-b12x" in x).split("\t"), strict=True)
    )
    assert cells["mean_kl"] == "0.00158" and cells["excess_kl"] == "-0.01682"  # divergences keep their digits
    gptoss = dict(
        zip(
            header.split("\t"),
            next(x for x in lines if "bf16 KV cache" in x and "gpt-oss" in x).split("\t"),
            strict=True,
        )
    )
    assert gptoss["kernel_a"] == "not recorded" and gptoss["positions"] == ""


def test_the_handover_keeps_imported_divergence_apart(demo: Path) -> None:
    with Store(demo, read_only=True) as store:
        text = build_report(store, now_ms=T0, operator_tz="UTC")
        pairs = sum(r.role == "pair" for r in kldiff_runs(store))
    assert "## Logit-level divergence (measured)" not in text
    section = text.split("## Logit-level divergence (imported: someone else's measurements)")[1].split(
        "\n## "
    )[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "verdict" not in line]
    assert len(rows) == pairs > 0
    assert any("qwen3.8-27b-nvfp4-flashinfer-b12x" in r and r.endswith("| below the floor |") for r in rows)


async def test_the_divergence_view_from_results(demo: Path) -> None:
    app = ConsoleApp(
        demo,
        read_only=True,
        clock=lambda: F.NOW,
        local_tz=ZoneInfo("Europe/London"),
        actions=F.FixedActions(read_only=True),
        keys_path=demo.with_name("no-keys.toml"),
        refresh_s=None,
    )
    async with app.run_test(size=(160, 40)) as pilot:
        await press(pilot, "4", "d")
        assert app.current_mode == "divergence"
        rows = table_rows(app, "#divergence-table")
        verdicts = {r[0]: r[5] for r in rows}
        assert verdicts["qwen3.8-27b-nvfp4-b12x vs qwen3.8-27b-nvfp4-flashinfer-b12x"] == "below floor"
        assert verdicts["Qwen3.8-27B, fp8 KV cache vs Qwen3.8-27B, bf16 KV cache"] == "just above"
        assert verdicts["qwen3.8-27b-nvfp4-b12x vs qwen3.8-27b-fp8-b12x"] == "7x floor"
        assert rows[0][0].startswith("control: ") and rows[0][5] == "floor"
        await press(pilot, "down", "down", "down")
        detail = text_of(app, "#divergence-detail")
        assert "verdict: excess KL +0.127, seven times the floor" in detail
        assert (
            "control Qwen3.8-27B, one configuration (not named) vs" in detail and "B12xNvFp4 W4A4" in detail
        )
        await press(pilot, "slash")
        await pilot.press(*"gpt-oss")
        await press(pilot, "enter")
        assert {r[0] for r in table_rows(app, "#divergence-table")} == {
            "control: gpt-oss, fp8 KV cache vs gpt-oss, fp8 KV cache",
            "gpt-oss, fp8 KV cache vs gpt-oss, bf16 KV cache",
        }
        await press(pilot, "escape")  # back where it came from
        assert app.current_mode == "results"
        await press(
            pilot, "d", "d"
        )  # `d` goes to the Divergence table and, there, back to the throughput rows
        assert app.current_mode == "results"
