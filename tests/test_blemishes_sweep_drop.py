"""A sweep whose SSH link to the box is cut again and again mid-walk rides it out: the link reconnects, the arm it
was on goes on from the step it was at (the same server, one tripwire, one row per bench), and the sweep ends
done, nothing lost and nothing doubled.

The box is a real sshd test box behind a loopback TCP proxy the test cuts (tests/support/tcp_proxy.py: every
live connection aborted at once, as a dead network leaves them), while the fake engine
(testbed/fake_engine.py) starts slowly and streams slowly enough that the cuts land while the console waits
for the server to come up, for the tripwire and for each bench."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from console.recipes import load_catalog
from console.service import Service
from console.service.sweep import SweepOptions
from console.store import Store
from console.store.sweeps import SweepArm, SweepRow
from testbed import box_python
from testbed.fake_engine import install, write_model
from testbed.ports import free_ports
from testbed.sweep_recipes import PROFILE
from tests.support.tcp_proxy import TcpProxy

pytestmark = [pytest.mark.timeout(300), pytest.mark.sshd]

RECIPES = (
    PROFILE
    + """
[arms."fake-slow"]
profile = "fake-moe"
device = "cpu"
max_model_len = 2048
max_num_seqs = 4
env = { FAKE_ENGINE_STARTUP_S = "3", FAKE_ENGINE_ITL_MS = "250" }

[shapes.short]
input_len = 16
output_len = 4

[sweeps."slow"]
arms = ["fake-slow"]
"""
)
CUT_AFTER_S = {"launching": 1.0, "tripwire": 0.2, "bench": 1.0}
"""After which step of the walk (its progress line) the link is cut, and how long after it starts."""


class Cutter:
    """Cuts the proxied link a moment after each step of the walk starts, from a thread of its own (the cut
    waits on the proxy process; the walk's event loop must not)."""

    def __init__(self, proxy: TcpProxy):
        self.proxy = proxy
        self.lock = threading.Lock()
        self.cuts = 0
        self.said: list[str] = []
        self.timers: list[threading.Timer] = []

    def progress(self, sweep: SweepRow, arms: list[SweepArm], what: str) -> None:
        self.said.append(what)
        for step, delay in CUT_AFTER_S.items():
            if f": {step}" in what:
                timer = threading.Timer(delay, self.cut)
                timer.start()
                self.timers.append(timer)

    def cut(self) -> None:
        with self.lock:
            self.cuts += self.proxy.drop() > 0  # a cut that found no live connection does not count

    def join(self) -> None:
        for timer in self.timers:
            timer.join()


def test_a_sweep_rides_out_cut_links_and_resumes_the_arm_without_losing_or_doubling_rows(
    tmp_path: Path,
) -> None:
    from testbed.fleet_fixtures import FAST, box_started, farm, register
    from testbed.sshd import SshdUnavailable

    try:
        farm()
    except SshdUnavailable as exc:
        pytest.skip(str(exc))
    box = box_started("blem-drop", None)
    env_dir = install(box.root / "fake-env", str(box_python.ensure()))
    write_model(box.root / "models" / "fake-moe")
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "slow.toml").write_text(RECIPES)
    proxy = TcpProxy(box.port)
    cutter = Cutter(proxy)
    db = tmp_path / "state.db"

    async def go() -> int:
        with Store(db) as store:
            register(store, box, port=proxy.port)
            store.boxes.update(box.name, serving_env=str(env_dir), model_root=str(box.root / "models"))
            service = Service(store, catalog=load_catalog([recipes]), settings=FAST)
            try:
                sweep, _ = service.open_sweep("slow", box.name, ["short"], [1, 2])
                options = SweepOptions(kill_grace_s=2, prompts=8, base_port=free_ports(1))
                await service.run_sweep(sweep.id, options, cutter.progress)
            finally:
                await service.close()
            return sweep.id

    try:
        sweep_id = asyncio.run(go())
        cutter.join()
    finally:
        proxy.close()
        box.kill_agent()
    assert cutter.cuts >= 3, f"only {cutter.cuts} live links were cut: {cutter.said}"
    assert any("link lost; reconnecting" in s for s in cutter.said), cutter.said
    assert any("link back after" in s for s in cutter.said), cutter.said
    with Store(db) as store:
        assert store.sweeps.get(sweep_id).state == "done"
        [arm] = store.sweeps.arms(sweep_id)
        assert (arm.state, arm.attempts, arm.reason) == ("served", 1, None)  # never relaunched
        launches = store.rows("SELECT id, state FROM launches")
        assert launches == [{"id": arm.launch_ids[0], "state": "stopped"}]  # one server, stopped at the end
        assert len(store.rows("SELECT id FROM tripwire_runs")) == 1
        benches = store.sweeps.benches(arm.id)
        assert sorted(b["concurrency"] for b in benches) == [1, 2]  # one row a point, none doubled
        assert all(b["bench_run_id"] and b["error"] is None for b in benches), benches
        runs = store.rows("SELECT id, concurrency, prompts FROM bench_runs ORDER BY concurrency")
        assert [(r["concurrency"], r["prompts"]) for r in runs] == [(1, 8), (2, 8)]
        assert {r["id"] for r in runs} == {b["bench_run_id"] for b in benches}
        results = store.rows(
            "SELECT count(*) AS n FROM journal WHERE box = ? AND kind = 'bench_result'", [box.name]
        )
        assert results == [{"n": 2}]
        # Every event the box journaled came once, in order, none lost on a cut and none quarantined.
        seqs = [
            r["seq"] for r in store.rows("SELECT seq FROM journal WHERE box = ? ORDER BY seq", [box.name])
        ]
        assert seqs and seqs == list(range(seqs[0], store.ingest.cursor(box.name) + 1))
        assert store.rows("SELECT count(*) AS n FROM lost_events") == [{"n": 0}]
        assert store.rows("SELECT count(*) AS n FROM quarantine") == [{"n": 0}]
