"""Logit-level divergence and the tripwire against real CPU vLLM servers, launched through the agent.

Three servers for the whole module (each start costs a minute or two here): the tiny model trained on
the tripwire's questions, served twice (the control pair), and a copy with noisy weights (a broken build,
testbed/tiny_model.py). The control reproduces bit for bit on CPU, the broken build's excess KL is
positive, the verdicts order as they must, and the tripwire passes the trained model 20/20 and fails the
broken one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from console.store import Store
from console.store.conditions import join_kernel_lines, selected_kernel_lines
from testbed.vllm_env import DEGRADED_NAME, TRAINED_NAME, VllmEnv, ensure_trained
from tests.support.local_box import launched_arms, served_model_recipe

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parent.parent


RECIPES = served_model_recipe(
    "tiny-trained", TRAINED_NAME, "the tiny Llama trained on the tripwire's questions"
) + served_model_recipe(
    "tiny-degraded", DEGRADED_NAME, "the trained tiny Llama with noisy weights: a broken build"
)


@dataclass(frozen=True)
class Servers:
    db: Path
    env: dict[str, str]
    python: Path
    trained: str  # launch ids
    twin: str
    degraded: str
    ports: dict[str, int]


def _campaign(servers: Servers, *argv: str, status: int = 0) -> Any:
    """The operator's command in its own process; with ``--json`` its stdout is the JSON and nothing else."""
    proc = subprocess.run(
        [sys.executable, "-m", "console", "--db", str(servers.db), *argv],
        env=servers.env,
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    assert proc.returncode == status, proc.stderr
    return json.loads(proc.stdout) if "--json" in argv else proc


@pytest.fixture(scope="module")
def servers(vllm_env: VllmEnv, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    ensure_trained()
    tmp = tmp_path_factory.mktemp("kldiff-vllm")
    with launched_arms(vllm_env, tmp, ("tiny-trained", "tiny-trained", "tiny-degraded"), RECIPES) as up:
        env = {**os.environ, "CAMPAIGN_RECIPES": str(up.recipes), "PYTHONPATH": str(ROOT)}
        trained, twin, degraded = up.launch_ids
        yield Servers(up.db, env, vllm_env.python, trained, twin, degraded, up.ports)


def _tool(servers: Servers, a: str, b: str, *extra: str, status: int = 0) -> dict[str, Any]:
    """The box-side tool as the agent runs it: under the serving environment's Python."""
    proc = subprocess.run(
        [str(servers.python), "-m", "agents", "kldiff", "--a", a, "--b", b, *extra, "--json", "--quiet"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == status, proc.stderr
    return dict(json.loads(proc.stdout))


def _url(servers: Servers, launch_id: str) -> str:
    return f"http://127.0.0.1:{servers.ports[launch_id]}"


class OtherTokenizer(ThreadingHTTPServer):
    """An OpenAI-style server whose tokenizer is another one: it serves the same model name, and
    ``/tokenize`` answers one id per byte (the tiny model's BPE merges many bytes into one token)."""

    daemon_threads = True

    def __init__(self, model: str) -> None:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _send(self, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._send({"object": "list", "data": [{"id": model, "object": "model"}]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                text = body.get("prompt") or json.dumps(body.get("messages"))
                self._send({"tokens": list(text.encode())[:200], "count": len(text), "max_model_len": 2048})

        super().__init__(("127.0.0.1", 0), Handler)


def test_the_box_side_tool_against_real_servers(servers: Servers) -> None:
    trained, twin, degraded = (_url(servers, x) for x in (servers.trained, servers.twin, servers.degraded))
    control = _tool(servers, trained, twin + "/v1", "--model", TRAINED_NAME)  # a URL with or without /v1
    assert control["b"] == twin and control["positions"] == control["positions_available"] > 500
    # One configuration served twice on CPU reproduces bit for bit: every position identical.
    assert (control["mean_kl"], control["top1_agreement"], control["top5_overlap"]) == (0.0, 1.0, 1.0)
    assert (
        control["top_k"] == 20 and control["contexts"] == 20 and "residual" in control["missing_token_method"]
    )
    broken = _tool(servers, trained, degraded, "--model", TRAINED_NAME, "--model-b", DEGRADED_NAME)
    assert (
        broken["mean_kl"] > 0.01 and broken["top1_agreement"] < 0.99 and broken["p99_kl"] >= broken["p50_kl"]
    )
    assert broken["missing_per_position"] > 0  # the two top-20 lists differ: the rule filled tokens in
    sample = _tool(
        servers,
        trained,
        degraded,
        "--model",
        TRAINED_NAME,
        "--model-b",
        DEGRADED_NAME,
        "--positions",
        "50",
        "--seed",
        "3",
        "--top-k",
        "5",
    )
    assert sample["positions"] == 50 and sample["positions_available"] == broken["positions"]
    again = _tool(
        servers,
        trained,
        degraded,
        "--model",
        TRAINED_NAME,
        "--model-b",
        DEGRADED_NAME,
        "--positions",
        "50",
        "--seed",
        "3",
        "--top-k",
        "5",
    )
    assert again["mean_kl"] == sample["mean_kl"]  # the same seed keeps the same positions
    contexts = Path(servers.db).with_name("contexts.json")
    contexts.write_text(
        json.dumps(
            [
                {
                    "messages": [
                        {"role": "user", "content": "What is the capital of France? Answer with one word."}
                    ],
                    "continuation": "paris",
                }
            ]
        )
    )
    answer = _tool(
        servers,
        trained,
        degraded,
        "--model",
        TRAINED_NAME,
        "--model-b",
        DEGRADED_NAME,
        "--contexts",
        str(contexts),
    )
    assert answer["contexts"] == 1 and 1 <= answer["positions"] <= 3  # only the continuation's tokens

    refused = _tool(
        servers, trained, degraded, "--model", TRAINED_NAME, status=2
    )  # b does not serve that name
    assert TRAINED_NAME in refused["error"] and DEGRADED_NAME in refused["error"]
    other = OtherTokenizer(TRAINED_NAME)
    threading.Thread(target=other.serve_forever, args=(0.05,), daemon=True).start()
    try:
        mismatch = _tool(
            servers, trained, f"http://127.0.0.1:{other.server_address[1]}", "--model", TRAINED_NAME, status=2
        )
    finally:
        other.shutdown()
        other.server_close()
    assert "tokenize context 0 differently" in mismatch["error"] and "tokenizers differ" in mismatch["error"]


def test_campaign_kldiff_reads_each_pair_against_its_control(servers: Servers) -> None:
    control = ["--control", servers.trained, servers.twin]
    broken = _campaign(servers, "kldiff", servers.trained, servers.degraded, *control, "--json")
    pair, floor = broken["pair"], broken["control"]
    assert (
        floor["role"] == "control"
        and floor["mean_kl"] == 0.0
        and floor["recorded_verdict"] == "the noise floor"
    )
    assert (pair["arm_a"], pair["arm_b"], pair["launch_a"], pair["launch_b"]) == (
        "tiny-trained",
        "tiny-degraded",
        servers.trained,
        servers.degraded,
    )
    assert pair["control_id"] == floor["id"] and pair["control_mean_kl"] == 0.0
    assert pair["excess_kl"] == pytest.approx(pair["mean_kl"]) and pair["excess_kl"] > 0.01
    with Store(
        servers.db, read_only=True
    ) as store:  # each side beside the kernel lines its own engine printed
        kernels = [
            join_kernel_lines(selected_kernel_lines(store, x)) for x in (servers.trained, servers.degraded)
        ]
    assert [pair["kernel_a"], pair["kernel_b"]] == kernels
    assert (
        broken["verdict"]["kind"] == "exact-floor" and pair["recorded_verdict"] == broken["verdict"]["text"]
    )

    same = _campaign(servers, "kldiff", servers.twin, servers.trained, *control, "--json")
    assert same["verdict"]["text"] == "below the floor" and same["pair"]["mean_kl"] == 0.0
    order = {"below": 0, "just-above": 1, "exact-floor": 2, "times": 2}
    assert order[same["verdict"]["kind"]] < order[broken["verdict"]["kind"]]

    bare = _campaign(servers, "kldiff", servers.trained, servers.degraded)
    assert "verdict: no verdict: no control pair" in bare.stdout and "--control C D" in bare.stderr
    assert "top-1 agreement" in bare.stdout

    rows = json.loads(_campaign(servers, "export", "kldiff", "--format", "json").stdout)
    measured = [r for r in rows if r["source"] == "measured"]
    assert len(measured) == 5 and measured[0]["verdict"].startswith("no verdict")  # newest first
    assert sum(r["role"] == "control" for r in measured) == 2


def test_the_tripwire_passes_the_trained_model_and_fails_the_broken_build(servers: Servers) -> None:
    passed = _campaign(servers, "tripwire", servers.trained, "--max-tokens", "32", "--json")
    assert passed["verdict"]["passed"] is True and (passed["verdict"]["ok"], passed["verdict"]["total"]) == (
        20,
        20,
    )
    failed = _campaign(servers, "tripwire", servers.degraded, "--max-tokens", "32", "--json", status=1)
    assert failed["verdict"]["passed"] is False and failed["verdict"]["ok"] < 18
