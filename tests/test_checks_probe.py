"""The checks against the REAL agent probe: ``python -m agents probe --json`` as a process, with the fake
nvidia-smi (answering from a GPU fixture built from real captures) on PATH, a stand-in libcuda.so.1 whose
cuInit returns the fixture's result on the loader path, and a real serving venv whose torch metadata
says which CUDA it was built for. Then ``campaign check`` end to end on the ``local`` box.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agents.protocol import ProbeReport
from console.checks import ArmContext, evaluate
from console.checks.capacity import DISK_LOW_GB, GB
from console.checks.run import CheckRun, judge, local_probe
from console.service import Service
from console.store import Store
from console.store.checks import as_probe
from console.timeutil import system_clock
from testbed.fake_nvidia_smi import FIXTURES, build_libcuda, install

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc builds the stand-in libcuda.so.1")


def serving_venv(where: Path, torch_version: str) -> Path:
    """A real venv whose installed-package metadata names a torch built for one CUDA (``+cu130``), and which
    sees this interpreter's packages (openai, which a serving env has through vLLM: the tripwire's client)."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(where)], check=True
    )
    site = where / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    dist = site / f"torch-{torch_version}.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {torch_version}\n")
    return where


def box_env(tmp: Path, fixture: str, torch_version: str = "2.9.0+cu130") -> tuple[dict[str, str], Path]:
    """Environment of a process 'on' the fixture box, and its serving env prefix."""
    path = FIXTURES / f"{fixture}.json"
    install(tmp / "bin", path)
    lib_dir = build_libcuda(path, tmp / "cuda")
    prefix = serving_venv(tmp / "serve", torch_version)
    env = {
        **os.environ,
        "PATH": f"{tmp / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "LD_LIBRARY_PATH": str(lib_dir),
    }
    env.pop("FAKE_NVIDIA_SMI_FIXTURE", None)
    return env, prefix


def agent_probe(env: dict[str, str], prefix: Path, disk: Path, console_t_ms: int) -> ProbeReport:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "agents",
            "probe",
            "--json",
            "--console-t-ms",
            str(console_t_ms),
            "--serving-python",
            str(prefix / "bin" / "python"),
            "--disk-path",
            str(disk),
        ],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return as_probe(json.loads(out.stdout))


def by_check(verdicts: list[Any]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for v in verdicts:
        out.setdefault(v.check, []).append(v.verdict)
    return out


def expected_disk(path: Path) -> str:
    return "ok" if shutil.disk_usage(path).free / GB >= DISK_LOW_GB else "warn"


@pytest.mark.skipif(not (FIXTURES / "h200.json").exists(), reason="the agent's H200 fixture has not landed")
def test_real_h200_capture_is_all_ok(tmp_path: Path) -> None:
    env, prefix = box_env(tmp_path, "h200")
    probe = agent_probe(env, prefix, tmp_path, system_clock())
    assert probe["source"] == "nvidia-smi" and probe["gpus"][0]["name"] == "NVIDIA H200"
    verdicts = evaluate(probe)
    assert by_check(verdicts) == {
        "power": ["ok"],
        "driver": ["ok"],
        "topology": ["ok"],
        "clock": ["ok"],
        "capacity": ["ok", expected_disk(tmp_path)],
        "serving_env": ["ok"],
        "tripwire_client": ["ok"],
    }, verdicts


def test_rtx_pro_6000_capped_at_400_of_600_warns(tmp_path: Path) -> None:
    env, prefix = box_env(tmp_path, "rtx-pro-6000-ws-400w")
    verdicts = evaluate(agent_probe(env, prefix, tmp_path, system_clock()))
    checks = by_check(verdicts)
    assert checks["power"] == ["warn"] and checks["driver"] == ["ok"] and checks["topology"] == ["ok"]
    power = next(v for v in verdicts if v.check == "power")
    assert "GPU0-3 capped at 400 W of a 600 W maximum (-33%)" in power.reason
    assert "23%" in power.reason and "34%" in power.reason
    assert "cuInit(0) = 0" in next(v for v in verdicts if v.check == "driver").reason


def test_rtx5090_575_driver_with_cu130_env_fails_with_804(tmp_path: Path) -> None:
    env, prefix = box_env(tmp_path, "rtx5090-575-cu130")
    probe = agent_probe(env, prefix, tmp_path, system_clock())
    assert probe["serving_env"]["torch_cuda"] == "13.0" and probe["serving_env"]["cuinit"] == 804
    assert probe["serving_env"]["compat_libs"], probe["serving_env"]
    verdicts = evaluate(probe)
    driver = [v for v in verdicts if v.check == "driver"]
    assert [v.verdict for v in driver] == ["fail", "fail"]
    assert "575.57.08 is older than 580.65.06" in driver[0].reason
    assert "804 (CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE)" in driver[1].reason
    assert by_check(verdicts)["power"] == ["warn"]  # the write-up's 5090 host was capped at 400 W too


def test_rtx5090_with_a_cu129_env_and_no_compat_libs_passes_the_driver_check(tmp_path: Path) -> None:
    """The fix the fail message names: an image built for the host driver's CUDA."""
    path = FIXTURES / "rtx5090-575-cu130.json"
    fixed = json.loads(path.read_text()) | {"cuinit": 0, "compat_libs": False}
    (tmp_path / "fixed.json").write_text(json.dumps(fixed))
    install(tmp_path / "bin", tmp_path / "fixed.json")
    lib_dir = build_libcuda(tmp_path / "fixed.json", tmp_path / "cuda")
    prefix = serving_venv(tmp_path / "serve", "2.9.0+cu129")
    env = {
        **os.environ,
        "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "LD_LIBRARY_PATH": str(lib_dir),
    }
    verdicts = evaluate(agent_probe(env, prefix, tmp_path, system_clock()))
    assert by_check(verdicts)["driver"] == ["ok"], [v.reason for v in verdicts if v.check == "driver"]


def test_pcie_4gpu_box_warns_a_tensor_parallel_arm_and_sees_the_foreign_process(tmp_path: Path) -> None:
    env, prefix = box_env(tmp_path, "pcie-4gpu")
    probe = agent_probe(env, prefix, tmp_path, system_clock())
    assert probe["topology"]["nvlink_all"] is False and len(probe["topology"]["links"]) == 6
    tp = evaluate(probe, ArmContext("glm-5.3-flash-tp4", tensor_parallel=4))
    topo = next(v for v in tp if v.check == "topology")
    assert topo.verdict == "warn" and "tensor-parallel (4 GPUs)" in topo.reason and "6x PHB" in topo.reason
    replicas = evaluate(
        probe, ArmContext("qwen3.8-27b-replicas", tensor_parallel=1, weights_gb=17.9, gpus=(0, 1, 2))
    )
    assert next(v for v in replicas if v.check == "topology").verdict == "ok"
    gpu3 = [v for v in tp if v.check == "capacity" and "GPU3" in v.reason]
    assert gpu3 and gpu3[0].verdict == "warn" and "pid 48213" in gpu3[0].reason


def test_box_clock_two_hours_off_fails_and_shows_its_zone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Skew injected the way it happens: the console's time sent with the request disagrees with the box."""
    env, prefix = box_env(tmp_path, "rtx-pro-6000-ws-400w")
    for key in ("PATH", "LD_LIBRARY_PATH"):
        monkeypatch.setenv(key, env[key])
    monkeypatch.setenv("TZ", "Europe/London")
    with Store(tmp_path / "state.db") as store:
        store.boxes.ensure_local()
        store.boxes.update("local", serving_env=str(prefix))
        box = store.boxes.get("local")
        run = judge(store, "local", local_probe(box, store.clock() - 2 * 3600_000))
        clock = next(v for v in run.verdicts if v.check == "clock")
        assert clock.verdict == "fail" and run.verdict == "fail"
        assert "box clock 2h00m" in clock.reason and "ahead of the console" in clock.reason
        assert "Europe/London" in clock.reason
        assert store.checks.last_failed("local")[0].check == "clock"
        assert store.boxes.get("local").tz == "Europe/London"


def campaign(db: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "console", "--db", str(db), *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_campaign_check_local_exits_1_on_fail_and_stores_the_run(tmp_path: Path) -> None:
    env, prefix = box_env(tmp_path, "rtx5090-575-cu130")
    db = tmp_path / "state.db"
    with Store(db) as store:
        store.boxes.ensure_local()
        store.boxes.update("local", serving_env=str(prefix))
    done = campaign(db, "check", "local", env=env)
    assert done.returncode == 1, done.stderr
    assert "probing box local" in done.stderr
    assert re.search(r"^driver\s+FAIL\s+host driver 575.57.08", done.stdout, re.M), done.stdout
    assert "804" in done.stdout and "verdict: FAIL (2 fail" in done.stdout
    with Store(db) as store:
        failed = store.checks.last_failed("local")
        assert {v.check for v in failed} == {"driver"}
        assert store.boxes.get("local").gpu_summary == "8x NVIDIA GeForce RTX 5090, 400 W"
    # Offline: the stored probe judged again, same answer, as JSON.
    again = campaign(db, "check", "local", "--stored", "--json")
    assert again.returncode == 1, again.stderr
    body = json.loads(again.stdout)
    assert body["verdict"] == "fail" and body["box"] == "local"
    assert [v["check"] for v in body["verdicts"] if v["verdict"] == "fail"] == ["driver", "driver"]


def test_campaign_check_of_the_cpu_box_passes(tmp_path: Path) -> None:
    """No GPU tooling at all (this machine): nothing GPU-related can fail, the clock is checked."""
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "FAKE_NVIDIA_SMI_FIXTURE")}
    env["PATH"] = os.pathsep.join(
        p for p in env["PATH"].split(os.pathsep) if not (Path(p) / "nvidia-smi").exists()
    )
    db = tmp_path / "state.db"  # a fresh database: the local box is registered on first use
    done = campaign(db, "check", "local", "--json", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    body = json.loads(done.stdout)
    got = {v["check"]: v["verdict"] for v in body["verdicts"] if v["check"] != "capacity"}
    assert got == {
        "power": "ok",
        "driver": "ok",
        "topology": "ok",
        "clock": "ok",
        "serving_env": "ok",
        "tripwire_client": "ok",
    }, body


def test_campaign_check_errors_are_specific(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    with Store(db) as store:
        store.boxes.ensure_local()
    missing = campaign(db, "check", "nope")
    assert missing.returncode == 2 and "no box named 'nope'" in missing.stderr
    never = campaign(db, "check", "local", "--stored")
    assert never.returncode == 2 and "no stored probe" in never.stderr and "without --stored" in never.stderr


@pytest.mark.sshd
@pytest.mark.timeout(180)
def test_check_of_an_ssh_box_goes_through_its_agent(tmp_path: Path) -> None:
    """A real sshd box presenting the 400 W fixture: probe op over SSH, one stored probe, power warned."""
    from testbed.fleet_fixtures import FAST, box_started, register
    from testbed.sshd import SshdUnavailable

    try:
        box = box_started("chkpro", "rtx-pro-6000-ws-400w")
    except SshdUnavailable as exc:
        pytest.skip(str(exc))
    with Store(tmp_path / "state.db") as store:
        register(store, box)
        service = Service(store, settings=FAST)

        async def check() -> CheckRun:
            try:
                return await service.check("chkpro")
            finally:
                await service.close()

        run = asyncio.run(check())
        assert run.probe["source"] == "nvidia-smi" and len(run.probe["gpus"]) == 4
        power = [v for v in run.verdicts if v.check == "power"]
        assert [v.verdict for v in power] == ["warn"] and "400 W of a 600 W" in power[0].reason
        # The op's answer and the journaled probe event are one row.
        assert store.scalar("SELECT count(*) FROM probes WHERE box = 'chkpro'") == 1
        assert store.checks.last_verdicts("chkpro")[0].probe_id == run.probe_id


def test_campaign_check_with_an_arm_from_the_recipes(tmp_path: Path) -> None:
    """Probe the 4-GPU PCIe box once, then judge the stored probe for arms of the shipped catalogue."""
    env, prefix = box_env(tmp_path, "pcie-4gpu")
    db = tmp_path / "state.db"
    with Store(db) as store:
        store.boxes.ensure_local()
        store.boxes.update("local", serving_env=str(prefix))
    assert campaign(db, "check", "local", env=env).returncode == 0

    tp = campaign(db, "check", "local", "--stored", "--arm", "glm-5.3-flash-tp4", "--json")
    body = json.loads(tp.stdout)
    assert tp.returncode == (1 if body["verdict"] == "fail" else 0), tp.stderr
    assert body["arm"]["name"] == "glm-5.3-flash-tp4" and body["arm"]["tensor_parallel"] == 4
    assert body["arm"]["weights_gb"] == 198.0 and body["arm"]["gpus"] == [0, 1, 2, 3]
    topo = [v for v in body["verdicts"] if v["check"] == "topology"]
    assert (
        topo[0]["verdict"] == "warn" and "glm-5.3-flash-tp4 is tensor-parallel (4 GPUs)" in topo[0]["reason"]
    )

    replicas = campaign(db, "check", "local", "--stored", "--arm", "qwen3.8-27b-nvfp4-b12x", "--json")
    body = json.loads(replicas.stdout)
    assert [v["verdict"] for v in body["verdicts"] if v["check"] == "topology"] == ["ok"]
    with Store(db) as store:  # the newest run is the one with the arm
        assert any("qwen3.8-27b-nvfp4-b12x" in v.reason for v in store.checks.last_verdicts("local"))


def test_model_that_does_not_fit_one_consumer_card_fails(tmp_path: Path) -> None:
    """Campaign rule 10 on the 8x RTX 5090 box: gpt-oss-120b's 61 GB as one-card replicas cannot load."""
    env, prefix = box_env(tmp_path, "rtx5090-575-cu130")
    db = tmp_path / "state.db"
    with Store(db) as store:
        store.boxes.ensure_local()
        store.boxes.update("local", serving_env=str(prefix))
    done = campaign(db, "check", "local", "--arm", "gpt-oss-120b-replicas", "--json", env=env)
    assert done.returncode == 1, done.stderr
    body = json.loads(done.stdout)
    fails = [v["reason"] for v in body["verdicts"] if v["verdict"] == "fail" and v["check"] == "capacity"]
    assert any("61 GB of weights split over 1 GPU(s) need 58,174 MiB" in r for r in fails), body


def test_campaign_check_arm_errors_are_specific(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    with Store(db) as store:
        store.boxes.ensure_local()
        store.checks.add_probe(
            "local",
            {
                "t_ms": system_clock(),
                "console_t_ms": system_clock(),
                "gpus": [],
                "source": None,
                "tz": "UTC",
                "utc_offset_s": 0,
            },
        )
    unknown = campaign(db, "check", "local", "--stored", "--arm", "glm-5.3-flash-tp5")
    assert unknown.returncode == 2 and "no arm named 'glm-5.3-flash-tp5'" in unknown.stderr
    assert "did you mean" in unknown.stderr
    no_gpus = campaign(db, "check", "local", "--stored", "--arm", "glm-5.3-flash-tp4")
    assert no_gpus.returncode == 2 and "arm glm-5.3-flash-tp4 on box local" in no_gpus.stderr
    assert "has none" in no_gpus.stderr


def test_an_unknown_arm_is_refused_before_the_box_is_probed(tmp_path: Path) -> None:
    """A probe can take minutes; a typo in --arm must not cost them, nor leave a probe row behind."""
    db = tmp_path / "state.db"
    unknown = campaign(db, "check", "local", "--arm", "glm-5.3-flash-tp5")
    assert unknown.returncode == 2 and "no arm named 'glm-5.3-flash-tp5'" in unknown.stderr
    assert "probing" not in unknown.stderr
    with Store(db) as store:
        assert store.scalar("SELECT count(*) FROM probes") == 0
