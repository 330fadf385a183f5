"""``campaign specdiff`` against real CPU vLLM servers of the tiny model, launched through the agent.

Three launches for the whole module (each start costs 20-40 s here, so they start at once): the shipped
``tiny-cpu-ngram`` (vLLM's ngram speculation: no drafter weights), its baseline ``tiny-cpu``, and a
``tiny-cpu`` with another ``--max-num-seqs`` (a BASE that differs in more than the speculative config).
The three refusals, and the verdict branch with the write-up's control (the same server captured twice,
which on CPU reproduces bit for bit).

The "no conclusion" branch needs a control that does not reproduce, which a CPU vLLM never does. So its
second capture is a test-only server (``Unsteady``, below): it forwards every request to the real
``tiny-cpu`` server and returns vLLM's real answer, except that for eight of the twelve built-in prompts
it changes the second generated token id, as a GPU stack whose batches change reductions run to run can.
It is registered as a launch of the ``tiny-cpu`` arm (the same argv, its own port), so the console treats
it as the second launch of that configuration; the control then reproduces 4 of 12, as the write-up's did.
"""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from agents.loadgen.specdecode import over_run, read
from agents.specdiff.prompts import DEFAULT_PROMPTS
from console.store import Store
from testbed.vllm_env import CPU_ARM_ENV_TOML, VllmEnv
from tests.support.cli import run_cli
from tests.support.local_box import launched_arms

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(1800)]

OTHER = f"""
[arms."tiny-cpu-seqs8"]
profile = "tiny-llama"
device = "cpu"
dtype = "bfloat16"
max_model_len = 2048
max_num_seqs = 8
enforce_eager = true
gpu_memory_utilization = 0.15
description = "tiny-cpu with another --max-num-seqs: a BASE that differs in more than speculation"
{CPU_ARM_ENV_TOML}

[arms."tiny-cpu-seqs8".flags]
"--override-generation-config" = '{{"temperature":0.0}}'
"""
UNSTEADY = frozenset(DEFAULT_PROMPTS[4:])
"""The built-in prompts whose second capture the unsteady server changes: 8 of 12, so 4 reproduce."""
MAX_TOKENS = "16"


@dataclass(frozen=True)
class Servers:
    db: Path
    spec: str  # launch ids
    base: str
    other: str
    ports: dict[str, int]


@pytest.fixture(scope="module")
def servers(vllm_env: VllmEnv, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    tmp = tmp_path_factory.mktemp("specdiff-vllm")
    with launched_arms(vllm_env, tmp, ("tiny-cpu-ngram", "tiny-cpu", "tiny-cpu-seqs8"), OTHER) as up:
        spec, base, other = up.launch_ids
        yield Servers(up.db, spec, base, other, up.ports)


def _refused(servers: Servers, *argv: str) -> str:
    code, out, err = run_cli(servers.db, "specdiff", *argv)
    assert code == 1 and out == "", (code, out, err)
    assert err.count("\n") == 1, err  # one line
    return err


def test_the_three_refusals(servers: Servers) -> None:
    s, b, o = servers.spec, servers.base, servers.other
    err = _refused(servers, b, s, "--control", b, b)
    assert f"SPEC launch {b} (tiny-cpu) has no --speculative-config in its argv" in err
    err = _refused(servers, s, o, "--control", b, b)
    assert f"BASE launch {o} (tiny-cpu-seqs8) differs from SPEC {s} (tiny-cpu-ngram)" in err
    assert "+--max-num-seqs 16, ---max-num-seqs 8" in err  # the differing elements, SPEC's then BASE's
    err = _refused(servers, s, b)
    assert "specdiff without --control" in err and "--control C1 C2" in err
    with Store(servers.db, read_only=True) as store:
        assert store.scalar("SELECT count(*) FROM commands WHERE op = 'specdiff'") == 0


def test_a_verdict_when_the_same_server_captured_twice_reproduces(servers: Servers) -> None:
    s, b = servers.spec, servers.base
    spec_url = f"http://127.0.0.1:{servers.ports[s]}"
    before = read((spec_url,))
    code, out, err = run_cli(
        servers.db, "specdiff", s, b, "--control", b, b, "--max-tokens", MAX_TOKENS, "--json"
    )
    assert code == 0, err
    run = json.loads(out)
    drafted = over_run(before, read((spec_url,)))
    assert drafted is not None and drafted.drafts > 0, drafted  # the speculative path really ran
    n = len(DEFAULT_PROMPTS)
    assert (run["prompt_count"], run["control_matched"], run["min_control"]) == (n, n, n)
    assert run["control"] == f"launch {b} captured twice" and run["speculative_config"]
    items = run["items"]
    assert all(i["control_a_tokens"] == i["control_b_tokens"] == i["base_tokens"] for i in items)
    assert all(0 < len(i["spec_tokens"]) <= int(MAX_TOKENS) for i in items)
    assert run["pair_matched"] == sum(i["spec_tokens"] == i["base_tokens"] for i in items)
    verdict = run["verdict"]
    assert verdict["conclusive"] and run["recorded_verdict"] == verdict["text"]
    assert verdict["kind"] == ("identical" if run["pair_matched"] == n else "differs"), verdict
    print(f"specdiff on CPU vLLM, ngram 3 tokens: {verdict['text']}; {drafted}")

    code, out, _ = run_cli(servers.db, "specdiff", "--list")  # offline: the store only
    assert code == 0 and run["run_id"] in out and f"{n}/{n}" in out


class Unsteady(ThreadingHTTPServer):
    """vLLM's answers from ``upstream``, with the second generated token changed for the prompts in
    ``UNSTEADY``: a control capture that does not reproduce (see the module's docstring)."""

    daemon_threads = True

    def __init__(self, upstream: str) -> None:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _relay(self, body: bytes | None) -> None:
                request = urllib.request.Request(
                    upstream + self.path, data=body, headers={"Content-Type": "application/json"}
                )
                with urllib.request.urlopen(request, timeout=300) as answer:
                    payload: Any = json.loads(answer.read())
                sent = json.loads(body) if body else {}
                if sent.get("prompt") in UNSTEADY:
                    ids = payload["choices"][0]["token_ids"]
                    if len(ids) > 1:
                        ids[1] = ids[1] + 1
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._relay(None)

            def do_POST(self) -> None:
                self._relay(self.rfile.read(int(self.headers["Content-Length"])))

        super().__init__(("127.0.0.1", 0), Handler)


def _set_state(store: Store, launch_id: str, state: str) -> None:
    with store.atomic() as db:  # the test's own launch: no agent journals it
        db.execute("UPDATE launches SET state = ? WHERE id = ?", [state, launch_id])


def test_no_conclusion_when_the_control_does_not_reproduce(servers: Servers) -> None:
    s, b = servers.spec, servers.base
    unsteady = Unsteady(f"http://127.0.0.1:{servers.ports[b]}")
    threading.Thread(target=unsteady.serve_forever, daemon=True).start()
    with Store(servers.db) as store:
        base = store.launches.get(b)
        assert base is not None
        store.launches.add(
            "unsteady",
            "local",
            base.arm,
            arm_id=base.arm_id,
            replica=0,
            gpus=[],
            port=unsteady.server_address[1],
            forced=False,
        )
        _set_state(store, "unsteady", "serving")
    try:
        control = ("--control", b, "unsteady", "--max-tokens", MAX_TOKENS)
        code, out, err = run_cli(servers.db, "specdiff", s, b, *control)
        assert code == 0, err
        assert "verdict: no conclusion: control reproduced 4 of 12" in out
        assert "`campaign quality compare`" in out and "differs at token 1" in out
        assert f"control: launches {b} and unsteady of tiny-cpu" in out

        # A stated threshold the control meets gives a verdict on the same captures' kind of run.
        code, out, err = run_cli(servers.db, "specdiff", s, b, *control, "--min-control", "4", "--json")
        assert code == 0, err
        run = json.loads(out)
        assert run["control_matched"] == 4 and run["min_control"] == 4 and run["verdict"]["conclusive"]
    finally:
        with Store(servers.db) as store:
            _set_state(store, "unsteady", "stopped")
        unsteady.shutdown()
        unsteady.server_close()

    code, out, _ = run_cli(servers.db, "specdiff", "--list")
    assert code == 0 and out.count("specdiff-") >= 3 and "no conclusion: control reproduced 4 of 12" in out
