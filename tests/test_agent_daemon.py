"""The agent as a real detached process: journal, ack, dedupe, GPU samples, launches, faults, restarts.

The "server" the agent launches here is a small real HTTP server (written to tmp by the tests) that
prints vLLM's real log line formats and serves /health, /v1/models and /metrics; the real vLLM on CPU
is driven in test_agent_vllm.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agents import proc
from testbed.agent_box import AgentBox, bin_with_fake_smi, write_fixture_variant
from testbed.ports import free_port

FAKE_SERVER = r"""
import http.server, os, signal, subprocess, sys, threading, time

args = sys.argv[1:]
port = int(args[args.index("--port") + 1])
t0 = time.monotonic()

def log(line):
    print(line, flush=True)

if "--ignore-term" in args:
    signal.signal(signal.SIGTERM, lambda *a: log("ignoring SIGTERM"))
log("INFO 12-02 13:20:19 [api_server.py:101] vLLM API server version 0.32.0")
log("(EngineCore pid=%d) INFO 12-02 13:20:20 [cuda.py:507] Using FLASH_ATTN attention backend out of "
    "potential backends: ['FLASH_ATTN', 'FLASHINFER', 'TRITON_ATTN']." % os.getpid())
log("INFO 12-02 13:20:20 [nvfp4.py:240] Using 'FLASHINFER_CUTLASS' NvFp4 MoE backend out of potential "
    "backends: ['FLASHINFER_TRTLLM', 'FLASHINFER_CUTLASS', 'MARLIN'].")
log("INFO 12-02 13:20:20 [__init__.py:88] Using FlashInferCutlassNvFp4LinearKernel for NVFP4 GEMM")
log("INFO 12-02 13:20:20 [arg_utils.py:1] kernel_config=KernelConfig(moe_backend='auto', linear_backend='auto')")
log("INFO 12-02 13:20:20 [__init__.py:88] Using FlashInferCutlassNvFp4LinearKernel for NVFP4 GEMM")
if "--die-at-start" in args:
    def load_moe(backend):
        raise ValueError("moe_backend='triton' is not supported for NvFP4 MoE. Expected one of "
                         "['b12x', 'cutlass', 'flashinfer_cutlass', 'marlin'].")
    def build_engine():
        load_moe("triton")
    try:
        build_engine()
    except Exception:
        import traceback
        for line in traceback.format_exc().splitlines():
            log("(EngineCore pid=%d) ERROR 12-02 13:20:21 [core.py:900] %s" % (os.getpid(), line))
    log("Traceback (most recent call last):")
    log('  File "/venv/lib/python3.11/site-packages/vllm/v1/engine/core_client.py", line 100, in __init__')
    log("RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}")
    sys.exit(1)
if "--traceback-on-usr1" in args:  # dies of an error of its own while it serves
    def die(*_):
        log("ERROR 12-02 13:30:00 [core.py:900] Traceback (most recent call last):")
        log('ERROR 12-02 13:30:00 [core.py:900]   File "/venv/vllm/v1/worker/gpu_worker.py", line 7, in execute')
        log("ERROR 12-02 13:30:00 [core.py:900] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB")
        os._exit(1)
    signal.signal(signal.SIGUSR1, die)
if "--child" in args:
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
ready_after = float(args[args.index("--ready-after") + 1]) if "--ready-after" in args else 0.0
log("(EngineCore pid=%d) INFO 12-02 13:20:22 [kv_cache_utils.py:2328] GPU KV cache size: 79,648 tokens, "
    "Maximum concurrency for 65,536 tokens per request: 4.03x" % os.getpid())

class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass
    def do_GET(self):
        if time.monotonic() - t0 < ready_after:
            self.send_response(503); self.end_headers(); return
        if self.path == "/health":
            body = b""
        elif self.path == "/v1/models":
            body = b'{"data":[{"id":"fake"}]}'
        elif self.path == "/metrics":
            if "--slow-metrics" in args:  # a server saturated by its clients: /metrics takes seconds
                time.sleep(float(args[args.index("--slow-metrics") + 1]))
            n = time.monotonic() - t0
            if "--malformed-metrics" in args:
                body = b'vllm:generation_tokens_total{engine="0"} lots\nvllm:num_requests_running{engine="0" 3\n'
            else:
                body = (
                    "# TYPE vllm:generation_tokens_total counter\n"
                    'vllm:generation_tokens_total{engine="0",model_name="fake"} %f\n'
                    'vllm:generation_tokens_total{engine="1",model_name="fake"} %f\n'
                    'vllm:prompt_tokens_total{engine="0",model_name="fake"} %f\n'
                    'vllm:num_requests_running{engine="0",model_name="fake"} 7.0\n'
                    'vllm:num_requests_waiting{engine="0",model_name="fake"} 2.0\n'
                    'vllm:kv_cache_usage_perc{engine="0",model_name="fake"} 0.25\n'
                    'vllm:prefix_cache_queries_total{engine="0",model_name="fake"} %f\n'
                    'vllm:prefix_cache_hits_total{engine="0",model_name="fake"} %f\n'
                    'vllm:time_to_first_token_seconds_bucket{le="0.001",engine="0",model_name="fake"} 0.0\n'
                ) % (100 * n, 100 * n, 400 * n, 1000 * n, 250 * n)
                body = body.encode()
        else:
            self.send_response(404); self.end_headers(); return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

http.server.ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
"""


@pytest.fixture
def fake_server(tmp_path: Path) -> Path:
    path = tmp_path / "fake_server.py"
    path.write_text(FAKE_SERVER)
    return path


@pytest.fixture
def box(tmp_path: Path) -> Iterator[AgentBox]:
    agent = AgentBox(tmp_path / "home", path_prefix=[bin_with_fake_smi(tmp_path, "h200")])
    agent.start()
    try:
        yield agent
    finally:
        agent.stop()


def launch_args(fake_server: Path, launch_id: str, port: int, *flags: str, **extra: Any) -> dict[str, Any]:
    return {
        "launch_id": launch_id,
        "argv": [sys.executable, str(fake_server), "--port", str(port), *flags],
        "env": {"CUDA_VISIBLE_DEVICES": "0"},
        "gpus": [0],
        "port": port,
        **extra,
    }


def state_of(launch_id: str, state: str) -> Callable[[dict[str, Any]], bool]:
    return lambda e: e["kind"] == "launch_state" and e["launch_id"] == launch_id and e["state"] == state


# -- daemon lifecycle, journal, protocol ---------------------------------------------------------


def test_daemon_detaches_refuses_second_start_and_answers_hello(box: AgentBox) -> None:
    again = box.start(check=False)
    assert again.returncode == 1
    assert "already running" in again.stderr and str(box.pid) in again.stderr
    hello = box.ok("hello")
    assert hello["pid"] == box.pid and hello["gpu_source"] == "nvidia-smi"
    assert len(hello["version"]) == 16
    assert os.stat(box.home / "agent.sock").st_mode & 0o777 == 0o600
    # detached: another session than ours (double fork: not a session leader, so no terminal ever)
    assert box.pid is not None
    assert os.getsid(box.pid) != os.getsid(0) and os.getsid(box.pid) != box.pid
    assert box.pid not in _children_pids(os.getpid())
    started = box.wait_for(lambda e: e["kind"] == "agent_started")
    assert started["restarted"] is False and started["adopted_launches"] == []


def test_events_seq_ack_per_consumer_and_nothing_deleted_before_every_consumer_acked(box: AgentBox) -> None:
    first = box.ok("hello", {"consumer": "campaign-a", "label": "laptop:/a/state.db"})
    assert first["consumer"]["new"] is True and first["consumer"]["acked_seq"] == first["first_seq"] - 1
    box.ok("hello", {"consumer": "campaign-b", "label": "laptop:/b/state.db"})
    box.wait_for(lambda e: e["kind"] == "gpu_sample")
    events = box.events()
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert all(isinstance(e["t_ms"], int) and e["t_ms"] > 1_700_000_000_000 for e in events)
    mid = seqs[len(seqs) // 2]
    assert box.ok("ack", {"seq": seqs[-1], "consumer": "campaign-a"}) == {
        "acked_seq": seqs[-1],
        "registered": True,
    }
    assert box.events()[0]["seq"] == seqs[0]  # campaign-b has acked nothing: all kept
    assert box.ok("ack", {"seq": mid, "consumer": "campaign-b"})["acked_seq"] == mid
    assert box.events()[0]["seq"] == mid + 1  # rows both acked are gone, the rest kept
    hello = box.ok("hello", {"consumer": "campaign-b"})
    assert (hello["acked_seq"], hello["first_seq"], hello["consumer"]["new"]) == (mid, mid + 1, False)
    assert box.ok("events", {"after": 0, "limit": 1, "consumer": "campaign-a"})["acked_seq"] == seqs[-1]
    assert box.ok("detach", {"consumer": "campaign-b"})["detached"] is True
    assert box.ok("ack", {"seq": seqs[-1], "consumer": "campaign-b"})["registered"] is False
    assert all(e["seq"] > seqs[-1] for e in box.events())  # only campaign-a is left, and it acked them all
    too_far = box.request("ack", {"seq": 10**9, "consumer": "campaign-a"})
    assert not too_far["ok"] and "beyond the last journaled seq" in too_far["error"]
    bad = box.request("events", {"after": -1})
    assert not bad["ok"] and "after must be an integer of at least 0" in bad["error"]


def test_an_events_call_that_waits_answers_with_the_next_event_as_it_is_journaled(tmp_path: Path) -> None:
    """``wait_ms``: caught up, a pull waits on the box and answers with the next event as soon as it is
    journaled (here, between ticks an hour apart); with none in time it answers empty; a bad wait is refused."""
    import threading

    agent = AgentBox(tmp_path / "home", path_prefix=[], interval_s=3600)
    agent.start()
    try:
        agent.wait_for(lambda e: e["kind"] == "warning" and e["where"] == "gpu")  # its start's last event
        last = max(e["seq"] for e in agent.events())
        assert agent.ok("events", {"after": last, "wait_ms": 300})["events"] == []  # nothing came: empty
        answers: list[dict[str, Any]] = []
        waiting = threading.Thread(
            target=lambda: answers.append(
                agent.ok("events", {"after": last, "wait_ms": 60_000, "rows": True})
            )
        )
        waiting.start()
        time.sleep(0.5)
        assert waiting.is_alive()  # nothing after ``last`` yet: it waits rather than answering empty
        agent.ok("probe")  # journals a probe event
        waiting.join(30)
        assert not waiting.is_alive()
        (answer,) = answers
        assert [row[2] for row in answer["rows"]][:1] == ["probe"] and answer["rows"][0][0] == last + 1
        newest = max(row[0] for row in answer["rows"])
        answers.clear()
        waiting = threading.Thread(
            target=lambda: answers.append(agent.ok("events", {"after": newest, "wait_ms": 60_000}))
        )
        waiting.start()
        with sqlite3.connect(tmp_path / "home" / "journal.db", timeout=30) as db:  # another process's row
            db.execute("INSERT INTO events (t_ms, kind, body) VALUES (1, 'warning', '{\"where\":\"x\"}')")
        waiting.join(30)
        assert not waiting.is_alive() and answers[0]["events"][0]["where"] == "x"  # seen by the waiting call
        bad = agent.request("events", {"after": last, "wait_ms": -5})
        assert not bad["ok"] and "wait_ms must be an integer of at least 0" in bad["error"]
    finally:
        agent.stop()


def test_a_corrupt_journal_row_is_sent_as_malformed_and_the_rows_after_it_still_go(box: AgentBox) -> None:
    box.wait_for(lambda e: e["kind"] == "gpu_sample")
    with sqlite3.connect(box.home / "journal.db", timeout=30) as db:
        db.execute(
            "INSERT INTO events (t_ms, kind, body) VALUES (1, 'gpu_sample', '{\"gpus\": [{\"gpu\": NaN}]}')"
        )
        db.execute("INSERT INTO events (t_ms, kind, body) VALUES (1, 'warning', '[not, json')")
        bad = [r[0] for r in db.execute("SELECT seq FROM events ORDER BY seq DESC LIMIT 2")]
    after = box.wait_for(
        lambda e: e["kind"] == "gpu_sample" and e["seq"] > max(bad), what="a sample after them"
    )
    events = {e["seq"]: e for e in box.events()}
    assert all("malformed" in events[seq] for seq in bad) and after["seq"] in events
    assert events[min(bad)]["body"] == '{"gpus": [{"gpu": NaN}]}'


def test_malformed_requests_get_clear_errors(box: AgentBox) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(str(box.home / "agent.sock"))
        s.sendall(
            b"not json\n" + b'{"v": 9, "id": "x", "op": "hello"}\n' + b'{"v": 1, "id": "y", "op": "fly"}\n'
        )
        s.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    replies = [json.loads(x) for x in data.splitlines()]
    assert [r["ok"] for r in replies] == [False, False, False]
    assert "not JSON" in replies[0]["error"]
    assert "protocol version 9" in replies[1]["error"] and "push the matching agent" in replies[1]["error"]
    assert "unknown op 'fly'" in replies[2]["error"]


def test_call_proxy_relays_stdio(box: AgentBox) -> None:
    import subprocess

    lines = b'{"v":1,"id":"p1","op":"hello","args":{}}\n{"v":1,"id":"p2","op":"launches","args":{}}\n'
    proc = subprocess.run(
        [sys.executable, "-m", "agents", "call", "--home", str(box.home)],
        input=lines,
        capture_output=True,
        env=box.env,
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    replies = [json.loads(x) for x in proc.stdout.splitlines()]
    assert [r["id"] for r in replies] == ["p1", "p2"] and all(r["ok"] for r in replies)


def test_resent_command_is_not_executed_twice(box: AgentBox, fake_server: Path) -> None:
    port = free_port()
    first = box.request("launch", launch_args(fake_server, "dup", port), command_id="cmd-42")
    again = box.request("launch", launch_args(fake_server, "dup", port), command_id="cmd-42")
    assert first["ok"] and again["ok"] and again["replayed"] is True
    assert again["result"]["pid"] == first["result"]["pid"]
    box.wait_for(state_of("dup", "serving"))
    starts = [e for e in box.events() if e["kind"] == "launch_state" and e["state"] == "starting"]
    assert len(starts) == 1
    fresh = box.request("launch", launch_args(fake_server, "dup", port), command_id="cmd-43")
    assert not fresh["ok"] and "already used" in fresh["error"]


# -- GPU sampling and its faults -----------------------------------------------------------------


def test_gpu_samples_from_one_long_running_nvidia_smi(box: AgentBox) -> None:
    box.wait_for(lambda e: e["kind"] == "gpu_sample")
    time.sleep(2.5)
    samples = [e for e in box.events() if e["kind"] == "gpu_sample"]
    assert len(samples) >= 2
    gpu = samples[0]["gpus"][0]
    assert gpu == {
        "gpu": 0,
        "power_w": gpu["power_w"],
        "power_limit_w": 700.0,
        "enforced_limit_w": 700.0,
        "max_limit_w": 700.0,
        "sm_clock_mhz": 345.0,
        "util_pct": 0.0,
        "mem_used_mib": 0.0,
        "mem_total_mib": 143771.0,
        "temp_c": 36.0,
        "throttle_reasons": 0x1,  # clocks_event_reasons.active: GPU idle
        "energy_mj": None,  # nvidia-smi offers no energy counter field
    }
    assert {s["gpus"][0]["power_w"] for s in samples} <= {79.18, 79.22, 79.21, 79.12, 79.11, 79.10}
    fallback = [e for e in box.events() if e["kind"] == "warning" and e["where"] == "nvml"]
    assert len(fallback) == 1 and "NVML unavailable" in fallback[0]["message"]  # NVML missing: said once
    # one nvidia-smi -lms process, not one per sample
    assert box.pid is not None
    smi = [p for p in _children_cmdlines(box.pid) if "fake_nvidia_smi.py" in p]
    assert len(smi) == 1 and "-lms" in smi[0]


def _children_pids(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except (FileNotFoundError, ProcessLookupError):
                continue
            if int(stat[stat.rfind(")") + 2 :].split()[1]) == pid:
                out.append(int(entry))
    return out


def _children_cmdlines(pid: int) -> list[str]:
    out = []
    for child in _children_pids(pid):
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            out.append(Path(f"/proc/{child}/cmdline").read_text().replace("\0", " "))
    return out


def test_unknown_field_and_na_placeholder_are_survived(tmp_path: Path) -> None:
    def fault(fx: dict[str, Any]) -> None:
        fx["invalid_fields"] = ["clocks.current.sm"]
        fx["gpus"][0]["power.draw"] = "[N/A]"

    fixture = write_fixture_variant(tmp_path, "old-driver", fault)
    agent = AgentBox(tmp_path / "home", path_prefix=[bin_with_fake_smi(tmp_path, fixture)])
    agent.start()
    try:
        warning = agent.wait_for(lambda e: e["kind"] == "warning" and "clocks.current.sm" in e["message"])
        assert 'does not know field "clocks.current.sm"' in warning["message"]
        sample = agent.wait_for(lambda e: e["kind"] == "gpu_sample")
        gpu = sample["gpus"][0]
        assert gpu["power_w"] is None and gpu["sm_clock_mhz"] is None and gpu["power_limit_w"] == 700.0
        assert agent.ok("hello")["pid"] == agent.pid
    finally:
        agent.stop()


def test_no_gpu_tooling_warns_once_and_keeps_running(tmp_path: Path) -> None:
    agent = AgentBox(tmp_path / "home", path_prefix=[])
    agent.start()
    try:
        time.sleep(1.5)
        events = agent.events()
        warnings = [e for e in events if e["kind"] == "warning" and e["where"] == "gpu"]
        assert len(warnings) == 1 and "no GPU tooling" in warnings[0]["message"]
        assert not [e for e in events if e["kind"] == "gpu_sample"]
        assert agent.ok("hello")["gpu_source"] is None
    finally:
        agent.stop()


def test_disk_floor_stops_samples_but_keeps_lifecycle_events(tmp_path: Path) -> None:
    floor_mb = str(10**9)  # a petabyte floor: any real disk is "nearly full"
    jobs = tmp_path / "home" / "jobs"
    jobs.mkdir(parents=True)
    for name in ("bench-old.jsonl", "bench-old.json", "bench-old.log"):  # a finished run of an earlier agent
        (jobs / name).write_text('{"x": 1}\n' * 100)
    agent = AgentBox(
        tmp_path / "home",
        path_prefix=[bin_with_fake_smi(tmp_path, "h200")],
        extra_args=["--disk-floor-mb", floor_mb],
    )
    agent.start()
    try:
        pruned = agent.wait_for(lambda e: e["kind"] == "warning" and e["where"] == "disk")
        assert "deleted the per-request records of 1 finished run(s)" in pruned["message"]
        assert "bench-old.jsonl" in pruned["message"] and "900 bytes" in pruned["message"]
        assert sorted(p.name for p in jobs.iterdir()) == [
            "bench-old.json",
            "bench-old.log",
        ]  # results and logs stay
        low = agent.wait_for(lambda e: e["kind"] == "disk_low")
        assert low["threshold_bytes"] == 10**9 * 1024 * 1024 and low["free_bytes"] < low["threshold_bytes"]
        time.sleep(1.5)
        kinds = [e["kind"] for e in agent.events()]
        assert "gpu_sample" not in kinds and kinds.count("disk_low") == 1
        refused = agent.ok("launch", {"launch_id": "l1", "argv": ["no-such-engine"], "port": free_port()})
        assert refused["state"] == "failed"
        agent.wait_for(state_of("l1", "failed"))  # lifecycle events are still journaled
        # A campaign silent for long loses its hold on what the others have committed, and is told so.
        agent.ok("hello", {"consumer": "away", "label": "laptop:/away/state.db"})
        agent.ok("hello", {"consumer": "here", "label": "desk:/here/state.db"})
        agent.ok("ack", {"seq": agent.events()[-1]["seq"], "consumer": "here"})
        with sqlite3.connect(tmp_path / "home" / "journal.db", timeout=30) as db:
            db.execute("UPDATE consumers SET acked_ms = 0 WHERE consumer = 'away'")  # silent since 1970
        released = agent.wait_for(lambda e: e["kind"] == "warning" and e["where"] == "journal")
        assert "released consumer away (laptop:/away/state.db)" in released["message"]
        assert [c["consumer"] for c in agent.ok("hello")["consumers"]] == ["here"]
    finally:
        agent.stop()


# -- launches ------------------------------------------------------------------------------------


def test_launch_ready_kernel_lines_budget_metrics_and_kill(box: AgentBox, fake_server: Path) -> None:
    port = free_port()
    started = box.ok("launch", launch_args(fake_server, "arm1", port, "--ready-after", "0.6", "--child"))
    assert started["state"] == "starting" and started["log_path"].endswith("arm1.log")
    box.wait_for(state_of("arm1", "serving"), what="serving")
    box.wait_for(lambda e: e["kind"] == "server_sample" and e["gen_tok_per_s"] is not None, what="rates")
    events = box.events()
    kernel = [e for e in events if e["kind"] == "kernel_line"]
    cats = sorted(e["category"] for e in kernel)
    assert cats == ["attention", "config", "linear", "moe"]  # the repeated GEMM line is journaled once
    assert any("FLASHINFER_CUTLASS" in e["line"] for e in kernel)
    budget = [e for e in events if e["kind"] == "launch_budget"][0]
    assert budget["kv_cache_tokens"] == 79648 and budget["max_concurrency"] == 4.03
    sample = [e for e in events if e["kind"] == "server_sample" and e["gen_tok_per_s"] is not None][-1]
    assert 120 < sample["gen_tok_per_s"] < 280  # two engines x 100 tok/s, summed over label sets
    assert 300 < sample["prompt_tok_per_s"] < 500
    assert sample["running"] == 7 and sample["waiting"] == 2 and sample["kv_usage"] == 0.25
    assert sample["prefix_hit_rate"] == pytest.approx(0.25, abs=0.02)
    tail = box.ok("log_tail", {"launch_id": "arm1", "lines": 3})["lines"]
    assert len(tail) == 3

    killed = box.request("kill", {"launch_id": "arm1", "grace_s": 5}, command_id="kill-1")
    assert killed["ok"] and killed["result"]["state"] == "stopping"
    stopped = box.wait_for(state_of("arm1", "stopped"), what="stopped")
    assert stopped["exit_code"] == -signal.SIGTERM
    released = box.wait_for(lambda e: e["kind"] == "gpu_released" and e["launch_id"] == "arm1")
    assert released["released"] is True and released["leftover_pids"] == []
    assert released["gpus"] == [{"gpu": 0, "mem_used_mib": 0.0}]
    done = box.wait_for(lambda e: e["kind"] == "command_done" and e["command_id"] == "kill-1")
    assert done["ok"] and done["result"] == {"state": "stopped", "released": True}
    assert box.ok("launches")["launches"][0]["state"] == "stopped"


def test_between_ticks_a_launch_serves_stops_and_is_released_as_it_happens(
    tmp_path: Path, fake_server: Path
) -> None:
    """An agent whose next tick is an hour away still journals a server's readiness (probed again a moment
    after each answer), its exit on a kill and the GPUs' release, each woken by the change itself; the
    release waits for a GPU reading taken after the exit, the one such pass takes."""
    agent = AgentBox(tmp_path / "home", path_prefix=[bin_with_fake_smi(tmp_path, "h200")], interval_s=3600)
    agent.start()
    try:
        agent.ok("launch", launch_args(fake_server, "quick", free_port(), "--ready-after", "0.6"))
        agent.wait_for(state_of("quick", "serving"), what="serving before the next tick")
        agent.ok("kill", {"launch_id": "quick", "grace_s": 5}, command_id="kill-quick")
        agent.wait_for(state_of("quick", "stopped"), what="stopped before the next tick")
        released = agent.wait_for(lambda e: e["kind"] == "gpu_released", what="released before the next tick")
        assert released["released"] is True and released["gpus"] == [{"gpu": 0, "mem_used_mib": 0.0}]
        events = agent.events()
        stopped = next(e["seq"] for e in events if state_of("quick", "stopped")(e))
        assert any(e["kind"] == "gpu_sample" and stopped < e["seq"] < released["seq"] for e in events)
        assert not [e for e in events if e["kind"] == "server_sample"]  # metrics keep the tick's cadence
        done = agent.wait_for(lambda e: e["kind"] == "command_done" and e["command_id"] == "kill-quick")
        assert done["result"] == {"state": "stopped", "released": True}
    finally:
        agent.stop()


def test_kill_escalates_to_sigkill_after_grace(box: AgentBox, fake_server: Path) -> None:
    port = free_port()
    box.ok("launch", launch_args(fake_server, "stubborn", port, "--ignore-term"))
    box.wait_for(state_of("stubborn", "serving"))
    t0 = time.monotonic()
    box.ok("kill", {"launch_id": "stubborn", "grace_s": 1.0})
    stopped = box.wait_for(state_of("stubborn", "stopped"))
    assert stopped["exit_code"] == -signal.SIGKILL and time.monotonic() - t0 >= 1.0


def test_missing_binary_and_port_in_use_are_failed_launches_with_reasons(
    box: AgentBox, fake_server: Path
) -> None:
    missing = box.ok(
        "launch", {"launch_id": "m1", "argv": ["/opt/nowhere/bin/vllm", "serve"], "port": free_port()}
    )
    assert missing["state"] == "failed" and "'/opt/nowhere/bin/vllm' not found" in missing["reason"]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = box.ok("launch", launch_args(fake_server, "p1", port))
    assert busy["state"] == "failed" and f"port {port} is already in use" in busy["reason"]
    events = [e for e in box.events() if e["kind"] == "launch_state"]
    assert {(e["launch_id"], e["state"]) for e in events} == {("m1", "failed"), ("p1", "failed")}
    bad = box.request("launch", {"launch_id": "s1", "argv": "vllm serve x", "port": 8000})
    assert not bad["ok"] and "args.argv is 'vllm serve x', not a list" in bad["error"]


def test_server_dying_at_start_records_root_cause_and_accepted_backends(
    box: AgentBox, fake_server: Path
) -> None:
    box.ok("launch", launch_args(fake_server, "dies", free_port(), "--die-at-start"))
    failed = box.wait_for(state_of("dies", "failed"))
    assert failed["exit_code"] == 1
    assert failed["reason"].startswith("ValueError: moe_backend='triton' is not supported for NvFP4 MoE.")
    assert "in load_moe" in failed["reason"]  # the innermost frame, not the wrapper's
    assert failed["backends_accepted"] == ["b12x", "cutlass", "flashinfer_cutlass", "marlin"]


def test_malformed_metrics_is_a_warning_and_sampling_continues(box: AgentBox, fake_server: Path) -> None:
    box.ok("launch", launch_args(fake_server, "junk", free_port(), "--malformed-metrics"))
    warning = box.wait_for(lambda e: e["kind"] == "warning" and e["where"] == "metrics:junk")
    assert "malformed /metrics" in warning["message"] and "lots" in warning["message"]
    time.sleep(1.0)
    events = box.events()
    assert len([e for e in events if e["kind"] == "warning" and e["where"] == "metrics:junk"]) == 1
    assert [e for e in events if e["kind"] == "server_sample" and e["launch_id"] == "junk"]
    assert box.ok("hello")["pid"] == box.pid


def test_crashed_agent_restarts_and_readopts_its_servers(box: AgentBox, fake_server: Path) -> None:
    port = free_port()
    box.ok("launch", launch_args(fake_server, "survivor", port))
    box.wait_for(state_of("survivor", "serving"))
    server_pid = box.ok("launches")["launches"][0]["pid"]
    last = box.events()[-1]["seq"]
    box.kill_hard()
    assert Path(f"/proc/{server_pid}").exists()  # the server outlived the agent
    box.start()
    started = box.wait_for(lambda e: e["kind"] == "agent_started" and e["seq"] > last)
    assert started["restarted"] is True and started["adopted_launches"] == ["survivor"]
    box.wait_for(lambda e: e["kind"] == "server_sample" and e["seq"] > last)  # scraping resumed
    box.ok("kill", {"launch_id": "survivor", "grace_s": 5})
    box.wait_for(state_of("survivor", "stopped"))
    assert not Path(f"/proc/{server_pid}").exists() or "Z" in Path(f"/proc/{server_pid}/stat").read_text()


def test_watchdog_deadline_survives_restart_and_stops_arms(box: AgentBox, fake_server: Path) -> None:
    box.ok("launch", launch_args(fake_server, "timed", free_port()))
    box.wait_for(state_of("timed", "serving"))
    now = int(time.time() * 1000)
    armed = box.ok(
        "set_deadline",
        {"timer_id": "t1", "deadline_ms": now + 4000, "action": "stop-arms", "console_now_ms": now},
    )
    assert armed["armed"] is True and 3 < armed["remaining_s"] <= 4
    box.shutdown()  # the agent goes away, its arm and the deadline stay
    box.start()
    assert [t["timer_id"] for t in box.ok("hello")["timers"]] == ["t1"]
    box.wait_for(lambda e: e["kind"] == "deadline" and e["state"] == "fired", timeout=20)
    box.wait_for(state_of("timed", "stopped"), timeout=40)


def test_a_run_that_fails_is_a_command_done_with_its_reason(box: AgentBox) -> None:
    started = box.ok("tripwire", {"tripwire_id": "w9", "argv": ["--no-such-flag"]}, command_id="trip-9")
    assert started["started"] is True
    done = box.wait_for(lambda e: e["kind"] == "command_done" and e["command_id"] == "trip-9", timeout=60)
    assert done["ok"] is False and done["op"] == "tripwire"
    assert "tripwire exited 2 without a result" in done["error"] and "arguments are required" in done["error"]
    assert not [e for e in box.events() if e["kind"] == "tripwire_result"]
    missing_id = box.request("bench", {"base_url": "http://127.0.0.1:9", "model": "m", "concurrency": 1})
    assert not missing_id["ok"] and "bench: args has no bench_id" in missing_id["error"]


def test_a_tripwire_sent_with_the_launch_starts_at_once_and_asks_the_server_only_once_it_serves(
    box: AgentBox, fake_server: Path
) -> None:
    """The client starts while the server loads and waits for it; where it sends its requests is the agent's
    record of the launch, not the URL the console guessed."""
    port = free_port()
    box.ok("launch", launch_args(fake_server, "loading", port, "--ready-after", "4"))
    args = {"tripwire_id": "early", "launch_id": "loading", "base_url": "http://127.0.0.1:9", "model": "fake"}
    started = box.ok("tripwire", {**args, "wait_ready_s": 120, "concurrency": 4}, command_id="trip-early")
    client_started_ms = time.time() * 1000
    assert started["started"] is True  # at once, while the launch loads
    serving = box.wait_for(state_of("loading", "serving"), timeout=60)
    result = box.wait_for(lambda e: e["kind"] == "tripwire_result", timeout=120)["result"]
    assert result["base_url"] == f"http://127.0.0.1:{port}"
    assert result["t_ms"] >= serving["t_ms"] - 1000 > client_started_ms  # its chats began once it served
    assert result["total"] == 20  # every item was asked (this server has no chat endpoint: graded wrong)
    box.ok("kill", {"launch_id": "loading", "grace_s": 1})


def test_a_tripwire_waiting_for_a_launch_that_ends_stops_at_once_and_says_why(
    box: AgentBox, fake_server: Path
) -> None:
    box.ok("launch", launch_args(fake_server, "doomed", free_port(), "--ready-after", "600"))
    args = {"tripwire_id": "w-doomed", "launch_id": "doomed", "model": "fake", "wait_ready_s": 600}
    box.ok("tripwire", args, command_id="trip-doomed")
    box.ok("kill", {"launch_id": "doomed", "grace_s": 1})
    # The client's one-line error is its result, which the console stores as the command's failure.
    result = box.wait_for(lambda e: e["kind"] == "tripwire_result", timeout=60)["result"]
    assert "ended before it served; no request was sent" in result["error"]
    ended = box.request("tripwire", {**args, "tripwire_id": "w-late"}, command_id="trip-late")
    assert (
        not ended["ok"]
        and "launch doomed is stopp" in ended["error"]
        and "nothing to wait for" in ended["error"]
    )
    unknown = box.request("tripwire", {**args, "tripwire_id": "w-none", "launch_id": "nope"})
    assert not unknown["ok"] and "no launch 'nope' on this box" in unknown["error"]


def test_a_server_never_ready_is_killed_and_failed_with_the_reason(box: AgentBox, fake_server: Path) -> None:
    box.ok("launch", launch_args(fake_server, "slow", free_port(), "--ready-after", "600", ready_timeout_s=1))
    failed = box.wait_for(state_of("slow", "failed"), timeout=30)
    assert failed["reason"] == "not ready after 1 s (/health and /v1/models); killed"
    assert failed["exit_code"] == -signal.SIGTERM


def test_a_kill_interrupted_by_an_agent_crash_is_still_carried_out_and_answered(
    box: AgentBox, fake_server: Path
) -> None:
    box.ok("launch", launch_args(fake_server, "obstinate", free_port(), "--ignore-term"))
    box.wait_for(state_of("obstinate", "serving"))
    box.ok("kill", {"launch_id": "obstinate", "grace_s": 600}, command_id="kill-7")  # SIGTERM is ignored
    box.wait_for(state_of("obstinate", "stopping"))
    box.kill_hard()  # the agent dies holding the kill
    box.start()
    stopped = box.wait_for(state_of("obstinate", "stopped"), timeout=20)
    assert stopped["exit_code"] is None  # finished by the new agent: the server is no longer its child
    done = box.wait_for(lambda e: e["kind"] == "command_done" and e["command_id"] == "kill-7")
    assert done["ok"] and done["result"] == {"state": "stopped", "released": True}
    box.shutdown()
    box.start()  # answered once: a further restart does not answer it again
    box.wait_for(lambda e: e["kind"] == "agent_started" and e["seq"] > done["seq"])
    time.sleep(0.6)
    assert [e["command_id"] for e in box.events() if e["kind"] == "command_done"] == ["kill-7"]


def test_a_server_slow_to_answer_metrics_never_stalls_the_others(box: AgentBox, fake_server: Path) -> None:
    box.ok("launch", launch_args(fake_server, "busy", free_port(), "--slow-metrics", "1.5"))
    box.ok("launch", launch_args(fake_server, "quick", free_port()))
    box.wait_for(state_of("busy", "serving"))
    serving = box.wait_for(state_of("quick", "serving"))
    time.sleep(2.5)
    events = box.events(serving["seq"])
    quick = [e["t_ms"] for e in events if e["kind"] == "server_sample" and e["launch_id"] == "quick"]
    # the tick runs every 0.25 s; a scrape of "busy" waited for on the tick would hold it 1.5 s each time
    assert len(quick) >= 5 and max(b - a for a, b in zip(quick, quick[1:], strict=False)) < 900
    busy = [e for e in events if e["kind"] == "server_sample" and e["launch_id"] == "busy"]
    assert busy and busy[-1]["running"] == 7  # the slow server is still measured
    assert not [e for e in events if e["kind"] == "warning" and e["where"] == "metrics:busy"]


def test_a_server_dying_while_no_agent_runs_gets_the_reason_from_its_log(
    box: AgentBox, fake_server: Path
) -> None:
    box.ok("launch", launch_args(fake_server, "oom", free_port(), "--traceback-on-usr1"))
    box.wait_for(state_of("oom", "serving"))
    server_pid = box.ok("launches")["launches"][0]["pid"]
    box.kill_hard()
    os.kill(server_pid, signal.SIGUSR1)  # it dies, logging why, while the agent is down
    deadline = time.monotonic() + 10
    while proc.alive(server_pid, None):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    box.start()
    failed = box.wait_for(state_of("oom", "failed"))
    assert failed["reason"].startswith("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB")
    assert "gpu_worker.py:7 in execute" in failed["reason"] and "agent was not running" in failed["reason"]
    kinds = [e["kind"] for e in box.events() if e.get("launch_id") == "oom"]
    assert kinds.count("kernel_line") == 4  # lines read before the crash are not journaled again
