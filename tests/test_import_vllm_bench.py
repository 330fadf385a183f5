"""``campaign import vllm-bench``: a colleague's ``vllm bench serve`` runs as imported bench rows.

The unit tests build files with the key set vLLM 0.32 writes (vllm/benchmarks/serve.py: ``result_json`` and
``benchmark()``'s result; vllm/benchmarks/sweep/serve.py: ``run=<i>.json`` with ``run_number`` and the
combination's overrides, ``summary.json`` their list); the real test runs the real ``vllm bench serve``
against the tiny CPU server beside this console's own load generator and imports what it wrote.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from console.cli import main
from console.readmodel import ResultRow, bench_requests, bench_rows
from console.recipes.model import Shape
from console.store import Store
from ops.vllm_bench import Options, read_runs, serve_part, to_row
from testbed.vllm_bench import bench_serve_argv
from testbed.vllm_env import VllmEnv
from testbed.vllm_server import TinyServer
from tests.support.cli import run_cli

TINY = Shape("tiny", 64, 16)


def saved_result(max_concurrency: int | None = 2, detailed: bool = True, **extra: Any) -> dict[str, Any]:
    """A ``vllm bench serve --save-result`` file as 0.32 writes it (``--save-detailed``: the request lists)."""
    result: dict[str, Any] = {
        "date": "20260906-142700",
        "endpoint_type": "vllm",
        "backend": "vllm",
        "label": None,
        "model_id": "tiny-llama",
        "tokenizer_id": "/models/tiny-llama",
        "num_prompts": 3,
        "request_rate": "inf",
        "burstiness": 1.0,
        "max_concurrency": max_concurrency,
        "duration": 2.0,
        "completed": 2,
        "failed": 1,
        "total_input_tokens": 128,
        "total_output_tokens": 32,
        "request_throughput": 1.0,
        "request_goodput": None,
        "output_throughput": 16.0,
        "total_token_throughput": 80.0,
        "latencies": [0.5, 0.0, 0.4],
        "queue_times": [0.0, 0.0, 0.1],
        "max_output_tokens_per_s": 20.0,
        "max_concurrent_requests": 2,
        "rtfx": 0.0,
        "mean_ttft_ms": 100.0,
        "median_ttft_ms": 100.0,
        "std_ttft_ms": 0.0,
        "p99_ttft_ms": 119.6,
        "mean_tpot_ms": 20.0,
        "median_tpot_ms": 20.0,
        "std_tpot_ms": 0.0,
        "p99_tpot_ms": 25.0,
        "mean_itl_ms": 20.0,
        "median_itl_ms": 20.0,
        "std_itl_ms": 0.0,
        "p99_itl_ms": 30.0,
        **extra,
    }
    if detailed:
        result |= {
            "input_lens": [64, 64, 64],
            "output_lens": [16, 0, 16],
            "ttfts": [0.12, 0.0, 0.08],
            "itls": [[0.02] * 14 + [0.03], [], [0.02] * 15],
            "start_times": [1000.5, 1000.0, 1000.25],
            "generated_texts": ["a", "", "b"],
            "errors": ["", "Connection reset", ""],
        }
    return result


def write(path: Path, value: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value))
    return path


def campaign(db: Path, *argv: str) -> int:
    return main(["--db", str(db), "import", "vllm-bench", *argv])


def imported(db: Path) -> list[ResultRow]:
    with Store(db) as store:
        return [r for r in bench_rows(store) if r.source == "imported"]


def counts(db: Path) -> tuple[int, int, int]:
    if not db.exists():
        return (0, 0, 0)
    with Store(db) as store:
        return (
            int(store.scalar("SELECT count(*) FROM bench_runs")),
            int(store.scalar("SELECT count(*) FROM bench_requests")),
            int(store.scalar("SELECT count(*) FROM imports")),
        )


def curve_points(db: Path) -> list[tuple[str, tuple[int, float | None, int]]]:
    """Each stored curve's arm with each point's (concurrency, rate, runs), in point order."""
    with Store(db) as store:
        return [
            (c.arm, (p.concurrency, p.rate, len(p.bench_run_ids)))
            for c in store.curves.all()
            for p in store.curves.points(c.id)
        ]


# ---------------------------------------------------------------- the mapping


def test_a_saved_result_becomes_one_imported_row_with_its_requests(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = write(tmp_path / "vllm-infqps-concurrency2-tiny-llama-20260906-142700.json", saved_result())
    db = tmp_path / "s.db"
    assert campaign(db, str(f), "--arm", "colleague-tp1", "--shape", "tiny") == 0
    assert "imported: 1 vllm bench run" in capsys.readouterr().out
    (row,) = imported(db)
    assert (row.arm, row.shape, row.concurrency, row.model) == ("colleague-tp1", "tiny", 2, "tiny-llama")
    assert (row.requests, row.failed, row.prompts, row.duration_s) == (3, 1, 3, 2.0)
    assert (row.req_per_s, row.out_tok_per_s, row.total_tok_per_s, row.in_tok_per_s) == (
        1.0,
        16.0,
        80.0,
        64.0,
    )
    assert (row.ttft_ms_p50, row.ttft_ms_p99, row.tpot_ms_p50, row.itl_ms_p99) == (100.0, 119.6, 20.0, 30.0)
    assert row.e2e_ms_p50 is None  # vllm bench serve's default percentile metrics leave E2E out
    assert (row.input_len, row.output_len, row.prefix_len) == (64, 16, 0)
    # Nothing in the file says the kernel, the tripwire, the power limit or (without its zone) the instant.
    assert row.kernel_line is None and row.tripwire_id is None and row.power_limit_w is None
    assert row.started_ms is None and row.ended_ms is None and row.box is None
    sha = hashlib.sha256(f.read_bytes()).hexdigest()
    assert row.provenance is not None and str(f) in row.provenance and sha in row.provenance
    assert "20260906-142700" in row.provenance and "zone not given" in row.provenance
    with Store(db) as store:
        reqs = bench_requests(store, row.id)
        raw = json.loads(store.scalar("SELECT raw FROM bench_runs WHERE id = ?", [row.id]))
    # Sorted by start: the failed one (sent first) has no timings, only its tokens and error.
    assert [r.start_ms for r in reqs] == [0.0, 250.0, 500.0]
    failed, second, first = reqs
    assert failed.error == "Connection reset" and failed.ttft_ms is None and failed.e2e_ms is None
    assert (first.ttft_ms, first.in_tokens, first.out_tokens, first.error) == (120.0, 64, 16, None)
    assert first.e2e_ms == pytest.approx(120 + 14 * 20 + 30)  # TTFT + the sum of the ITLs
    assert first.tpot_ms == pytest.approx((14 * 20 + 30) / 15)
    assert first.itl_p50_ms == pytest.approx(20.0) and first.itl_max_ms == pytest.approx(30.0)
    assert second.ttft_ms == pytest.approx(80.0) and second.e2e_ms == pytest.approx(80 + 15 * 20)
    assert raw["request_timings"] == {"stored": 3, "omitted": 0}
    assert "generated_texts" not in raw and raw["request_rate"] == "inf"


def test_without_save_detailed_the_row_alone(tmp_path: Path) -> None:
    f = write(tmp_path / "r.json", saved_result(detailed=False))
    db = tmp_path / "s.db"
    assert campaign(db, str(f), "--arm", "a", "--shape", "tiny") == 0
    (row,) = imported(db)
    with Store(db) as store:
        assert bench_requests(store, row.id) == []
        raw = json.loads(store.scalar("SELECT raw FROM bench_runs WHERE id = ?", [row.id]))
    assert raw["per_request"].startswith("absent")


def test_the_zone_given_stores_the_instants(tmp_path: Path) -> None:
    """vLLM's ``date`` is written when the run ends, in the local time of the machine that ran it."""
    f = write(tmp_path / "r.json", saved_result())
    db = tmp_path / "s.db"
    assert campaign(db, str(f), "--arm", "a", "--shape", "tiny", "--tz", "Europe/London") == 0
    (row,) = imported(db)
    assert row.ended_ms == 1_788_701_220_000  # 2026-09-06 14:27:00 BST = 13:27:00 UTC
    assert row.started_ms == row.ended_ms - 2000


def test_a_sweep_tree_one_row_per_run(tmp_path: Path) -> None:
    exp = tmp_path / "results" / "exp1"
    for c in (2, 4):
        comb = exp / f"SERVE--max_num_seqs=8-BENCH--max_concurrency={c}"
        runs = []
        for i in range(2):
            run = {**saved_result(c, detailed=False), "run_number": i, "max_num_seqs": 8}
            write(comb / f"run={i}.json", run)
            runs.append(run)
        write(comb / "summary.json", runs)  # the same runs again: read once
        write(comb / "warmup.json", {**saved_result(c), "run_number": -1})  # not measured
    write(
        exp / "SERVE--max_num_seqs=16" / "summary.json",
        [{**saved_result(8, detailed=False), "run_number": 0}],
    )
    write(exp / "SERVE--max_num_seqs=16" / "run=1.failure.json", {"run_number": 1, "error": "boom"})
    db = tmp_path / "s.db"
    code, out, err = run_cli(db, "import", "vllm-bench", str(exp), "--shape", "tiny")
    assert code == 0, err
    assert "filed as curve #1: SERVE--max_num_seqs=16 tiny on unknown, C8 (`campaign curves 1`)" in out, out
    assert "filed as curve #2: SERVE--max_num_seqs=8 tiny on unknown, C2, C4" in out, out
    rows = imported(db)
    # The arm is the combination's server part: one server's runs at several concurrencies are one arm.
    assert sorted((r.arm, r.configuration, r.concurrency) for r in rows) == [
        ("SERVE--max_num_seqs=16", "SERVE--max_num_seqs=16", 8),
        ("SERVE--max_num_seqs=8", "SERVE--max_num_seqs=8-BENCH--max_concurrency=2", 2),
        ("SERVE--max_num_seqs=8", "SERVE--max_num_seqs=8-BENCH--max_concurrency=2", 2),
        ("SERVE--max_num_seqs=8", "SERVE--max_num_seqs=8-BENCH--max_concurrency=4", 4),
        ("SERVE--max_num_seqs=8", "SERVE--max_num_seqs=8-BENCH--max_concurrency=4", 4),
    ]
    # ... and a curve per server: its points the concurrencies, run=0 and run=1 one point's repeats.
    by_id = {r.id: r for r in rows}
    with Store(db) as store:
        curves = {c.arm: (c, store.curves.points(c.id)) for c in store.curves.all()}
    assert set(curves) == {"SERVE--max_num_seqs=8", "SERVE--max_num_seqs=16"}
    c8, points8 = curves["SERVE--max_num_seqs=8"]
    assert (c8.source, c8.state, c8.box, c8.shape, c8.concurrency, c8.repeat, c8.rate) == (
        "imported",
        "done",
        "unknown",
        "tiny",
        (2, 4),
        2,
        None,
    )
    assert [(p.concurrency, p.state, len(p.bench_run_ids)) for p in points8] == [
        (2, "done", 2),
        (4, "done", 2),
    ]
    for p in points8:
        assert {by_id[i].concurrency for i in p.bench_run_ids} == {p.concurrency}
        assert p.repeat_group is not None
        assert {by_id[i].repeat_group for i in p.bench_run_ids} == {p.repeat_group}
    assert points8[0].repeat_group != points8[1].repeat_group
    c16, points16 = curves["SERVE--max_num_seqs=16"]
    assert c16.concurrency == (8,) and c16.repeat == 1 and points16[0].repeat_group is None
    assert any("run=1.json" in (r.provenance or "") for r in rows)
    assert any("summary.json[0]" in (r.provenance or "") for r in rows)
    # --arm files every run under one arm; the combination stays as its configuration.
    db2 = tmp_path / "s2.db"
    assert campaign(db2, str(exp), "--shape", "tiny", "--arm", "theirs") == 0
    assert {r.arm for r in imported(db2)} == {"theirs"}


def test_runs_paced_by_rate_are_a_rate_curve(tmp_path: Path) -> None:
    """Appended runs of one server at two request rates (capped at C=4): a curve whose points are the rates."""
    f = tmp_path / "rates.json"
    f.write_text(
        "\n".join(
            json.dumps(saved_result(4, detailed=False, request_rate=r, burstiness=1.0))
            for r in (1.5, 0.5, 1.5)
        )
    )
    db = tmp_path / "s.db"
    assert campaign(db, str(f), "--arm", "paced", "--shape", "tiny") == 0
    assert sorted(curve_points(db)) == [("paced", (4, 0.5, 1)), ("paced", (4, 1.5, 2))]
    with Store(db) as store:
        (curve,) = store.curves.all()
    assert (curve.concurrency, curve.burstiness, sorted(curve.rate or ())) == ((4,), 1.0, [0.5, 1.5])
    assert sorted((r.request_rate, r.burstiness) for r in imported(db)) == [
        (0.5, 1.0),
        (1.5, 1.0),
        (1.5, 1.0),
    ]


def test_appended_results_and_summary_files(tmp_path: Path) -> None:
    """``--append-result`` writes one object a line; a sweep's summary.json given alone is its list."""
    f = tmp_path / "appended.json"
    f.write_text(json.dumps(saved_result(1)) + "\n" + json.dumps(saved_result(4)))
    assert [r.result["max_concurrency"] for r in read_runs(f)] == [1, 4]
    s = write(tmp_path / "comb-a" / "summary.json", [saved_result(2), saved_result(2)])
    runs = read_runs(s)
    assert [r.combination for r in runs] == ["comb-a", "comb-a"] and runs[1].where.endswith("summary.json[1]")


def test_concurrency_given_only_for_a_run_paced_by_rate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = write(tmp_path / "r.json", saved_result(None, request_rate=4.0))
    db = tmp_path / "s.db"
    assert campaign(db, str(f), "--arm", "a", "--shape", "tiny") == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "max_concurrency is null" in err and "--concurrency C" in err
    assert counts(db) == (0, 0, 0) or imported(db) == []
    assert campaign(db, str(f), "--arm", "a", "--shape", "tiny", "-c", "8") == 0
    assert [r.concurrency for r in imported(db)] == [8]
    g = write(tmp_path / "g.json", saved_result(2))
    assert campaign(db, str(g), "--arm", "a", "--shape", "tiny", "-c", "8") == 2
    assert "not the --concurrency 8" in capsys.readouterr().err


def test_the_mapping_keeps_the_operators_kernel_and_power(tmp_path: Path) -> None:
    (run,) = read_runs(write(tmp_path / "r.json", saved_result()))
    row = to_row(run, Options("a", TINY, kernel_line="FlashInfer", power_limit_w=600.0))
    assert (row["kernel_line"], row["power_limit_w"]) == ("FlashInfer", 600.0)


# ---------------------------------------------------------------- refusals and re-imports


@pytest.mark.parametrize(
    ("name", "content", "said"),
    [
        ("broken.json", '{"date": "2026', "not JSON"),
        ("other.json", json.dumps({"results": {"gsm8k": {}}}), "not a `vllm bench serve` generation result"),
        ("list.json", json.dumps([1, 2]), "not a vLLM benchmark result object"),
        ("nan.json", json.dumps({**saved_result(), "duration": "2 s"}), "not a finite number"),
    ],
)
def test_what_is_not_a_vllm_result_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, content: str, said: str
) -> None:
    f = tmp_path / name
    f.write_text(content)
    db = tmp_path / "s.db"
    assert campaign(db, str(f), "--arm", "a", "--shape", "tiny") == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and said in err and str(f) in err and "vllm bench" in err, err
    assert imported(db) == []


def test_refused_trees_arms_and_shapes_write_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    empty = tmp_path / "exp"
    write(empty / "comb" / "warmup.json", saved_result())
    good = write(tmp_path / "good.json", saved_result())
    bad = tmp_path / "tree"
    write(bad / "a" / "run=0.json", saved_result())
    write(bad / "b" / "run=0.json", {"nope": 1})  # the second file fails: the first is not written either
    cases = [
        ([str(empty), "--shape", "tiny"], "no run=<i>.json or summary.json"),
        ([str(good), "--shape", "tiny"], "give --arm NAME"),
        ([str(good), "--arm", "a", "--shape", "galaxy"], "no shape 'galaxy'"),
        ([str(tmp_path / "missing.json"), "--arm", "a", "--shape", "tiny"], "no such file"),
        ([str(bad), "--shape", "tiny"], "b/run=0.json: not a `vllm bench serve`"),
    ]
    for argv, said in cases:
        assert campaign(db, *argv) == 2, argv
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and said in err, (argv, err)
        assert imported(db) == []


def test_the_same_files_again_change_nothing_and_changed_ones_replace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = write(tmp_path / "r.json", saved_result())
    db = tmp_path / "s.db"
    assert campaign(db, str(f), "--arm", "a", "--shape", "tiny") == 0
    before = counts(db)
    capsys.readouterr()
    assert campaign(db, str(f), "--arm", "a", "--shape", "tiny") == 0
    assert capsys.readouterr().out.startswith("already imported")
    assert counts(db) == before and len(curve_points(db)) == 1
    assert curve_points(db) == [("a", (2, None, 1))]  # a single result: a one-point curve
    write(f, saved_result(output_throughput=20.0))
    assert campaign(db, str(f), "--arm", "a", "--shape", "tiny", "--json") == 0
    replaced = json.loads(capsys.readouterr().out)
    assert replaced["state"] == "replaced"
    assert counts(db) == before and [r.out_tok_per_s for r in imported(db)] == [20.0]
    # The changed file's curve replaced the old one: one curve, of the new import, its point the new row.
    (row,) = imported(db)
    with Store(db) as store:
        (curve,) = store.curves.all()
        assert curve.import_id == replaced["import_id"]
        assert store.curves.points(curve.id)[0].bench_run_ids == (row.id,)
    # Another arm for the same files is another filing of them: it replaces, never doubles.
    assert campaign(db, str(f), "--arm", "b", "--shape", "tiny") == 0
    assert [r.arm for r in imported(db)] == ["b"]


# ---------------------------------------------------------------- the real vllm bench serve


def _console_point(server: TinyServer, tmp_path: Path) -> dict[str, Any]:
    """This console's own load generator at C=2 against the same server: the measured row to sit beside."""
    argv = [
        sys.executable,
        "-m",
        "agents.loadgen",
        "--base-url",
        server.base_url,
        "--model",
        server.model,
        "--tokenizer",
        str(server.model_dir),
        "--input-len",
        str(TINY.input_len),
        "--output-len",
        str(TINY.output_len),
        "--concurrency",
        "2",
        "--prompts",
        "8",
        "--warmup",
        "0",
        "--json",
        "--quiet",
        "--records",
        str(tmp_path / "ours.jsonl"),
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def _vllm_bench_serve(server: TinyServer, env: VllmEnv, result_dir: Path) -> Path:
    seed = secrets.randbelow(2**31)
    argv = bench_serve_argv(
        env.python,
        server.base_url,
        server.model,
        server.model_dir,
        input_len=TINY.input_len,
        output_len=TINY.output_len,
        prompts=8,
        concurrency=2,
        result_dir=result_dir,
        seed=seed,
        detailed=True,
    )
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"}
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (path,) = result_dir.glob("*.json")
    return path


@pytest.mark.vllm
def test_a_real_vllm_bench_serve_result_sits_beside_the_consoles_own_point(
    tiny_server: TinyServer, vllm_env: VllmEnv, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    ours = _console_point(tiny_server, tmp_path)
    with Store(db) as store:
        store.boxes.ensure_local()
        store.results.add_bench_run(
            {**ours, "arm": "tiny-cpu", "shape": "tiny", "concurrency": 2, "box": "local", "raw": ours}
        )
    path = _vllm_bench_serve(tiny_server, vllm_env, tmp_path / "vllm")
    theirs = json.loads(path.read_text())
    assert campaign(db, str(path), "--arm", "tiny-cpu (vllm bench serve)", "--shape", "tiny") == 0
    print(capsys.readouterr().out, file=sys.stderr)  # the figures, in the test's log
    (row,) = imported(db)
    assert row.concurrency == theirs["max_concurrency"] == 2
    assert row.requests == theirs["completed"] + theirs["failed"] == 8
    assert row.out_tok_per_s == theirs["output_throughput"] and row.ttft_ms_p50 == theirs["median_ttft_ms"]
    assert row.tpot_ms_p50 == theirs["median_tpot_ms"] and row.itl_ms_p50 == theirs["median_itl_ms"]
    with Store(db) as store:
        beside = [r for r in bench_rows(store, text="tiny") if r.shape == "tiny" and r.concurrency == 2]
        reqs = bench_requests(store, row.id)
    assert sorted(r.source for r in beside) == ["imported", "measured"]
    for r in beside:  # both points, in the test's log
        print(
            f"{r.source}: {r.arm} C={r.concurrency} {r.out_tok_per_s:.1f} tok/s TTFT p50 {r.ttft_ms_p50:.1f} ms"
        )
    # Its requests as this console defines them, from vLLM's own lists.
    assert len(reqs) == 8 and all(r.error is None and r.out_tokens == TINY.output_len for r in reqs)
    assert sorted(r.ttft_ms for r in reqs if r.ttft_ms is not None) == pytest.approx(
        sorted(t * 1000 for t in theirs["ttfts"])
    )
    assert campaign(db, str(path), "--arm", "tiny-cpu (vllm bench serve)", "--shape", "tiny") == 0
    assert len(imported(db)) == 1
    # The real result is a one-point imported curve, and `export curves` brings it back to the same point.
    assert curve_points(db) == [("tiny-cpu (vllm bench serve)", (2, None, 1))]
    exported = tmp_path / "curves.json"
    assert main(["--db", str(db), "export", "curves", "--format", "json", "-o", str(exported)]) == 0
    (run,) = json.loads(exported.read_text())["curves"][0]["points"][0]["runs"]
    for key in ("max_concurrency", "completed", "output_throughput", "median_ttft_ms", "p99_tpot_ms"):
        assert run[key] == pytest.approx(theirs[key]), key
    fresh = tmp_path / "fresh.db"
    assert campaign(fresh, str(exported), "--shape", "tiny") == 0
    (back,) = imported(fresh)
    assert curve_points(fresh) == curve_points(db)
    assert (back.out_tok_per_s, back.ttft_ms_p50, back.tpot_ms_p50) == (
        row.out_tok_per_s,
        row.ttft_ms_p50,
        row.tpot_ms_p50,
    )


_override = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_=0123456789.", min_size=1, max_size=30)


@given(serve=_override, bench=_override)
def test_a_combinations_arm_is_its_server_part(serve: str, bench: str) -> None:
    """vLLM names a combination SERVE--<serve>-BENCH--<bench>: the arm is the SERVE part whatever the overrides;
    a combination of only one side is its own arm."""
    assert serve_part(f"SERVE--{serve}-BENCH--{bench}") == f"SERVE--{serve}"
    assert serve_part(f"SERVE--{serve}") == f"SERVE--{serve}"
    assert serve_part(f"BENCH--{bench}") == f"BENCH--{bench}"
