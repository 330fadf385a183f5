"""Numbers you can defend, on a real state.db: node rows with per-replica detail, the conditions of each
number (kernel fallback from real vLLM lines, prefix caching, queueing), repeat groups with their spread,
and `campaign compare` read against the spread and a control pair's noise floor. The same through the
real agent and the fake engine is in tests/test_node_bench.py; through a real CPU vLLM in
tests/test_fleet_e2e.py."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agents import loglines
from console.cli import main
from console.errors import InputError
from console.readmodel import bench_rows, compare, replica_results, standings
from console.store import Box, Store
from console.store.conditions import admitted_streams, prefix_caching, streams_per_replica

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "tests" / "fixtures" / "vllm_logs"
T0 = 1_788_658_020_000  # 2026-09-06 01:27:00 UTC
BOX = "pro-a"

# Real lines (tests/fixtures/vllm_logs/kernel-lines.tsv and kernel-noise.txt, the CPU capture's config).
B12X = (
    "(EngineCore pid=311) INFO 09-06 01:27:12 [__init__.py:1240] Using B12xNvFp4LinearKernel for NVFP4 GEMM"
)
MARLIN = (
    "INFO 11-03 15:50:38 [compressed_tensors_wNa16.py:95] Using MarlinLinearKernel for CompressedTensorsWNA16"
)
NOISE = "(APIServer pid=9498) INFO 12-02 13:21:37 [model.py:2152] Using max model len 2048"
CPU_CONFIG = next(
    loglines.config_excerpt(line)
    for line in (LOGS / "cpu-llama-serving.log").read_text().splitlines()
    if "KernelConfig(" in line
)
ARGV = [
    "vllm",
    "serve",
    "/m",
    "--served-model-name",
    "m",
    "--kernel-config.linear_backend",
    "b12x",
    "--max-num-seqs",
    "16",
    "--no-enable-prefix-caching",
]


class Campaign:
    """A state.db on which launches are recorded as the console does and results arrive through ingest."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.store = Store(path, clock=lambda: T0)
        self.store.boxes.add(Box(name=BOX, host="203.0.113.7", ssh_user="root", price_per_hour=3.08))
        self.seq = 0
        self.runs = 0

    def ingest(self, *events: dict[str, Any]) -> None:
        batch = []
        for e in events:
            self.seq += 1
            batch.append({"v": 1, "seq": self.seq, "t_ms": T0 + self.seq * 1000, **e})
        report = self.store.ingest.batch(BOX, batch)
        assert not report.journal_only, report.journal_only

    def launch(
        self, arm: str, replicas: int, lines: list[list[str]], kv_tokens: int = 4096, argv: list[str] = ARGV
    ) -> list[str]:
        """One launch of ``arm``: its replicas serving, each with the kernel lines it printed."""
        arm_id = self.store.launches.add_arm(
            arm, "m", BOX, f"hash-{arm}", argv, {}, [[i] for i in range(replicas)], 1, []
        )
        group = f"launch-{arm}-{self.seq}"
        ids = [f"{arm}.{self.seq}.r{i}" for i in range(replicas)]
        for i, launch_id in enumerate(ids):
            self.store.launches.add(
                launch_id,
                BOX,
                arm,
                arm_id=arm_id,
                replica=i,
                gpus=[i],
                port=8100 + i,
                forced=False,
                group=group,
            )
            self.ingest(
                {"kind": "kernel_line", "launch_id": launch_id, "category": "config", "line": CPU_CONFIG},
                *(
                    {"kind": "kernel_line", "launch_id": launch_id, "category": "linear", "line": x}
                    for x in lines[i]
                ),
                {"kind": "launch_budget", "launch_id": launch_id, "kv_cache_tokens": kv_tokens},
                {"kind": "launch_state", "launch_id": launch_id, "arm": arm, "state": "serving"},
            )
        return ids

    def bench(
        self,
        launch_ids: list[str],
        out: list[float],
        concurrency: int = 8,
        shape: str = "router",
        group: str | None = None,
        seed: int = 7,
    ) -> str:
        """One node run as the console asks it and the load generator answers it (``out``: each replica's)."""
        self.runs += 1
        run_id = f"bench-{self.runs}"
        urls = [f"http://127.0.0.1:{8100 + i}" for i in range(len(launch_ids))]
        args = {
            "bench_id": run_id,
            "launch_id": launch_ids[0],
            "launch_ids": launch_ids,
            "replicas": len(launch_ids),
            "arm": self.store.launches.get(launch_ids[0]).arm,  # type: ignore[union-attr]
            "base_url": urls,
            "workload": shape,
            "input_len": 1024,
            "output_len": 128,
            "prefix_len": 0,
            "concurrency": concurrency,
            "prompts": 8 * concurrency,
            "seed": seed,
            "repeat_group": group,
        }
        self.store.commands.add(run_id, BOX, "bench", args)
        per_url = [
            {
                "base_url": url,
                "streams": streams_per_replica(concurrency, len(out)),
                "requests": 100,
                "failed": 0,
                "out_tok_per_s": o,
                "in_tok_per_s": 8 * o,
                "ttft_ms_p50": 100.0 + i,
            }
            for i, (url, o) in enumerate(zip(urls, out, strict=True))
        ]
        result = {
            "shape": shape,
            "concurrency": concurrency,
            "seed": seed,
            "requests": 100 * len(out),
            "failed": 0,
            "out_tok_per_s": sum(out),
            "in_tok_per_s": 8 * sum(out),
            "ttft_ms_p50": 100.0,
            "client_cpu": 0.2,
            "client_bound": False,
            "per_url": per_url,
        }
        self.ingest(
            {"kind": "bench_result", "bench_id": run_id, "launch_id": launch_ids[0], "result": result}
        )
        return run_id


@pytest.fixture
def campaign(tmp_path: Path) -> Iterator[Campaign]:
    c = Campaign(tmp_path / "state.db")
    try:
        yield c
    finally:
        c.store.close()


def test_a_node_row_sums_its_replicas_and_keeps_each_ones_share_as_detail(campaign: Campaign) -> None:
    ids = campaign.launch("qwen-b12x", 2, [[B12X], [B12X]])
    campaign.bench(ids, [2500.0, 2600.0])
    [row] = bench_rows(campaign.store)  # one row for the node, never one per replica
    assert (row.replicas, row.out_tok_per_s, row.launch_id, row.seed, row.prompts) == (
        2,
        5100.0,
        ids[0],
        7,
        64,
    )
    detail = replica_results(campaign.store, row.id)
    assert [(d.replica, d.launch_id, d.out_tok_per_s, d.streams) for d in detail] == [
        (0, ids[0], 2500.0, 4),
        (1, ids[1], 2600.0, 4),
    ]
    assert row.kernel_line == B12X and row.kernel_fallback is False and "KERNEL-FALLBACK" not in row.marks
    # A failed tripwire on any replica marks the node row diagnostic-only.
    campaign.ingest(
        {
            "kind": "tripwire_result",
            "tripwire_id": "T1",
            "launch_id": ids[1],
            "result": {"ok": 3, "degenerate": 17, "wrong": 0, "total": 20, "passed": False},
        }
    )
    assert bench_rows(campaign.store)[0].diagnostic_only is True


def test_a_replica_on_another_kernel_than_asked_marks_the_node_row_kernel_fallback(
    campaign: Campaign,
) -> None:
    # Replica 1 fell back to Marlin; log noise that says "Using" is never a kernel line.
    ids = campaign.launch("qwen-b12x", 2, [[NOISE, B12X], [B12X, MARLIN]])
    campaign.bench(ids, [2000.0, 1200.0], concurrency=6)
    [row] = bench_rows(campaign.store)
    assert row.kernel_fallback is True and row.marks == "KERNEL-FALLBACK"
    assert row.kernel_line == B12X  # the noise line is not in it
    assert [f.text for f in row.fallbacks] == ["linear: asked b12x, used MarlinLinearKernel"]
    assert {k.kind: k.status for k in row.kernel_check} == {
        "linear": "fallback",
        "moe": "not-reported",
        "attention": "not-reported",
    }
    assert "kernel-fallback" in row.text()  # the Results filter finds it


def test_prefix_caching_is_what_the_engine_says_else_what_the_arm_asked() -> None:
    assert "enable_prefix_caching=True" in CPU_CONFIG  # the CPU vLLM's own config line, as the agent keeps it
    assert prefix_caching(["--no-enable-prefix-caching"], [CPU_CONFIG]) is True  # the engine's word wins
    assert (
        prefix_caching(["--enable-prefix-caching", "--no-enable-prefix-caching"], []) is False
    )  # the last flag
    assert (
        prefix_caching(["--enable-prefix-caching"], ["kernel_config=KernelConfig(moe_backend='auto')"])
        is True
    )
    assert prefix_caching([], []) is None


def test_queueing_marks_every_row_whose_streams_per_replica_exceed_what_a_replica_admits(
    campaign: Campaign,
) -> None:
    # 4,096 KV tokens hold 3 requests of 1,024 + 128 tokens (fewer than --max-num-seqs 16).
    assert admitted_streams(4096, 16, 1152) == 3
    ids = campaign.launch("qwen-b12x", 2, [[B12X], [B12X]])
    campaign.bench(ids, [1000.0, 1000.0], concurrency=6)  # 3 streams per replica: admitted
    campaign.bench(ids, [1000.0, 1000.0], concurrency=8)  # 4 per replica: the fourth queues
    rows = {r.concurrency: r for r in bench_rows(campaign.store)}
    assert (rows[6].admitted, rows[6].queueing, rows[8].queueing) == (3, False, True)
    assert rows[8].marks == "QUEUEING"
    assert rows[6].prefix_caching is True  # CPU_CONFIG says so, though the argv turns it off


def _groups(campaign: Campaign) -> dict[str, str]:
    """Arms A (two launches: a control pair), B, C and D benched three times each, E once."""
    figures = {
        "A1": ("arm-a", [1000.0, 1010.0, 990.0]),
        "A2": ("arm-a", [1030.0, 1040.0, 1020.0]),  # the same arm launched again: 3% apart
        "B": ("arm-b", [1060.0, 1070.0, 1065.0]),  # 6.5% faster than A1, outside its spread and the floor
        "C": ("arm-c", [1020.0, 1025.0, 1030.0]),  # 2.5% faster, outside A1's spread but inside the floor
        "D": ("arm-d", [1005.0, 1015.0, 1008.0]),  # inside A1's spread
    }
    groups = {}
    for name, (arm, outs) in figures.items():
        ids = campaign.launch(arm, 1, [[B12X]])
        groups[name] = f"group-{name}"
        for out in outs:
            campaign.bench(ids, [out], group=groups[name])
    groups["E"] = campaign.bench(campaign.launch("arm-e", 1, [[B12X]]), [2000.0])
    return groups


def test_repeats_report_median_spread_and_coefficient_of_variation(campaign: Campaign) -> None:
    g = _groups(campaign)
    result = compare(campaign.store, g["A1"], g["D"])
    a1 = result.a
    assert (a1.n, a1.median, a1.low, a1.high) == (3, 1000.0, 990.0, 1010.0)
    assert a1.cv == pytest.approx(0.01)  # sample standard deviation 10 over the mean 1000
    assert a1.spread_text == "1,000 tok/s median, 990-1,010, CV 1.0%"


def test_compare_says_faster_only_outside_the_spread_and_the_control_pairs_noise_floor(
    campaign: Campaign,
) -> None:
    g = _groups(campaign)
    faster = compare(campaign.store, g["B"], g["A1"])
    assert (faster.verdict, faster.winner) == ("faster", "a") and faster.percent == pytest.approx(6.5)
    assert faster.floor is not None and faster.floor.floor == pytest.approx(0.03)  # A1 against A2
    assert (
        faster.text
        == "A (arm-b) 6.5% faster than B (arm-a) (outside the measured spread and the noise floor of 3.0%)"
    )
    inside_floor = compare(campaign.store, g["A1"], g["C"])
    assert inside_floor.verdict == "tie" and "inside the noise floor of 3.0%" in inside_floor.text
    inside_spread = compare(campaign.store, g["D"], g["A1"])
    assert (
        inside_spread.verdict == "tie"
        and inside_spread.text == "tie: the difference (0.8%) is inside the spread"
    )
    lone = compare(campaign.store, g["E"], g["A1"])
    assert lone.verdict == "no-verdict" and "has no repeats" in lone.text and "--repeat 3" in lone.text
    # Sides by arm (its newest group at its one workload), by a row's run id, by a row's id.
    by_arm = compare(campaign.store, "arm-b", "arm-c")
    assert (by_arm.a.id, by_arm.b.id) == (g["B"], g["C"])
    run_of_b = campaign.store.scalar("SELECT run_id FROM bench_runs WHERE repeat_group = ? LIMIT 1", [g["B"]])
    row_of_d = campaign.store.scalar("SELECT id FROM bench_runs WHERE repeat_group = ? LIMIT 1", [g["D"]])
    assert compare(campaign.store, run_of_b, str(row_of_d)).b.id == g["D"]


def test_compare_refuses_unlike_workloads_and_names_what_it_cannot_find(campaign: Campaign) -> None:
    g = _groups(campaign)
    ids = campaign.launch("arm-b", 1, [[B12X]])
    campaign.bench(ids, [400.0], shape="judge", group="group-judge")
    campaign.bench(ids, [410.0], shape="judge", group="group-judge")
    with pytest.raises(InputError, match="ran different workloads"):
        compare(campaign.store, "group-judge", g["A1"])
    with pytest.raises(
        InputError, match=r"arm-b was benched at judge C8, router C8; choose one with --shape"
    ):
        compare(campaign.store, "arm-b", "arm-a")
    with pytest.raises(InputError, match="'nope' is no bench row"):
        compare(campaign.store, "nope", g["A1"])


def test_the_results_standings_mark_ties_with_the_best_group(campaign: Campaign) -> None:
    g = _groups(campaign)
    words = {s.group.id: s.word for s in standings(bench_rows(campaign.store))}
    assert words[g["B"]] == "best" and words[g["A2"]] == "-3.3%"
    assert words[g["C"]] == "-3.8%"  # 1,025 against 1,065: outside the spread and the 3.0% floor
    assert g["E"] not in words  # a lone run is no group


def test_campaign_compare_prints_the_verdict_and_exits_1_without_one(
    campaign: Campaign, capsys: pytest.CaptureFixture[str]
) -> None:
    g = _groups(campaign)
    db = str(campaign.path)
    assert main(["--db", db, "compare", g["B"], g["A1"], "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["verdict"], out["winner"], out["a"]["n"], out["a"]["median"]) == ("faster", "a", 3, 1065.0)
    assert out["noise_floor"]["floor"] == pytest.approx(0.03)
    assert main(["--db", db, "compare", g["D"], g["A1"]]) == 0
    text = capsys.readouterr().out
    assert "A: arm-d router C8 (group group-D, 3 runs): 1,008 tok/s median, 1,005-1,015" in text
    assert text.rstrip().endswith("tie: the difference (0.8%) is inside the spread")
    assert main(["--db", db, "compare", g["E"], g["A1"]]) == 1
    assert "no verdict" in capsys.readouterr().out
    assert main(["--db", db, "compare", "nope", g["A1"]]) == 2
    assert "is no bench row" in capsys.readouterr().err


def test_exports_carry_replicas_seed_prefix_caching_kernel_fallback_and_repeat_group(
    campaign: Campaign, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = campaign.launch("qwen-b12x", 2, [[B12X], [MARLIN]])
    campaign.bench(ids, [1000.0, 900.0], group="group-x", seed=41)
    campaign.store.results.add_bench_run(
        {"arm": "older", "shape": "router", "concurrency": 8, "box": BOX, "out_tok_per_s": 10.0}
    )  # nothing known of its conditions
    db = str(campaign.path)
    assert main(["--db", db, "export", "summary", "--format", "json"]) == 0
    rows = {r["arm"]: r for r in json.loads(capsys.readouterr().out)}
    node = rows["qwen-b12x"]
    assert (
        node["replicas"],
        node["seed"],
        node["prefix_caching"],
        node["kernel_fallback"],
        node["repeat_group"],
    ) == (2, 41, True, True, "group-x")
    assert rows["older"]["prefix_caching"] is None and rows["older"]["kernel_fallback"] is False
    assert main(["--db", db, "export", "summary"]) == 0
    tsv = {r["arm"]: r for r in csv.DictReader(io.StringIO(capsys.readouterr().out), delimiter="\t")}
    assert (tsv["qwen-b12x"]["prefix_caching"], tsv["qwen-b12x"]["kernel_fallback"]) == ("yes", "yes")
    assert (tsv["older"]["prefix_caching"], tsv["older"]["kernel_fallback"]) == ("", "no")
