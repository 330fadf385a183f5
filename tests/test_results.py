"""The result records and the exports: a measured state.db (built through the real journal ingest) read
through console.readmodel and out to TSV/CSV/JSON, with the kernel line, tripwire verdict and power limit
beside every number."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from console.cli import main
from console.readmodel import TripwireVerdict, bench_rows, bench_run, tripwire_run
from console.store import Box, Store
from console.store.results import ResultError
from ops.export import KERNEL_COLUMNS, SUMMARY_COLUMNS

T0 = 1_788_658_020_000  # 2026-09-06 01:27:00 UTC

LOADGEN = {  # the load generator's JSON for one run, as the agent journals it
    "shape": "router",
    "concurrency": 256,
    "input_len": 1024,
    "output_len": 128,
    "prefix_len": 0,
    "prompts": 1536,
    "seed": 7,
    "requests": 1536,
    "failed": 0,
    "duration_s": 45.8,
    "req_per_s": 33.5,
    "in_tok_per_s": 34304.0,
    "out_tok_per_s": 4288.0,
    "total_tok_per_s": 38592.0,
    "ttft_ms_p50": 410.0,
    "ttft_ms_p99": 1900.0,
    "tpot_ms_p50": 52.0,
    "tpot_ms_p99": 61.5,
    "itl_ms_p50": 50.1,
    "itl_ms_p99": 88.0,
    "e2e_ms_p50": 7100.0,
    "e2e_ms_p99": 9800.0,
    "client_cpu": 0.97,
    "client_bound": True,
}


# Real selection lines (tests/fixtures/vllm_logs/kernel-lines.tsv): the kernel line stores them as printed.
LINEAR = (
    "(EngineCore pid=311) INFO 09-06 01:27:12 [__init__.py:1240] Using B12xNvFp4LinearKernel for NVFP4 GEMM"
)
ATTENTION = (
    "(EngineCore pid=207) INFO 04-19 10:02:39 [cuda.py:368] Using FLASHINFER attention backend out of "
    "potential backends: ['FLASHINFER', 'TRITON_ATTN']."
)


def _events(first_seq: int, *events: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"v": 1, "seq": first_seq + i, "t_ms": T0 + i * 1000, **e} for i, e in enumerate(events)]


@pytest.fixture
def measured(tmp_path: Path) -> Path:
    """A state.db with two launches on one box: one clean arm and one whose tripwire fails."""
    path = tmp_path / "state.db"
    with Store(path, clock=lambda: T0) as store:
        store.boxes.add(Box(name="pro-a", host="203.0.113.7", ssh_user="root", price_per_hour=3.08))
        store.ingest.batch(
            "pro-a",
            _events(
                1,
                {
                    "kind": "launch_state",
                    "launch_id": "L1",
                    "arm": "qwen-b12x",
                    "state": "serving",
                    "gpus": [0, 1],
                },
                {"kind": "kernel_line", "launch_id": "L1", "category": "linear", "line": LINEAR},
                {"kind": "kernel_line", "launch_id": "L1", "category": "attention", "line": ATTENTION},
                {
                    "kind": "gpu_sample",
                    "gpus": [
                        {"gpu": 0, "enforced_limit_w": 600.0, "power_limit_w": 600.0},
                        {"gpu": 1, "enforced_limit_w": 400.0, "power_limit_w": 400.0},
                        {"gpu": 2, "enforced_limit_w": 300.0, "power_limit_w": 300.0},
                    ],
                },
                {"kind": "bench_result", "bench_id": "B1", "launch_id": "L1", "result": LOADGEN},
                {
                    "kind": "tripwire_result",
                    "tripwire_id": "T1",
                    "launch_id": "L1",
                    "result": {"ok": 20, "degenerate": 0, "wrong": 0, "total": 20, "passed": True},
                },
                {
                    "kind": "launch_state",
                    "launch_id": "L2",
                    "arm": "glm-dp2tp2",
                    "state": "serving",
                    "gpus": [2],
                },
                {
                    "kind": "bench_result",
                    "bench_id": "B2",
                    "launch_id": "L2",
                    "result": {**LOADGEN, "out_tok_per_s": 1300.0, "client_bound": False},
                },
                {
                    "kind": "tripwire_result",
                    "tripwire_id": "T2",
                    "launch_id": "L2",
                    "result": {"ok": 11, "degenerate": 8, "wrong": 1, "total": 20, "passed": False},
                },
                {
                    "kind": "launch_state",
                    "launch_id": "L3",
                    "arm": "ds-b12x-moe",
                    "state": "failed",
                    "reason": "b12x MXFP4 MoE backend refuses dp_size=4",
                },
            ),
        )
    return path


def test_bench_rows_carry_kernel_power_and_tripwire(measured: Path) -> None:
    with Store(measured, read_only=True) as store:
        rows = {r.arm: r for r in bench_rows(store)}
    clean, bad = rows["qwen-b12x"], rows["glm-dp2tp2"]
    assert clean.kernel_line == f"{LINEAR} | {ATTENTION}"
    assert clean.power_limit_w == 400.0  # the lowest enforced limit among the launch's GPUs 0 and 1
    assert (
        clean.tripwire.text == "20/20 ok" and clean.tripwire.word == "ok" and clean.diagnostic_only is False
    )
    assert clean.client_bound is True and clean.started_ms == T0 + 4000 and clean.marks == "CLIENT-BOUND"
    # The tripwire arrived after the bench: it still reaches the row and marks it diagnostic-only.
    assert bad.tripwire.text == "FAILED 11/20 ok, 8 degenerate, 1 wrong" and bad.diagnostic_only is True
    assert bad.tripwire.word == "DEGEN" and bad.marks == "DIAGNOSTIC-ONLY"
    assert bad.power_limit_w == 300.0 and bad.kernel_line is None


def test_bench_and_tripwire_runs_by_the_command_that_asked(measured: Path) -> None:
    with Store(measured, read_only=True) as store:
        bench = bench_run(store, "B1")
        run = tripwire_run(store, "T2")
        assert bench_run(store, "nope") is None and tripwire_run(store, "nope") is None
    assert bench is not None and (bench.arm, bench.launch_id, bench.requests, bench.failed) == (
        "qwen-b12x",
        "L1",
        1536,
        0,
    )
    assert bench.ttft_ms_p99 == 1900.0 and bench.tripwire.text == "20/20 ok"
    assert run is not None and (run.arm, run.box, run.launch_id) == ("glm-dp2tp2", "pro-a", "L2")
    assert (
        run.verdict == TripwireVerdict(11, 8, 1, 20, passed=False) and run.verdict.failed and run.items == ()
    )


def test_tripwire_items_are_parsed(tmp_path: Path) -> None:
    items = [
        {"id": "math-1", "verdict": "ok", "reasons": [], "reasoning_leak": None},
        {
            "id": "code-2",
            "verdict": "degenerate",
            "reasons": ["repeats a 12-token span 9 times"],
            "reasoning_leak": "<think> in the answer",
        },
    ]
    with Store(tmp_path / "s.db", clock=lambda: T0) as store:
        store.results.add_tripwire_run(
            {
                "arm": "a",
                "ok": 1,
                "degenerate": 1,
                "wrong": 0,
                "total": 2,
                "passed": False,
                "reasoning_leak": 1,
                "items": items,
                "run_id": "tw-1",
            }
        )
        run = tripwire_run(store, "tw-1")
    assert run is not None and run.verdict.word == "LEAK"
    assert [(i.id, i.verdict, i.reasons, i.reasoning_leak) for i in run.items] == [
        ("math-1", "ok", (), None),
        ("code-2", "degenerate", ("repeats a 12-token span 9 times",), "<think> in the answer"),
    ]


def test_bad_rows_are_refused_with_the_field(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as store:
        with pytest.raises(ResultError, match="'shape'"):
            store.results.add_bench_run({"arm": "a", "concurrency": 8})
        with pytest.raises(ResultError, match="degenerate"):
            store.results.add_tripwire_run({"arm": "a", "ok": 1, "wrong": 0, "total": 1, "passed": True})
        with pytest.raises(ResultError, match="outside 0..1"):
            store.results.add_eval_run({"model": "m", "configuration": "c", "items": 10, "overall": 8.1})


def test_tripwire_words() -> None:
    assert TripwireVerdict.of(None, None, None, None, None).text == "not recorded"
    assert TripwireVerdict.of(None, None, None, None, None).word == "none"
    assert (
        TripwireVerdict.of(19, 0, 0, 20, 1).text == "19/20 ok"
    )  # split not published: only ok/total claimed
    assert TripwireVerdict.of(18, 1, 1, 20, 1).text == "18/20 ok, 1 degenerate, 1 wrong"
    assert TripwireVerdict.of(20, 0, 0, 20, 0, 1).text == "FAILED 20/20 ok, reasoning leaked"
    assert [
        TripwireVerdict.of(*c).word
        for c in ((20, 0, 0, 20, 1), (20, 0, 0, 20, 0, 1), (11, 8, 1, 20, 0), (15, 1, 4, 20, 0))
    ] == ["ok", "LEAK", "DEGEN", "WRONG"]


def test_summary_tsv_round_trip(measured: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "summary_all.tsv"
    assert main(["--db", str(measured), "export", "summary", "-o", str(out)]) == 0
    assert "wrote 2 rows" in capsys.readouterr().err
    reader = csv.DictReader(io.StringIO(out.read_text()), delimiter="\t")
    assert tuple(reader.fieldnames or ()) == SUMMARY_COLUMNS
    rows = {r["arm"]: r for r in reader}
    clean = rows["qwen-b12x"]
    assert clean["box"] == "pro-a" and clean["shape"] == "router" and clean["concurrency"] == "256"
    assert float(clean["out_tok_per_s"]) == 4288 and float(clean["total_tok_per_s"]) == 38592
    assert float(clean["ttft_ms_p99"]) == 1900 and float(clean["itl_ms_p50"]) == 50.1
    assert float(clean["e2e_ms_p99"]) == 9800 and float(clean["req_per_s"]) == 33.5
    assert clean["kernel_line"] == f"{LINEAR} | {ATTENTION}"
    assert clean["tripwire"] == "20/20 ok" and float(clean["power_limit_w"]) == 400
    assert clean["client_bound"] == "yes" and clean["diagnostic_only"] == "no"
    assert clean["source"] == "measured" and clean["started_utc"] == "2026-09-06T01:27:04+00:00"
    assert rows["glm-dp2tp2"]["diagnostic_only"] == "yes"
    assert rows["glm-dp2tp2"]["kernel_line"] == "not recorded"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".summary_all")]  # no temp file left


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_other_formats_mark_diagnostic_rows(
    measured: Path, fmt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--db", str(measured), "export", "summary", "--format", fmt]) == 0
    text = capsys.readouterr().out
    if fmt == "json":
        rows = {r["arm"]: r for r in json.loads(text)}
        assert rows["glm-dp2tp2"]["diagnostic_only"] is True and rows["qwen-b12x"]["diagnostic_only"] is False
        assert rows["glm-dp2tp2"]["tripwire"].startswith("FAILED")
        assert rows["qwen-b12x"]["out_tok_per_s"] == 4288.0
    else:
        rows = {r["arm"]: r for r in csv.DictReader(io.StringIO(text))}
        assert rows["glm-dp2tp2"]["diagnostic_only"] == "yes"
        assert rows["qwen-b12x"]["kernel_line"].startswith(LINEAR)


def test_kernels_by_server(measured: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--db", str(measured), "export", "kernels"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out), delimiter="\t"))
    assert tuple(rows[0]) == KERNEL_COLUMNS
    lines = [(r["launch_id"], r["category"], r["line"]) for r in rows]
    assert ("L1", "linear", LINEAR) in lines
    assert ("L2", "", "none recorded") in lines  # a server that printed nothing is a row, not an omission
    failed = next(r for r in rows if r["launch_id"] == "L3")
    assert failed["state"] == "failed" and "dp_size=4" in failed["failure_reason"]


def test_export_errors_are_specific(
    measured: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--db", str(measured), "export", "summary", "-o", str(tmp_path / "no" / "x.tsv")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["--db", str(measured), "export", "summary", "-o", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err
    assert main(["--db", str(tmp_path / "missing.db"), "export", "summary"]) == 2
    assert "no such database" in capsys.readouterr().err
    assert not (tmp_path / "missing.db").exists()  # exporting never creates a database


def test_report_separates_measured_and_failures(measured: Path, tmp_path: Path) -> None:
    out = tmp_path / "RESUME.md"
    assert main(["--db", str(measured), "report", "-o", str(out), "--tz", "Europe/London"]) == 0
    text = out.read_text()
    measured_part = text.split("## Best measured rows per model")[1].split("##")[0]
    assert "qwen-b12x" in measured_part and "glm-dp2tp2" not in measured_part  # diagnostic-only left out
    failures = text.split("## Open failures")[1].split("##")[0]
    assert "b12x MXFP4 MoE backend refuses dp_size=4" in failures
    assert "FAILED 11/20 ok, 8 degenerate, 1 wrong" in failures
    assert "No timer is armed" in text and "imported" not in measured_part


def test_report_timers_in_utc_and_local(measured: Path) -> None:
    from console.report import build_report

    with Store(measured, clock=lambda: T0) as store:
        store.timers.add("pro-a", T0 + 3 * 3600_000, "stop-arms", "04:27 UTC", now_ms=T0)
        text = build_report(store, now_ms=T0, operator_tz="Europe/London")
    timers = text.split("## Timers")[1].split("##")[0]
    assert "2026-09-06 04:27:00 UTC" in timers and "05:27:00 BST (+01:00)" in timers
    assert "3h00m" in timers and "box zone unknown" in timers  # never guessed from the console's zone


def test_report_refuses_an_unknown_zone_even_with_no_timer(
    measured: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A typo in --tz is caught the first time, not on the day a timer makes the zone matter."""
    out = tmp_path / "RESUME.md"
    assert main(["--db", str(measured), "report", "--tz", "Europe/Londn", "-o", str(out)]) == 2
    assert "unknown time zone 'Europe/Londn'" in capsys.readouterr().err
    assert not out.exists()
