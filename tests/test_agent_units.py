"""Pure parts of the agent on real text: vLLM log lines, /metrics pages, nvidia-smi output, packaging."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import zipfile
from io import BytesIO
from pathlib import Path
from typing import Any

import pytest

from agents import gpu, loglines, metrics, package, probe
from agents.protocol import GPU_COLUMNS
from testbed.fake_nvidia_smi import build_libcuda

H200 = Path(__file__).parent / "fixtures" / "nvidia-smi" / "h200"  # real captures from an H200
ROOT = Path(__file__).resolve().parent.parent


# -- log lines (formats from vLLM 0.32 source, tests/fixtures/vllm_logs/) ------------------------


@pytest.mark.parametrize(
    ("line", "category"),
    [
        (
            "INFO 12-02 [cuda.py:507] Using FLASH_ATTN attention backend out of potential backends: ['FLASH_ATTN'].",
            "attention",
        ),
        (
            "INFO [nvfp4.py:241] Using 'FLASHINFER_CUTLASS' NvFp4 MoE backend out of potential backends: ['A'].",
            "moe",
        ),
        ("INFO [__init__.py:88] Using FlashInferCutlassNvFp4LinearKernel for NVFP4 GEMM", "linear"),
        ("INFO [__init__.py:90] Selected CutlassFP8ScaledMMLinearKernel for Fp8LinearMethod", "linear"),
        (
            "INFO [arg_utils.py:1] kernel_config=KernelConfig(moe_backend='auto', linear_backend='b12x')",
            "config",
        ),
        ("INFO [cpu.py:175] Using CPU_MLA backend.", "attention"),
        ("INFO [nvfp4.py:448] Using MoEPrepareAndFinalizeNoDPEPModular", "other"),
        ("INFO [api_server.py:1] vLLM API server version 0.32.0", None),
        ("(APIServer pid=9498) INFO 12-02 13:21:37 [model.py:2152] Using max model len 2048", None),
        (
            "[W1202 13:21:56.598607377 utils.cpp:68] Warning: NUMA binding: Using MEMBIND policy for memory "
            "allocation on the NUMA nodes (0).",
            None,
        ),
    ],
)
def test_kernel_line_categories(line: str, category: str | None) -> None:
    assert loglines.kernel_category(line) == category


def test_kv_budget_line_of_vllm_032() -> None:
    line = (
        "(EngineCore pid=9) INFO [kv_cache_utils.py:2328] CPU KV cache size: 43,680 tokens, "
        "Maximum concurrency for 2,048 tokens per request: 21.33x"
    )
    assert loglines.kv_budget(line) == loglines.KvBudget(43680, 21.33)
    assert loglines.kv_budget("GPU KV cache size: 79,648 tokens") == loglines.KvBudget(79648, None)
    assert loglines.kv_budget("nothing here") is None


def test_failure_reason_prefers_root_cause_over_wrapper() -> None:
    prefix = "(EngineCore_DP0 pid=77) ERROR 12-02 13:20:21 [core.py:900] "
    lines = [
        "INFO starting",
        prefix + "Traceback (most recent call last):",
        prefix + '  File "/v/vllm/engine/core.py", line 10, in run',
        prefix + "    build()",
        prefix
        + '  File "/v/vllm/model_executor/layers/fused_moe/oracle/nvfp4.py", line 181, in map_nvfp4_backend',
        prefix + "    raise ValueError(",
        prefix
        + "ValueError: moe_backend='triton' is not supported for NvFP4 MoE. Expected one of ['b12x', 'marlin'].",
        "Traceback (most recent call last):",
        '  File "/v/vllm/v1/engine/core_client.py", line 100, in __init__',
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
    ]
    failure = loglines.failure_reason(lines, 1)
    assert failure.reason == (
        "ValueError: moe_backend='triton' is not supported for NvFP4 MoE. Expected one of "
        "['b12x', 'marlin']. (at /v/vllm/model_executor/layers/fused_moe/oracle/nvfp4.py:181 "
        "in map_nvfp4_backend)"
    )
    assert failure.backends_accepted == ["b12x", "marlin"]


def test_failure_reason_without_traceback_names_exit_and_last_line() -> None:
    failure = loglines.failure_reason(["loading", "\x1b[31mKilled\x1b[0m", ""], -9)
    assert failure.reason == "exited with code -9 before serving; last log line: Killed"
    assert failure.backends_accepted is None


def test_the_real_cpu_refusal_names_no_accepted_set() -> None:
    """vLLM 0.32's "does not support the deployment configuration" refusal prints no set: recorded as None
    ("the engine printed none"), never as [] ("it accepts none")."""
    log = Path(__file__).parent / "fixtures" / "vllm_logs" / "cpu-moe-backend-refused.log"
    failure = loglines.failure_reason(log.read_text().splitlines(), 1)
    assert failure.reason.startswith(
        "ValueError: Unquantized MoE backend FlashInfer CUTLASS does not support the "
        "deployment configuration since kernel does not support current device cpu."
    )
    assert failure.backends_accepted is None


@pytest.mark.parametrize(
    ("line", "accepted"),
    [  # the lines vLLM 0.32 raises (model_executor/layers/fused_moe/oracle/nvfp4.py)
        (
            "ValueError: moe_backend='triton' is not supported for NvFP4 MoE. Expected one of ['b12x', 'cutlass', "
            "'flashinfer_trtllm', 'flashinfer_cutlass', 'marlin'].",
            ["b12x", "cutlass", "flashinfer_trtllm", "flashinfer_cutlass", "marlin"],
        ),
        (
            "ValueError: Model sets swiglu_limit=7.0, but the explicitly requested moe_backend='flashinfer_b12x' does "
            "not apply the SwiGLU clamp. Use 'flashinfer_trtllm', 'flashinfer_cutlass', 'flashinfer_cutedsl', "
            "'flashinfer_moe_ep_cutedsl', 'cutlass', 'b12x', 'marlin', or 'humming' instead.",
            [
                "flashinfer_trtllm",
                "flashinfer_cutlass",
                "flashinfer_cutedsl",
                "flashinfer_moe_ep_cutedsl",
                "cutlass",
                "b12x",
                "marlin",
                "humming",
            ],
        ),
        (
            "ValueError: NvFp4 MoE backend 'FLASHINFER_CUTLASS' does not support the deployment configuration since "
            "group size 16 is not supported.",
            None,
        ),
        ("INFO Using 'MARLIN' NvFp4 MoE backend out of potential backends: ['MARLIN'].", None),
    ],
)
def test_accepted_set_from_each_refusal_line(line: str, accepted: list[str] | None) -> None:
    assert loglines.accepted_set(line) == accepted


# -- /metrics -----------------------------------------------------------------------------------

PAGE = """# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="m"} 1000.0
vllm:generation_tokens_total{engine="1",model_name="m"} 500.0
vllm:prompt_tokens_total{engine="0",model_name="m"} 4000.0
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_waiting{engine="0",model_name="m"} 0.0
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.5
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 12.0
python_gc_objects_collected_total{generation="0"} 1.0
"""


def test_metrics_rates_from_two_scrapes() -> None:
    tracker = metrics.RateTracker()
    first, problems = tracker.sample(PAGE, 10.0)
    assert problems == [] and first["gen_tok_per_s"] is None and first["gen_tokens_total"] == 1500.0
    assert first["running"] == 3 and first["waiting"] == 0 and first["kv_usage"] == 0.5
    second, _ = tracker.sample(PAGE.replace("1000.0", "1200.0").replace("4000.0", "4400.0"), 12.0)
    assert second["gen_tok_per_s"] == 100.0 and second["prompt_tok_per_s"] == 200.0
    assert second["prefix_hit_rate"] is None  # the family is absent: unknown, not 0


def test_metrics_counter_reset_gives_no_rate() -> None:
    tracker = metrics.RateTracker()
    tracker.sample(PAGE, 1.0)
    after_restart, _ = tracker.sample(PAGE.replace("1000.0", "10.0"), 2.0)
    assert after_restart["gen_tok_per_s"] is None


def test_metrics_malformed_lines_are_reported_and_the_rest_kept() -> None:
    page = PAGE + 'vllm:num_requests_waiting{engine="1" 4\nvllm:kv_cache_usage_perc{engine="1"} NaN\n'
    parsed = metrics.parse(page)
    assert len(parsed.problems) == 2 and "line 11" in parsed.problems[0] and "NaN" in parsed.problems[1]
    assert parsed.values["vllm:num_requests_running"] == 3.0


# -- nvidia-smi text ----------------------------------------------------------------------------


def test_values_from_real_h200_csv() -> None:
    header, row = (H200 / "smi_query.csv").read_text().splitlines()
    cells = dict(zip([h.split(" [")[0] for h in header.split(", ")], row.split(", "), strict=True))
    assert gpu.value(cells["power.draw"]) == 79.18 and gpu.value(cells["power.max_limit"]) == 700.0
    assert gpu.value(cells["memory.total"]) == 143771.0 and gpu.value(cells["temperature.gpu"]) == 36.0
    assert gpu.value("[N/A]") is None and gpu.value("[Not Supported]") is None and gpu.value("N/A") is None
    assert gpu.text_value("[Requested functionality has been deprecated]") is None
    assert [gpu.value(x) for x in (H200 / "smi_query_nounits.csv").read_text().strip().split(", ")][:3] == [
        0.0,
        79.19,
        700.0,
    ]


def test_topology_real_single_gpu_capture_and_an_nvlink_matrix() -> None:
    single = probe.parse_topology((H200 / "smi_topo.txt").read_text())
    assert single["links"] == {} and single["nvlink_all"] is False
    hgx = (
        "\t\x1b[4mGPU0\tGPU1\tGPU2\tCPU Affinity\x1b[0m\nGPU0\t X \tNV18\tNV18\t0-47\nGPU1\tNV18\t X \tNV18\t0-47\n"
        "GPU2\tNV18\tNV18\t X \t0-47\n"
    )
    assert probe.parse_topology(hgx)["links"] == {"0-1": "NV18", "0-2": "NV18", "1-2": "NV18"}
    assert probe.parse_topology(hgx)["nvlink_all"] is True
    pcie = hgx.replace("NV18", "SYS", 1)
    assert probe.parse_topology(pcie)["nvlink_all"] is False


def test_cuda_versions() -> None:
    assert probe.cuda_version_text(13000) == "13.0" and probe.cuda_version_text(12040) == "12.4"
    assert probe.torch_cuda("2.9.0+cu130") == "13.0" and probe.torch_cuda("2.13.0+cu128") == "12.8"
    assert probe.torch_cuda("2.13.0+cpu") is None and probe.torch_cuda(None) is None


# -- probe as a real process, with the fake nvidia-smi and a fake libcuda -------------------------


def _probe(tmp_path: Path, fixture: str | Path, lib_dir: Path | None) -> dict[str, Any]:
    from testbed.agent_box import bin_with_fake_smi

    env = {
        "PATH": f"{bin_with_fake_smi(tmp_path, fixture)}:/usr/bin:/bin",
        "PYTHONPATH": str(ROOT),
        "TZ": "Europe/London",
    }
    if lib_dir is not None:
        env["LD_LIBRARY_PATH"] = str(lib_dir)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "agents",
            "probe",
            "--json",
            "--console-t-ms",
            "1788658020000",
            "--disk-path",
            str(tmp_path),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    probe: dict[str, Any] = json.loads(out.stdout)
    return probe


def test_probe_h200_fixture(tmp_path: Path) -> None:
    p = _probe(tmp_path, "h200", build_libcuda("h200", tmp_path / "cuda"))
    assert (
        p["source"] == "nvidia-smi"
        and p["driver_version"] == "580.159.04"
        and p["cuda_driver_version"] == "13.0"
    )
    assert p["console_t_ms"] == 1788658020000 and abs(p["t_ms"] - p["console_t_ms"]) > 0
    assert p["tz"] == "Europe/London" and p["utc_offset_s"] in (0, 3600)
    g = p["gpus"][0]
    assert (g["name"], g["compute_cap"], g["pci_bus_id"]) == ("NVIDIA H200", "9.0", "00000000:00:06.0")
    assert (
        g["power_limit_w"],
        g["enforced_limit_w"],
        g["default_limit_w"],
        g["min_limit_w"],
        g["max_limit_w"],
    ) == (700.0, 700.0, 700.0, 200.0, 700.0)
    assert g["max_sm_clock_mhz"] == 1980.0
    env = p["serving_env"]
    assert env["cuinit"] == 0 and env["cuinit_name"] is None and env["libcuda_path"].endswith("libcuda.so.1")
    assert env["compat_libs"] == []
    assert p["disk"]["free_bytes"] > 0 and p["cpu_count"] >= 1


def test_probe_error_804_with_compat_libs_on_the_loader_path(tmp_path: Path) -> None:
    from testbed.agent_box import write_fixture_variant

    def consumer_card_with_compat(fx: dict[str, Any]) -> None:
        fx["cuinit"], fx["compat_libs"] = 804, True

    fixture = write_fixture_variant(tmp_path, "compat-804", consumer_card_with_compat)
    p = _probe(tmp_path, fixture, build_libcuda(fixture, tmp_path / "cuda"))
    env = p["serving_env"]
    assert env["cuinit"] == 804 and env["cuinit_name"] == "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE"
    assert env["compat_libs"] and "/compat/libcuda.so.1" in env["compat_libs"][0]


def test_probe_without_gpu_tooling(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-m", "agents", "probe", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    p = json.loads(out.stdout)
    assert p["source"] is None and p["gpus"] == [] and p["driver_version"] is None
    assert any("no GPU tooling" in w for w in p["warnings"])


# -- packaging ----------------------------------------------------------------------------------


def test_zipapp_is_deterministic_runs_and_reports_its_version(tmp_path: Path) -> None:
    first, second = package.build_zipapp(), package.build_zipapp()
    assert first == second and first.startswith(b"#!/usr/bin/env python3\n")
    names = zipfile.ZipFile(BytesIO(first)).namelist()
    assert (
        "__main__.py" in names
        and "agents/daemon.py" in names
        and not [n for n in names if "__pycache__" in n]
    )
    pyz = tmp_path / "agent.pyz"
    pyz.write_bytes(first)
    out = subprocess.run(
        [sys.executable, str(pyz), "version"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
        check=True,
    )
    assert out.stdout.strip() == package.agent_version() == package.AGENT_VERSION


def test_version_changes_with_any_source_change() -> None:
    sources = package._sources()
    changed = [
        (name, data + b"\n# changed\n" if name == "agents/journal.py" else data) for name, data in sources
    ]
    assert package._hash(sources) != package._hash(changed)


def test_config_excerpt_from_vllm_032_engine_config_line() -> None:
    # the shape of vLLM 0.32's "Initializing a V1 LLM engine ... with config:" line: thousands of characters
    line = (
        "(EngineCore pid=10505) INFO 12-02 13:32:48 [core.py:133] Initializing a V1 LLM engine (v0.32.0) with "
        "config: model='/m', " + "x_option=None, " * 200 + "kernel_config=KernelConfig(ir_op_priority="
        "IrOpPriorityConfig(rms_norm=['native']), enable_flashinfer_autotune=True, moe_backend='auto', "
        "linear_backend='b12x'), observability_config=None"
    )
    assert len(line) > loglines.MAX_LINE_CHARS and loglines.kernel_category(line) == "config"
    assert loglines.config_excerpt(line) == (
        "kernel_config=KernelConfig(ir_op_priority=IrOpPriorityConfig(rms_norm=['native']), "
        "enable_flashinfer_autotune=True, moe_backend='auto', linear_backend='b12x')"
    )


def test_serving_env_reads_torch_cuda_without_importing_torch(tmp_path: Path) -> None:
    # a PyPI CUDA wheel's layout: no "+cu130" in the version, the CUDA version in torch/version.py
    site = tmp_path / "site"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text("raise SystemExit('the probe must not import torch')\n")
    (site / "torch" / "version.py").write_text(
        "from typing import Optional\n__version__ = '2.11.0'\ncuda: Optional[str] = '13.0'\n"
    )
    (site / "torch-2.11.0.dist-info").mkdir()
    (site / "torch-2.11.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: torch\nVersion: 2.11.0\n"
    )
    env = probe.serving_env(sys.executable, {"PYTHONPATH": str(site), "LD_LIBRARY_PATH": ""})
    error = env["error"]
    assert env["torch_cuda"] == "13.0" and error is not None and error.startswith("libcuda.so.1 not loadable")


# -- Python 3.10: the box's interpreter (the zipapp runs on whatever python3 the box has) -------------

_PY311_MODULES = {"tomllib", "wsgiref.types"}
_PY311_NAMES = {
    ("datetime", "UTC"),
    ("typing", "Self"),
    ("typing", "LiteralString"),
    ("typing", "Never"),
    ("typing", "assert_never"),
    ("typing", "reveal_type"),
    ("typing", "Required"),
    ("typing", "NotRequired"),
    ("typing", "TypeVarTuple"),
    ("typing", "Unpack"),
    ("enum", "StrEnum"),
    ("enum", "verify"),
    ("contextlib", "chdir"),
    ("asyncio", "TaskGroup"),
    ("asyncio", "timeout"),
    ("asyncio", "Runner"),
    ("hashlib", "file_digest"),
    ("operator", "call"),
    ("logging", "getLevelNamesMapping"),
}
_PY311_BUILTINS = {"ExceptionGroup", "BaseExceptionGroup", "add_note"}


def py311_only(source: str, name: str = "<source>") -> list[str]:
    """What in ``source`` needs Python 3.11+: syntax (``except*``...) and the 3.11 standard library."""
    import ast

    try:
        tree = ast.parse(source, name, feature_version=(3, 10))
    except SyntaxError as exc:
        return [f"{name}:{exc.lineno}: {exc.msg}"]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [
                f"{name}:{node.lineno}: import {a.name}" for a in node.names if a.name in _PY311_MODULES
            ]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module in _PY311_MODULES:
                found.append(f"{name}:{node.lineno}: from {node.module}")
            found += [
                f"{name}:{node.lineno}: {node.module}.{a.name}"
                for a in node.names
                if (node.module, a.name) in _PY311_NAMES
            ]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if (node.value.id, node.attr) in _PY311_NAMES:
                found.append(f"{name}:{node.lineno}: {node.value.id}.{node.attr}")
            elif node.attr in _PY311_BUILTINS:
                found.append(f"{name}:{node.lineno}: .{node.attr}")
        elif isinstance(node, ast.Name) and node.id in _PY311_BUILTINS:
            found.append(f"{name}:{node.lineno}: {node.id}")
    return found


def test_the_checker_sees_311_only_code() -> None:
    bad = "import tomllib\nfrom datetime import UTC\nimport asyncio\ntry:\n    pass\nexcept* ValueError:\n    pass\n"
    assert py311_only(bad) and "except" in py311_only(bad)[0].lower()
    assert (
        len(py311_only("import tomllib\nfrom datetime import UTC\nimport asyncio\nasyncio.TaskGroup()\n"))
        == 3
    )
    assert py311_only("x: int | None = None\nmatch x:\n    case None:\n        pass\n") == []  # 3.10 is fine


def test_agent_sources_run_on_python_310() -> None:
    found = []
    for path in sorted((ROOT / "agents").rglob("*.py")):
        found += py311_only(path.read_text(), str(path.relative_to(ROOT)))
    assert found == []


# -- the daemon's tick: one failing step must not starve the others (the watchdog above all) ----------


def test_a_failing_tick_step_is_journaled_and_the_watchdog_still_ticks(tmp_path: Path) -> None:
    from agents.daemon import Agent

    agent = Agent(tmp_path, disk_floor_bytes=0)
    ticks = []

    def broken(scrape: bool = True) -> None:
        raise OSError(28, "No space left on device")

    agent.supervisor.tick = broken  # type: ignore[method-assign]
    agent.watchdog = type("Watch", (), {"tick": lambda self: ticks.append(1)})()
    try:
        agent.tick()
        agent.tick()
        warnings = [e for e in agent.journal.events_after(0, 100) if e["kind"] == "warning"]
        assert ticks == [1, 1] and [w["where"] for w in warnings] == ["tick:launches", "tick:launches"]
        assert "No space left on device" in warnings[0]["message"]
    finally:
        agent.close()


# -- NVML faults: "not supported" reads as None in silence; a broken binding is journaled, once per call ----


def test_a_broken_nvml_binding_is_journaled_once_naming_the_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agents.daemon import Agent
    from tests.support import fake_pynvml

    broken = fake_pynvml.binding(
        gpus=2,
        failing={
            "nvmlDeviceGetPowerUsage": RuntimeError("ctypes.ArgumentError: argument 1: wrong type"),
            "nvmlDeviceGetTemperature": fake_pynvml.NVMLError(fake_pynvml.CODES["NVML_ERROR_GPU_IS_LOST"]),
            "nvmlDeviceGetPowerManagementLimit": fake_pynvml.NVMLError(
                fake_pynvml.CODES["NVML_ERROR_NO_PERMISSION"]
            ),
            "nvmlDeviceGetClockInfo": fake_pynvml.NVMLError(fake_pynvml.CODES["NVML_ERROR_NOT_SUPPORTED"]),
            "nvmlDeviceGetEnforcedPowerLimit": fake_pynvml.ERROR_CLASSES["NVML_ERROR_FUNCTION_NOT_FOUND"](
                fake_pynvml.CODES["NVML_ERROR_FUNCTION_NOT_FOUND"]
            ),
        },
    )
    monkeypatch.setitem(sys.modules, "pynvml", broken)  # where load_nvml finds the binding: `import pynvml`
    agent = Agent(tmp_path, disk_floor_bytes=0, gpu_source="nvml")
    agent.gpu = gpu.GpuSampler(agent.warn, "nvml")
    try:
        assert agent.gpu.source == "nvml"
        for _ in range(5):
            agent.tick()
        events = agent.journal.events_after(0, 1000)
    finally:
        agent.close()
    assert broken.calls["nvmlDeviceGetPowerUsage"] == 10  # 5 ticks x 2 GPUs: each failed, each was counted
    warnings = {e["where"]: e["message"] for e in events if e["kind"] == "warning"}
    assert sorted(warnings) == [
        "nvml:nvmlDeviceGetPowerManagementLimit",
        "nvml:nvmlDeviceGetPowerUsage",
        "nvml:nvmlDeviceGetTemperature",
    ]  # once each, not 10 times; NotSupported: none
    assert len([e for e in events if e["kind"] == "warning"]) == 3
    assert (
        "nvmlDeviceGetPowerUsage failed: RuntimeError: ctypes.ArgumentError"
        in warnings["nvml:nvmlDeviceGetPowerUsage"]
    )
    assert "NVML error 15" in warnings["nvml:nvmlDeviceGetTemperature"]
    assert "NVML error 4" in warnings["nvml:nvmlDeviceGetPowerManagementLimit"]
    samples = [e for e in events if e["kind"] == "gpu_sample"]
    assert len(samples) == 5
    row = samples[-1]["gpus"][1]
    assert (
        row["power_w"],
        row["power_limit_w"],
        row["temp_c"],
        row["sm_clock_mhz"],
        row["enforced_limit_w"],
    ) == (None, None, None, None, None)  # unknown, never a number that reads as an idle GPU
    assert (row["max_limit_w"], row["mem_total_mib"]) == (700.0, 143771.0)  # the calls that work still read


def test_an_nvml_fault_is_reported_again_only_after_the_interval() -> None:
    now = [0.0]
    said: list[tuple[str, str]] = []
    faults = gpu.NvFaults(
        lambda where, message: said.append((where, message)), every_s=600.0, clock=lambda: now[0]
    )
    broken = RuntimeError("boom")

    def failing() -> int:
        raise broken

    for t in (0.0, 1.0, 2.0, 599.0, 600.0, 601.0):
        now[0] = t
        assert gpu.nv(failing, faults=faults) is None
    assert [w for w, _ in said] == ["nvml:failing", "nvml:failing"]
    assert "3 more failure(s)" in said[1][1] and "more failure" not in said[0][1]


def test_an_nvml_handle_that_cannot_be_had_reads_as_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support import fake_pynvml

    lost = fake_pynvml.NVMLError(fake_pynvml.CODES["NVML_ERROR_GPU_IS_LOST"])
    monkeypatch.setitem(
        sys.modules, "pynvml", fake_pynvml.binding(failing={"nvmlDeviceGetHandleByIndex": lost})
    )
    said: list[str] = []
    sampler = gpu.GpuSampler(lambda where, message: said.append(where), "nvml")
    assert sampler.read() == [{"gpu": 0, **dict.fromkeys(GPU_COLUMNS)}]  # every figure, counters too
    assert sampler.processes() == [] and said == ["nvml:nvmlDeviceGetHandleByIndex"]


def test_the_smi_loop_reads_whole_rounds_dated_when_they_began(tmp_path: Path) -> None:
    """A tick landing mid-round gets the round before, whole (never one GPU's new row beside another's old
    one), with the instant it began to arrive: what a reading dated after a server's readiness relies on."""
    width = 2 + len(gpu.SAMPLE_FIELDS)  # index, the sample fields, the throttle mask

    def row(index: int, power: float) -> str:
        return ", ".join([str(index), str(power), *["1.0"] * (width - 3), "0x0"])

    smi = tmp_path / "nvidia-smi"
    smi.write_text(
        f"#!{sys.executable}\nimport sys, time\n"
        f"for line in {[row(0, 100.0), row(1, 101.0)]!r}:\n    print(line, flush=True)\n"
        f"time.sleep(0.3)\nprint({row(0, 200.0)!r}, flush=True)\ntime.sleep(60)\n"
    )
    smi.chmod(0o755)
    loop = gpu.SmiLoop(lambda where, message: None, str(smi))
    started = time.monotonic()
    loop.start()
    try:
        deadline = time.monotonic() + 20
        reads: list[list[tuple[int, float | None]]] = []
        while (not reads or len(reads[-1]) < 2) and time.monotonic() < deadline:
            time.sleep(0.05)
            rows = loop.read()
            if rows:
                reads.append([(r["gpu"], r["power_w"]) for r in rows])
        # the first round as it arrives (there is none before it to mix with), then whole
        assert reads[-1] == [(0, 100.0), (1, 101.0)] and all(r == reads[-1][: len(r)] for r in reads)
        time.sleep(0.6)  # the second round's first row is in
        assert started < loop.read_mono < time.monotonic() - 0.25  # the first round's, not the second's
        assert loop.read() == []  # the second round is not whole: nothing new, nothing mixed
    finally:
        loop.stop()
