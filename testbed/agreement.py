"""One client run against a real vLLM, read from both sides (the client's figures and CPU, the server's
``/metrics`` and its processes' CPU time): the measurement of bench/agreement.py, which the suite's
agreement test (tests/test_loadgen.py) runs once too."""

from __future__ import annotations

import itertools
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from testbed.pinning import on_cpus
from testbed.vllm_bench import bench_serve_argv

ROOT = Path(__file__).resolve().parents[1]

CLIENT_KEYS = (
    "out_tok_per_s",
    "ttft_ms_p50",
    "ttft_ms_mean",
    "tpot_ms_p50",
    "itl_ms_p50",
    "e2e_ms_p50",
    "e2e_ms_mean",
    "duration_s",
)
"""What both clients report, by the same definitions (vLLM's, research in docs/facts.md)."""
SERVER_HISTOGRAMS = {
    "ttft_ms_mean": "vllm:time_to_first_token_seconds",
    "itl_ms_mean": "vllm:inter_token_latency_seconds",
    "e2e_ms_mean": "vllm:e2e_request_latency_seconds",
    "queue_ms_mean": "vllm:request_queue_time_seconds",
    "prefill_ms_mean": "vllm:request_prefill_time_seconds",
    "decode_ms_mean": "vllm:request_decode_time_seconds",
}
"""The server's own timings: the mean of each histogram over one run (its ``_sum`` over its ``_count``)."""


def log(message: str) -> None:
    print(f"[agreement {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def scrape(base_url: str) -> dict[str, float]:
    """Every ``_sum``, ``_count`` and ``_total`` sample of a vLLM ``/metrics`` page, summed over label sets
    (histogram buckets are left out: the means over a run need only the sums and counts)."""
    with urllib.request.urlopen(base_url + "/metrics", timeout=30) as response:
        text = response.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith("vllm:"):
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name.endswith(("_sum", "_count", "_total")):
            out[name] = out.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
    return out


def session_pids(session: int) -> list[int]:
    """The processes of a process session (a server and the engine processes it started, or a client and
    its workers)."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # it ended while we looked
        if int(fields[3]) == session:  # after the name: state, ppid, pgrp, session, ...
            pids.append(int(stat.parent.name))
    return pids


def cpu_s(pids: Sequence[int]) -> float:
    """CPU seconds (user + system) these processes have used so far (those that ended are left out)."""
    ticks = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


class CpuSampler(threading.Thread):
    """CPU seconds of a few process sessions (the server's, the client's) sampled every 50 ms, so the CPU
    each used inside the client's timed window can be read afterwards.

    Why: on a shared machine the wall-clock figures of two runs differ as much by what else ran as by the
    client. The server's CPU time per token barely moves with other work and says whether two clients asked
    for the same work; its CPU over the window's length says how much of its core it got meanwhile; the
    client's says how close the client came to its own core's limit."""

    PERIOD_S = 0.05
    RESCAN_EVERY = 20
    """Samples between rescans of a session's processes (a client forks its workers after it starts)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.sessions: dict[str, tuple[int, list[int]]] = {}
        self.samples: list[tuple[float, dict[str, float]]] = []
        self.lock = threading.Lock()
        self.stopped = threading.Event()

    def watch(self, name: str, session: int) -> None:
        with self.lock:
            self.sessions[name] = session, session_pids(session)

    def _sample(self, rescan: bool) -> None:
        with self.lock:
            if rescan:
                self.sessions = {n: (sid, session_pids(sid)) for n, (sid, _) in self.sessions.items()}
            self.samples.append(
                (time.perf_counter(), {n: cpu_s(pids) for n, (_, pids) in self.sessions.items()})
            )

    def run(self) -> None:
        for i in itertools.count(1):
            self._sample(i % self.RESCAN_EVERY == 0)
            if self.stopped.wait(self.PERIOD_S):
                self._sample(False)
                return

    def stop(self) -> None:
        self.stopped.set()
        self.join()

    def used(self, name: str, t0: float, t1: float) -> float | None:
        """CPU seconds session ``name`` used between perf_counter times t0 and t1 (None: not watched then)."""
        points = [(t, cpu[name]) for t, cpu in self.samples if name in cpu]
        if len(points) < 2 or t0 < points[0][0]:
            return None

        def at(t: float) -> float:
            for (ta, ca), (tb, cb) in itertools.pairwise(points):
                if ta <= t <= tb:
                    return ca + (cb - ca) * (t - ta) / (tb - ta) if tb > ta else cb
            return points[-1][1]

        return at(t1) - at(t0)


@dataclass(frozen=True)
class ServerView:
    """One client run as the server counted and timed it (the difference of two scrapes)."""

    requests: int
    prompt_tokens_per_request: float | None
    generation_tokens_per_request: float | None
    max_tokens_per_request: float | None
    prefix_cache_hit_share: float | None
    """Share of the run's prompt tokens the server took from its prefix cache instead of computing them."""
    ttft_ms_mean: float | None
    itl_ms_mean: float | None
    e2e_ms_mean: float | None
    queue_ms_mean: float | None
    prefill_ms_mean: float | None
    decode_ms_mean: float | None
    cpu_ms_per_token: float | None = None
    """The server's CPU time in the client's timed window per generated token (None when its process
    session is unknown)."""
    cpu_share: float | None = None
    """The server's CPU time in that window over its length: how much of its core it got (1.0: all of one)."""
    in_flight: float | None = None
    """The server's end-to-end times summed over the client's wall time: requests it held at once on
    average. Near C when the client kept C streams busy and timed its run as the server saw it."""

    @classmethod
    def between(
        cls, before: dict[str, float], after: dict[str, float], wall_s: float, cpu: float | None = None
    ) -> ServerView:
        """``wall_s``: the client's timed window; ``cpu``: the server's CPU seconds inside it."""

        def delta(name: str) -> float:
            return after.get(name, 0.0) - before.get(name, 0.0)

        def per(family: str, scale: float = 1.0) -> float | None:
            count = delta(family + "_count")
            return delta(family + "_sum") * scale / count if count else None

        queries = delta("vllm:prefix_cache_queries_total")
        tokens = delta("vllm:generation_tokens_total")
        timings = {key: per(family, 1000.0) for key, family in SERVER_HISTOGRAMS.items()}
        return cls(
            requests=round(delta("vllm:request_success_total")),
            prompt_tokens_per_request=per("vllm:request_prompt_tokens"),
            generation_tokens_per_request=per("vllm:request_generation_tokens"),
            max_tokens_per_request=per("vllm:request_params_max_tokens"),
            prefix_cache_hit_share=delta("vllm:prefix_cache_hits_total") / queries if queries else None,
            **timings,
            cpu_ms_per_token=cpu * 1000 / tokens if cpu is not None and tokens else None,
            cpu_share=cpu / wall_s if cpu is not None and wall_s > 0 else None,
            in_flight=delta("vllm:e2e_request_latency_seconds_sum") / wall_s if wall_s > 0 else None,
        )


@dataclass(frozen=True)
class Shape:
    input_len: int
    output_len: int
    prompts: int
    concurrency: int


@dataclass(frozen=True)
class Target:
    base_url: str
    model: str
    tokenizer: Path
    vllm_python: Path


def spawn(
    label: str,
    argv: list[str],
    cpus: list[int],
    sampler: CpuSampler | None,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> str:
    """Run a client pinned to ``cpus`` in a process session of its own, watched by ``sampler`` as
    ``client``; its stdout, or RuntimeError with its stderr's end."""
    proc = subprocess.Popen(
        on_cpus(argv, cpus),
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    if sampler:
        sampler.watch("client", proc.pid)
    try:
        out, err = proc.communicate(timeout=900)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise RuntimeError(f"{label} ran past 900 s") from None
    if proc.returncode != 0:
        raise RuntimeError(f"{label} failed ({proc.returncode}): {err[-3000:]}")
    return out


def run_ours(
    target: Target,
    shape: Shape,
    cpus: list[int],
    tmp: Path,
    sampler: CpuSampler | None = None,
    root: Path = ROOT,
) -> dict[str, Any]:
    """One run of the load generator of checkout ``root``, warm-up off: its result, the means vLLM also
    reports, and its timed ``window`` in perf_counter seconds."""
    records = tmp / "ours.jsonl"
    argv = [
        sys.executable,
        "-m",
        "agents.loadgen",
        "--base-url",
        target.base_url,
        "--model",
        target.model,
        "--tokenizer",
        str(target.tokenizer),
        "--input-len",
        str(shape.input_len),
        "--output-len",
        str(shape.output_len),
        "--concurrency",
        str(shape.concurrency),
        "--prompts",
        str(shape.prompts),
        "--warmup",
        "0",
        "--json",
        "--quiet",
        "--records",
        str(records),
    ]
    out: dict[str, Any] = json.loads(spawn("agents.loadgen", argv, cpus, sampler, cwd=root))
    ok = [
        r for r in map(json.loads, records.read_text().splitlines()[1:]) if r["error"] is None and r["events"]
    ]
    out["ttft_ms_mean"] = statistics.fmean(r["events"][0][0] - r["start_ms"] for r in ok)
    out["e2e_ms_mean"] = statistics.fmean(r["events"][-1][0] - r["start_ms"] for r in ok)
    out["prompt_tokens"] = sum(r["prompt_tokens"] or 0 for r in ok)
    out["decode_gaps_ms"] = [gap for r in ok for gap in read_gaps(r["events"])]
    wall_minus_perf = time.time() - time.perf_counter()  # one offset for every process of this host
    out["window"] = (out["started_ms"] / 1000 - wall_minus_perf, out["ended_ms"] / 1000 - wall_minus_perf)
    return out


def read_gaps(events: list[list[float]]) -> list[float]:
    """One request's decode steps as this client read them, from its records' ``[ms, tokens]`` per socket
    read: the gap since the previous read for a read's first token, 0 for each further token it carried."""
    gaps: list[float] = []
    for i, (t, n) in enumerate(events):
        if i:
            gaps.append(t - events[i - 1][0])
        gaps += [0.0] * (int(n) - 1)
    return gaps


def run_reference(
    target: Target,
    shape: Shape,
    cpus: list[int],
    tmp: Path,
    seed: int | None,
    sampler: CpuSampler | None = None,
) -> dict[str, Any]:
    """One run of `vllm bench serve` (``seed`` None: its default, 0): its result under this load generator's
    keys, and its timed ``window`` in perf_counter seconds."""
    name = "vllm.json"
    argv = bench_serve_argv(
        target.vllm_python,
        target.base_url,
        target.model,
        target.tokenizer,
        input_len=shape.input_len,
        output_len=shape.output_len,
        prompts=shape.prompts,
        concurrency=shape.concurrency,
        result_dir=tmp,
        result_filename=name,
        seed=seed,
        detailed=True,
        extra=("--percentile-metrics", "ttft,tpot,itl,e2el"),
    )
    spawn("vllm bench serve", argv, cpus, sampler, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    r = json.loads((tmp / name).read_text())
    # Its request start times are perf_counter readings, CLOCK_MONOTONIC: the same clock in every process.
    ends = [t + latency for t, latency in zip(r["start_times"], r["latencies"], strict=True)]
    return {
        "window": (min(r["start_times"]), max(ends)),
        "out_tok_per_s": r["output_throughput"],
        "ttft_ms_p50": r["median_ttft_ms"],
        "ttft_ms_mean": r["mean_ttft_ms"],
        "tpot_ms_p50": r["median_tpot_ms"],
        "itl_ms_p50": r["median_itl_ms"],
        "e2e_ms_p50": r["median_e2el_ms"],
        "e2e_ms_mean": r["mean_e2el_ms"],
        "duration_s": r["duration"],
        "completed": r["completed"],
        "failed": r["failed"],
        "prompt_tokens": r["total_input_tokens"],
        "seed": seed,
        "decode_gaps_ms": [gap * 1000 for itl in r["itls"] for gap in itl],
    }


Runner = Callable[[CpuSampler | None], dict[str, Any]]


def measured(base_url: str, session: int | None, run: Runner) -> dict[str, Any]:
    """One client run, read from both sides: the client's figures (and its CPU over its timed window), the
    server's view of the same run, and the machine's load average when it started. ``session``: the
    server's process session, for its CPU time (None: not measured)."""
    load = os.getloadavg()[0]
    before = scrape(base_url)
    sampler = CpuSampler()
    if session:
        sampler.watch("server", session)
    sampler.start()
    try:
        client = run(sampler)
    finally:
        sampler.stop()
    t0, t1 = client["window"]
    client_cpu = sampler.used("client", t0, t1)
    server = ServerView.between(before, scrape(base_url), t1 - t0, sampler.used("server", t0, t1))
    keep = {k: client.get(k) for k in (*CLIENT_KEYS, "completed", "failed", "prompt_tokens", "seed")}
    keep["cpu_share"] = client_cpu / (t1 - t0) if client_cpu is not None and t1 > t0 else None
    vs = vs_server(keep, server, client["decode_gaps_ms"])
    return {"load_1m": load, "client": keep, "server": asdict(server), "vs_server": vs}


def vs_server(
    client: dict[str, Any], server: ServerView, decode_gaps_ms: list[float]
) -> dict[str, float | None]:
    """One run's client figures against the server's own for the same requests. Between runs the server's
    pace moves by tens of percent; inside one run a client that times the stream as the server made it
    reads a TPOT p50 near the server's mean inter-token latency and adds only its transport (HTTP, the API
    server, its own event loop) to TTFT and E2E. It can time only the decode steps it read apart: a client
    starved of its core reads several tokens at once, and each step it read together with the one before
    (a gap under a tenth of the server's step) times as nothing. ``decode_seen_share`` is the share it
    read apart. Below 1 its ITL holds zeros, and its TPOT is the server's only if it read the first and the
    last token about as late as each other (0.40 apart still timed 1.00x; one client that read its 16
    tokens in a read or two timed 0.07x)."""

    def gap(key: str) -> float | None:
        a, b = client[key], getattr(server, key)
        return a - b if a is not None and b is not None else None

    tpot, itl = client["tpot_ms_p50"], server.itl_ms_mean
    seen = (
        sum(g >= itl / 10 for g in decode_gaps_ms) / len(decode_gaps_ms) if itl and decode_gaps_ms else None
    )
    return {
        "ttft_ms_mean_added": gap("ttft_ms_mean"),
        "e2e_ms_mean_added": gap("e2e_ms_mean"),
        "tpot_p50_over_server_itl": tpot / itl if tpot and itl else None,
        "decode_seen_share": seen,
    }
