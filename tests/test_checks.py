"""Preflight checks as pure functions: every verdict path, from probe dicts shaped as docs/contracts.md says.

The base probe is the real H200 capture (tests/fixtures/nvidia-smi/h200) as the agent reports it;
each test changes only what its verdict path needs.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from agents.protocol import ProbeReport
from console.checks import CHECKS, ArmContext, GpusSeen, Verdict, evaluate, worst
from console.checks.capacity import check_capacity
from console.checks.clock import check_clock
from console.checks.driver_cuda import check_driver_cuda, newest_cuda_for
from console.checks.min_driver import MAJOR_FLOOR, MIN_DRIVER
from console.checks.power import check_power
from console.checks.probe_view import gpu_label, version_tuple
from console.checks.topology import check_topology
from console.store.checks import as_probe

T0 = 1_796_205_264_000  # 2026-12-02 09:54:24 UTC, the H200 capture's timestamp


def h200_gpu(index: int = 0, **over: Any) -> dict[str, Any]:
    g = {
        "index": index,
        "name": "NVIDIA H200",
        "uuid": "GPU-b03e0a6f-130b-dbb6-c49b-27d23c0aecf3",
        "pci_bus_id": "00000000:00:06.0",
        "compute_cap": "9.0",
        "power_w": 79.18,
        "power_limit_w": 700.0,
        "enforced_limit_w": 700.0,
        "default_limit_w": 700.0,
        "min_limit_w": 200.0,
        "max_limit_w": 700.0,
        "sm_clock_mhz": 345.0,
        "max_sm_clock_mhz": 1980.0,
        "temp_c": 36.0,
        "util_pct": 0.0,
        "mem_used_mib": 0.0,
        "mem_total_mib": 143771.0,
    }
    g.update(over)
    return g


def h200_probe(**over: Any) -> ProbeReport:
    p: dict[str, Any] = {
        "t_ms": T0,
        "console_t_ms": T0 - 150,
        "hostname": "h200-a",
        "tz": "Etc/UTC",
        "utc_offset_s": 0,
        "cpu_count": 16,
        "disk": {"path": "/root", "free_bytes": 400 * 10**9, "total_bytes": 500 * 10**9},
        "driver_version": "580.159.04",
        "cuda_driver_version": "13.0",
        "gpus": [h200_gpu()],
        "processes": [],
        "topology": {"raw": "", "links": {}, "nvlink_all": False},
        "serving_env": {
            "prefix": "/opt/vllm",
            "python": "/opt/vllm/bin/python",
            "torch_cuda": "13.0",
            "vllm_version": "0.32.0",
            "cuinit": 0,
            "cuinit_name": None,
            "libcuda_path": "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
            "compat_libs": [],
            "error": None,
        },
        "tripwire_client": {
            "python": "/opt/vllm/bin/python",
            "python_version": "3.12.3",
            "openai_version": "1.99.0",
            "error": None,
        },
        "source": "nvml",
        "warnings": [],
    }
    p.update(over)
    return as_probe(p)


def multi_gpu_probe(n: int, link: str, **gpu_over: Any) -> ProbeReport:
    links = {f"{i}-{j}": link for i in range(n) for j in range(i + 1, n)}
    return h200_probe(
        gpus=[h200_gpu(i, **gpu_over) for i in range(n)],
        topology={"raw": "", "links": links, "nvlink_all": link.startswith("NV")},
    )


def only(verdicts: list[Verdict], check: str) -> list[Verdict]:
    got = [v for v in verdicts if v.check == check]
    assert got, f"no {check} verdict in {verdicts}"
    return got


# -- the whole set ---------------------------------------------------------------------------------
def test_real_h200_capture_is_all_ok() -> None:
    verdicts = evaluate(h200_probe())
    assert tuple(dict.fromkeys(v.check for v in verdicts)) == CHECKS  # every check, in the documented order
    assert [v for v in verdicts if v.verdict != "ok"] == []
    assert worst(verdicts) == "ok"


def test_probe_taken_on_a_real_h200_by_the_agent() -> None:
    """tests/fixtures/probes/h200-real.json: `python -m agents probe --json` on a real H200 (NVML path,
    driver 580.159.04), 2026-12-02. Its serving venv's torch (2.11.0, metadata without +cu130) hid the CUDA
    build from this agent version, so the driver check can only warn; everything else is ok."""
    probe = json.loads((Path(__file__).parent / "fixtures" / "probes" / "h200-real.json").read_text())
    assert probe["source"] == "nvml" and probe["gpus"][0]["mem_used_mib"] == 615.0625
    verdicts = evaluate(probe)
    assert {v.check: v.verdict for v in verdicts if v.check != "driver"} == {
        "power": "ok",
        "topology": "ok",
        "clock": "ok",
        "capacity": "ok",
        "serving_env": "ok",  # an agent that predates package versions: nothing to compare
    }
    driver = [v for v in verdicts if v.check == "driver"]
    assert [v.verdict for v in driver] == ["warn"] and "/opt/torch/.venv" in driver[0].reason


def test_worst_orders_fail_over_warn_and_refuses_empty() -> None:
    vs = [Verdict("a", "ok", "x"), Verdict("b", "fail", "y"), Verdict("c", "warn", "z")]
    assert worst(vs) == "fail"
    with pytest.raises(ValueError, match="nothing was checked"):
        worst([])


def test_verdict_refuses_unknown_verdict() -> None:
    unknown: Any = "bad"  # as an untyped caller (a stored row, a plugin) could pass it
    with pytest.raises(ValueError, match="expected ok, warn or fail"):
        Verdict("power", unknown, "x")


def test_evaluate_refuses_non_dict() -> None:
    with pytest.raises(TypeError, match="a probe is a dict"):
        evaluate(["not", "a", "probe"])  # type: ignore[arg-type]


def test_cpu_box_without_gpu_tooling_is_ok() -> None:
    probe = h200_probe(
        gpus=[],
        source=None,
        driver_version=None,
        cuda_driver_version=None,
        serving_env={
            "prefix": None,
            "python": None,
            "torch_cuda": None,
            "vllm_version": None,
            "cuinit": None,
            "cuinit_name": None,
            "libcuda_path": None,
            "compat_libs": [],
            "error": "torch not importable",
        },
    )
    verdicts = evaluate(probe)
    assert worst(verdicts) == "ok", verdicts
    assert "no NVIDIA GPU" in only(verdicts, "power")[0].reason


# -- presence: the GPUs a box listed before --------------------------------------------------------------
def four_h200(*, uuids: bool = True, **over: Any) -> ProbeReport:
    """Four H200s on NVLink, each its own card (its bus id, and its UUID unless ``uuids`` is false)."""
    cards = [h200_gpu(i, uuid=f"GPU-{i:08d}", pci_bus_id=f"00000000:{0x18 + i:02X}:00.0") for i in range(4)]
    if not uuids:
        for card in cards:
            del card["uuid"]
    links = {f"{i}-{j}": "NV18" for i in range(4) for j in range(i + 1, 4)}
    return h200_probe(gpus=cards, topology={"raw": "", "links": links, "nvlink_all": True}, **over)


SEEN = GpusSeen.of(12, four_h200())


def test_a_box_that_listed_gpus_and_now_has_no_tooling_fails_instead_of_passing_as_a_cpu_box() -> None:
    cpu_like = h200_probe(gpus=[], source=None, driver_version=None, cuda_driver_version=None)
    assert worst(evaluate(cpu_like)) == "ok"  # a box never seen with GPUs: nothing to check
    verdicts = evaluate(cpu_like, seen=SEEN)
    assert tuple(dict.fromkeys(v.check for v in verdicts)) == CHECKS
    (driver,) = only(verdicts, "driver")
    assert driver.verdict == "fail" and "no NVIDIA tooling answers" in driver.reason
    assert "probe 12 (2026-12-02 09:54:24 UTC) listed 4x NVIDIA H200, 700 W" in driver.reason
    assert driver.numbers["missing"] == [f"GPU-{i:08d}" for i in range(4)]
    for check in ("power", "topology"):  # could not look: never "ok"
        assert [(v.verdict, v.reason.split(":")[0]) for v in only(verdicts, check)] == [
            ("warn", "not checked")
        ]


def test_a_gpu_that_no_longer_answers_is_named_by_its_uuid_after_the_topology_verdicts() -> None:
    three = four_h200()
    three["gpus"] = [
        {**g, "index": i} for i, g in enumerate(g for g in three["gpus"] if g["uuid"] != "GPU-00000002")
    ]
    three["topology"]["links"] = {f"{i}-{j}": "NV18" for i in range(3) for j in range(i + 1, 3)}
    verdicts = evaluate(three, seen=SEEN)
    topology = only(verdicts, "topology")
    assert [v.verdict for v in topology] == ["ok", "fail"]
    assert "1 of 4 GPUs no longer answer (GPU-00000002); probe 12 (" in topology[1].reason
    assert "Xid 79" in topology[1].reason
    assert [v.check for v in verdicts].index("clock") == [v.check for v in verdicts].index("topology") + 2
    assert worst(evaluate(four_h200(), seen=SEEN)) == "ok"  # the same four cards: nothing to say
    # Without UUIDs the bus id names a card; indexes renumber when one drops, so they are the last resort.
    bare = four_h200(uuids=False)
    moved = copy.deepcopy(bare)
    moved["gpus"][3]["pci_bus_id"] = "00000000:99:00.0"
    without_uuid = GpusSeen.of(3, bare)
    assert "(00000000:1B:00.0)" in only(evaluate(moved, seen=without_uuid), "topology")[-1].reason


# -- power -----------------------------------------------------------------------------------------
def test_power_full_limit_ok_quotes_numbers() -> None:
    (v,) = check_power(h200_probe())
    assert v.verdict == "ok" and "700 W enforced of 700 W maximum" in v.reason
    assert v.numbers["gpus"][0]["max_w"] == 700.0


def test_power_400_of_600_warns_with_seed_cost() -> None:
    probe = multi_gpu_probe(
        4,
        "NODE",
        name="NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
        power_limit_w=400.0,
        enforced_limit_w=400.0,
        default_limit_w=600.0,
        max_limit_w=600.0,
    )
    (v,) = check_power(probe)
    assert v.verdict == "warn"
    assert "GPU0-3 capped at 400 W of a 600 W maximum (-33%)" in v.reason
    assert "23%" in v.reason and "NVFP4" in v.reason and "34%" in v.reason and "FP8" in v.reason
    assert v.numbers["seed_cost"] == {"nvfp4": -0.23, "fp8": -0.34, "at_w": 400, "of_w": 600}
    assert v.numbers["loss_fraction"] == pytest.approx(0.3333, abs=1e-4)


def test_power_enforced_below_requested_names_the_other_limiter() -> None:
    probe = h200_probe(gpus=[h200_gpu(power_limit_w=700.0, enforced_limit_w=500.0)])
    (v,) = check_power(probe)
    assert v.verdict == "warn" and "500 W of a 700 W" in v.reason
    assert "requested 700 W but another limiter" in v.reason


def test_power_default_below_max_says_it_can_be_raised() -> None:
    probe = h200_probe(
        gpus=[h200_gpu(power_limit_w=450.0, enforced_limit_w=450.0, default_limit_w=450.0, max_limit_w=600.0)]
    )
    (v,) = check_power(probe)
    assert v.verdict == "warn" and "default limit" in v.reason and "-pl" in v.reason


def test_power_software_cap_below_default() -> None:
    probe = h200_probe(gpus=[h200_gpu(power_limit_w=300.0, enforced_limit_w=300.0)])
    (v,) = check_power(probe)
    assert v.verdict == "warn" and "below the 700 W default by software" in v.reason


def test_power_rounding_within_a_watt_is_not_a_cap() -> None:
    probe = h200_probe(gpus=[h200_gpu(power_limit_w=699.5, enforced_limit_w=699.5)])
    assert check_power(probe)[0].verdict == "ok"


def test_power_gpus_that_differ_are_flagged() -> None:
    probe = multi_gpu_probe(4, "NODE")
    probe["gpus"][2].update({"power_limit_w": 400.0, "enforced_limit_w": 400.0})
    verdicts = check_power(probe)
    assert [v.verdict for v in verdicts] == ["warn", "warn"]
    assert "GPU2 capped at 400 W" in verdicts[0].reason
    assert "GPUs on this box differ" in verdicts[1].reason
    assert "GPU0,1,3 NVIDIA H200 @ 700 W, GPU2 NVIDIA H200 @ 400 W" in verdicts[1].reason


def test_power_mixed_models_are_flagged() -> None:
    probe = multi_gpu_probe(2, "NV18")
    probe["gpus"][1]["name"] = "NVIDIA H100 80GB HBM3"
    verdicts = check_power(probe)
    assert any("GPUs on this box differ" in v.reason and "H100" in v.reason for v in verdicts)


def test_power_unreadable_limits_warn() -> None:
    probe = h200_probe(gpus=[h200_gpu(power_limit_w=None, enforced_limit_w=None)])
    (v,) = check_power(probe)
    assert v.verdict == "warn" and "not readable" in v.reason


def test_power_tooling_without_gpus_fails() -> None:
    (v,) = check_power(h200_probe(gpus=[], source="nvidia-smi"))
    assert v.verdict == "fail" and "listed no GPU" in v.reason


# -- driver / CUDA ---------------------------------------------------------------------------------
def test_min_driver_table_matches_facts() -> None:
    assert MIN_DRIVER["13.0"] == "580.65.06"
    assert MIN_DRIVER["12.0"] == "525.60.13"
    assert MIN_DRIVER["12.8"] == "570.26"
    assert MIN_DRIVER["12.9"] == "575.51.03"
    assert MAJOR_FLOOR[13] == "580.65.06"
    for cuda, driver in MIN_DRIVER.items():
        assert version_tuple(driver) >= version_tuple(MAJOR_FLOOR[int(cuda.split(".")[0])]), cuda


def test_versions_compare_numerically_not_as_text() -> None:
    assert version_tuple("580.159.04") > version_tuple("580.65.06")
    assert newest_cuda_for("575.57.08") == "12.9"
    assert newest_cuda_for("580.159.04") == "13.0"
    assert newest_cuda_for("400.1") is None
    with pytest.raises(ValueError, match="not a dotted numeric version"):
        version_tuple("580.x")


def test_driver_ok_with_cuinit_zero() -> None:
    (v,) = check_driver_cuda(h200_probe())
    assert v.verdict == "ok"
    assert "580.159.04 >= 580.65.06" in v.reason and "cuInit(0) = 0" in v.reason


def rtx5090_probe(**env: Any) -> ProbeReport:
    serving = {
        "prefix": "/opt/vllm-cu130",
        "python": "/opt/vllm-cu130/bin/python",
        "torch_cuda": "13.0",
        "vllm_version": "0.32.0",
        "cuinit": 804,
        "cuinit_name": "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
        "libcuda_path": "/usr/local/cuda-13.0/compat/libcuda.so.1",
        "compat_libs": ["/usr/local/cuda-13.0/compat/libcuda.so.1"],
        "error": None,
    }
    serving.update(env)
    return h200_probe(
        driver_version="575.57.08",
        cuda_driver_version="12.9",
        gpus=[h200_gpu(i, name="NVIDIA GeForce RTX 5090", mem_total_mib=32607.0) for i in range(8)],
        serving_env=serving,
    )


def test_rtx5090_575_driver_cu130_fails_with_804_explained() -> None:
    verdicts = check_driver_cuda(rtx5090_probe())
    assert all(v.verdict == "fail" for v in verdicts)
    table, cuinit = verdicts
    assert "575.57.08 is older than 580.65.06" in table.reason and "CUDA 13.0" in table.reason
    assert "CUDA 12.9 or older" in table.reason  # the fix: what this driver can run
    assert "804" in cuinit.reason and "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE" in cuinit.reason
    assert "consumer" in cuinit.reason and "RTX 5090" in cuinit.reason


def test_consumer_gpu_with_compat_libs_fails_before_cuinit_was_run() -> None:
    verdicts = check_driver_cuda(rtx5090_probe(cuinit=None, cuinit_name=None, error="cuInit not attempted"))
    assert any(v.verdict == "fail" and "consumer GPU" in v.reason and "804" in v.reason for v in verdicts)


def test_compat_lib_detected_from_libcuda_path_alone() -> None:
    probe = rtx5090_probe(cuinit=None, compat_libs=[], torch_cuda="12.9")
    probe["driver_version"] = "575.57.08"
    verdicts = check_driver_cuda(probe)
    assert any(v.verdict == "fail" and "/compat/libcuda.so.1" in v.reason for v in verdicts)


def test_datacentre_gpu_with_compat_libs_is_not_refused() -> None:
    probe = h200_probe()
    probe["serving_env"]["compat_libs"] = ["/usr/local/cuda-13.0/compat/libcuda.so.1"]
    assert check_driver_cuda(probe)[0].verdict == "ok"


@pytest.mark.parametrize(
    ("code", "name", "words"),
    [
        (803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "older forward-compatibility libcuda shadows"),
        (802, "CUDA_ERROR_SYSTEM_NOT_READY", "fabric manager"),
        (100, "CUDA_ERROR_NO_DEVICE", "no CUDA device"),
        (42, "CUDA_ERROR_WHATEVER", "see the CUDA driver API"),
    ],
)
def test_cuinit_codes_are_explained(code: int, name: str, words: str) -> None:
    probe = h200_probe()
    probe["serving_env"].update({"cuinit": code, "cuinit_name": name})
    (v,) = check_driver_cuda(probe)
    assert v.verdict == "fail" and f"returned {code} ({name})" in v.reason and words in v.reason


def test_driver_below_toolkit_minimum_but_above_major_floor_warns() -> None:
    probe = h200_probe(driver_version="570.86.15")
    probe["serving_env"]["torch_cuda"] = "12.9"
    (v,) = check_driver_cuda(probe)
    assert v.verdict == "warn" and "minor-version compatibility" in v.reason and "575.51.03" in v.reason


def test_unknown_cuda_minor_uses_major_floor() -> None:
    probe = h200_probe()
    probe["serving_env"]["torch_cuda"] = "13.7"
    (v,) = check_driver_cuda(probe)
    assert v.verdict == "ok" and "580.65.06" in v.reason


def test_unknown_cuda_major_warns() -> None:
    probe = h200_probe()
    probe["serving_env"]["torch_cuda"] = "14.0"
    (v,) = check_driver_cuda(probe)
    assert v.verdict == "warn" and "does not know" in v.reason


def test_serving_env_unknown_warns_and_says_how_to_fix() -> None:
    """An agent's serving env holding only these four fields: the rest read as unknown."""
    probe = h200_probe(
        serving_env={
            "prefix": None,
            "torch_cuda": None,
            "cuinit": None,
            "error": "no torch in /usr/bin/python3",
        }
    )
    (v,) = check_driver_cuda(probe)
    assert (
        v.verdict == "warn"
        and "no torch in /usr/bin/python3" in v.reason
        and "fix the serving env" in v.reason
    )
    probe = h200_probe(serving_env={"prefix": None, "torch_cuda": None, "cuinit": None, "error": None})
    (v,) = check_driver_cuda(probe)
    assert "no serving environment is configured" in v.reason and "--serving-env" in v.reason


def test_serving_env_without_torch_cuda_names_the_env() -> None:
    """What the real H200 probe showed: the probe ran in a venv, but torch's CUDA was not read."""
    probe = h200_probe()
    probe["serving_env"].update({"prefix": "/opt/torch/.venv", "torch_cuda": None})
    (v,) = check_driver_cuda(probe)
    assert v.verdict == "warn" and "/opt/torch/.venv reports no torch CUDA build" in v.reason


def test_cuinit_not_run_warns() -> None:
    probe = h200_probe()
    probe["serving_env"].update({"cuinit": None, "error": "libcuda.so.1 not found"})
    verdicts = check_driver_cuda(probe)
    assert [v.verdict for v in verdicts] == ["warn"] and "libcuda.so.1 not found" in verdicts[0].reason


def test_driver_unreadable_warns() -> None:
    verdicts = check_driver_cuda(h200_probe(driver_version=None))
    assert verdicts[0].verdict == "warn" and "driver version not readable" in verdicts[0].reason


# -- topology --------------------------------------------------------------------------------------
def test_single_gpu_topology_ok() -> None:
    (v,) = check_topology(h200_probe(), ArmContext("a", tensor_parallel=1))
    assert v.verdict == "ok" and "1 GPU" in v.reason


def test_nvlink_all_ok_even_for_tensor_parallel() -> None:
    (v,) = check_topology(multi_gpu_probe(8, "NV18"), ArmContext("big-tp8", tensor_parallel=8))
    assert v.verdict == "ok" and "NVLink between all 8 GPUs" in v.reason and "28x NV18" in v.reason


def test_pcie_only_ok_for_replicas() -> None:
    (v,) = check_topology(multi_gpu_probe(4, "PHB"), ArmContext("qwen-replicas", tensor_parallel=1))
    assert v.verdict == "ok" and "PCIe only" in v.reason and "replicas" in v.reason


def test_pcie_only_tensor_parallel_gets_the_seed_warning() -> None:
    (v,) = check_topology(multi_gpu_probe(4, "NODE"), ArmContext("glm-5.3-flash-tp4", tensor_parallel=4))
    assert v.verdict == "warn"
    assert "glm-5.3-flash-tp4 is tensor-parallel (4 GPUs)" in v.reason
    assert "replicas beating one tensor-parallel server" in v.reason and "324 s" in v.reason


def test_dual_socket_is_named() -> None:
    probe = multi_gpu_probe(4, "NODE")
    probe["topology"]["links"]["0-3"] = "SYS"
    (v,) = check_topology(probe)
    assert "inter-socket" in v.reason


def test_partial_nvlink_is_not_all_nvlink() -> None:
    probe = multi_gpu_probe(4, "NV4")
    probe["topology"]["links"]["2-3"] = "PHB"
    (v,) = check_topology(probe, ArmContext("tp4", tensor_parallel=4))
    assert v.verdict == "warn" and "NVLink on 5 of 6 pairs" in v.reason


def test_missing_topology_warns() -> None:
    probe = as_probe({**multi_gpu_probe(4, "NODE"), "topology": None})
    (v,) = check_topology(probe)
    assert v.verdict == "warn" and "0 of 6 GPU pairs" in v.reason


# -- clock -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("skew_ms", "verdict"),
    [
        (0, "ok"),
        (1_999, "ok"),
        (-1_999, "ok"),
        (2_001, "warn"),
        (-30_000, "warn"),
        (60_000, "warn"),
        (60_001, "fail"),
        (-7_200_000, "fail"),
    ],
)
def test_clock_thresholds(skew_ms: int, verdict: str) -> None:
    (v,) = check_clock(h200_probe(t_ms=T0 + skew_ms, console_t_ms=T0))
    assert v.verdict == verdict, v.reason
    assert v.numbers["skew_s"] == pytest.approx(skew_ms / 1000)
    assert "box time zone Etc/UTC (UTC+00:00)" in v.reason


def test_clock_two_hours_off_fails_and_shows_the_zone() -> None:
    probe = h200_probe(t_ms=T0 + 2 * 3600_000, console_t_ms=T0, tz="Europe/London", utc_offset_s=3600)
    (v,) = check_clock(probe)
    assert v.verdict == "fail"
    assert "box clock 2h00m00s ahead of the console" in v.reason
    assert "Europe/London (UTC+01:00)" in v.reason and "BST" in v.reason and "NTP" in v.reason


def test_clock_behind_and_negative_offset() -> None:
    (v,) = check_clock(
        h200_probe(t_ms=T0 - 5_000, console_t_ms=T0, tz="America/New_York", utc_offset_s=-18000)
    )
    assert v.verdict == "warn" and "5.0 s behind" in v.reason and "UTC-05:00" in v.reason


def test_clock_without_console_time_warns() -> None:
    (v,) = check_clock(h200_probe(console_t_ms=None))
    assert v.verdict == "warn" and "skew unknown" in v.reason and "console time" in v.reason


# -- capacity --------------------------------------------------------------------------------------
def test_capacity_idle_box_ok() -> None:
    verdicts = check_capacity(h200_probe())
    assert [v.verdict for v in verdicts] == ["ok", "ok"]
    assert "143,771 MiB free" in verdicts[0].reason and "400.0 GB free of 500 GB" in verdicts[1].reason


def test_capacity_other_process_warns_with_pid_and_vllm_rule() -> None:
    probe = multi_gpu_probe(4, "PHB")
    probe["gpus"][3]["mem_used_mib"] = 18437.0
    probe["processes"] = [{"gpu": 3, "pid": 48213, "name": "/usr/bin/python3", "used_mib": 18432.0}]
    verdicts = check_capacity(probe)
    gpu_warn = [v for v in verdicts if v.verdict == "warn"]
    assert len(gpu_warn) == 1
    assert "GPU3: 1 other process(es)" in gpu_warn[0].reason and "pid 48213" in gpu_warn[0].reason
    assert "--gpu-memory-utilization 0.9" in gpu_warn[0].reason


def test_capacity_arm_on_other_gpus_ignores_the_busy_one() -> None:
    probe = multi_gpu_probe(4, "PHB")
    probe["gpus"][3]["mem_used_mib"] = 18437.0
    probe["processes"] = [{"gpu": 3, "pid": 48213, "name": "python3", "used_mib": 18432.0}]
    verdicts = check_capacity(probe, ArmContext("qwen", weights_gb=17.9, gpus=(0, 1, 2)))
    assert [v.verdict for v in verdicts] == ["ok", "ok"]


def test_capacity_hidden_memory_use_warns() -> None:
    probe = h200_probe(gpus=[h200_gpu(mem_used_mib=60000.0)])
    (gpu_v, _disk) = check_capacity(probe)
    assert gpu_v.verdict == "warn" and "not visible from here" in gpu_v.reason


def test_capacity_weights_that_do_not_fit_one_card_fail() -> None:
    probe = h200_probe(
        gpus=[h200_gpu(i, name="NVIDIA GeForce RTX 5090", mem_total_mib=32607.0) for i in range(8)]
    )
    verdicts = check_capacity(probe, ArmContext("gpt-oss-120b", tensor_parallel=1, weights_gb=61.0))
    fail = [v for v in verdicts if v.verdict == "fail"]
    assert len(fail) == 1 and "61 GB of weights split over 1 GPU(s) need 58,174 MiB per GPU" in fail[0].reason
    assert "rule 10" in fail[0].reason
    ok_tp4 = check_capacity(probe, ArmContext("gpt-oss-120b-tp4", tensor_parallel=4, weights_gb=61.0))
    assert ok_tp4[0].verdict == "ok" and "split over 4" in ok_tp4[0].reason
    dp_ep = ArmContext("deepseek-dp4-ep", tensor_parallel=1, weights_gb=61.0, weight_shards=4)
    assert check_capacity(probe, dp_ep)[0].verdict == "ok"


def test_capacity_arm_wants_gpus_the_box_lacks() -> None:
    verdicts = check_capacity(h200_probe(), ArmContext("tp4", tensor_parallel=4, gpus=(0, 1, 2, 3)))
    assert verdicts[0].verdict == "fail" and "GPU1-3" in verdicts[0].reason


def test_capacity_unreadable_memory_warns() -> None:
    probe = h200_probe(gpus=[h200_gpu(mem_used_mib=None)])
    assert check_capacity(probe)[0].verdict == "warn"


@pytest.mark.parametrize(
    ("free_gb", "verdict", "words"),
    [
        (10, "fail", "take 17.9 GB if they must be downloaded"),
        (30, "warn", "less than 20 GB to spare"),
        (300, "ok", "room for arm qwen"),
    ],
)
def test_capacity_disk_against_weights(free_gb: int, verdict: str, words: str) -> None:
    probe = h200_probe(disk={"path": "/data", "free_bytes": free_gb * 10**9, "total_bytes": 1000 * 10**9})
    disk = check_capacity(probe, ArmContext("qwen", weights_gb=17.9))[-1]
    assert disk.verdict == verdict and words in disk.reason and "/data" in disk.reason


def test_capacity_disk_low_without_arm_and_unreadable() -> None:
    low = check_capacity(h200_probe(disk={"path": "/", "free_bytes": 5 * 10**9, "total_bytes": None}))[-1]
    assert low.verdict == "warn" and "only 5.0 GB free" in low.reason
    gone = check_capacity(h200_probe(disk=None))[-1]
    assert gone.verdict == "warn" and "not readable" in gone.reason


def test_gpu_label() -> None:
    assert gpu_label([0, 1, 2, 3]) == "GPU0-3"
    assert gpu_label([0, 2]) == "GPU0,2"
    assert gpu_label([3]) == "GPU3"
    assert gpu_label([]) == "no GPU"


def test_checks_do_not_mutate_the_probe() -> None:
    probe = rtx5090_probe()
    before = copy.deepcopy(probe)
    evaluate(probe, ArmContext("x", tensor_parallel=4, weights_gb=61.0))
    assert probe == before
