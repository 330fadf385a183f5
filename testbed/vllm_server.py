"""Start and stop a real CPU vLLM server for tests (one per session: start-up is the expensive part)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from console.recipes import BoxSpec, Replica, load_catalog, resolve
from testbed.pinning import on_cpus
from testbed.ports import free_port
from testbed.vllm_env import VllmEnv


@dataclass
class TinyServer:
    base_url: str
    model: str
    port: int
    log_path: Path
    process: subprocess.Popen[bytes]
    model_dir: Path
    argv: list[str]


def tiny_cpu_replica(env: VllmEnv, port: int) -> Replica:
    """The product's own ``tiny-cpu`` arm resolved on this machine: tests serve what operators launch."""
    box = BoxSpec("local", 0, serving_env=str(env.prefix), model_root=str(env.model_root))
    return resolve(load_catalog(), "tiny-cpu", box, base_port=port).replicas[0]


def start(
    env: VllmEnv,
    log_path: Path,
    timeout_s: float = 420,
    cpus: set[int] | None = None,
    extra_args: tuple[str, ...] = (),
) -> TinyServer:
    """Serve the tiny model; ``cpus`` pins the server and every process it starts, ``extra_args`` go after
    the arm's own (both for bench/agreement.py)."""
    replica = tiny_cpu_replica(env, free_port())
    argv = [*replica.argv, *extra_args]
    port = replica.port
    with open(log_path, "wb") as log:  # the server writes to its own copy of the file descriptor
        proc = subprocess.Popen(
            on_cpus(argv, cpus),
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **replica.env},
            start_new_session=True,
        )
    deadline = time.monotonic() + timeout_s
    url = f"http://127.0.0.1:{port}"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"vLLM exited with {proc.returncode} during start-up; see {log_path}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as r:
                if r.status == 200:
                    warm(url, env.served_name)
                    return TinyServer(url, env.served_name, port, log_path, proc, env.model_dir, argv)
        except OSError:
            pass
        time.sleep(1)
    stop(proc)
    raise RuntimeError(f"vLLM not ready after {timeout_s:.0f} s; see {log_path}")


WARM_PROMPT = "The quick brown fox jumps over the lazy dog. " * 27
"""About 1,200 characters: a long enough first prefill to reach the AMX GEMM that grants the worker its tile state
(docs/facts.md: a server whose first request is a few tokens long loses its worker to SIGILL on this CPU), so
the shared server holds whichever test asks it first."""


def warm(url: str, model: str, rank: int | None = None) -> None:
    """Ask the server at ``url`` WARM_PROMPT first. A data-parallel server has a worker per rank, each needing
    its own long first prefill: ``rank`` sends it to that rank."""
    post_json(url, "/v1/completions", {"model": model, "prompt": WARM_PROMPT, "max_tokens": 1}, rank)


def post_json(url: str, path: str, body: dict[str, Any], rank: int | None = None) -> dict[str, Any]:
    """One JSON request to the server at ``url``; ``rank`` sends it to that data-parallel rank (vLLM's
    ``X-data-parallel-rank`` header, which the API server of a data-parallel head honours)."""
    headers = {"Content-Type": "application/json"}
    if rank is not None:
        headers["X-data-parallel-rank"] = str(rank)
    request = urllib.request.Request(url + path, data=json.dumps(body).encode(), headers=headers)
    with urllib.request.urlopen(request, timeout=120) as r:
        answer: dict[str, Any] = json.load(r)
    return answer


def stop(proc: subprocess.Popen[bytes], grace_s: float = 15) -> None:
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
