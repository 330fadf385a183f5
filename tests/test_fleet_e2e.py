"""End to end through the fleet layer: a real vLLM on CPU launched from a recipe on the ``local`` box (two
replicas: a node), measured by the load generator on the box, ingested into state.db, killed."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from console.readmodel import replica_results
from console.recipes import load_catalog
from console.recipes.load import shipped_recipe_dir
from console.service import Service, released
from console.store import Store
from testbed.agent_box import stop_agent
from testbed.fleet_fixtures import FAST
from testbed.ports import free_ports
from testbed.vllm_env import CPU_ARM_ENV_TOML, VllmEnv
from tests.support.local_box import add_vllm_box

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(900)]


async def _until(what: str, predicate: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.5)


async def _campaign(db: str, recipes: Path, *argv: str, status: int = 0) -> dict[str, Any]:
    """Run the real CLI in its own process (it opens its own store and link, as an operator's would, and
    reads ``recipes`` as the operator's own); with ``--json`` its stdout is that JSON and nothing else."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "console",
        "--db",
        db,
        *argv,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "CAMPAIGN_RECIPES": str(recipes)},
    )
    out, err = await asyncio.wait_for(proc.communicate(), 600)
    assert proc.returncode == status, err.decode()
    return dict(json.loads(out))


TWO_REPLICAS = f"""
[arms."tiny-cpu-x2"]  # tiny-cpu as two servers on the box's CPUs: a node of two replicas
profile = "tiny-llama"
device = "cpu"
gpu_memory_utilization = 0.15
dtype = "bfloat16"
max_model_len = 2048
max_num_seqs = 2
enforce_eager = true
replicas = 2
{CPU_ARM_ENV_TOML}
"""


async def test_recipe_to_node_bench_rows_through_the_fleet(vllm_env: VllmEnv, tmp_path: Path) -> None:
    """One launch of two real vLLM replicas (the only one the suite affords), every node assertion on it."""
    home = tmp_path / "agent-home"
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "tiny-x2.toml").write_text(TWO_REPLICAS)
    store = Store(tmp_path / "state.db")
    add_vllm_box(store, vllm_env, home)
    service = Service(store, catalog=load_catalog([shipped_recipe_dir(), recipes]), settings=FAST)
    try:
        service.fleet.start("local")  # supervised: the journal flows into state.db while we act
        plan = service.plan_launch("tiny-cpu-x2", "local", base_port=free_ports(2))
        outcome = await service.launch(plan, ready_timeout_s=600)
        assert outcome.serving, outcome.replicas
        launch_id, other_id = outcome.launch_ids
        launch = store.launches.get(launch_id)
        assert launch is not None and launch.state == "serving", launch
        assert launch.kv_cache_tokens and launch.kv_cache_tokens > 0
        # A dense model on CPU: vLLM names no kernel, so the launch's one kernel line is its KernelConfig
        # (log noise such as "Using max model len 2048" is no kernel line: tests/test_kernel_lines.py).
        categories = store.rows("SELECT category FROM kernel_lines WHERE launch_id = ?", [launch_id])
        assert [r["category"] for r in categories] == ["config"], categories

        # One node run per repeat: both replicas at once, the streams dealt over their ports.
        bench = await service.bench(
            launch_id, "local", "tiny", concurrency=4, prompts=16, repeat=2, timeout_s=300
        )
        assert bench.group is not None and bench.group.n == 2 and len(bench.rows) == 2
        for row in bench.rows:
            assert (row.arm, row.shape, row.concurrency, row.replicas, row.failed) == (
                "tiny-cpu-x2",
                "tiny",
                4,
                2,
                0,
            )
            assert row.out_tok_per_s and row.out_tok_per_s > 0
            assert row.prefix_caching is True  # the engine's own config line says so; the arm did not ask
            assert row.kernel_line is None and not row.kernel_fallback  # nothing named, nothing fallen back
            assert row.admitted == 2 and not row.queueing  # two streams per replica, --max-num-seqs 2
            detail = replica_results(store, row.id)
            assert [(d.launch_id, d.streams) for d in detail] == [(launch_id, 2), (other_id, 2)]
            assert (
                all(d.requests and d.out_tok_per_s for d in detail)
                and sum(d.requests or 0 for d in detail) == 16
            )
        assert bench.rows[0].seed != bench.rows[1].seed  # a new seed for every run
        assert store.scalar("SELECT count(*) FROM bench_runs") == 2  # node rows only: no row per replica

        # The tripwire on random weights: degenerate answers, so the arm's throughput is diagnostic only.
        tripwire_id = await service.tripwire(launch_id, max_tokens=48)
        await _until(
            "the tripwire to finish",
            lambda: (
                store.commands.get(tripwire_id).state == "failed"
                or "exit_code" in (store.commands.get(tripwire_id).result or {})
            ),
            300,
        )
        command = store.commands.get(tripwire_id)
        assert command.state == "acked", f"tripwire failed on the box: {command.error}"
        verdict = store.rows("SELECT * FROM tripwire_runs WHERE launch_id = ?", [launch_id])[0]
        assert verdict["arm"] == "tiny-cpu-x2" and verdict["total"] > 0
        nodes = store.rows(
            "SELECT tripwire_id, diagnostic_only FROM bench_runs WHERE launch_id = ?", [launch_id]
        )
        assert all(
            n["tripwire_id"] == verdict["id"] and n["diagnostic_only"] == int(not verdict["passed"])
            for n in nodes
        )

        # The same through the operator's commands: each prints the stored row, traced to its command. The
        # arm names the node on the box; 8 x C prompts by default; three streams a replica admitting two queue.
        db = str(tmp_path / "state.db")
        bench_cli = await _campaign(
            db, recipes, "bench", "tiny-cpu-x2", "--box", "local", "--shape", "tiny", "-c", "6", "--json"
        )
        assert bench_cli["run_id"].startswith("bench-") and bench_cli["concurrency"] == 6
        assert (bench_cli["replicas"], bench_cli["prompts"], bench_cli["queueing"]) == (2, 48, True)
        assert [r["streams"] for r in bench_cli["per_replica"]] == [3, 3]
        assert bench_cli["out_tok_per_s"] > 0 and bench_cli["diagnostic_only"] == int(not verdict["passed"])
        failed = 0 if verdict["passed"] else 1  # `campaign tripwire` exits 1 on a failed tripwire, as `check`
        tripwire_cli = await _campaign(
            db, recipes, "tripwire", launch_id, "--max-tokens", "32", "--json", status=failed
        )
        assert (
            tripwire_cli["run_id"].startswith("tripwire-")
            and tripwire_cli["verdict"]["total"] == verdict["total"]
        )

        stopped = await service.kill(service.plan_kill("tiny-cpu-x2", "local"), grace_s=20)
        assert [x.state for x in stopped] == ["stopped", "stopped"] and all(released(x) for x in stopped)
    finally:
        live = [row.id for row in store.launches.live("local")]
        if live:  # arms outlive their agent by design: never leave a vLLM behind a failed test
            await service.stop_launches("local", live, grace_s=5)
        await service.close()
        store.close()
        stop_agent(home)
