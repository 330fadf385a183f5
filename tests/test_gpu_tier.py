"""The ``gpu`` tier: the agent's GPU paths on a real NVIDIA GPU, with the figures they read printed.

Why: every other test reads GPUs through fakes (testbed/fake_nvidia_smi.py, fake_pynvml.py). These
run the real NVML binding, the probe's power limits and its ``cuInit(0)`` through the real libcuda, a
kill through the agent daemon that must give a torch process's memory back, power idle vs loaded, and the
energy counter's joules against the 1 Hz power samples' trapezoid under load.
Where no NVIDIA GPU or NVML exists (CI) every test here skips, saying why; a ``gpu`` skip never fails CI
(tests/conftest.py fails skips of sshd and vllm tests only). On a GPU machine:
``python3 -m pytest -m gpu -s -q tests/test_gpu_tier.py`` (``-s`` shows the figures).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agents.gpu import GpuSampler
from agents.probe import probe
from console.readmodel.energy import counter_joules, counter_span, integrate_power
from testbed.agent_box import AgentBox
from testbed.ports import free_ports

pytestmark = pytest.mark.gpu

HOLDER = Path(__file__).resolve().parent / "support" / "gpu_holder.py"
HOLD_GIB = 16.0
NEAR_IDLE_MIB = 512.0
"""After the kill, the GPU's used memory must be back within this much of its idle reading."""


def _no_gpu_reason() -> str | None:
    try:
        import pynvml
    except ImportError:
        return "no NVIDIA GPU/NVML here: nvidia-ml-py (import pynvml) is not installed"
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound / DriverNotLoaded: no driver, no GPU
        return f"no NVIDIA GPU/NVML here: nvmlInit failed ({type(exc).__name__}: {exc})"
    try:
        count = int(pynvml.nvmlDeviceGetCount())
    except Exception as exc:
        return f"NVML answers but cannot count GPUs ({type(exc).__name__}: {exc})"
    return None if count > 0 else "NVML answers but sees no GPU"


@pytest.fixture(scope="module", autouse=True)
def real_gpu() -> None:
    reason = _no_gpu_reason()
    if reason is not None:
        pytest.skip(reason)


@pytest.fixture
def sampler() -> Iterator[tuple[GpuSampler, list[str]]]:
    said: list[str] = []
    s = GpuSampler(lambda where, message: said.append(f"{where}: {message}"), "nvml")
    assert s.source == "nvml", said
    try:
        yield s, said
    finally:
        s.close()


def _needs_torch_cuda() -> None:
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed in this Python: no CUDA process to hold memory or load the GPU")


def _gpu0_uuid() -> str:
    import pynvml

    uuid = pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(0))
    return uuid.decode() if isinstance(uuid, bytes) else str(uuid)


def _cuda_env() -> dict[str, str]:
    """CUDA device 0 of a child = NVML's GPU 0 (by uuid: CUDA's own order may differ from NVML's)."""
    return {"CUDA_VISIBLE_DEVICES": _gpu0_uuid()}


# -- (1) the sampler over real NVML ----------------------------------------------------------------


def test_nvml_sampler_reads_every_gpu_and_what_a_sample_costs(sampler: tuple[GpuSampler, list[str]]) -> None:
    s, said = sampler
    rows = s.read()
    for r in rows:
        print(
            f"\n[sampler] GPU {r['gpu']}: power {r['power_w']} W, limit {r['power_limit_w']} W "
            f"(enforced {r['enforced_limit_w']}, max {r['max_limit_w']}), memory {r['mem_used_mib']:.0f} of "
            f"{r['mem_total_mib']:.0f} MiB, SM {r['sm_clock_mhz']} MHz, util {r['util_pct']} %, {r['temp_c']} C"
        )
    costs = []
    for _ in range(50):
        t0 = time.perf_counter()
        s.read()
        costs.append(time.perf_counter() - t0)
    median_us = statistics.median(costs) * 1e6
    print(
        f"[sampler] one read of all {s.count} GPU(s): median {median_us:.0f} us over 50 "
        f"(min {min(costs) * 1e6:.0f}, max {max(costs) * 1e6:.0f} us); {median_us / s.count:.0f} us per GPU"
    )
    print(f"[sampler] warnings: {said or 'none'}")
    assert len(rows) == s.count >= 1
    for r in rows:
        assert r["power_w"] is not None and r["power_w"] > 0
        assert r["power_limit_w"] is not None and r["max_limit_w"] is not None
        assert 0 < r["power_limit_w"] <= r["max_limit_w"]
        assert r["mem_total_mib"] is not None and r["mem_total_mib"] > 0
        assert r["mem_used_mib"] is not None and 0 <= r["mem_used_mib"] <= r["mem_total_mib"]
    assert said == [], "a real driver's NVML failed a call the sampler makes"
    assert median_us < 50_000, "an NVML read of the GPUs should cost well under the 1 Hz tick"


# -- (2) the probe: power limits and cuInit(0) through the real libcuda --------------------------------


def test_probe_reads_the_power_limits_and_cuinit_through_the_real_libcuda(tmp_path: Path) -> None:
    t0 = time.monotonic()
    p = probe(serving_python=sys.executable, disk_path=str(tmp_path))
    took = time.monotonic() - t0
    env = p["serving_env"]
    print(
        f"\n[probe] source {p['source']}, driver {p['driver_version']}, CUDA {p['cuda_driver_version']}, "
        f"{len(p['gpus'])} GPU(s), took {took:.1f} s"
    )
    for g in p["gpus"]:
        print(
            f"[probe] GPU {g['index']} {g['name']} (cc {g['compute_cap']}, {g['pci_bus_id']}): power.limit "
            f"{g['power_limit_w']} W vs power.max_limit {g['max_limit_w']} W (default {g['default_limit_w']}, "
            f"min {g['min_limit_w']}, enforced {g['enforced_limit_w']}); max SM clock {g['max_sm_clock_mhz']} MHz"
        )
    print(
        f"[probe] serving python {env['python']}: cuInit(0) = {env['cuinit']} ({env['cuinit_name'] or 'CUDA_SUCCESS'}), "
        f"libcuda {env['libcuda_path']}, driver CUDA {env['cuda_driver_version']}, torch CUDA {env['torch_cuda']}"
    )
    print(f"[probe] warnings: {p['warnings'] or 'none'}")
    assert p["source"] == "nvml" and p["driver_version"] and p["cuda_driver_version"]
    for g in p["gpus"]:
        assert g["power_limit_w"] is not None and g["max_limit_w"] is not None
        assert 0 < g["power_limit_w"] <= g["max_limit_w"]
    assert env["error"] is None, env
    assert env["cuinit"] == 0 and env["cuinit_name"] is None, env
    assert env["libcuda_path"] and "libcuda.so" in env["libcuda_path"]


# -- (3) a kill through the agent daemon gives the GPU's memory back -----------------------------------


def _last_gpu0(box: AgentBox, after_seq: int) -> tuple[int, float]:
    """(seq, mem_used_mib of GPU 0) of the second gpu_sample journaled after ``after_seq``."""
    seen: list[dict[str, Any]] = []

    def second_sample(e: dict[str, Any]) -> bool:
        if e["kind"] == "gpu_sample" and e["seq"] > after_seq and e["seq"] not in {x["seq"] for x in seen}:
            seen.append(e)
        return len(seen) >= 2

    box.wait_for(second_sample, timeout=30, what="two GPU samples")
    e = seen[1]
    return e["seq"], next(g for g in e["gpus"] if g["gpu"] == 0)["mem_used_mib"]


def test_kill_through_the_agent_frees_the_gpu_memory() -> None:
    _needs_torch_cuda()
    root = Path(tempfile.mkdtemp(prefix="gt-"))  # the agent's unix socket path must stay under 108 bytes
    box = AgentBox(root / "agent", interval_s=0.25, extra_args=["--gpu-source", "nvml"])
    try:
        box.start()
        hello = box.ok("hello")
        assert hello["gpu_source"] == "nvml", hello
        seq, idle = _last_gpu0(box, 0)
        port = free_ports(1)
        argv = [sys.executable, str(HOLDER), "--port", str(port), "--gib", str(HOLD_GIB)]
        t0 = time.monotonic()
        launched = box.ok(
            "launch",
            {
                "launch_id": "gpu-holder",
                "argv": argv,
                "env": _cuda_env(),
                "port": port,
                "gpus": [0],
                "ready_timeout_s": 180,
            },
        )
        assert launched["state"] == "starting", launched
        serving = box.wait_for(
            lambda e: (
                e["kind"] == "launch_state"
                and e["launch_id"] == "gpu-holder"
                and e["state"] in ("serving", "failed")
            ),
            timeout=180,
            what="the holder serving",
        )
        assert serving["state"] == "serving", (
            serving,
            box.ok("log_tail", {"launch_id": "gpu-holder", "lines": 40}),
        )
        ready_s = time.monotonic() - t0
        seq, held = _last_gpu0(box, serving["seq"])
        t1 = time.monotonic()
        box.ok("kill", {"launch_id": "gpu-holder", "grace_s": 10.0}, command_id="kill-gpu-holder")
        released = box.wait_for(
            lambda e: e["kind"] == "gpu_released" and e["launch_id"] == "gpu-holder",
            timeout=60,
            what="gpu_released",
        )
        release_s = time.monotonic() - t1
        after = next(g for g in released["gpus"] if g["gpu"] == 0)["mem_used_mib"]
        stopped = [e for e in box.events() if e["kind"] == "launch_state" and e["launch_id"] == "gpu-holder"]
        print(
            f"\n[kill] GPU 0 memory: idle {idle:.0f} MiB, held {held:.0f} MiB (+{held - idle:.0f} MiB for "
            f"{HOLD_GIB:.0f} GiB asked), after kill {after:.0f} MiB ({after - idle:+.0f} MiB vs idle)"
        )
        print(
            f"[kill] launch to serving {ready_s:.1f} s; kill to gpu_released {release_s:.1f} s; states "
            f"{[e['state'] for e in stopped]}; gpu_released: released={released['released']}, "
            f"holding={released['holding']}, leftover_pids={released['leftover_pids']}"
        )
        assert held - idle >= HOLD_GIB * 1024 - 256, "the holder's memory never showed in NVML's reading"
        assert released["released"] is True and released["holding"] == [] and released["leftover_pids"] == []
        assert abs(after - idle) <= NEAR_IDLE_MIB, f"memory after the kill {after} MiB, idle {idle} MiB"
        assert stopped[-1]["state"] == "stopped"
    finally:
        box.stop()
        shutil.rmtree(root, ignore_errors=True)


# -- (4) power: idle vs a matmul loop --------------------------------------------------------------------

_LOAD = """
import time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
(a @ b).sum().item()
print("loaded", flush=True)
end, n = time.monotonic() + float(__import__("sys").argv[1]), 0
while time.monotonic() < end:
    for _ in range(20):
        c = a @ b
    torch.cuda.synchronize()
    n += 20
print("matmuls", n, flush=True)
"""


def _power_series(s: GpuSampler, seconds: float, period: float = 0.2) -> list[tuple[float, float]]:
    out = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        row = s.read()[0]
        power, clock = row["power_w"], row["sm_clock_mhz"]
        assert power is not None and clock is not None, row
        out.append((power, clock))
        time.sleep(period)
    return out


def test_power_idle_vs_a_matmul_loop(sampler: tuple[GpuSampler, list[str]]) -> None:
    _needs_torch_cuda()
    s, said = sampler
    idle = _power_series(s, 3.0)
    load_s = 10.0
    proc = subprocess.Popen(
        [sys.executable, "-c", _LOAD, str(load_s)],
        env={**os.environ, **_cuda_env()},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.strip() == "loaded", first + proc.stdout.read()
        loaded = _power_series(s, load_s - 1.0)
        rest = proc.stdout.read()
        assert proc.wait(timeout=60) == 0, rest
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    limit = s.read()[0]["power_limit_w"]
    assert limit is not None
    idle_w = statistics.median(p for p, _ in idle)
    steady = [p for p, _ in loaded[len(loaded) // 4 :]]  # past the ramp
    loaded_w = statistics.median(steady)
    print(
        f"\n[power] GPU 0 idle {idle_w:.0f} W (SM {statistics.median(c for _, c in idle):.0f} MHz); "
        f"matmul loop {loaded_w:.0f} W median, {max(steady):.0f} W max (SM "
        f"{statistics.median(c for _, c in loaded[len(loaded) // 4 :]):.0f} MHz); limit {limit:.0f} W; "
        f"{rest.strip()} bf16 8192^3 in {load_s:.0f} s; {len(idle)}+{len(loaded)} samples"
    )
    assert said == []
    assert loaded_w > idle_w + 50.0, "a matmul loop should draw well above idle"
    assert max(steady) <= limit * 1.05, "power above the limit NVML reports"


# -- (5) energy: NVML's counter vs the 1 Hz power samples, and the throttle reasons -----------------------

COUNTER_VS_SAMPLES = 0.15
"""How far the 1 Hz trapezoid may stray from the counter's joules over a steady load (the issue's bound)."""


def test_energy_counter_agrees_with_the_power_samples_under_a_matmul_loop(
    sampler: tuple[GpuSampler, list[str]],
) -> None:
    _needs_torch_cuda()
    s, said = sampler
    load_s = 12.0
    proc = subprocess.Popen(
        [sys.executable, "-c", _LOAD, str(load_s)],
        env={**os.environ, **_cuda_env()},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    power: list[tuple[int, float]] = []
    counter: list[tuple[int, float]] = []
    masks: list[int] = []
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.strip() == "loaded", first + proc.stdout.read()
        end = time.monotonic() + load_s - 1.0
        while time.monotonic() < end:  # 1 Hz, as the agent samples
            row = s.read()[0]
            t_ms = time.time_ns() // 1_000_000
            assert row["power_w"] is not None and row["energy_mj"] is not None, row
            assert isinstance(row["throttle_reasons"], int), row
            power.append((t_ms, row["power_w"]))
            counter.append((t_ms, float(row["energy_mj"])))
            masks.append(row["throttle_reasons"])
            time.sleep(1.0)
        rest = proc.stdout.read()
        assert proc.wait(timeout=60) == 0, rest
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # a window inside the samples, past the ramp, with edges between samples as a bench window's are
    start, stop = power[2][0] + 300, power[-1][0] - 300
    span = counter_span(counter, start, stop)
    assert span is not None
    by_counter = counter_joules(span, start, stop)
    by_samples = integrate_power(power, start, stop)
    window_s = (stop - start) / 1000
    apart = abs(by_samples - by_counter) / by_counter
    print(
        f"\n[energy] GPU 0 over {window_s:.1f} s of a bf16 matmul loop: counter {by_counter:.0f} J "
        f"({by_counter / window_s:.0f} W), 1 Hz samples {by_samples:.0f} J ({by_samples / window_s:.0f} W), "
        f"{apart:.1%} apart; throttle reasons seen {sorted({hex(m) for m in masks})}; {rest.strip()}"
    )
    assert said == []
    assert by_counter > 0 and apart <= COUNTER_VS_SAMPLES
    assert all(c1[1] >= c0[1] for c0, c1 in zip(counter, counter[1:], strict=False)), "the counter went back"
