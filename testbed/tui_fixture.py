"""A small, fixed campaign written through the Store, for TUI tests, snapshots and the TUI benchmark.

It carries the write-up's stories in miniature: a box whose GPU 2 is capped at 400 W of 600 W, a box
that went dead 20 minutes ago, an arm serving with its kernel lines, an arm the engine refused (with
the backends it accepts), a degenerate fast layout whose numbers are diagnostic-only, a client-bound
bench row, an imported row, and a hard stop at 01:27 UTC. Every instant is fixed, so the console
renders it identically on every run.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from console.errors import Unreachable
from console.store import Box, Store
from console.store.jsonutil import dumps
from console.store.results import ApiPrice
from console.timeutil import parse_instant
from console.tui.actions import LintLine, Recipes

NOW = parse_instant("2026-09-06T00:15:00Z")
"""The fake clock of every TUI test: 01:15 BST, 1h12m before the 01:27 UTC hard stop."""

START = NOW - 30 * 60_000
STEP_MS = 5_000

QWEN = "qwen3.8-27b-nvfp4-b12x"
GLM_FAILED = "glm-5.3-flash-dp4-ep"
GLM_DEGEN = "glm-4.7-dp2tp2"
SMALL = "qwen3-0.6b-bf16"
UNFORCED = "qwen3.8-27b-nvfp4-auto"


def _probe_gpu(i: int) -> dict[str, object]:
    limit = 400.0 if i == 2 else 600.0
    return {
        "index": i,
        "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
        "uuid": f"GPU-fixture-{i}",
        "pci_bus_id": f"00000000:0{i + 1}:00.0",
        "compute_cap": "12.0",
        "power_w": 80.0,
        "power_limit_w": limit,
        "enforced_limit_w": limit,
        "default_limit_w": 600.0,
        "min_limit_w": 150.0,
        "max_limit_w": 600.0,
        "sm_clock_mhz": 180.0,
        "max_sm_clock_mhz": 2910.0,
        "temp_c": 35.0,
        "util_pct": 0.0,
        "mem_used_mib": 0.0,
        "mem_total_mib": 97887.0,
    }


PROBE: dict[str, object] = {
    "t_ms": START - 60_000,
    "console_t_ms": START - 60_000,
    "hostname": "pro-a",
    "tz": "Europe/London",
    "utc_offset_s": 3600,
    "cpu_count": 64,
    "disk": {"path": "/", "free_bytes": 900 << 30, "total_bytes": 2 << 40},
    "driver_version": "580.95.05",
    "cuda_driver_version": "13.0",
    "gpus": [_probe_gpu(i) for i in range(4)],
    "processes": [],
    "topology": {"raw": "", "links": {"0-1": "PHB", "2-3": "PHB"}, "nvlink_all": False},
    "serving_env": {
        "prefix": None,
        "python": None,
        "torch_cuda": None,
        "vllm_version": None,
        "cuinit": None,
        "cuinit_name": None,
        "libcuda_path": None,
        "compat_libs": [],
        "error": None,
    },
    "source": "nvidia-smi",
    "warnings": [],
}
"""A probe of pro-a in the shape docs/contracts.md gives: GPU 2 enforced at 400 W of a 600 W maximum."""


@dataclass(frozen=True)
class Fixture:
    path: Path
    now_ms: int
    serving_launch: str
    failed_launch: str


def gpu_rows(
    box: str,
    gpus: int,
    start: int,
    end: int,
    step: int,
    capped: Iterable[int] = (),
    max_w: float = 600.0,
    cap_w: float = 400.0,
) -> Iterable[tuple[Any, ...]]:
    """GPU samples in gpu_samples column order: under load, a capped GPU sits at its enforced limit."""
    capped = set(capped)
    for t in range(start, end + 1, step):
        phase = (t // step) % 60
        for g in range(gpus):
            limit = cap_w if g in capped else max_w
            draw = round(min(limit, 0.62 * max_w + 0.35 * max_w * math.sin(phase / 9.5 + g)), 1)
            yield (
                box,
                g,
                t,
                draw,
                limit,
                limit,
                max_w,
                2400.0 if g in capped else 2850.0,
                95.0,
                81000.0,
                97887.0,
                61.0 + g,
            )


def insert_gpu_rows(store: Store, rows: Iterable[tuple[Any, ...]]) -> None:
    with store.atomic() as db:
        db.conn.executemany(
            "INSERT INTO gpu_samples(box, gpu, t_ms, power_w, power_limit_w, enforced_limit_w, max_limit_w, "
            "sm_clock_mhz, util_pct, mem_used_mib, mem_total_mib, temp_c) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            rows,
        )


def server_rows(
    box: str, launch_id: str, start: int, end: int, step: int, peak: float
) -> Iterable[tuple[Any, ...]]:
    for t in range(start, end + 1, step):
        ramp = min(1.0, (t - start) / (10 * 60_000))
        gen = round(peak * ramp * (0.9 + 0.1 * math.sin(t / 40_000)), 1)
        yield (
            box,
            launch_id,
            t,
            gen,
            round(gen * 3.1, 1),
            round(812 * ramp),
            round(212 * ramp),
            0.71 * ramp,
            0.42,
            gen * 60,
            gen * 180,
        )


def insert_server_rows(store: Store, rows: Iterable[tuple[Any, ...]]) -> None:
    with store.atomic() as db:
        db.conn.executemany(
            "INSERT INTO server_samples(box, launch_id, t_ms, gen_tok_per_s, prompt_tok_per_s, running, "
            "waiting, kv_usage, prefix_hit_rate, gen_tokens_total, prompt_tokens_total) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            rows,
        )


def _bench(arm: str, shape: str, c: int, out: float, **extra: object) -> dict[str, object]:
    row: dict[str, object] = {
        "box": "pro-a",
        "launch_id": None,
        "arm": arm,
        "model": arm.split("-nvfp4", maxsplit=1)[0].split("-dp", maxsplit=1)[0],
        "shape": shape,
        "concurrency": c,
        "prompts": 4 * c,
        "seed": 0,
        "requests": 4 * c,
        "failed": 0,
        "req_per_s": round(out / 1024, 2),
        "in_tok_per_s": out * 3,
        "out_tok_per_s": out,
        "total_tok_per_s": out * 4,
        "ttft_ms_p50": 180.0 + c,
        "ttft_ms_p99": 900.0 + c,
        "tpot_ms_p50": 21.5,
        "tpot_ms_p99": 44.0,
        "e2e_ms_p99": 31000.0,
        "power_limit_w": 600.0,
        "source": "measured",
        "client_bound": 0,
        "diagnostic_only": 0,
        "queueing": 0,
        "client_cpu": 0.31,
        "kernel_line": None,
        "tripwire_id": None,
        "started_ms": None,
        "ended_ms": None,
        "provenance": None,
    }
    row.update(extra)
    return row


def build(path: Path) -> Fixture:
    """Write the fixture campaign to ``path`` (a new file) and return what tests need to find in it."""
    with Store(path, clock=lambda: START) as store:
        store.boxes.add(Box(name="local", kind="local", status="up", tz="UTC", gpu_summary="no GPU"))
        store.boxes.add(
            Box(
                name="pro-a",
                ssh_user="root",
                host="203.0.113.7",
                port=22022,
                price_per_hour=2.74,
                status="up",
                tz="Europe/London",
                gpu_summary="4x RTX PRO 6000 96GB",
                last_seen_ms=NOW - 1000,
            )
        )
        store.boxes.add(
            Box(
                name="h200-b",
                ssh_user="root",
                host="198.51.100.4",
                price_per_hour=6.10,
                status="down",
                status_detail="connection refused since 23:55 UTC",
                tz="UTC",
                gpu_summary="2x H200 141GB",
                last_seen_ms=NOW - 20 * 60_000,
            )
        )
        insert_gpu_rows(store, gpu_rows("pro-a", 4, START, NOW, STEP_MS, capped=[2]))
        insert_gpu_rows(store, gpu_rows("h200-b", 2, START, NOW - 20 * 60_000, STEP_MS, max_w=700.0))

        serving, failed, stopped = "L-qwen-0", "L-glm-0", "L-glm47-0"
        with store.atomic() as db:
            db.table("probes").insert({"id": 1, "box": "pro-a", "t_ms": START - 60_000, "data": dumps(PROBE)})
            db.table("check_verdicts").insert_all(
                [
                    {
                        "box": "pro-a",
                        "probe_id": 1,
                        "t_ms": START - 60_000,
                        "check_name": name,
                        "verdict": v,
                        "reason": reason,
                    }
                    for name, v, reason in (
                        (
                            "power",
                            "fail",
                            "GPU 2 capped at 400 W of 600 W max (-23% NVFP4, -34% FP8 in the write-up)",
                        ),
                        ("driver", "ok", "driver 580.95 supports CUDA 13.0 of the serving env"),
                        ("topology", "warn", "no NVLink: PCIe PHB between GPU pairs"),
                        ("clock", "ok", "box clock within 0.2 s of the console"),
                    )
                ]
            )
            db.table("launches").insert_all(
                [
                    {
                        "id": stopped,
                        "box": "pro-a",
                        "arm": GLM_DEGEN,
                        "replica": 0,
                        "gpus": dumps([0, 1, 2, 3]),
                        "port": 8100,
                        "pid": 4100,
                        "state": "stopped",
                        "start_ms": START - 3600_000,
                        "ready_ms": START - 3300_000,
                        "stop_ms": START - 600_000,
                        "exit_code": 0,
                    },
                    {
                        "id": failed,
                        "box": "pro-a",
                        "arm": GLM_FAILED,
                        "replica": 0,
                        "gpus": dumps([0, 1, 2, 3]),
                        "port": 8100,
                        "pid": 4200,
                        "state": "failed",
                        "start_ms": START - 500_000,
                        "stop_ms": START - 420_000,
                        "exit_code": 1,
                        "failure_reason": "vllm/model_executor/layers/fused_moe/oracle.py:211 ValueError: "
                        "moe_backend 'flashinfer_cutlass' is not supported for this model",
                        "backends_accepted": dumps(["triton", "marlin"]),
                        "log_path": "/root/.campaign-agent/logs/L-glm-0.log",
                    },
                    {
                        "id": serving,
                        "box": "pro-a",
                        "arm": QWEN,
                        "replica": 0,
                        "gpus": dumps([0, 1, 2, 3]),
                        "port": 8100,
                        "pid": 4300,
                        "state": "serving",
                        "start_ms": START - 240_000,
                        "ready_ms": START - 60_000,
                        "log_path": "/root/.campaign-agent/logs/L-qwen-0.log",
                        "kv_cache_tokens": 1_212_416,
                        "max_concurrency": 1184.0,
                    },
                ]
            )
            db.table("arms").insert_all(
                [
                    {
                        "arm": QWEN,
                        "model": "qwen3.8-27b",
                        "box": "pro-a",
                        "recipe_hash": "a1",
                        "argv": "[]",
                        "env": "{}",
                        "gpus": "[[0,1,2,3]]",
                        "tensor_parallel": 4,
                        "created_ms": START - 240_000,
                    },
                    {
                        "arm": GLM_FAILED,
                        "model": "glm-5.3-flash",
                        "box": "pro-a",
                        "recipe_hash": "b2",
                        "argv": "[]",
                        "env": "{}",
                        "gpus": "[[0,1,2,3]]",
                        "tensor_parallel": 1,
                        "created_ms": START - 500_000,
                    },
                ]
            )
            db.table("kernel_lines").insert_all(
                [
                    {
                        "box": "pro-a",
                        "launch_id": serving,
                        "t_ms": START - 200_000,
                        "category": cat,
                        "line": line,
                    }
                    for cat, line in (
                        ("linear", "Using B12xNvFp4LinearKernel for NVFP4 GEMM"),
                        ("attention", "Using FLASHINFER attention backend"),
                        ("config", "max_num_seqs=1024 max_num_batched_tokens=16384"),
                    )
                ]
            )
            trip_ok = (
                db.table("tripwire_runs")
                .insert(
                    {
                        "box": "pro-a",
                        "launch_id": serving,
                        "arm": QWEN,
                        "model": "qwen3.8-27b",
                        "t_ms": START + 60_000,
                        "ok": 20,
                        "degenerate": 0,
                        "wrong": 0,
                        "total": 20,
                        "passed": 1,
                    }
                )
                .last_pk
            )
            trip_bad = (
                db.table("tripwire_runs")
                .insert(
                    {
                        "box": "pro-a",
                        "launch_id": stopped,
                        "arm": GLM_DEGEN,
                        "model": "glm-4.7",
                        "t_ms": START - 3000_000,
                        "ok": 11,
                        "degenerate": 8,
                        "wrong": 1,
                        "total": 20,
                        "passed": 0,
                    }
                )
                .last_pk
            )
            kernel = "B12xNvFp4LinearKernel / FLASHINFER"
            db.table("bench_runs").insert_all(
                [
                    _bench(
                        QWEN,
                        "chat-1k",
                        64,
                        3120.0,
                        started_ms=START + 120_000,
                        ended_ms=START + 300_000,
                        launch_id=serving,
                        kernel_line=kernel,
                        tripwire_id=trip_ok,
                    ),
                    _bench(
                        QWEN,
                        "chat-1k",
                        256,
                        4410.5,
                        started_ms=START + 400_000,
                        ended_ms=START + 580_000,
                        launch_id=serving,
                        kernel_line=kernel,
                        tripwire_id=trip_ok,
                    ),
                    _bench(
                        QWEN,
                        "chat-1k",
                        1024,
                        5215.0,
                        started_ms=NOW - 60_000,
                        ended_ms=None,
                        launch_id=serving,
                        kernel_line=kernel,
                        tripwire_id=trip_ok,
                    ),
                    _bench(
                        GLM_DEGEN,
                        "chat-1k",
                        256,
                        6020.0,
                        started_ms=START - 2900_000,
                        ended_ms=START - 2700_000,
                        launch_id=stopped,
                        kernel_line="TritonMoE / FLASH_ATTN",
                        tripwire_id=trip_bad,
                        diagnostic_only=1,
                    ),
                    _bench(
                        SMALL,
                        "short-128",
                        2048,
                        41000.0,
                        started_ms=START - 1800_000,
                        ended_ms=START - 1700_000,
                        kernel_line="cutlass bf16",
                        client_bound=1,
                        client_cpu=0.98,
                        queueing=1,
                    ),
                    _bench(
                        "seed-glm-4.6-fp8",
                        "chat-1k",
                        256,
                        2650.0,
                        box=None,
                        started_ms=None,
                        ended_ms=None,
                        kernel_line="FP8 CUTLASS (as published)",
                        power_limit_w=400.0,
                        source="imported",
                        provenance="campaign write-up table 3",
                    ),
                ]
            )
            stop = (
                db.table("timers")
                .insert(
                    {
                        "box": "pro-a",
                        "deadline_ms": parse_instant("2026-09-06T01:27:00Z"),
                        "action": "stop-arms",
                        "state": "armed",
                        "input_text": "2026-09-06 01:27 UTC",
                        "created_ms": START,
                        "updated_ms": START,
                    }
                )
                .last_pk
            )
            gone = (
                db.table("timers")
                .insert(
                    {
                        "box": "h200-b",
                        "deadline_ms": NOW + 3600_000,
                        "action": "destroy",
                        "state": "cancelled",
                        "input_text": "in 2h",
                        "created_ms": START,
                        "updated_ms": START + 60_000,
                    }
                )
                .last_pk
            )
            db.table("timer_log").insert_all(
                [
                    {"timer_id": stop, "t_ms": START, "event": "armed", "enforcer": "agent"},
                    {"timer_id": gone, "t_ms": START, "event": "armed", "enforcer": "agent"},
                    {"timer_id": gone, "t_ms": START + 60_000, "event": "cancelled", "enforcer": "console"},
                ]
            )
        insert_server_rows(store, server_rows("pro-a", serving, START, NOW, STEP_MS, peak=5200.0))
        add_sweep(store, failed)
    return Fixture(path=path, now_ms=NOW, serving_launch=serving, failed_launch=failed)


SWEEP_LIST = "glm-5.3-moe-pairs"


def add_sweep(store: Store, refused_launch: str) -> None:
    """A sweep half-way through its walk, as the write-up's ksweep.sh night: one arm served (with benches),
    one refused by the engine (which named the backends it accepts, queued next), one crashed, one
    degenerate, one running and one still pending; a finished earlier sweep below it."""
    with store.atomic() as db:
        old = (
            db.table("sweeps")
            .insert(
                {
                    "list": "qwen3-smoke",
                    "box": "pro-a",
                    "shapes": dumps(["chat-1k"]),
                    "concurrency": dumps([64]),
                    "bench_degenerate": 0,
                    "state": "done",
                    "created_ms": START - 7200_000,
                    "updated_ms": START - 5400_000,
                }
            )
            .last_pk
        )
        db.table("sweep_arms").insert(
            {
                "sweep_id": old,
                "position": 0,
                "arm": SMALL,
                "origin": "list",
                "state": "served",
                "attempts": 1,
                "started_ms": START - 7200_000,
                "ended_ms": START - 5400_000,
            }
        )
        sweep = (
            db.table("sweeps")
            .insert(
                {
                    "list": SWEEP_LIST,
                    "box": "pro-a",
                    "shapes": dumps(["chat-1k"]),
                    "concurrency": dumps([64, 256]),
                    "bench_degenerate": 0,
                    "state": "running",
                    "runner_pid": 4242,
                    "runner_host": "laptop",
                    "created_ms": START - 600_000,
                    "updated_ms": NOW - 30_000,
                }
            )
            .last_pk
        )
        refusal = (
            "vllm/model_executor/layers/fused_moe/oracle.py:211 ValueError: moe_backend 'flashinfer_cutlass' "
            "is not supported for this model; accepted backends: ['triton', 'marlin']"
        )
        arms: list[dict[str, Any]] = [
            {
                "arm": QWEN,
                "origin": "list",
                "state": "served",
                "kv_cache_tokens": 1_212_416,
                "max_concurrency": 1184.0,
                "launch_ids": dumps(["L-qwen-0"]),
                "started_ms": START - 600_000,
                "ended_ms": START - 590_000,
            },
            {
                "arm": f"{GLM_FAILED}@auto+flashinfer_cutlass",
                "base": GLM_FAILED,
                "moe_backend": "flashinfer_cutlass",
                "origin": "pair",
                "state": "refused",
                "reason": refusal,
                "backends_accepted": dumps(["triton", "marlin"]),
                "backends_potential": dumps(["triton", "marlin", "flashinfer_cutlass"]),
                "launch_ids": dumps([refused_launch]),
                "started_ms": START - 500_000,
                "ended_ms": START - 420_000,
            },
            {
                "arm": f"{GLM_FAILED}@auto+triton",
                "base": GLM_FAILED,
                "moe_backend": "triton",
                "origin": "accepted",
                "queued_by": f"{GLM_FAILED}@auto+flashinfer_cutlass",
                "state": "crashed",
                "attempts": 1,
                "reason": "server exited with code -9 (killed: out of host memory) before it was ready",
                "started_ms": START - 400_000,
                "ended_ms": START - 200_000,
            },
            {
                "arm": GLM_DEGEN,
                "origin": "list",
                "state": "degenerate",
                "reason": "tripwire 11/20: 8 degenerate, 1 wrong",
                "started_ms": START - 180_000,
                "ended_ms": START - 100_000,
            },
            {
                "arm": f"{GLM_FAILED}@auto+marlin",
                "base": GLM_FAILED,
                "moe_backend": "marlin",
                "origin": "accepted",
                "queued_by": f"{GLM_FAILED}@auto+flashinfer_cutlass",
                "state": "running",
                "attempts": 2,
                "started_ms": NOW - 192_000,
            },
            {"arm": UNFORCED, "origin": "list", "state": "pending"},
        ]
        ids = []
        for position, arm in enumerate(arms):
            arm.setdefault("attempts", 1 if arm["state"] != "pending" else 0)
            ids.append(
                db.table("sweep_arms").insert({"sweep_id": sweep, "position": position, **arm}).last_pk
            )
        qwen_runs = [
            r["id"]
            for r in store.rows(
                "SELECT id FROM bench_runs WHERE arm = ? AND concurrency IN (64, 256) ORDER BY concurrency",
                [QWEN],
            )
        ]
        for run_id, c in zip(qwen_runs, (64, 256), strict=True):
            db.table("sweep_benches").insert(
                {
                    "sweep_arm_id": ids[0],
                    "launch_id": "L-qwen-0",
                    "shape": "chat-1k",
                    "concurrency": c,
                    "bench_run_id": run_id,
                    "admitted": 1184,
                    "t_ms": START - 595_000,
                }
            )


ECONOMICS_BOX = "pro-a"


def add_economics(path: Path) -> None:
    """Router and promptopt rows of three configurations, their task accuracy and two API prices: enough
    for the Economics view to price each one and draw a frontier with a dominated and a degenerate point.
    Kept out of ``build`` so the Results and Live screens stay as their snapshots show them."""
    shapes = {"router": (1024, 128, 0), "promptopt": (512, 256, 3072)}
    configs = [  # arm, model, router out tok/s, promptopt out tok/s, accuracy, diagnostic-only
        (QWEN, "qwen3.8-27b", 2400.0, 3900.0, 0.842, 0),
        (SMALL, "qwen3-0.6b", 9800.0, 14500.0, 0.512, 0),
        ("qwen3.8-27b-fp8-flashinfer", "qwen3.8-27b", 1900.0, 3100.0, 0.801, 0),
        (GLM_DEGEN, "glm-4.7", 5200.0, 8800.0, 0.655, 1),
    ]
    with Store(path, clock=lambda: NOW) as store:
        for arm, model, router, promptopt, accuracy, diagnostic in configs:
            for shape, out in (("router", router), ("promptopt", promptopt)):
                input_len, output_len, prefix_len = shapes[shape]
                store.results.add_bench_run(
                    _bench(
                        arm,
                        shape,
                        256,
                        out,
                        model=model,
                        input_len=input_len,
                        output_len=output_len,
                        prefix_len=prefix_len,
                        in_tok_per_s=out * (input_len + prefix_len) / output_len,
                        started_ms=START - 7000_000,
                        ended_ms=START - 6900_000,
                        diagnostic_only=diagnostic,
                    )
                )
            store.results.add_eval_run(
                {
                    "box": ECONOMICS_BOX,
                    "arm": arm,
                    "model": model,
                    "t_ms": START - 6000_000,
                    "configuration": arm,
                    "items": 200,
                    "overall": accuracy,
                }
            )
        for model, provider, p_in, p_out, cached in (
            ("qwen3.8-27b", "openrouter-list", 0.30, 1.20, 0.06),
            ("qwen3-0.6b", "openrouter-list", 0.02, 0.08, None),
            ("glm-4.7", "openrouter-list", 0.40, 1.60, 0.10),
        ):
            store.results.add_api_price(ApiPrice(model, provider, p_in, p_out, cached))


class FixedActions:
    """A stand-in for console.service in Pilot tests: fixed recipes and lint, and a record of every call.

    The console talks to the service only through this interface (console.tui.actions.Actions), so the
    tests drive the real screens, keys and confirmations; what the service does with a launch is tested
    with the service itself.
    """

    def __init__(self, read_only: bool = False):
        self.read_only = read_only
        self.calls: list[tuple[Any, ...]] = []
        self.logs = {
            "L-glm47-0": [
                "INFO 09-05 22:45:10 [launcher.py:31] Shutting down FastAPI HTTP server.",
                "INFO 09-05 22:45:11 [api_server.py:1912] vLLM API server stopped",
            ],
            "L-qwen-0": [
                "INFO 09-05 23:41:02 [gpu_model_runner.py:1901] Model loading took 14.2 GiB",
                "INFO 09-05 23:43:40 [api_server.py:1880] Starting vLLM API server 0 on http://127.0.0.1:8100",
                'INFO:     127.0.0.1:51234 - "POST /v1/completions HTTP/1.1" 200 OK',
            ],
        }
        self._recipes = Recipes(
            {QWEN: "qwen3.8-27b", GLM_FAILED: "glm-5.3-flash", UNFORCED: "qwen3.8-27b"},
            shapes=("chat-1k", "promptopt", "router"),
        )
        self.findings = {
            QWEN: [
                LintLine("warn", "R7-no-nvlink", "tensor_parallel 4 on a box without NVLink", "arms.toml:12")
            ],
            UNFORCED: [
                LintLine(
                    "error",
                    "R1-nvfp4-linear-backend",
                    "NVFP4 without a forced linear backend: the engine may pick a slow kernel",
                    "arms.toml:30",
                )
            ],
        }

    def recipes(self) -> Recipes:
        return self._recipes

    def lint(self, arm: str, box: str) -> list[LintLine]:
        self.calls.append(("lint", arm, box))
        return list(self.findings.get(arm, []))

    async def launch(self, box: str, arm: str) -> str:
        self.calls.append(("launch", box, arm))
        return f"launch of {arm} on {box} requested"

    async def kill(self, box: str, launch_id: str) -> str:
        self.calls.append(("kill", box, launch_id))
        return f"{launch_id} stopping"

    async def log_tail(self, launch_id: str, lines: int) -> list[str]:
        self.calls.append(("log_tail", launch_id, lines))
        if launch_id not in self.logs:
            raise Unreachable(f"box unreachable: no log for {launch_id}")
        return self.logs[launch_id][-lines:]

    async def arm_timer(self, box: str, text: str, action: str) -> str:
        self.calls.append(("arm_timer", box, text, action))
        return "armed"

    async def check(self, box: str) -> str:
        self.calls.append(("check", box))
        return "FAIL power (GPU 2 capped at 400 W of 600 W max)"

    async def connect(self, box: str) -> str:
        self.calls.append(("connect", box))
        return "already running; 0 new events ingested"

    async def bench(self, launch_id: str, box: str, shape: str, concurrency: int) -> str:
        self.calls.append(("bench", launch_id, box, shape, concurrency))
        return f"{QWEN} {shape} C{concurrency}: out 5.2k tok/s, in 16k tok/s, tripwire ok"

    async def tripwire(self, launch_id: str, box: str) -> str:
        self.calls.append(("tripwire", launch_id, box))
        return f"{QWEN}: tripwire 20/20 ok"

    async def supervise(self, notify: Callable[[str], None]) -> None:
        self.calls.append(("supervise",))

    async def close(self) -> None:
        self.calls.append(("close",))
