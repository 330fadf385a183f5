"""Multi-box plans against the real vLLM 0.32 (CPU build): its own `vllm serve` parser reads every planned
argv, head and workers, as the plan meant it (sizes, the head's address, the RPC port, each worker's first
rank, headless), and nothing the plan did not write (no external or hybrid balancing, no rank of its own);
and the shipped data-parallel test arm launched over two boxes of this machine, serving through its head.

Ray's ``ray start`` argv are not parsed here: the CPU build does not install Ray (docs/multinode.md).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from console.recipes import BoxSpec, load_catalog
from console.recipes.multinode import DP_RPC_PORT, MultiNodePlan, PlanBox, plan
from testbed.vllm_env import VllmEnv
from tests.support.vllm_python import run_in_vllm_env

pytestmark = pytest.mark.vllm

# Runs inside the vLLM venv: each argv through `vllm serve`'s own parser, and the values it read.
PARSE = """
import json, sys
from vllm.entrypoints.launchers.cli_args import make_arg_parser
from vllm.utils.argparse_utils import FlexibleArgumentParser
out = {}
for name, argv in json.load(sys.stdin).items():
    ns = make_arg_parser(FlexibleArgumentParser(prog="vllm serve")).parse_args(argv[2:])
    out[name] = {k: getattr(ns, k) for k in (
        "model_tag", "host", "port", "headless", "data_parallel_size", "data_parallel_size_local",
        "data_parallel_address", "data_parallel_rpc_port", "data_parallel_start_rank", "data_parallel_rank",
        "data_parallel_hybrid_lb", "data_parallel_external_lb", "data_parallel_backend", "tensor_parallel_size",
        "pipeline_parallel_size", "distributed_executor_backend", "enable_expert_parallel", "api_server_count",
        "served_model_name",
    )}
json.dump(out, sys.stdout)
"""


def _parse(vllm_env: VllmEnv, plans: list[MultiNodePlan]) -> dict[str, dict[str, Any]]:
    argvs = {
        f"{p.arm}/{i}": x.argv
        for p in plans
        for i, x in enumerate(p.processes)
        if x.role in ("head", "worker")
    }
    parsed: dict[str, dict[str, Any]] = run_in_vllm_env(vllm_env, PARSE, argvs)
    return parsed


def test_vllm_reads_every_planned_argv_as_the_plan_meant_it(vllm_env: VllmEnv) -> None:
    catalog = load_catalog()
    pro = [
        PlanBox(
            BoxSpec(f"p{i}", 8, "NVIDIA RTX PRO 6000", 97887, False, "/opt/vllm", "/models"),
            f"10.0.0.{i + 1}",
        )
        for i in range(4)
    ]
    cpu = [
        PlanBox(
            BoxSpec(f"c{i}", 0, serving_env=str(vllm_env.prefix), model_root=str(vllm_env.model_root)),
            "127.0.0.1",
        )
        for i in range(2)
    ]
    spanning = [a for a in catalog.arms.values() if a.nodes > 1]
    plans = [plan(catalog, a, (cpu if a.device == "cpu" else pro)[: a.nodes]) for a in spanning]
    assert {p.mode for p in plans} == {"dp", "ray"}  # the shipped arms cover both layouts
    parsed = _parse(vllm_env, plans)
    checked = 0
    for p in plans:
        arm = catalog.arms[p.arm]
        for i, x in enumerate(p.processes):
            if x.role not in ("head", "worker"):
                continue  # a Ray node: `ray start`, not vLLM
            got, checked = parsed[f"{p.arm}/{i}"], checked + 1
            assert got["served_model_name"] == [p.served_model_name] and got["model_tag"] == x.argv[2]
            assert got["tensor_parallel_size"] == arm.tensor_parallel
            assert got["enable_expert_parallel"] == arm.expert_parallel
            assert got["data_parallel_rank"] is None and not got["data_parallel_external_lb"]
            assert not got["data_parallel_hybrid_lb"] and got["data_parallel_backend"] == "mp"
            assert got["api_server_count"] is None
            if x.role == "head":
                assert (got["host"], got["port"], got["headless"]) == ("127.0.0.1", x.port, False)
            else:
                assert got["headless"] is True
            if p.mode == "dp":
                local = arm.data_parallel // arm.nodes
                assert got["data_parallel_size"] == arm.data_parallel
                assert got["data_parallel_size_local"] == local
                assert (
                    got["data_parallel_address"]
                    == p.head_address
                    == p.processes[0].argv[p.processes[0].argv.index("--data-parallel-address") + 1]
                )
                assert got["data_parallel_rpc_port"] == DP_RPC_PORT
                assert got["data_parallel_start_rank"] == (None if x.role == "head" else i * local)
            else:
                assert got["pipeline_parallel_size"] == arm.nodes
                assert got["distributed_executor_backend"] == "ray"
                assert got["data_parallel_size"] == 1 and got["data_parallel_address"] is None
    assert checked == sum(1 for p in plans for x in p.processes if x.role in ("head", "worker"))


PROMPT = "The capital of France is"
MAX_TOKENS = 12
COMPLETION = {
    "model": "tiny-llama",
    "prompt": PROMPT,
    "max_tokens": MAX_TOKENS,
    "temperature": 0,
    "ignore_eos": True,
}
_SUCCESS = re.compile(r'^vllm:request_success_total\{[^}]*engine="(\d+)"[^}]*\}\s+(\S+)$', re.MULTILINE)


def _served_by_engine(page: str) -> dict[str, float]:
    """Requests finished per data-parallel engine on the head's ``/metrics`` (every finish reason)."""
    served: dict[str, float] = {}
    for engine, value in _SUCCESS.findall(page):
        served[engine] = served.get(engine, 0.0) + float(value)
    return served


@pytest.mark.timeout(900)
def test_tiny_cpu_dp2_serves_over_two_boxes_of_this_machine(vllm_env: VllmEnv, tmp_path: Path) -> None:
    """The shipped test arm launched through the console: its head on one box, its headless rank on another,
    each box its own agent (two boxes of kind local: the sshd boxes' users cannot run this machine's vLLM),
    the head's address 127.0.0.1. The head's API opens once both ranks joined, each rank serves completions
    through it, and one kill stops both."""
    import asyncio
    import urllib.request

    from console.service import Service, released
    from console.store import Box, Store
    from testbed.agent_box import stop_agent
    from testbed.fleet_fixtures import FAST
    from testbed.ports import free_ports
    from testbed.vllm_server import post_json, warm

    homes = {name: tmp_path / f"agent-{name}" for name in ("node-a", "node-b")}

    async def go(store: Store) -> None:
        service = Service(store, settings=FAST)
        try:
            first = free_ports(2)
            mplan = service.plan_multinode(
                "tiny-cpu-dp2-2node", ["node-a", "node-b"], base_port=first, inter_node_port=first + 1
            )
            outcome = await service.launch_multinode(mplan, ready_timeout_s=600)
            head, worker = outcome.launches
            if not outcome.serving:
                tails = {x.id: await service.log_tail(x.id, 60) for x in outcome.launches}
                pytest.fail(f"{outcome.stopped}: {json.dumps(tails, indent=1)[-6000:]}")
            assert (head.box, worker.box) == ("node-a", "node-b")
            # The head's API opened only after the rank on the other box joined through the planned address
            # and port.
            rpc = mplan.plan.inter_node_port
            said = await service.log_tail(worker.id, 400)
            assert any(
                f"Launching 1 data parallel engine(s) in headless mode, with head node address tcp://127.0.0.1:{rpc}"
                in line
                for line in said
            ), said[-20:]
            said = await service.log_tail(head.id, 400)
            assert any("All engine subscriptions received by DP coordinator" in line for line in said), said[
                -20:
            ]
            base = f"http://127.0.0.1:{first}"
            with urllib.request.urlopen(f"{base}/v1/models", timeout=30) as r:
                assert [m["id"] for m in json.load(r)["data"]] == ["tiny-llama"]
            # Each rank's worker dies of SIGILL in the AMX attention kernel if its first request is a few tokens
            # long (docs/facts.md, docs/multinode.md): each rank is asked a long prompt first. The requests run
            # off the event loop, which keeps serving both agents' links.
            for rank in (0, 1):
                await asyncio.to_thread(warm, base, "tiny-llama", rank)
            tokens = await asyncio.to_thread(
                post_json, base, "/tokenize", {"model": "tiny-llama", "prompt": PROMPT}
            )
            prompt_tokens = len(tokens["tokens"])
            texts = []
            for to in (0, 1, None):  # each rank by vLLM's header, then one the head balances
                done = await asyncio.to_thread(post_json, base, "/v1/completions", COMPLETION, to)
                usage = [done["usage"][k] for k in ("prompt_tokens", "completion_tokens", "total_tokens")]
                assert usage == [prompt_tokens, MAX_TOKENS, prompt_tokens + MAX_TOKENS], done
                assert done["model"] == "tiny-llama" and done["choices"][0]["finish_reason"] == "length"
                texts.append(done["choices"][0]["text"])
            # Greedy over the same weights: the rank on node-b answers what the head's rank answers.
            assert texts[0] and texts == [texts[0]] * 3, texts
            with urllib.request.urlopen(f"{base}/metrics", timeout=30) as r:
                served = _served_by_engine(r.read().decode())
            assert set(served) == {"0", "1"} and sum(served.values()) == 5, served
            assert min(served.values()) >= 2, served  # its warm-up and its own completion, at least
            stopped = await service.kill_multinode("tiny-cpu-dp2-2node", "node-a", grace_s=10)
            assert {x.state for x in stopped} == {"stopped"} and all(released(x) for x in stopped)
        finally:
            for name in homes:
                live = [x.id for x in store.launches.live(name)]
                if live:
                    await service.stop_launches(name, live, grace_s=5)
            await service.close()

    with Store(tmp_path / "state.db") as store:
        for name, home in homes.items():
            store.boxes.add(
                Box(
                    name=name,
                    kind="local",
                    agent_home=str(home),
                    serving_env=str(vllm_env.prefix),
                    model_root=str(vllm_env.model_root),
                )
            )
        try:
            asyncio.run(go(store))
        finally:
            for home in homes.values():
                stop_agent(home)
