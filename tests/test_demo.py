"""The demo campaign: the write-up's figures land in state.db as imported rows, checked against the write-up."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.cli import main
from console.readmodel import ResultRow, api_prices, bench_rows, eval_runs, failed_launches, imports
from console.store import Box, Store
from ops.demo import DemoDataError, MeasuredDataPresent, build_demo, load_payload, seed_if_empty
from tests.support.demo import copy_seed


def _row(store: Store, arm: str, box: str, shape: str, concurrency: int) -> ResultRow:
    rows = [
        r
        for r in bench_rows(store)
        if (r.arm, r.box, r.shape, r.concurrency) == (arm, box, shape, concurrency)
    ]
    assert len(rows) == 1, (arm, box, shape, concurrency)
    return rows[0]


def test_figures_match_the_write_up(demo: Path) -> None:
    with Store(demo, read_only=True) as store:
        # Headline table, 600 W: "B12xNvFp4 W4A4 (b12x) ... router C1024 5,161 ... tripwire 19/20".
        r = _row(store, "qwen3.8-27b-nvfp4-b12x", "seed-pro6000-600w", "router", 1024)
        assert r.out_tok_per_s == 5161 and r.kernel_line == "B12xNvFp4 W4A4 (b12x)"
        assert r.tripwire.text == "19/20 ok" and r.power_limit_w == 600 and r.source == "imported"
        assert (r.input_len, r.output_len, r.prefix_len) == (1024, 128, 0)
        # "DP2 x TP2 + expert parallel, 384 seqs per rank - rejected by quality tripwire ... 1,300 (diagnostic
        # only)": eight degenerate outputs and one wrong answer.
        r = _row(store, "glm-5.3-flash-dp2tp2-ep-384", "seed-pro6000-600w", "router", 1024)
        assert r.out_tok_per_s == 1300 and r.diagnostic_only is True
        assert r.tripwire.text == "FAILED 11/20 ok, 8 degenerate, 1 wrong"
        # DeepSeek TP4 promptopt C1024: 2,387 out, 33,411 in, 45.7 s TTFT, footnote i (queueing).
        r = _row(store, "deepseek-v4-flash-tp4-b12x-256", "seed-pro6000-600w", "promptopt", 1024)
        assert (r.out_tok_per_s, r.in_tok_per_s, r.ttft_ms_p50, r.queueing) == (2387, 33411, 45700, True)
        assert r.prefix_len == 3072 and r.total_tok_per_s == 2387 + 33411
        # 400 W Workstation table: gpt-oss-20b promptopt C256 13,442 / 188,192 / 0.6 s, 20/20.
        r = _row(store, "gpt-oss-20b-4rep", "seed-pro6000-400w", "promptopt", 256)
        assert (r.out_tok_per_s, r.in_tok_per_s, r.ttft_ms_p50) == (13442, 188192, 600)
        assert r.power_limit_w == 400 and r.tripwire.text == "20/20 ok"
        # 8x RTX 5090: Qwen3.8-27B NVFP4 b12x router C1024 6,558; head to head router C256 6,445.
        assert _row(store, "qwen3.8-27b-nvfp4-b12x", "seed-5090x8-400w", "router", 1024).out_tok_per_s == 6558
        assert _row(store, "qwen3.8-27b-nvfp4-b12x", "seed-5090x8-400w", "router", 256).out_tok_per_s == 6445
        # Quality table: DeepSeek-V4-Flash TP1 x DP4 + EP, 403 items, 0.844, maths 0.938.
        ds = [e for e in eval_runs(store) if e.arm == "deepseek-v4-flash-dp4-ep-512"]
        assert len(ds) == 1 and ds[0].overall == 0.844 and ds[0].families["maths"] == 0.938
        # Prices: the boxes and the API.
        assert store.boxes.get("seed-pro6000-600w").price_per_hour == pytest.approx(3.082)
        glm = {p.provider: p for p in api_prices(store, "GLM-5.3-Flash")}
        assert (glm["openrouter-list"].in_per_mtok, glm["openrouter-list"].out_per_mtok) == (0.075, 0.25)
        # Failed launches are rows with the engine's refusal.
        reasons = {r.arm: r.failure_reason for r in failed_launches(store, None)}
        assert reasons["ling-3.0-flash-tp"] is not None and "101,376" in reasons["ling-3.0-flash-tp"]
        assert "swiglu_limit" in (reasons["glm-5.3-flash-dp4-flashinfer-b12x-moe"] or "")
        kv = store.scalar(
            "SELECT kv_cache_tokens FROM launches WHERE id = 'import:seed-5090x8-400w:qwen3.8-27b-nvfp4-b12x'"
        )
        assert kv == 181000


def test_every_row_is_marked_imported_with_provenance(demo: Path) -> None:
    with Store(demo, read_only=True) as store:
        for table in ("bench_runs", "tripwire_runs", "eval_runs"):
            assert (
                store.scalar(
                    f"SELECT count(*) FROM {table} WHERE source != 'imported' OR provenance IS NULL "
                    "OR import_id IS NULL"
                )
                == 0
            )
        assert {b.status for b in store.boxes.every()} == {"imported"}
        assert [i.rows for i in imports(store)] == [load_payload().row_count]


def test_twice_changes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "s.db")
    assert main(["--db", db, "demo"]) == 0
    first = capsys.readouterr()
    assert "3/3" in first.err and "imported in" in first.out  # the progress bar is on stderr
    assert main(["--db", db, "demo"]) == 0
    assert "already present" in capsys.readouterr().out
    with Store(db) as store:
        counts = [
            store.scalar(f"SELECT count(*) FROM {t}")
            for t in (
                "bench_runs",
                "tripwire_runs",
                "eval_runs",
                "launches",
                "kernel_lines",
                "arms",
                "imports",
            )
        ]
    assert counts[0] == 111 and counts[-1] == 1


def test_changed_data_replaces_its_own_rows(tmp_path: Path) -> None:
    data = copy_seed(tmp_path)
    with Store(tmp_path / "s.db") as store:
        build_demo(store, data_dir=data)
        before = store.scalar("SELECT count(*) FROM bench_runs")
        tsv = data / "throughput.tsv"
        tsv.write_text(
            tsv.read_text().replace(
                "qwen3.8-27b-nvfp4-b12x\tseed-pro6000-600w\trouter\t1024\t5161",
                "qwen3.8-27b-nvfp4-b12x\tseed-pro6000-600w\trouter\t1024\t5170",
            )
        )
        boxes = data / "boxes.toml"
        boxes.write_text(
            boxes.read_text().replace(
                'price_per_hour = 3.082\ntz = "Europe/London"', 'price_per_hour = 2.5\ntz = "Europe/London"'
            )
        )
        assert build_demo(store, data_dir=data).state == "replaced"
        assert store.boxes.get("seed-pro6000-600w").price_per_hour == 2.5
        assert store.scalar("SELECT count(*) FROM bench_runs") == before
        assert store.scalar("SELECT count(*) FROM imports") == 1
        assert (
            store.scalar(
                "SELECT out_tok_per_s FROM bench_runs WHERE arm = 'qwen3.8-27b-nvfp4-b12x' "
                "AND box = 'seed-pro6000-600w' AND shape = 'router' AND concurrency = 1024"
            )
            == 5170
        )
        assert (
            store.scalar(
                "SELECT count(*) FROM bench_runs WHERE tripwire_id IS NOT NULL AND tripwire_id NOT IN "
                "(SELECT id FROM tripwire_runs)"
            )
            == 0
        )


def test_refuses_to_mix_into_measured_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "s.db"
    with Store(db) as store:
        store.boxes.add(Box(name="pro-a", host="h", ssh_user="root"))
        store.results.add_bench_run(
            {
                "box": "pro-a",
                "arm": "a",
                "shape": "router",
                "concurrency": 8,
                "out_tok_per_s": 100.0,
                "t_ms": 1,
            }
        )
        with pytest.raises(MeasuredDataPresent, match="--force"):
            build_demo(store)
        assert not seed_if_empty(store)
    assert main(["--db", str(db), "demo"]) == 1  # refused: the campaign's own measurements come first
    assert "holds measured results" in capsys.readouterr().err
    assert main(["--db", str(db), "demo", "--force"]) == 0
    with Store(db) as store:
        assert store.scalar("SELECT count(*) FROM bench_runs WHERE source = 'measured'") == 1


def test_seed_if_empty(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as store:
        store.boxes.ensure_local()  # plain `campaign` registers the local box first: still empty
        assert seed_if_empty(store) is True
        assert seed_if_empty(store) is False
        assert store.scalar("SELECT count(*) FROM imports") == 1


def test_inconsistent_data_names_file_and_line(tmp_path: Path) -> None:
    data = copy_seed(tmp_path)
    with (data / "throughput.tsv").open("a") as fh:
        fh.write("no-such-arm\tseed-pro6000-600w\trouter\t1024\t1\t\t\t0\t0\t\n")
    lines = (data / "throughput.tsv").read_text().splitlines()
    with pytest.raises(DemoDataError, match=rf"throughput.tsv:{len(lines)}: arm no-such-arm"):
        load_payload(data)
    (data / "throughput.tsv").write_text(
        "\n".join(lines[:-1] + ["hy3\tseed-pro6000-400w\trouter\t256\tfast\t\t\t0\t0\t"]) + "\n"
    )
    with pytest.raises(DemoDataError, match="column 'out_tok_s' is 'fast'"):
        load_payload(data)


def test_the_write_ups_points_are_curves_at_exactly_their_measured_concurrencies(demo: Path) -> None:
    """One imported curve per (arm, box, shape) of the demo's rows, its points those rows' concurrencies and
    each point linking exactly its rows: mostly one point, never one the write-up did not measure."""
    with Store(demo) as store:
        rows = [r for r in bench_rows(store) if r.source == "imported"]
        stored = store.curves.all()
        points = {c.id: store.curves.points(c.id) for c in stored}
    measured: dict[tuple[str, str, str], dict[int, set[int]]] = {}
    for r in rows:
        assert r.box is not None
        measured.setdefault((r.arm, r.box, r.shape), {}).setdefault(r.concurrency, set()).add(r.id)
    assert {(c.arm, c.box, c.shape) for c in stored} == set(measured)
    assert len(stored) == len(measured)
    for c in stored:
        assert (c.source, c.state, c.rate) == ("imported", "done", None) and c.import_id is not None
        want = measured[(c.arm, c.box, c.shape)]
        assert list(c.concurrency) == sorted(want)
        assert {p.concurrency: set(p.bench_run_ids) for p in points[c.id]} == want
        assert all(p.state == "done" for p in points[c.id])
    assert any(len(p) == 1 for p in points.values())  # the write-up's single-concurrency arms
    # Building the demo again replaces nothing and doubles nothing.
    with Store(demo) as store:
        build_demo(store, force=True)
        assert [(c.arm, c.box, c.shape, c.concurrency) for c in store.curves.all()] == [
            (c.arm, c.box, c.shape, c.concurrency) for c in stored
        ]
