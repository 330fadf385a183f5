"""What a box's serving env carries, read by the real agent probe over SSH and judged by check and launch.

The box is a real sshd test box presenting four H200s (the real single-H200 capture, repeated four times, with
the PCIe 4-GPU fixture's topology). Its serving env is a real venv of the system Python whose installed-package
metadata names the write-up's stack (vLLM, torch for cu130, FlashInfer 0.6.18 with a cubin of another version,
the image's mismatch), and whose site-packages holds an engine patch's marker module or not: the probe reads
both with the env's own Python, exactly as on a GPU box. Nothing of vLLM needs to run for what is tested here.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from console.recipes import load_catalog
from console.service import Service
from console.service.sweep import SweepOptions
from console.store import Store
from console.store.sweeps import SweepArm
from testbed import box_python
from testbed.fleet_fixtures import FAST, box_started, fleet_store, register, sshd_farm
from testbed.ports import free_ports
from testbed.sshd import SshBox, SshdFarm
from testbed.sweep_recipes import PROFILE
from tests.support.cli import run_cli

__all__ = ["fleet_store", "sshd_farm"]

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "gpus"
STACK = {
    "vllm": "0.32.0",
    "torch": "2.13.0+cu130",
    "flashinfer-python": "0.6.18",
    "flashinfer-jit-cache": "0.6.18",
    "flashinfer-cubin": "0.6.17",
}
SPARSE = "glm-5.3-flash-tp2-mla-sparse-sm120"

# The operator's own recipes: a one-card arm whose profile needs the write-up's o_proj patch.
USER_RECIPES = """
[profiles.patched]
checkpoint = "org/Patched-Model"
architecture = "qwen3"
quantization = "bf16"
quantizer = "vendor"
weights_gb = 1.0
requires_patches = ["patch_oproj"]

[arms.patched-tp1]
profile = "patched"
replicas = 1
"""


def four_h200(where: Path) -> Path:
    """The real H200 capture as four cards (indexes, UUIDs and bus ids made distinct), PCIe-linked."""
    one = json.loads((FIXTURES / "h200.json").read_text())
    gpu = one["gpus"][0]
    one["gpus"] = [
        {**gpu, "index": str(i), "uuid": gpu["uuid"][:-1] + str(i), "pci.bus_id": f"00000000:00:0{6 + i}.0"}
        for i in range(4)
    ]
    one["topo"] = json.loads((FIXTURES / "pcie-4gpu.json").read_text())["topo"]
    one["source"] = (
        "four copies of the H200 capture (tests/fixtures/gpus/h200.json), pcie-4gpu.json's topology"
    )
    where.mkdir(mode=0o755, parents=True, exist_ok=True)
    path = where / "h200x4.json"
    path.write_text(json.dumps(one))
    path.chmod(0o644)
    return path


def site_packages(env: Path) -> Path:
    return next((env / "lib").glob("python3*/site-packages"))


def install_dist(env: Path, name: str, version: str) -> None:
    """A package's installed metadata, as a wheel leaves it (what ``importlib.metadata`` reads)."""
    site = site_packages(env)
    for old in site.glob(f"{name.replace('-', '_')}-*.dist-info"):
        for f in old.iterdir():
            f.unlink()
        old.rmdir()
    dist = site / f"{name.replace('-', '_')}-{version}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def fake_serving_env(where: Path) -> Path:
    """A venv of the system Python (a box user cannot run root's interpreters) with the stack's metadata, and
    the box Python's packages on its path (a .pth file), so it has the tripwire's client as vLLM's env does."""
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(where)], check=True)
    for name, version in STACK.items():
        install_dist(where, name, version)
    box_site = next((box_python.ensure().parent.parent / "lib").glob("python3*/site-packages"))
    (site_packages(where) / "box_python.pth").write_text(f"{box_site}\n")
    return where


def _box(farm: SshdFarm, store: Store) -> tuple[SshBox, Path]:
    box = box_started("senv-h200x4", str(four_h200(farm.root / "fixtures")))
    register(store, box)
    env = fake_serving_env(box.home / "serve")
    store.boxes.update(box.name, serving_env=str(env))
    return box, env


@pytest.mark.sshd
@pytest.mark.timeout(300)
def test_versions_are_probed_and_a_cubin_mismatch_or_old_flashinfer_is_refused(
    sshd_farm: SshdFarm, fleet_store: Store, tmp_path: Path
) -> None:
    box, env = _box(sshd_farm, fleet_store)
    db = tmp_path / "state.db"

    code, out, err = run_cli(db, "check", box.name, "--json")
    assert code == 1, err
    body = json.loads(out)
    probed = body["verdicts"]
    (cubin,) = [v for v in probed if v["check"] == "serving_env"]
    assert cubin["verdict"] == "fail"
    assert cubin["reason"].startswith(
        f"box {box.name}: flashinfer-cubin 0.6.17 does not match flashinfer-python 0.6.18 in serving env {env}"
    )
    assert f"`campaign box setup {box.name}`" in cubin["reason"] and "\n" not in cubin["reason"]
    # The versions are stored with the box, and torch's CUDA is read from its local tag.
    assert fleet_store.boxes.get(box.name).engine_versions == STACK
    driver = [v for v in probed if v["check"] == "driver"]
    assert all("13.0" in v["reason"] or "cuInit" in v["reason"] for v in driver), driver

    install_dist(env, "flashinfer-cubin", "0.6.18")
    code, out, err = run_cli(db, "check", box.name, "--arm", SPARSE)
    assert code == 1, err
    line = f"box {box.name}: arm {SPARSE} needs flashinfer-python >0.6.18; serving env {env} has 0.6.18"
    assert line in out
    assert "flashinfer-cubin 0.6.18" in out  # the mismatch is gone

    code, out, err = run_cli(db, "launch", SPARSE, "--box", box.name, "--no-wait")
    assert code == 1
    assert err.splitlines()[-1].startswith(f"campaign: arm {SPARSE} is refused: {line}"), err
    assert fleet_store.launches.live(box.name) == []

    install_dist(env, "flashinfer-python", "0.6.19.dev20260904")  # a nightly with PR #4802
    install_dist(env, "flashinfer-cubin", "0.6.19.dev20260904")
    install_dist(env, "flashinfer-jit-cache", "0.6.19.dev20260904")
    code, out, err = run_cli(db, "check", box.name, "--arm", SPARSE, "--json")
    needs = [v for v in json.loads(out)["verdicts"] if v["check"] == "serving_env"]
    # The fake env has no vLLM source to read the arm's FLASHINFER_MLA_SPARSE_SM120 from: unknown warns only.
    assert [v["verdict"] for v in needs] == ["ok", "ok", "warn"], needs
    assert "flashinfer-python 0.6.19.dev20260904 meets >0.6.18" in needs[1]["reason"]


@pytest.mark.sshd
@pytest.mark.timeout(300)
def test_a_missing_engine_patch_is_refused_and_a_launch_stores_the_patch_digest(
    sshd_farm: SshdFarm, fleet_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "patched.toml").write_text(USER_RECIPES)
    monkeypatch.setenv("CAMPAIGN_RECIPES", str(recipes))
    box, env = _box(sshd_farm, fleet_store)
    install_dist(env, "flashinfer-cubin", "0.6.18")
    db = tmp_path / "state.db"

    code, out, err = run_cli(db, "check", box.name, "--arm", "deepseek-v4-flash-dp4-ep")
    assert code == 1, err
    assert (
        f"box {box.name}: serving env {env} lacks patch patch_oproj that arm deepseek-v4-flash-dp4-ep needs "
        "(module patch_oproj: not importable); apply box/patch_oproj.py"
    ) in out

    code, out, err = run_cli(db, "check", box.name, "--arm", "patched-tp1")
    assert code == 1, err
    code, out, err = run_cli(db, "launch", "patched-tp1", "--box", box.name, "--no-wait")
    assert code == 1 and "lacks patch patch_oproj that arm patched-tp1 needs" in err.splitlines()[-1], err
    assert fleet_store.scalar("SELECT count(*) FROM launches") == 0

    marker = site_packages(env) / "patch_oproj.py"
    marker.write_text("# the operator's box/patch_oproj.py, installed as a module of its own name\n")
    digest = hashlib.sha256(marker.read_bytes()).hexdigest()
    code, out, err = run_cli(db, "check", box.name, "--arm", "patched-tp1", "--json")
    assert code == 0, out + err
    (patch,) = [v for v in json.loads(out)["verdicts"] if v["numbers"].get("patch") == "patch_oproj"]
    assert patch["verdict"] == "ok" and patch["numbers"]["found"]["path"] == str(marker)

    # The env has no vLLM to run, so the box fails the launch; its rows still say which patch it had.
    code, out, err = run_cli(db, "launch", "patched-tp1", "--box", box.name, "--no-wait")
    rows = fleet_store.rows("SELECT patch_digests FROM launches WHERE arm = 'patched-tp1'")
    assert [json.loads(r["patch_digests"]) for r in rows] == [{"patch_oproj": digest}], (code, out, err)


SWEPT = (
    PROFILE
    + """
[patches.fake_marker]
source = "a marker module no env here has"
module = "campaign_test_absent_marker"

[arms."fake-patched"]
profile = "fake-moe"
device = "cpu"
max_model_len = 2048
requires_patches = ["fake_marker"]

[shapes.short]
input_len = 16
output_len = 4

[sweeps."fake-patched"]
arms = ["fake-patched"]
"""
)


@pytest.mark.timeout(240)
def test_a_sweep_refuses_an_arm_whose_serving_env_lacks_its_patch(local_db: Path, tmp_path: Path) -> None:
    """The local box (the fake engine's env, probed by the agent's probe as a process): the arm is a refused row
    with the one-line reason, nothing is launched."""
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "fake.toml").write_text(SWEPT)

    async def go() -> dict[str, SweepArm]:
        with Store(local_db) as store:
            service = Service(store, catalog=load_catalog([recipes]), settings=FAST)
            try:
                await service.check("local")
                sweep, _ = service.open_sweep("fake-patched", "local", shapes=["short"], concurrency=[1])
                options = SweepOptions(kill_grace_s=2, prompts=4, base_port=free_ports(1), force=True)
                await service.run_sweep(sweep.id, options)
            finally:
                await service.close()
            assert store.scalar("SELECT count(*) FROM launches") == 0
            return {a.arm: a for a in store.sweeps.arms(sweep.id)}

    (arm,) = asyncio.run(go()).values()
    assert arm.state == "refused", arm
    assert (arm.reason or "").startswith("serving env: box local: serving env ")
    assert "lacks patch fake_marker that arm fake-patched needs (module campaign_test_absent_marker" in (
        arm.reason or ""
    )
