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
                    _first_request(url, env.served_name)
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


def _first_request(url: str, model: str) -> None:
    body = json.dumps({"model": model, "prompt": WARM_PROMPT, "max_tokens": 1}).encode()
    request = urllib.request.Request(
        url + "/v1/completions", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=120) as r:
        r.read()


def stop(proc: subprocess.Popen[bytes], grace_s: float = 15) -> None:
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
