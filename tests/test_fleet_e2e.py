"""End to end through the fleet layer: a real vLLM on CPU launched from a recipe on the ``local`` box,
measured by the load generator on the box, ingested into state.db, killed."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from console.service import Service, released
from console.store import Box, Store
from tests.support.fleet_fixtures import FAST
from tests.support.vllm_env import VllmEnv
from tests.support.vllm_server import free_port

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(900)]


async def _until(what: str, predicate: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.5)


async def _campaign(db: str, *argv: str, status: int = 0) -> dict[str, Any]:
    """Run the real CLI in its own process (it opens its own store and link, as an operator's would);
    with ``--json`` its stdout is that JSON and nothing else."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "console", "--db", db, *argv,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 600)
    assert proc.returncode == status, err.decode()
    return dict(json.loads(out))


async def test_recipe_to_bench_row_through_the_fleet(vllm_env: VllmEnv, tmp_path: Path) -> None:
    home = tmp_path / "agent-home"
    store = Store(tmp_path / "state.db")
    store.boxes.add(Box(name="local", kind="local", agent_home=str(home), serving_env=str(vllm_env.prefix),
                        model_root=str(vllm_env.model_root)))  # fmt: skip
    service = Service(store, settings=FAST)
    try:
        service.fleet.start("local")  # supervised: the journal flows into state.db while we act
        plan = service.plan_launch("tiny-cpu", "local", base_port=free_port())
        outcome = await service.launch(plan, ready_timeout_s=600)
        [launch_id] = outcome.launch_ids
        assert outcome.serving, outcome.replicas
        launch = store.launches.get(launch_id)
        assert launch is not None and launch.state == "serving", launch
        assert store.scalar("SELECT count(*) FROM kernel_lines WHERE launch_id = ?", [launch_id]) > 0
        assert launch.kv_cache_tokens and launch.kv_cache_tokens > 0

        bench_id = await service.bench(launch_id, "tiny", concurrency=4, prompts=16)
        await _until("the bench run to finish", lambda: store.commands.get(bench_id).state == "failed"
                     or "exit_code" in (store.commands.get(bench_id).result or {}), 300)  # fmt: skip
        command = store.commands.get(bench_id)
        assert command.state == "acked", f"bench failed on the box: {command.error}"
        row = store.rows("SELECT * FROM bench_runs WHERE launch_id = ?", [launch_id])[0]
        assert row["arm"] == "tiny-cpu" and row["shape"] == "tiny" and row["concurrency"] == 4
        assert row["out_tok_per_s"] > 0, row
        # A dense model on CPU: vLLM names no kernel, so the launch's one kernel line is its KernelConfig
        # (log noise such as "Using max model len 2048" is no kernel line: tests/test_kernel_lines.py).
        categories = store.rows("SELECT category FROM kernel_lines WHERE launch_id = ?", [launch_id])
        assert [r["category"] for r in categories] == ["config"], categories

        # The tripwire on random weights: degenerate answers, so the arm's throughput is diagnostic only.
        tripwire_id = await service.tripwire(launch_id, max_tokens=48)
        await _until("the tripwire to finish", lambda: store.commands.get(tripwire_id).state == "failed"
                     or "exit_code" in (store.commands.get(tripwire_id).result or {}), 300)  # fmt: skip
        command = store.commands.get(tripwire_id)
        assert command.state == "acked", f"tripwire failed on the box: {command.error}"
        verdict = store.rows("SELECT * FROM tripwire_runs WHERE launch_id = ?", [launch_id])[0]
        assert verdict["arm"] == "tiny-cpu" and verdict["total"] > 0
        bench = store.rows("SELECT tripwire_id, diagnostic_only FROM bench_runs WHERE launch_id = ?", [launch_id])[0]
        assert bench["tripwire_id"] == verdict["id"] and bench["diagnostic_only"] == int(not verdict["passed"])

        # The same through the operator's commands: each prints the stored row, traced to its command.
        db = str(tmp_path / "state.db")
        bench_cli = await _campaign(db, "bench", launch_id, "--shape", "tiny", "-c", "2", "--prompts", "8", "--json")
        assert bench_cli["run_id"].startswith("bench-") and bench_cli["concurrency"] == 2
        assert bench_cli["out_tok_per_s"] > 0 and bench_cli["diagnostic_only"] == int(not verdict["passed"])
        failed = 0 if verdict["passed"] else 1  # `campaign tripwire` exits 1 on a failed tripwire, as `check`
        tripwire_cli = await _campaign(db, "tripwire", launch_id, "--max-tokens", "32", "--json", status=failed)
        assert tripwire_cli["run_id"].startswith("tripwire-") and tripwire_cli["verdict"]["total"] == verdict["total"]

        [stopped] = await service.kill(service.plan_kill(launch_id, "local"), grace_s=20)
        assert stopped.state == "stopped" and released(stopped)
    finally:
        live = [row.id for row in store.launches.live("local")]
        if live:  # arms outlive their agent by design: never leave a vLLM behind a failed test
            await service.stop_launches("local", live, grace_s=5)
        await service.close()
        store.close()
        pidfile = home / "agent.pid"
        if pidfile.exists():
            os.kill(int(pidfile.read_text().split()[0]), signal.SIGTERM)
