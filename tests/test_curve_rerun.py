"""A point whose GPU power cap changed while it was measured is stored invalid with its reason, and
``campaign curve ... --rerun-invalid`` measures only the invalid points again.

A real sshd test box whose fake nvidia-smi shows four RTX PRO 6000 cards (tests/fixtures/gpus/pcie-4gpu.json),
sampled by the real agent at 1 Hz; its server is the fake engine on one card, decoding one token every 30 ms
so each point lasts seconds and its window holds several samples. While the curve's second point is measured,
the test flips the card's power limit read back between 600 W and 400 W (the fake's control file, as an
operator's `nvidia-smi -pl` would), then restores it.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from console.readmodel import curve
from console.recipes import load_catalog
from console.service import Service
from console.store import Store
from testbed import box_python
from testbed.fake_engine import install, write_model
from testbed.ports import free_ports
from tests import test_sweep
from tests.support.cli import campaign_argv, campaign_env, run_campaign

recipes = test_sweep.recipes
"""A user recipes layer with the fake engine's profile ``fake-moe`` (tests/test_sweep.py)."""
pytestmark = [pytest.mark.sshd, pytest.mark.timeout(420)]

ARM = """
[arms."paced"]
profile = "fake-moe"
max_model_len = 2048
max_num_seqs = 4
env = { FAKE_ENGINE_ITL_MS = "30" }

[shapes.slow]
input_len = 16
output_len = 100
"""
CURVE = (
    "curve",
    "paced",
    "--box",
    "cr",
    "--shape",
    "slow",
    "--concurrency",
    "1,2,4",
    "--prompts-per-slot",
    "2",
)


def _box() -> Any:
    from testbed.fleet_fixtures import box_started, farm
    from testbed.sshd import SshdUnavailable

    try:
        farm()
    except SshdUnavailable as exc:
        pytest.skip(str(exc))
    box = box_started("cr", "pcie-4gpu")
    write_model(box.root / "models" / "fake-moe")
    return box


def _cap(box: Any, gpu: int, watts: float | None) -> None:
    """The card's power limit as the box's nvidia-smi reads it back from now on; None: the fixture's again."""
    folder = box.home / ".fake-nvidia-smi"
    folder.mkdir(exist_ok=True)
    values = (
        {}
        if watts is None
        else {str(gpu): {"power.limit": f"{watts:.2f} W", "enforced.power.limit": f"{watts:.2f} W"}}
    )
    tmp = folder / "control.tmp"
    tmp.write_text(json.dumps(values))
    for path in (folder, tmp):
        os.chown(path, box.uid, box.gid)
    os.replace(tmp, folder / "control.values")


def _points(db: Path) -> list[dict[str, Any]]:
    with Store(db, read_only=True) as store:
        return store.rows("SELECT position, state, bench_run_ids FROM curve_points ORDER BY position")


def test_a_power_cap_changed_mid_point_is_invalid_and_only_invalid_points_are_measured_again(
    recipes: Path, tmp_path: Path
) -> None:
    box = _box()
    (recipes / "paced.toml").write_text(ARM)
    db = tmp_path / "state.db"

    async def launch() -> int:
        from testbed.fleet_fixtures import FAST, register

        with Store(db) as store:
            register(store, box)
            env_dir = install(box.root / "fake-env", str(box_python.ensure()))
            store.boxes.update(box.name, serving_env=str(env_dir), model_root=str(box.root / "models"))
            service = Service(store, catalog=load_catalog([recipes]), settings=FAST)
            try:
                await service.check(box.name)  # its GPUs probed, as an operator does before a launch
                launched = await service.launch(
                    service.plan_launch("paced", box.name, gpus=[1], base_port=free_ports(1)),
                    ready_timeout_s=60,
                )
                assert launched.serving, launched.replicas
                [gpus] = [json.loads(r["gpus"]) for r in store.rows("SELECT gpus FROM launches")]
                return int(gpus[0])
            finally:
                await service.close()

    try:
        gpu = asyncio.run(launch())
        walking = subprocess.Popen(
            campaign_argv(db, *CURVE),
            env=campaign_env(recipes),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 240
            while [p["state"] for p in _points(db)][:2] != ["done", "running"] if db.exists() else True:
                assert walking.poll() is None, walking.communicate()
                assert time.monotonic() < deadline, _points(db)
                time.sleep(0.05)
            watts = 400.0
            while _points(db)[1]["state"] == "running":  # flipped through the second point's whole window
                _cap(box, gpu, watts)
                watts = 1000.0 - watts
                time.sleep(1.5)
            _cap(box, gpu, None)
            out, err = walking.communicate(timeout=240)
            assert walking.returncode == 0, err
        finally:
            if walking.poll() is None:
                walking.kill()
            _cap(box, gpu, None)

        with Store(db, read_only=True) as store:
            [made] = [c for c in store.curves.all() if c.arm == "paced"]
            view = curve(store, made.id)
        judged = {p.position: p.validity for p in view.points}
        assert all(v is not None for v in judged.values()), view.points
        assert judged[0] is not None and judged[0].valid, judged[0]  # measured before any change
        second = judged[1]
        assert second is not None and not second.valid
        assert any(f"GPU {gpu} on cr: the power limit read back changed" in r for r in second.reasons), second
        invalid = sorted(p for p, v in judged.items() if v is not None and not v.valid)
        print("invalid points:", invalid, {p: v.reasons for p, v in judged.items() if v is not None})
        before = {p["position"]: json.loads(p["bench_run_ids"]) for p in _points(db)}
        shown = run_campaign(db, "curves", str(made.id), recipes=recipes)
        assert "invalid: GPU" in shown.stdout, shown.stdout

        again = run_campaign(db, *CURVE, "--rerun-invalid", "--json", recipes=recipes, timeout=300)
        assert again.returncode == 0, again.stderr
        body = json.loads(again.stdout)
        levels = [1, 2, 4]
        assert body["measured_now"] == [levels[p] for p in invalid]  # only the invalid points, nothing else
        assert "is invalid, measured again" in again.stderr
        points = {p["concurrency"]: p for p in body["points"]}
        for position, c in enumerate(levels):
            if position in invalid:
                assert points[c]["replaced_run_ids"] == before[position], points[c]
                assert points[c]["bench_run_ids"] != before[position]
                assert points[c]["valid"] is True, points[c]  # the cap held this time
            else:
                assert points[c]["bench_run_ids"] == before[position] and points[c]["replaced_run_ids"] == []
        with Store(db, read_only=True) as store:  # the replaced rows are kept
            kept = {r["id"] for r in store.rows("SELECT id FROM bench_runs WHERE arm = 'paced'")}
        assert {i for p in invalid for i in before[p]} <= kept
    finally:
        from testbed.fleet_fixtures import FAST, stop_live_launches

        if db.exists():
            asyncio.run(stop_live_launches(db, box.name, FAST))  # the fake engine outlives the agent
        box.kill_agent()
