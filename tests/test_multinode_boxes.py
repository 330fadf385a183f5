"""A multi-box arm launched and killed as one arm on two real sshd boxes, through each box's agent.

The servers are the fake engine (testbed/fake_engine.py): the head serves its API on the port the plan gave
it, the worker runs ``--headless`` with no API, as vLLM's headless ranks do. What is real: the boxes, their
agents, the launch and kill commands, the journal; what is fake: the engine, since the sshd boxes' users
cannot run this machine's CPU vLLM (tests/test_multinode_vllm.py launches that on two boxes here).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import urllib.request
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from console.errors import InputError
from console.recipes import load_catalog
from console.service import Service, released
from console.store import Store
from testbed import box_python
from testbed.fake_engine import install, write_model
from testbed.ports import free_ports
from testbed.sweep_recipes import PROFILE

pytestmark = [pytest.mark.sshd, pytest.mark.timeout(300)]

ARMS = """
[arms."fake-dp2"]
profile = "fake-moe"
device = "cpu"
nodes = 2
data_parallel = 2
max_model_len = 2048
env = { FAKE_ENGINE_STARTUP_S = "0.5" }

[arms."fake-dp2-worker-crash"]  # the head takes 3 s to serve; the worker dies at once
profile = "fake-moe"
device = "cpu"
nodes = 2
data_parallel = 2
max_model_len = 2048
env = { FAKE_ENGINE_STARTUP_S = "3", FAKE_ENGINE_HEADLESS_MODE = "crash" }
"""


@pytest.fixture
def recipes(tmp_path: Path) -> Path:
    path = tmp_path / "recipes"
    path.mkdir()
    (path / "fake.toml").write_text(PROFILE + ARMS)
    return path


def _boxes(store: Store, *names: str) -> list[Any]:
    from testbed.fleet_fixtures import box_started, farm, register
    from testbed.sshd import SshdUnavailable

    try:
        farm()
    except SshdUnavailable as exc:
        pytest.skip(str(exc))
    boxes = [box_started(name, None) for name in names]  # no GPU tooling: CPU boxes
    python = str(box_python.ensure())
    for box in boxes:
        write_model(box.root / "models" / "fake-moe")
        register(store, box)
        env_dir = install(box.root / "fake-env", python)  # run by the box's own unix user
        store.boxes.update(box.name, serving_env=str(env_dir), model_root=str(box.root / "models"))
    return boxes


def _run_on_boxes(tmp_path: Path, go: Callable[[Store], Coroutine[Any, Any, None]], *names: str) -> None:
    """``go`` over a fresh state.db holding the named sshd boxes; their agents stopped after, whatever happened."""
    with Store(tmp_path / "state.db") as store:
        boxes = _boxes(store, *names)
        try:
            asyncio.run(go(store))
        finally:
            for box in boxes:
                box.kill_agent()


def _kill_order(store: Store) -> list[str]:
    """The launch ids of the kill commands, in the order the console sent them."""
    rows = store.rows("SELECT args FROM commands WHERE op = 'kill' ORDER BY rowid")
    return [json.loads(r["args"])["launch_id"] for r in rows]


def test_a_multi_box_arm_launches_head_and_worker_and_is_killed_as_one(recipes: Path, tmp_path: Path) -> None:
    from testbed.fleet_fixtures import FAST

    async def go(store: Store) -> None:
        service = Service(store, catalog=load_catalog([recipes]), settings=FAST)
        try:
            runs = await service.check_multinode(
                "fake-dp2", ["mn-a", "mn-b"]
            )  # each box probed, for its node
            assert [(r.box, r.arm.name if r.arm else None) for r in runs] == [
                ("mn-a", "fake-dp2"),
                ("mn-b", "fake-dp2"),
            ]
            with pytest.raises(InputError, match=r"arm fake-dp2 spans 2 boxes; 1 given \(mn-a\)"):
                await service.check_multinode("fake-dp2", ["mn-a"])
            mplan = service.plan_multinode("fake-dp2", ["mn-a", "mn-b"], base_port=free_ports(1))
            head_argv = mplan.plan.processes[0].argv
            assert head_argv[head_argv.index("--data-parallel-address") + 1] == "127.0.0.1"
            outcome = await service.launch_multinode(mplan, ready_timeout_s=60)
            assert outcome.serving and outcome.stopped is None, outcome
            head, worker = outcome.launches
            assert (head.box, head.state, head.replica) == ("mn-a", "serving", 0)
            assert (worker.box, worker.state, worker.replica) == ("mn-b", "serving", 1)
            port = mplan.plan.head.port
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=10) as r:
                assert [m["id"] for m in json.load(r)["data"]] == ["fake-moe"]
            tail = await service.log_tail(worker.id)
            assert any("Launching 1 data parallel engine(s) in headless mode" in line for line in tail)
            arm = store.launches.arm_record(worker.arm_id)
            assert arm is not None and "--headless" in arm.argv and arm.box == "mn-b"
            with pytest.raises(InputError, match="no live process of arm fake-dp2 on mn-c"):
                service.multinode_live("fake-dp2", "mn-c")
            stopped = await service.kill_multinode("fake-dp2", "mn-b", grace_s=5)
            assert {x.id: x.state for x in stopped} == {worker.id: "stopped", head.id: "stopped"}
            assert all(released(x) for x in stopped)
            assert _kill_order(store) == [worker.id, head.id]  # the worker first, then the head it served
        finally:
            await service.close()

    _run_on_boxes(tmp_path, go, "mn-a", "mn-b", "mn-c")


def test_a_failed_worker_stops_the_head(recipes: Path, tmp_path: Path) -> None:
    from testbed.fleet_fixtures import FAST

    async def go(store: Store) -> None:
        service = Service(store, catalog=load_catalog([recipes]), settings=FAST)
        try:
            mplan = service.plan_multinode("fake-dp2-worker-crash", ["mn-a", "mn-b"], base_port=free_ports(1))
            outcome = await service.launch_multinode(mplan, ready_timeout_s=60)
            head, worker = outcome.launches
            assert not outcome.serving and worker.state == "failed"
            assert outcome.stopped is not None
            assert outcome.stopped.startswith(f"{worker.id} on box mn-b failed: ")
            assert outcome.stopped.endswith("; stopped every process of arm fake-dp2-worker-crash")
            assert head.state == "stopped" and head.ready_ms is None  # stopped before it ever served
            assert store.launches.live("mn-a") == [] and store.launches.live("mn-b") == []
            assert head.id in _kill_order(store)
        finally:
            await service.close()

    _run_on_boxes(tmp_path, go, "mn-a", "mn-b")


def test_the_cli_checks_launches_and_kills_a_multi_box_arm(
    recipes: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.support.cli import run_cli

    monkeypatch.setenv("CAMPAIGN_RECIPES", str(recipes))
    db = tmp_path / "state.db"
    with Store(db) as store:
        boxes = _boxes(store, "mn-a", "mn-b")
    try:
        code, out, err = run_cli(db, "check", "mn-a", "mn-b", "--arm", "fake-dp2")
        assert "box mn-a: probe" in out and "box mn-b: probe" in out and out.count(", arm fake-dp2") == 2, err
        code, out, err = run_cli(db, "launch", "fake-dp2", "--box", "mn-a")
        assert code == 2 and "arm 'fake-dp2' spans 2 boxes, not one box mn-a" in err
        code, out, err = run_cli(
            db, "launch", "fake-dp2", "--box", "mn-a", "--box", "mn-b", "--ready-timeout", "60"
        )
        assert code == 0, (out, err)
        assert (
            "arm fake-dp2 over boxes mn-a, mn-b: " in err and "/mn-a/models/fake-moe as fake-moe, dp" in err
        )
        assert "  head on mn-a: GPUs -\n  worker on mn-b: GPUs -\n" in err and err.endswith("serving\n")
        rows = [line.split() for line in out.splitlines()[1:]]
        assert [(r[1], r[2], r[3]) for r in rows] == [
            ("mn-a", "head", "serving"),
            ("mn-b", "worker", "serving"),
        ]
        code, out, err = run_cli(db, "kill", "fake-dp2", "--box", "mn-b", "--yes", "--grace", "5")
        assert code == 0, (out, err)
        assert [line.split()[1:] for line in out.splitlines()[1:]] == [["stopped", "freed"]] * 2
        code, out, err = run_cli(db, "kill", "fake-dp2", "--box", "mn-b", "--yes")
        assert code == 2 and "nothing to kill: no live process of arm fake-dp2 on mn-b" in err
    finally:
        for box in boxes:
            box.kill_agent()


def test_a_worker_that_dies_after_the_arm_serves_stops_the_head(recipes: Path, tmp_path: Path) -> None:
    """The head keeps its API open when a headless rank dies (it waits on a rank that will never answer): the
    console, following the boxes, stops every process left, each with the reason naming the rank that died."""
    from testbed.fleet_fixtures import FAST

    async def go(store: Store) -> None:
        service = Service(store, catalog=load_catalog([recipes]), settings=FAST)
        try:
            mplan = service.plan_multinode("fake-dp2", ["mn-a", "mn-b"], base_port=free_ports(1))
            outcome = await service.launch_multinode(mplan, ready_timeout_s=60)
            assert outcome.serving, outcome
            head, worker = outcome.launches
            assert worker.pid is not None
            os.kill(worker.pid, signal.SIGKILL)  # the worker's box loses the rank
            notices: list[str] = []
            stop = asyncio.Event()
            following = asyncio.create_task(service.follow("mn-a", stop, on_notice=notices.append))
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 90
            while not (now := store.launches.get(head.id)) or not now.ended or not now.failure_reason:
                assert loop.time() < deadline and not following.done(), (notices, now)
                await asyncio.sleep(0.2)
            stop.set()
            await following
            dead = store.launches.get(worker.id)
            assert dead is not None and dead.state == "failed"
            assert now.state == "stopped" and now.failure_reason is not None
            assert now.failure_reason.startswith(f"rank {worker.id} on box mn-b ended"), now.failure_reason
            assert now.failure_reason.endswith("; stopped every process of arm fake-dp2")
            assert now.failure_reason in notices, notices
            assert store.launches.live("mn-a") == [] and store.launches.live("mn-b") == []
            assert head.id in _kill_order(store)
            assert await service.stop_broken_arms() == []  # said once: nothing is left to stop
        finally:
            await service.close()

    _run_on_boxes(tmp_path, go, "mn-a", "mn-b")
