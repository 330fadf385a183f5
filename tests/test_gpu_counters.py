"""The GPU sampler's clocks-event (throttle) reasons and energy counter, on both paths, through to the store.

NVML (tests/support/fake_pynvml.py, since the binding only works on a GPU): the bitmask from the current call
name or the older one, the counter in mJ, both None in silence where NVML says they do not exist. nvidia-smi
(testbed/fake_nvidia_smi.py, a real subprocess looping with ``-lms``): the hex bitmask, no counter, and a
power cap and throttle change a test makes mid-loop landing in the next samples. Ingest stores both columns.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents import gpu
from console.store import Box, Store
from testbed import fake_nvidia_smi
from testbed.agent_box import AgentBox, bin_with_fake_smi
from tests.support import fake_pynvml

H200 = Path(__file__).parent / "fixtures" / "gpus" / "h200.json"


def _sampler(monkeypatch: pytest.MonkeyPatch, binding: object) -> tuple[gpu.GpuSampler, list[str]]:
    monkeypatch.setitem(sys.modules, "pynvml", binding)  # where load_nvml finds the binding
    said: list[str] = []
    return gpu.GpuSampler(lambda where, message: said.append(where), "nvml"), said


def test_nvml_reads_the_throttle_bitmask_and_the_energy_counter_as_they_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    nvml = fake_pynvml.binding(gpus=2)
    sampler, said = _sampler(monkeypatch, nvml)
    first = sampler.read()
    assert [(g["throttle_reasons"], g["energy_mj"]) for g in first] == [(0x1, 1_234_567_890)] * 2
    nvml.readings["nvmlDeviceGetCurrentClocksEventReasons"] = 0x4
    nvml.readings["nvmlDeviceGetTotalEnergyConsumption"] = lambda h: 2_000_000_000 + h.index
    nvml.readings["nvmlDeviceGetPowerManagementLimit"] = 350_000
    later = sampler.read()
    assert [(g["throttle_reasons"], g["energy_mj"], g["power_limit_w"]) for g in later] == [
        (0x4, 2_000_000_000, 350.0),
        (0x4, 2_000_000_001, 350.0),
    ]
    assert said == []


def test_an_older_binding_reads_the_throttle_reasons_by_their_old_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    nvml = fake_pynvml.binding()
    nvml.nvmlDeviceGetCurrentClocksThrottleReasons = nvml.nvmlDeviceGetCurrentClocksEventReasons  # type: ignore[attr-defined]
    del nvml.nvmlDeviceGetCurrentClocksEventReasons  # nvidia-ml-py before the rename
    del nvml.nvmlDeviceGetTotalEnergyConsumption  # and a binding without the counter at all
    sampler, said = _sampler(monkeypatch, nvml)
    [reading] = sampler.read()
    assert (reading["throttle_reasons"], reading["energy_mj"]) == (0x1, None) and said == []


def test_a_gpu_without_the_counter_reads_none_in_silence_and_a_broken_call_is_reported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    nvml = fake_pynvml.binding(
        failing={
            "nvmlDeviceGetTotalEnergyConsumption": fake_pynvml.NVMLError(
                fake_pynvml.CODES["NVML_ERROR_NOT_SUPPORTED"]
            ),
            "nvmlDeviceGetCurrentClocksEventReasons": fake_pynvml.NVMLError(
                fake_pynvml.CODES["NVML_ERROR_UNKNOWN"]
            ),
        }
    )
    sampler, said = _sampler(monkeypatch, nvml)
    [reading] = sampler.read()
    assert (reading["throttle_reasons"], reading["energy_mj"]) == (None, None)
    assert said == ["nvml:nvmlDeviceGetCurrentClocksEventReasons"]  # NotSupported: no word


@given(st.integers(min_value=0, max_value=2**64 - 1), st.sampled_from(["", " ", "  "]), st.booleans())
def test_hex_value_reads_any_64_bit_mask_as_nvidia_smi_prints_it(mask: int, pad: str, upper: bool) -> None:
    text = f"0x{mask:016x}"
    assert gpu.hex_value(pad + (text.upper().replace("0X", "0x") if upper else text) + pad) == mask


@given(st.text(max_size=20))
def test_hex_value_never_raises_and_reads_placeholders_as_none(text: str) -> None:
    got = gpu.hex_value(text)
    assert got is None or (text.strip().lower().startswith("0x") and got == int(text.strip(), 16))
    assert gpu.hex_value("[N/A]") is None and gpu.hex_value("[Not Supported]") is None


def test_nvidia_smi_loop_reads_the_mask_and_a_cap_change_a_test_makes_mid_loop(tmp_path: Path) -> None:
    user_home = tmp_path / "user"  # the box user's HOME, where the fake reads its control file
    user_home.mkdir()
    agent = AgentBox(
        tmp_path / "agent", path_prefix=[bin_with_fake_smi(tmp_path, H200)], env={"HOME": str(user_home)}
    )
    agent.start()
    try:
        first = agent.wait_for(lambda e: e["kind"] == "gpu_sample")["gpus"][0]
        assert (first["throttle_reasons"], first["energy_mj"], first["enforced_limit_w"]) == (
            0x1,
            None,
            700.0,
        )
        changed_at = int(time.time() * 1000)
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("HOME", str(user_home))  # control() writes where the fake (run as that user) reads
            fake_nvidia_smi.control(
                {0: {"enforced.power.limit": "350.00 W", "clocks_event_reasons.active": "0x0000000000000044"}}
            )
        after = agent.wait_for(
            lambda e: (
                e["kind"] == "gpu_sample"
                and e["t_ms"] > changed_at
                and e["gpus"][0]["enforced_limit_w"] == 350.0
            )
        )["gpus"][0]
        assert after["throttle_reasons"] == 0x44  # software power cap + hardware thermal slowdown
        assert after["power_limit_w"] == 700.0  # fields the test did not set still read the fixture
    finally:
        agent.stop()


def test_ingest_stores_both_and_an_old_agent_without_them_stores_null(tmp_path: Path) -> None:
    with Store(tmp_path / "state.db", clock=lambda: 1_788_658_020_000) as store:
        store.boxes.add(Box(name="b1", host="127.0.0.1", ssh_user="u"))
        events = [
            {
                "kind": "gpu_sample",
                "t_ms": 1_000,
                "gpus": [{"gpu": 0, "throttle_reasons": 4, "energy_mj": 2**40}],
            },
            {"kind": "gpu_sample", "t_ms": 2_000, "gpus": [{"gpu": 0, "power_w": 80.0}]},
            {"kind": "gpu_sample", "t_ms": 3_000, "gpus": [{"gpu": 0, "energy_mj": "12"}]},
        ]
        report = store.ingest.batch("b1", [{"v": 1, "seq": i + 1, **e} for i, e in enumerate(events)])
        assert len(report.quarantined) == 1  # a counter that is no integer is refused, not stored
        rows = store.rows("SELECT t_ms, throttle_reasons, energy_mj FROM gpu_samples ORDER BY t_ms")
    assert [(r["t_ms"], r["throttle_reasons"], r["energy_mj"]) for r in rows] == [
        (1_000, 4, 2**40),
        (2_000, None, None),
    ]
