"""End to end: `campaign sweep run` on the tiny CPU vLLM through the local box's agent, killed and resumed.

The list (tests/fixtures/recipes/sweep-tiny-test.toml): tiny-moe pinned to FlashInfer CUTLASS (the engine
refuses it on CPU), tiny-llama with a --seed vLLM's parser rejects (the server dies at start-up), and
tiny-cpu (serves). The sweep process is SIGKILLed while the second arm runs and resumed: four real
launches in all. The random-weight model fails the tripwire, so --bench-degenerate keeps its bench.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.store import Store
from testbed.agent_box import stop_agent
from testbed.fleet_fixtures import agent_ticking_fast
from testbed.ports import free_ports
from testbed.vllm_env import VllmEnv

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.vllm, pytest.mark.timeout(1200)]
SWEEP = (
    "sweep",
    "run",
    "tiny-cpu-test",
    "--box",
    "local",
    "--shapes",
    "short",
    "--concurrency",
    "1",
    "--prompts",
    "4",
    "--bench-degenerate",
    "--kill-grace",
    "10",
    "--ready-timeout",
    "600",
    "--tripwire-max-tokens",  # the random-weight model never stops: 21 s a tripwire at its default room
    "64",
)


@pytest.fixture
def setup(vllm_env: VllmEnv, tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    recipes = tmp_path / "recipes"  # the user layer: the test's list on top of the shipped recipes
    recipes.mkdir()
    shutil.copy(ROOT / "tests" / "fixtures" / "recipes" / "sweep-tiny-test.toml", recipes)
    home = Path(tempfile.mkdtemp(prefix="swv-"))  # a unix socket path must stay under 108 bytes
    db = tmp_path / "state.db"
    with Store(db) as store:
        store.boxes.ensure_local()
        store.boxes.update(
            "local",
            serving_env=str(vllm_env.prefix),
            model_root=str(vllm_env.model_root),
            agent_home=str(home / "agent"),
        )
    try:
        asyncio.run(agent_ticking_fast(db, "local"))  # the sweep's commands find it and keep its tick
        yield db, recipes
    finally:
        stop_agent(home / "agent")
        shutil.rmtree(home, ignore_errors=True)


def _campaign(db: Path, recipes: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "CAMPAIGN_RECIPES": str(recipes), "PYTHONPATH": str(ROOT)}
    if args[:2] == ("sweep", "run"):
        args = (*args, "--base-port", str(free_ports(8)))  # never 8100..: other test runs may hold it
    return subprocess.Popen(
        [sys.executable, "-m", "console", "--db", str(db), *args],
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _states(db: Path) -> dict[str, str]:
    with Store(db) as store:
        return {r["arm"]: r["state"] for r in store.rows("SELECT arm, state FROM sweep_arms")}


def test_sweep_refused_crashed_served_interrupted_and_resumed(setup: tuple[Path, Path]) -> None:
    db, recipes = setup
    first = _campaign(db, recipes, *SWEEP)
    deadline = time.monotonic() + 600
    while _states(db).get("tiny-cpu-bad-seed") != "running":
        assert first.poll() is None and time.monotonic() < deadline, first.communicate()
        time.sleep(0.5)
    first.send_signal(signal.SIGKILL)  # the console dies mid-sweep: nothing records the end
    first.wait()

    with Store(db) as store:
        refused = {a.arm: a for a in store.sweeps.arms(1)}["tiny-moe-flashinfer-cutlass"]
    assert refused.state == "refused" and refused.reason is not None
    assert refused.reason.startswith(  # the engine's own message, from the Worker's traceback
        "ValueError: Unquantized MoE backend FlashInfer CUTLASS does not support the deployment configuration "
        "since kernel does not support current device cpu."
    ), refused.reason
    # That refusal names no accepted set: recorded as none printed, never as "accepts nothing".
    assert refused.backends_accepted is None and refused.reason.endswith(
        "(the engine printed no accepted set)"
    )

    again = _campaign(db, recipes, *SWEEP)
    out, err = again.communicate(timeout=900)
    assert again.returncode == 0, err
    assert "resuming sweep #1" in err
    with Store(db) as store:
        arms = {a.arm: a for a in store.sweeps.arms(1)}
        assert arms["tiny-moe-flashinfer-cutlass"].attempts == 1  # finished before the kill: never re-run
        crashed = arms["tiny-cpu-bad-seed"]
        assert crashed.state == "crashed" and crashed.attempts == 2
        assert "exited with code 2" in (crashed.reason or "") and "--seed" in (crashed.reason or "")
        served = arms["tiny-cpu"]
        # Served; the random-weight model's answers fail the tripwire, which is what 'degenerate' records.
        assert served.state in ("served", "degenerate"), served
        assert served.kv_cache_tokens == 1048576 and served.max_concurrency == 512.0  # its start-up lines
        assert served.tripwire_run_id is not None
        # --tripwire-max-tokens 64 reached every answer of the tripwire.
        [items] = store.rows("SELECT items FROM tripwire_runs WHERE id = ?", [served.tripwire_run_id])
        capped = {i["completion_tokens"] <= 64 for i in json.loads(items["items"])}
        assert capped == {True}, items
        [bench] = store.sweeps.benches(served.id)
        assert bench["error"] is None and bench["out_tok_per_s"] > 0 and bench["queueing"] == 0
        assert store.sweeps.get(1).state == "done"
        assert store.rows("SELECT id FROM launches WHERE state NOT IN ('failed', 'stopped')") == []
        assert store.scalar("SELECT count(*) FROM launches") == 4  # refused, crash x2, served
    status = _campaign(db, recipes, "sweep", "status", "1", "--json")
    body, _ = status.communicate(timeout=60)
    [sweep] = json.loads(body)
    assert [a["state"] for a in sweep["arms"]] == ["refused", "crashed", served.state]


@pytest.mark.sshd
def test_one_queue_over_the_cpu_vllm_box_and_a_gpu_box_runs_their_arms_at_once(
    setup: tuple[Path, Path],
) -> None:
    """The CPU vLLM serves tiny-cpu on the local box (no GPUs: CPU arms only) while the fake engine's one-GPU
    arms run side by side on an sshd box's cards: one queue, two boxes, both at work at the same time."""
    from testbed.sweep_recipes import RECIPES
    from tests.test_sweep_boxes import _boxes, _launches, _register, one_gpu_arms

    db, recipes = setup
    (recipes / "fake.toml").write_text(
        RECIPES + one_gpu_arms(["g1", "g2"]) + '[sweeps."mixed"]\narms = ["tiny-cpu", "g1", "g2"]\n'
    )
    [qv] = _boxes("qv")
    with Store(db) as store:
        _register(store, [qv])
    run = _campaign(
        db,
        recipes,
        "sweep",
        "run",
        "mixed",
        "--box",
        "local",
        "--box",
        "qv",
        "--shapes",
        "short",
        "--concurrency",
        "1",
        "--prompts",
        "4",
        "--bench-degenerate",
        "--kill-grace",
        "10",
        "--ready-timeout",
        "600",
        "--tripwire-max-tokens",
        "64",
    )
    try:
        _, err = run.communicate(timeout=900)
    finally:
        qv.kill_agent()
    assert run.returncode == 0, err
    with Store(db) as store:
        arms = {a.arm: a for a in store.sweeps.arms(1)}
        tiny = arms["tiny-cpu"]
        assert tiny.state in ("served", "degenerate") and (tiny.box, tiny.gpus) == ("local", None), tiny
        assert tiny.kv_cache_tokens == 1048576  # the real engine's start-up line
        [bench] = store.sweeps.benches(tiny.id)
        assert bench["error"] is None and bench["out_tok_per_s"] > 0
        for name in ("g1", "g2"):
            assert arms[name].state == "served" and arms[name].box == "qv" and len(arms[name].gpus or []) == 1
        assert arms["g1"].gpus != arms["g2"].gpus
        launches = _launches(store)
        [vllm] = [x for x in launches if x["box"] == "local"]
        fakes = [x for x in launches if x["box"] == "qv"]
        # At once: each fake server was up while the CPU vLLM was (which takes far longer to start).
        assert all(x["start_ms"] < vllm["stop_ms"] and vllm["start_ms"] < x["stop_ms"] for x in fakes), (
            launches
        )
        assert store.sweeps.get(1).state == "done"
