"""End to end: the agent launches a real vLLM on CPU (tiny random-weight model), measures it, kills it."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from testbed.agent_box import AgentBox
from testbed.ports import free_port
from testbed.vllm_env import VllmEnv, server_env
from testbed.vllm_server import tiny_cpu_replica

pytestmark = pytest.mark.vllm


def _complete(port: int, model: str, n: int) -> int:
    tokens = 0
    for i in range(n):
        body = json.dumps(
            {"model": model, "prompt": f"hello {i}", "max_tokens": 32, "ignore_eos": True}
        ).encode()
        req = urllib.request.Request(
            f"http://127.0.0.1:{port}/v1/completions", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=60) as r:
            tokens += json.loads(r.read())["usage"]["completion_tokens"]
    return tokens


@pytest.mark.timeout(900)
def test_agent_runs_real_vllm_on_cpu(vllm_env: VllmEnv, tmp_path: Path) -> None:
    box = AgentBox(tmp_path / "home", path_prefix=[vllm_env.prefix / "bin"], interval_s=1.0)
    box.start()
    try:
        replica = tiny_cpu_replica(vllm_env, free_port())
        port = replica.port
        started = box.ok(
            "launch",
            {
                "launch_id": "tiny",
                "argv": replica.argv,
                "env": replica.env,
                "gpus": [],
                "port": port,
                "ready_timeout_s": 600,
            },
        )
        assert started["state"] == "starting" and started["pid"] > 0
        box.wait_for(
            lambda e: e["kind"] == "launch_state" and e["state"] in ("serving", "failed"),
            timeout=600,
            what="serving",
        )
        state = [e for e in box.events() if e["kind"] == "launch_state"][-1]
        assert state["state"] == "serving", state
        assert _complete(port, vllm_env.served_name, 8) == 8 * 32
        sample = box.wait_for(
            lambda e: e["kind"] == "server_sample" and (e["gen_tokens_total"] or 0) >= 256,
            timeout=30,
            what="server_sample with the generated tokens",
        )
        assert sample["running"] is not None and sample["kv_usage"] is not None
        _complete(port, vllm_env.served_name, 4)
        box.wait_for(
            lambda e: e["kind"] == "server_sample" and (e["gen_tok_per_s"] or 0) > 0,
            timeout=30,
            what="a non-zero generation rate",
        )

        events = box.events()
        kernel = [e for e in events if e["kind"] == "kernel_line"]
        assert any(e["category"] == "config" and "KernelConfig(" in e["line"] for e in kernel), kernel
        budget = [e for e in events if e["kind"] == "launch_budget"]
        assert budget and budget[-1]["kv_cache_tokens"] > 0 and budget[-1]["max_concurrency"] > 0

        # a benchmark and a tripwire run on the box, as child processes of the agent
        base_url = f"http://127.0.0.1:{port}"
        bench = box.ok(
            "bench",
            {
                "bench_id": "b1",
                "launch_id": "tiny",
                "base_url": base_url,
                "model": vllm_env.served_name,
                "tokenizer": str(vllm_env.model_dir),
                "input_len": 32,
                "output_len": 16,
                "concurrency": 2,
                "prompts": 6,
                "warmup": 1,
                "seed": 7,
            },
            command_id="bench-1",
        )
        assert bench["started"] is True
        tripwire = box.ok(
            "tripwire",
            {
                "tripwire_id": "w1",
                "launch_id": "tiny",
                "argv": [
                    "--base-url",
                    base_url,
                    "--model",
                    vllm_env.served_name,
                    "--max-tokens",
                    "24",
                    "--concurrency",
                    "4",
                ],
            },
            command_id="trip-1",
        )
        assert tripwire["started"] is True
        for command in ("bench-1", "trip-1"):

            def finished(e: dict[str, Any], c: str = command) -> bool:
                return bool(e["kind"] == "command_done" and e["command_id"] == c)

            done = box.wait_for(finished, timeout=300, what=f"{command} done")
            assert done["ok"] is True, done
        result = box.wait_for(lambda e: e["kind"] == "bench_result")
        assert result["bench_id"] == "b1" and result["launch_id"] == "tiny"
        assert result["result"]["requests"] >= 6 and result["result"]["out_tok_per_s"] > 0
        verdict = box.wait_for(lambda e: e["kind"] == "tripwire_result")
        assert verdict["tripwire_id"] == "w1" and isinstance(verdict["result"], dict)

        box.ok("kill", {"launch_id": "tiny", "grace_s": 20}, command_id="kill-tiny")
        stopped = box.wait_for(
            lambda e: e["kind"] == "launch_state" and e["state"] in ("stopped", "failed"), timeout=60
        )
        assert stopped["state"] == "stopped"
        released = box.wait_for(
            lambda e: e["kind"] == "gpu_released" and e["launch_id"] == "tiny", timeout=30
        )
        assert released["released"] is True and released["leftover_pids"] == []
        done = box.wait_for(lambda e: e["kind"] == "command_done" and e["command_id"] == "kill-tiny")
        assert done["ok"] is True
        # the whole journal is still there until acked, in seq order
        seqs = [e["seq"] for e in box.events()]
        assert seqs == sorted(seqs) and seqs[0] == 1
    finally:
        box.stop()  # also SIGKILLs the launch if an assertion failed before the kill


@pytest.mark.timeout(600)
def test_real_vllm_dying_at_start_up_leaves_a_reason(vllm_env: VllmEnv, tmp_path: Path) -> None:
    box = AgentBox(tmp_path / "home", path_prefix=[vllm_env.prefix / "bin"], interval_s=1.0)
    box.start()
    try:
        missing = tmp_path / "no-such-model"
        argv = [
            str(vllm_env.vllm),
            "serve",
            str(missing),
            "--host",
            "127.0.0.1",
            "--port",
            str(free_port()),
            "--enforce-eager",
        ]
        box.ok(
            "launch",
            {
                "launch_id": "broken",
                "argv": argv,
                "env": server_env(),
                "gpus": [],
                "port": int(argv[-2]),
                "ready_timeout_s": 300,
            },
        )
        t0 = time.monotonic()
        failed = box.wait_for(lambda e: e["kind"] == "launch_state" and e["state"] == "failed", timeout=300)
        assert failed["exit_code"] not in (None, 0)
        assert "no-such-model" in failed["reason"] or "Error" in failed["reason"], failed["reason"]
        assert " (at " in failed["reason"]  # the innermost traceback frame
        assert time.monotonic() - t0 < 300
    finally:
        box.stop()
