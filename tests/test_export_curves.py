"""``campaign export curves``: every curve as CSV (a line per run of each point) or JSON whose runs carry
``vllm bench serve --save-result``'s field names, and that JSON read back by ``campaign import vllm-bench``.

The curves come from a ``vllm bench sweep serve`` tree built as tests/test_import_vllm_bench.py builds one (the
key set vLLM 0.32 writes), and from the demo; everything goes through the real CLI and real SQLite files.
"""

from __future__ import annotations

import csv
import io
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.readmodel import bench_row
from console.store import Store
from ops.demo import build_demo
from ops.export import CURVE_COLUMNS
from tests.support.cli import run_cli
from tests.test_import_vllm_bench import saved_result, write


def sweep(root: Path) -> Path:
    """One server at C=2 and C=4, two runs each (the second run of C=4 faster), with every request kept."""
    exp = root / "exp"
    for c in (2, 4):
        for i in range(2):
            run = {
                **saved_result(c),
                "run_number": i,
                "output_throughput": 16.0 * c + i,
                "median_ttft_ms": 90.0 + c,
            }
            write(exp / f"SERVE--max_num_seqs=8-BENCH--max_concurrency={c}" / f"run={i}.json", run)
    return exp


def points(db: Path) -> list[tuple[str, int, float | None, list[tuple[float | int | None, ...]]]]:
    """Each curve point: (arm, concurrency, rate, each run's out tok/s, TTFT p50/p99, TPOT p50, requests)."""
    out: list[tuple[str, int, float | None, list[tuple[float | int | None, ...]]]] = []
    with Store(db) as store:
        for c in store.curves.all():
            for p in store.curves.points(c.id):
                rows = [bench_row(store, str(i)) for i in p.bench_run_ids]
                runs: list[tuple[float | int | None, ...]] = [
                    (r.out_tok_per_s, r.ttft_ms_p50, r.ttft_ms_p99, r.tpot_ms_p50, r.requests) for r in rows
                ]
                out.append((c.arm, p.concurrency, p.rate, runs))
    return out


@pytest.fixture
def swept(tmp_path: Path) -> Path:
    db = tmp_path / "swept.db"
    code, _, err = run_cli(db, "import", "vllm-bench", str(sweep(tmp_path)), "--shape", "tiny")
    assert code == 0, err
    return db


def test_csv_has_a_line_per_run_of_each_point(swept: Path) -> None:
    code, out, _ = run_cli(swept, "export", "curves", "--format", "csv")
    assert code == 0
    lines = list(csv.DictReader(io.StringIO(out)))
    assert tuple(lines[0]) == CURVE_COLUMNS
    assert [(r["arm"], r["concurrency"], r["run_index"], r["out_tok_per_s"]) for r in lines] == [
        ("SERVE--max_num_seqs=8", "2", "0", "32"),
        ("SERVE--max_num_seqs=8", "2", "1", "33"),
        ("SERVE--max_num_seqs=8", "4", "0", "64"),
        ("SERVE--max_num_seqs=8", "4", "1", "65"),
    ]
    # Nothing in vLLM's files says the kernel or the tripwire: every line says so.
    assert {(r["curve_source"], r["tripwire"], r["kernel_line"], r["rate"]) for r in lines} == {
        ("imported", "not recorded", "not recorded", "")
    }
    assert lines[0]["repeat_group"] == lines[1]["repeat_group"] != lines[2]["repeat_group"]


def test_json_runs_use_vllm_bench_serve_field_names(swept: Path, tmp_path: Path) -> None:
    out_file = tmp_path / "curves.json"
    code, _, err = run_cli(swept, "export", "curves", "--format", "json", "-o", str(out_file))
    assert code == 0 and "wrote 1 curves" in err
    (curve,) = json.loads(out_file.read_text())["curves"]
    assert (curve["arm"], curve["source"], curve["concurrency"]) == (
        "SERVE--max_num_seqs=8",
        "imported",
        [2, 4],
    )
    assert [(p["concurrency"], len(p["runs"])) for p in curve["points"]] == [(2, 2), (4, 2)]
    run: dict[str, Any] = curve["points"][1]["runs"][1]
    original = saved_result(4)
    assert (run["max_concurrency"], run["request_rate"], run["output_throughput"]) == (4, "inf", 65.0)
    for key in (
        "completed",
        "failed",
        "duration",
        "total_input_tokens",
        "total_output_tokens",
        "request_throughput",
        "total_token_throughput",
        "p99_ttft_ms",
        "median_tpot_ms",
        "p99_itl_ms",
    ):
        assert run[key] == original[key], key
    assert run["median_ttft_ms"] == 94.0
    # The requests as vLLM lists them (seconds, "" for no error), sorted by when each was sent.
    assert run["errors"] == ["Connection reset", "", ""] and run["output_lens"] == [0, 16, 16]
    assert run["ttfts"] == pytest.approx([0.0, 0.08, 0.12]) and run["input_lens"] == [64, 64, 64]
    assert "itls" not in run  # each request's ITL median and maximum are stored, not every gap
    assert run["mean_ttft_ms"] == pytest.approx(100.0)
    # The console's own conditions under their own names.
    console = run["console"]
    assert console["arm"] == "SERVE--max_num_seqs=8" and console["shape"] == "tiny"
    assert {"kernel_line", "tripwire", "power_limit_w", "seed", "replicas", "bench_run_id"} <= set(console)


def test_export_then_import_gives_the_same_points(swept: Path, tmp_path: Path) -> None:
    exported = tmp_path / "curves.json"
    assert run_cli(swept, "export", "curves", "--format", "json", "-o", str(exported))[0] == 0
    fresh = tmp_path / "fresh.db"
    code, _, err = run_cli(fresh, "import", "vllm-bench", str(exported), "--shape", "tiny")
    assert code == 0, err
    assert [(arm, c, len(runs)) for arm, c, _, runs in points(swept)] == [
        ("SERVE--max_num_seqs=8", 2, 2),
        ("SERVE--max_num_seqs=8", 4, 2),
    ]
    assert points(fresh) == points(swept)
    with Store(fresh) as store:
        (curve,) = store.curves.all()
        assert (curve.source, curve.repeat) == ("imported", 2)
        reimported = [r for r in store.rows("SELECT count(*) AS n FROM bench_requests")]
    assert reimported[0]["n"] == 0  # without every ITL gap the requests do not travel; the figures do
    # The same export again changes nothing.
    assert run_cli(fresh, "import", "vllm-bench", str(exported), "--shape", "tiny")[1].startswith(
        "already imported"
    )
    assert points(fresh) == points(swept)


def test_a_damaged_export_is_refused_in_one_line(swept: Path, tmp_path: Path) -> None:
    bad = write(tmp_path / "bad.json", {"curves": [{"arm": "a", "points": [{"runs": [{"nope": 1}]}]}]})
    fresh = tmp_path / "fresh.db"
    code, _, err = run_cli(fresh, "import", "vllm-bench", str(bad), "--shape", "tiny")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "curves 0 points 0 runs 0" in err
    with Store(fresh) as store:
        assert store.curves.all() == []


def test_the_demos_one_point_curves_export(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    with Store(db) as store:
        build_demo(store)
        stored = store.curves.all()
    code, out, _ = run_cli(db, "export", "curves", "--format", "csv")
    assert code == 0
    lines = list(csv.DictReader(io.StringIO(out)))
    assert {int(r["curve_id"]) for r in lines} == {c.id for c in stored}
    assert len(lines) == len({(r["curve_id"], r["position"], r["run_index"]) for r in lines})
    assert all(r["power_limit_w"] and r["box"] for r in lines)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    runs=st.dictionaries(
        st.integers(min_value=1, max_value=512),
        st.lists(st.floats(min_value=0.1, max_value=1e5, allow_nan=False), min_size=1, max_size=3),
        min_size=1,
        max_size=4,
    )
)
def test_any_sweep_round_trips_to_the_same_points(runs: dict[int, list[float]], tmp_path: Path) -> None:
    """Whatever concurrencies and repeats a sweep has, export then import gives the same curve points."""
    with tempfile.TemporaryDirectory(dir=tmp_path) as work:
        root = Path(work)
        for c, throughputs in runs.items():
            for i, out in enumerate(throughputs):
                run = {**saved_result(c), "run_number": i, "output_throughput": out}
                write(root / "exp" / f"SERVE--tp=1-BENCH--max_concurrency={c}" / f"run={i}.json", run)
        db, fresh, exported = root / "a.db", root / "b.db", root / "curves.json"
        assert run_cli(db, "import", "vllm-bench", str(root / "exp"), "--shape", "tiny")[0] == 0
        assert run_cli(db, "export", "curves", "--format", "json", "-o", str(exported))[0] == 0
        assert run_cli(fresh, "import", "vllm-bench", str(exported), "--shape", "tiny")[0] == 0
        want = [("SERVE--tp=1", c, None, len(runs[c])) for c in sorted(runs)]
        assert [(arm, c, rate, len(r)) for arm, c, rate, r in points(db)] == want
        assert points(fresh) == points(db)
