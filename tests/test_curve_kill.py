"""A curve survives its console being killed, and two consoles never walk one curve at once.

Through the real CLI and the real agent on the ``local`` box serving the fake engine (tests/conftest.py):
``campaign curve`` is SIGKILLed while a point is being measured (no handler runs: the point is left
``running``), a second console asking for the same curve meanwhile is refused in one line, and the same command
afterwards measures exactly the points not yet stored. The killed point's bench may still land its row from
the box's journal: that row stays in bench_runs, linked to no point.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from console.recipes import load_catalog
from console.service import Service
from console.store import Store
from testbed.fleet_fixtures import FAST, stop_live_launches
from testbed.ports import free_ports
from tests.support.cli import campaign_argv, campaign_env, run_campaign
from tests.support.fake_recipes import FAKE_NVFP4_PROFILE

pytestmark = pytest.mark.timeout(420)

RECIPES = (
    FAKE_NVFP4_PROFILE
    + """
[arms."fake-curve"]
profile = "fake-nvfp4"
device = "cpu"  # the fake engine on the local box, which has no GPU
linear_backend = "b12x"
max_model_len = 2048
max_num_seqs = 8

[shapes.short]
input_len = 16
output_len = 64
"""
)
LEVELS = "1,2,3,4,5,6"
CURVE = ("curve", "fake-curve", "--box", "local", "--shape", "short", "--concurrency", LEVELS)


def _states(db: Path) -> list[str]:
    with Store(db, read_only=True) as store:
        found = store.rows("SELECT state FROM curve_points ORDER BY position")
    return [r["state"] for r in found]


def _until(what: str, predicate: object, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_a_killed_curve_resumes_point_by_point_and_a_second_console_is_refused(
    local_db: Path, tmp_path: Path
) -> None:
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "fake.toml").write_text(RECIPES)
    db = local_db

    async def launch() -> None:
        with Store(db) as store:
            service = Service(store, catalog=load_catalog([recipes]), settings=FAST)
            try:
                launched = await service.launch(
                    service.plan_launch("fake-curve", "local", base_port=free_ports(1)), ready_timeout_s=60
                )
                assert launched.serving, launched.replicas
            finally:
                await service.close()

    asyncio.run(launch())
    try:
        _kill_and_resume(db, recipes)
    finally:
        asyncio.run(stop_live_launches(db, "local"))  # the box outlives the consoles: leave no server behind


def _kill_and_resume(db: Path, recipes: Path) -> None:
    walking = subprocess.Popen(
        campaign_argv(db, *CURVE, "--prompts-per-slot", "40"),
        env=campaign_env(recipes),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _until(
            "a point after the first to be measured",
            lambda: db.exists() and "running" in _states(db)[1:] and _states(db)[0] == "done",
        )
        # (a) A second console on the same curve is refused while the first holds it, storing nothing.
        second = run_campaign(db, *CURVE, "--prompts-per-slot", "40", recipes=recipes, timeout=120)
        assert second.returncode == 2, second.stderr
        assert "is being measured by another console" in second.stderr, second.stderr
        assert len(second.stderr.strip().splitlines()) <= 2, second.stderr  # resuming line + the refusal
        # (b) Killed outright: no handler runs, the point it measured is left running.
        walking.send_signal(signal.SIGKILL)
        walking.wait(timeout=30)
    finally:
        if walking.poll() is None:
            walking.kill()
    states = _states(db)
    done_before = [i for i, s in enumerate(states) if s == "done"]
    killed = states.index("running")
    assert done_before == list(range(killed)), states  # measured in order, the rest pending
    with Store(db, read_only=True) as store:
        (made,) = store.curves.all()
        linked_before = {p.position: p.bench_run_ids for p in store.curves.points(made.id)}

    # (c) The same command resumes: only the points not stored are measured, the killed one again.
    resumed = run_campaign(db, *CURVE, "--prompts-per-slot", "40", "--json", recipes=recipes, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    body = json.loads(resumed.stdout)
    levels = [int(c) for c in LEVELS.split(",")]
    assert body["curve"]["id"] == made.id and body["measured_now"] == levels[killed:]
    assert "resuming curve" in resumed.stderr
    with Store(db, read_only=True) as store:
        points = store.curves.points(made.id)
        assert [p.state for p in points] == ["done"] * len(levels)
        for position in done_before:  # a stored point is never measured again
            assert points[position].bench_run_ids == linked_before[position]
        linked = {i for p in points for i in p.bench_run_ids}
        rows = {r["id"] for r in store.rows("SELECT id FROM bench_runs WHERE arm = 'fake-curve'")}
    assert len(linked) == len(levels)
    # The killed point's own bench may have finished on the box and landed: kept, linked to no point.
    assert rows - linked <= {max(rows - linked, default=0)}, (rows, linked)
