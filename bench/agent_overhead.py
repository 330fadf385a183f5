"""Benchmark: the agent's own CPU per hour while sampling 8 GPUs and scraping 4 servers at 1 Hz.

Target: below 1% of one core. Setup, all real processes: the agent daemon in a temp home;
an 8-GPU fixture (the real H200 capture replicated, served by the fake ``nvidia-smi`` in its ``-lms``
loop); four HTTP servers launched *through the agent* serving a vLLM-sized /metrics page (~1,500 lines:
vLLM's histogram families x buckets x two engines). Only the daemon process's own utime+stime counts
(its children, the fake nvidia-smi and the servers, are reported apart). The peer measured in the same
run is the approach the agent avoids: one ``nvidia-smi --query-gpu`` subprocess per sample.

    python bench/agent_overhead.py [--seconds 60]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from testbed.agent_box import AgentBox  # noqa: E402
from testbed.fake_nvidia_smi import install  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")

SERVER = r"""
import http.server, sys, time
port = int(sys.argv[1]); t0 = time.monotonic()
HIST = ["time_to_first_token_seconds", "inter_token_latency_seconds", "e2e_request_latency_seconds",
        "request_queue_time_seconds", "request_prefill_time_seconds", "request_decode_time_seconds",
        "request_inference_time_seconds", "request_time_per_output_token_seconds", "request_prompt_tokens",
        "request_generation_tokens", "iteration_tokens_total", "request_params_max_tokens",
        "request_max_num_generation_tokens", "request_params_n", "request_prefill_kv_computed_tokens"]
def page():
    n = time.monotonic() - t0
    out = []
    for name, v in (("generation_tokens_total", 900 * n), ("prompt_tokens_total", 7000 * n),
                    ("prefix_cache_queries_total", 7000 * n), ("prefix_cache_hits_total", 3000 * n)):
        out.append("# TYPE vllm:%s counter" % name)
        for e in (0, 1):
            out.append('vllm:%s{engine="%d",model_name="m"} %f' % (name, e, v))
    for name, v in (("num_requests_running", 256), ("num_requests_waiting", 12), ("kv_cache_usage_perc", 0.7)):
        out.append("# TYPE vllm:%s gauge" % name)
        for e in (0, 1):
            out.append('vllm:%s{engine="%d",model_name="m"} %s' % (name, e, v))
    for h in HIST:
        out.append("# HELP vllm:%s histogram\n# TYPE vllm:%s histogram" % (h, h))
        for e in (0, 1):
            for i in range(40):
                out.append('vllm:%s_bucket{engine="%d",le="%g",model_name="m"} %d' % (h, e, 0.001 * 2 ** i, i * n))
            out.append('vllm:%s_sum{engine="%d",model_name="m"} %f' % (h, e, n))
            out.append('vllm:%s_count{engine="%d",model_name="m"} %d' % (h, e, n))
    for i in range(60):
        out.append('python_gc_objects_collected_total{generation="%d"} %d' % (i, i))
    return ("\n".join(out) + "\n").encode()
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        body = b'{"data":[]}' if self.path == "/v1/models" else page() if self.path == "/metrics" else b""
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
http.server.ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
"""


def cpu_s(pid: int) -> tuple[float, float]:
    """(own utime+stime, reaped children's cutime+cstime) of a process, in seconds."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    f = stat[stat.rfind(")") + 2 :].split()
    return (int(f[11]) + int(f[12])) / TICK, (int(f[13]) + int(f[14])) / TICK


def eight_gpu_fixture(tmp: Path) -> Path:
    fx = json.loads((ROOT / "tests" / "fixtures" / "gpus" / "h200.json").read_text())
    base = fx["gpus"][0]
    fx["gpus"] = [
        dict(
            base,
            index=str(i),
            uuid=f"{base['uuid'][:-2]}{i:02x}",
            **{"pci.bus_id": f"00000000:{i + 6:02X}:00.0"},
        )
        for i in range(8)
    ]
    fx["source"] = "8 copies of the real H200 capture (tests/fixtures/gpus/h200.json), for this benchmark"
    path = tmp / "h200x8.json"
    path.write_text(json.dumps(fx))
    return path


def progress(label: str, done: float, total: float) -> None:
    width = 30
    filled = int(width * min(done / total, 1.0))
    sys.stderr.write(f"\r{label} [{'#' * filled}{'.' * (width - filled)}] {done:5.0f}/{total:.0f} s")
    sys.stderr.flush()


def peer_cost(smi: Path, seconds: float) -> float:
    """CPU seconds per sample of the naive sampler: one nvidia-smi subprocess per sample."""
    before = os.times()
    n = 0
    t_end = time.monotonic() + seconds
    while time.monotonic() < t_end:
        subprocess.run(
            [
                str(smi),
                "--query-gpu=index,power.draw,power.limit,enforced.power.limit,power.max_limit,"
                "clocks.current.sm,utilization.gpu,memory.used,memory.total,temperature.gpu",
                "--format=csv,noheader,nounits",
            ],
            capture_output=True,
            check=True,
        )
        n += 1
        time.sleep(0.2)
    after = os.times()
    return (after.children_user + after.children_system - before.children_user - before.children_system) / n


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="measurement window")
    ns = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="agent-overhead-"))
    smi = install(tmp / "bin", eight_gpu_fixture(tmp))
    server = tmp / "server.py"
    server.write_text(SERVER)
    box = AgentBox(tmp / "home", path_prefix=[tmp / "bin"], interval_s=1.0)
    box.start()
    try:
        from testbed.ports import free_port

        for i in range(4):
            port = free_port()
            box.ok(
                "launch",
                {"launch_id": f"s{i}", "argv": [sys.executable, str(server), str(port)], "port": port},
            )
        for i in range(4):

            def serving(e: dict[str, Any], i: int = i) -> bool:
                return bool(
                    e["kind"] == "launch_state" and e["launch_id"] == f"s{i}" and e["state"] == "serving"
                )

            box.wait_for(serving, timeout=60)
        box.wait_for(lambda e: e["kind"] == "server_sample" and e["gen_tok_per_s"] is not None, timeout=30)
        assert box.pid is not None
        own0, _ = cpu_s(box.pid)
        seq0 = box.ok("hello")["last_seq"]
        t0 = time.monotonic()
        while (elapsed := time.monotonic() - t0) < ns.seconds:
            progress("measuring agent", elapsed, ns.seconds)
            time.sleep(min(1.0, ns.seconds - elapsed))
        progress("measuring agent", ns.seconds, ns.seconds)
        sys.stderr.write("\n")
        own1, _ = cpu_s(box.pid)
        wall = time.monotonic() - t0
        seq1 = box.ok("hello")["last_seq"]
        events = box.events(seq0)
        gpu_ticks = sum(1 for e in events if e["kind"] == "gpu_sample")
        gpus_seen = sorted({len(e["gpus"]) for e in events if e["kind"] == "gpu_sample"})
        srv = sum(1 for e in events if e["kind"] == "server_sample")
        payload = sum(len(json.dumps(e, separators=(",", ":"))) for e in events)
    finally:
        box.stop()  # the daemon, then the servers (they outlive an agent by design)
    peer = peer_cost(smi, min(10.0, ns.seconds))
    shutil.rmtree(tmp, ignore_errors=True)
    agent_frac = (own1 - own0) / wall
    result = {
        "window_s": round(wall, 1),
        "agent_cpu_s": round(own1 - own0, 3),
        "agent_cpu_s_per_hour": round(agent_frac * 3600, 1),
        "agent_pct_of_one_core": round(100 * agent_frac, 3),
        "target_pct": 1.0,
        "gpu_samples": gpu_ticks,
        "gpus_per_sample": gpus_seen,
        "server_samples": srv,
        "events": seq1 - seq0,
        "journal_payload_bytes_per_hour": int(payload / wall * 3600),
        "peer_subprocess_per_sample_cpu_s": round(peer, 4),
        "peer_pct_of_one_core_at_1hz": round(100 * peer, 2),
        "ratio_peer_over_agent": round(peer / agent_frac, 1) if agent_frac else None,
    }
    print(json.dumps(result, indent=2))
    return 0 if agent_frac < 0.01 else 1


if __name__ == "__main__":
    sys.exit(main())
