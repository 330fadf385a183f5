"""Does this load generator tell the same story as `vllm bench serve` about one real server?

One real CPU vLLM (the product's ``tiny-cpu`` arm, as the tests serve it) pinned to one core, the clients
pinned to the other, the same shape for both (256 tokens in, 32 out, 48 prompts at C8 by default), run
one after the other in rounds. Each run is read from both sides:

- the client's figures (by vLLM's definitions, both clients), and its CPU over its own timed window;
- the server's: ``/metrics`` scraped before and after the run says what work the client really sent
  (requests, prompt, generation and max tokens per request as the server counted them, prompt tokens
  served from the prefix cache) and what the server itself measured (its TTFT, inter-token, prefill and
  end-to-end times); its processes' CPU time inside the client's window says how much of its core it got
  and what each generated token cost it.

That separates "the clients send different work" from "they measure the same work differently" from
"the server was slower during one of them". Printed are medians per client, the ratios of the medians
and the medians of round-by-round ratios ("paired": the two runs of a ratio were back to back, so drift
between rounds cancels), for the clients' figures and for the server's own. Two clients agree when their
paired ratios match the server's. A run in which the server had its requests but less than
``--min-server-share`` of its core (other work on the machine) is set aside, kept in the JSON, and run again.

The clients:

- ``ours``: ``python -m agents.loadgen`` with ``--warmup 0``, so the server sees exactly the same number
  of requests from each client (`vllm bench serve` sends no warm-up by default); a new seed each run.
- ``ours-again``: the same, run again right after ``ours``: ours/ours-again is what two runs of one client
  differ by on this machine, the floor below which a ratio between two clients says nothing.
- ``vllm``: `vllm bench serve` (random dataset, ``--ignore-eos``) with a new ``--seed`` each run.
- ``vllm-seed0``: the same command without ``--seed``, as it is usually typed: its default seed 0 sends
  the same prompts every run, so from its second run on the server takes 60% of their tokens from its
  prefix cache. Kept to show what that does to the figures; ``--clients ours,ours-again,vllm`` leaves it out.
- ``baseline`` (only with ``--baseline DIR``): the load generator of another checkout of this repository,
  run exactly as ``ours``, to measure a change to it alternately with the current one.

    python bench/agreement.py                              # server on CPU 0, clients on CPU 1, 5 rounds
    python bench/agreement.py --rounds 12 --json out.json
    python bench/agreement.py --no-prefix-caching --clients ours,ours-again,vllm --rounds 10   # the same work
    python bench/agreement.py --base-url http://127.0.0.1:8000 --model tiny-llama   # a running server

Needs the CPU vLLM venv and the tiny model (tests/support/vllm_env.py). The first round warms the
server and is not counted.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.loadgen_ceiling import cpu_list  # noqa: E402

CLIENTS = ("ours", "ours-again", "vllm", "vllm-seed0", "baseline")
CLIENT_KEYS = ("out_tok_per_s", "ttft_ms_p50", "ttft_ms_mean", "tpot_ms_p50", "itl_ms_p50", "e2e_ms_p50",
               "e2e_ms_mean", "duration_s")  # fmt: skip
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
SIDES = ("client", "server", "vs_server")
REPORT_DEFINITIONS = {
    "client": "each client's own figures over its timed run, by vLLM's definitions (both clients: full run, "
    "request sent to first / last token; the load generator's steady-state window is not compared)",
    "server": "the server's /metrics over the same run: what it was sent and its own timings (means of its "
    "histograms, from the API server's arrival), its CPU per generated token and its share of its core",
    "vs_server": "per run, the client against the server: ms it adds to TTFT and E2E means, its TPOT p50 "
    "over the server's mean inter-token latency, and the share of decode steps it read apart (a gap of at least "
    "a tenth of the server's mean inter-token latency)",
    "medians": "per client, the median of its runs",
    "ratios": "ours over the other client, of the medians (unpaired: the server's drift between runs is in them)",
    "paired_ratios": "ours over the other client round by round (back-to-back runs), then the median",
    "set_aside": "runs in which the server had its requests but lost its core to other work, each run again",
}
"""What each part of the report is, written into its JSON."""


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
            self.samples.append((time.perf_counter(), {n: cpu_s(pids) for n, (_, pids) in self.sessions.items()}))

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
    def between(cls, before: dict[str, float], after: dict[str, float], wall_s: float,
                cpu: float | None = None) -> ServerView:
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


def spawn(label: str, argv: list[str], cpus: list[int], sampler: CpuSampler | None, cwd: Path | None = None,
          env: dict[str, str] | None = None) -> str:
    """Run a client pinned to ``cpus`` in a process session of its own, watched by ``sampler`` as
    ``client``; its stdout, or RuntimeError with its stderr's end."""
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=lambda: os.sched_setaffinity(0, set(cpus)))
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


def run_ours(target: Target, shape: Shape, cpus: list[int], tmp: Path, sampler: CpuSampler | None = None,
             root: Path = ROOT) -> dict[str, Any]:
    """One run of the load generator of checkout ``root``, warm-up off: its result, the means vLLM also
    reports, and its timed ``window`` in perf_counter seconds."""
    records = tmp / "ours.jsonl"
    argv = [sys.executable, "-m", "agents.loadgen", "--base-url", target.base_url, "--model", target.model,
            "--tokenizer", str(target.tokenizer), "--input-len", str(shape.input_len),
            "--output-len", str(shape.output_len), "--concurrency", str(shape.concurrency),
            "--prompts", str(shape.prompts), "--warmup", "0", "--json", "--quiet", "--records", str(records)]
    out: dict[str, Any] = json.loads(spawn("agents.loadgen", argv, cpus, sampler, cwd=root))
    ok = [r for r in map(json.loads, records.read_text().splitlines()[1:]) if r["error"] is None and r["events"]]
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


def run_reference(target: Target, shape: Shape, cpus: list[int], tmp: Path, seed: int | None,
                  sampler: CpuSampler | None = None) -> dict[str, Any]:
    """One run of `vllm bench serve` (``seed`` None: its default, 0): its result under this load generator's
    keys, and its timed ``window`` in perf_counter seconds."""
    name = "vllm.json"
    argv = [str(target.vllm_python), "-m", "vllm.entrypoints.cli.main", "bench", "serve", "--backend", "vllm",
            "--base-url", target.base_url, "--endpoint", "/v1/completions", "--model", target.model,
            "--tokenizer", str(target.tokenizer), "--dataset-name", "random",
            "--random-input-len", str(shape.input_len), "--random-output-len", str(shape.output_len),
            "--num-prompts", str(shape.prompts), "--max-concurrency", str(shape.concurrency),
            "--request-rate", "inf", "--ignore-eos", "--percentile-metrics", "ttft,tpot,itl,e2el",
            "--disable-tqdm", "--save-result", "--save-detailed", "--result-dir", str(tmp), "--result-filename", name,
            *(["--seed", str(seed)] if seed is not None else [])]
    spawn("vllm bench serve", argv, cpus, sampler, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    r = json.loads((tmp / name).read_text())
    # Its request start times are perf_counter readings, CLOCK_MONOTONIC: the same clock in every process.
    ends = [t + latency for t, latency in zip(r["start_times"], r["latencies"], strict=True)]
    return {
        "window": (min(r["start_times"]), max(ends)),
        "out_tok_per_s": r["output_throughput"], "ttft_ms_p50": r["median_ttft_ms"],
        "ttft_ms_mean": r["mean_ttft_ms"], "tpot_ms_p50": r["median_tpot_ms"], "itl_ms_p50": r["median_itl_ms"],
        "e2e_ms_p50": r["median_e2el_ms"], "e2e_ms_mean": r["mean_e2el_ms"], "duration_s": r["duration"],
        "completed": r["completed"], "failed": r["failed"], "prompt_tokens": r["total_input_tokens"], "seed": seed,
        "decode_gaps_ms": [gap * 1000 for itl in r["itls"] for gap in itl],
    }  # fmt: skip


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


def vs_server(client: dict[str, Any], server: ServerView, decode_gaps_ms: list[float]) -> dict[str, float | None]:
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
    seen = sum(g >= itl / 10 for g in decode_gaps_ms) / len(decode_gaps_ms) if itl and decode_gaps_ms else None
    return {"ttft_ms_mean_added": gap("ttft_ms_mean"), "e2e_ms_mean_added": gap("e2e_ms_mean"),
            "tpot_p50_over_server_itl": tpot / itl if tpot and itl else None, "decode_seen_share": seen}  # fmt: skip


def contended(run: dict[str, Any], concurrency: int, min_share: float) -> bool:
    """The server had its requests (at least 0.9 C in flight on average) but not its core (less than
    ``min_share`` of it): other work on the machine, not the client, set this run's pace."""
    server = run["server"]
    share, in_flight = server["cpu_share"], server["in_flight"]
    return share is not None and in_flight is not None and share < min_share and in_flight >= 0.9 * concurrency


def median_of(runs: Sequence[dict[str, Any]], side: str, key: str) -> float | None:
    values = [r[side][key] for r in runs if r[side][key] is not None]
    return statistics.median(values) if values else None


def summary(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Medians per client (both sides) and each client's figures over `vllm bench serve`'s."""
    medians = {
        name: {side: {k: median_of(rs, side, k) for k in rs[0][side] if k != "seed"} for side in SIDES}
        for name, rs in runs.items()
    }
    ratios: dict[str, dict[str, float | None]] = {}
    paired: dict[str, dict[str, float | None]] = {}
    for other in (n for n in runs if n != "ours"):
        if "ours" in runs:  # over baseline: the change's effect
            ours, theirs = medians["ours"]["client"], medians[other]["client"]
            ratios[f"ours/{other}"] = {k: ours[k] / theirs[k] if ours[k] and theirs[k] else None for k in CLIENT_KEYS}
            # Round by round (the two ran back to back), then the median: drift between rounds cancels. The
            # server's own figures get the same treatment: the clients agree when theirs move as the server's.
            pairs = list(zip(runs["ours"], runs[other], strict=True))
            paired[f"ours/{other}"] = {
                f"{side}.{k}": statistics.median(q) if (q := [a[side][k] / b[side][k] for a, b in pairs
                                                              if a[side][k] and b[side][k]]) else None
                for side, keys in (("client", CLIENT_KEYS), ("server", (*SERVER_HISTOGRAMS, "cpu_ms_per_token")))
                for k in keys
            }
    return {"medians": medians, "ratios": ratios, "paired_ratios": paired, "definitions": REPORT_DEFINITIONS}


def fmt(value: float | None, spec: str = ".1f") -> str:
    return "-" if value is None else format(value, spec)


def table(report: dict[str, Any]) -> str:
    names = list(report["runs"])
    med, ratios = report["medians"], report["ratios"]
    paired = report["paired_ratios"]
    head = (f"{'client side (median)':24}" + "".join(f"{n:>12}" for n in names) + "".join(f"{r:>18}" for r in ratios)
            + "".join(f"{r + ' paired':>25}" for r in paired))
    lines = [head]
    for k in CLIENT_KEYS:
        lines.append(f"{k:24}" + "".join(f"{fmt(med[n]['client'][k]):>12}" for n in names)
                     + "".join(f"{fmt(ratios[r][k], '.3f'):>18}" for r in ratios)
                     + "".join(f"{fmt(paired[r]['client.' + k], '.3f'):>25}" for r in paired))  # fmt: skip
    lines.append(f"{'client cpu_share':24}" + "".join(f"{fmt(med[n]['client']['cpu_share'], '.1%'):>12}"
                                                      for n in names))  # fmt: skip
    lines.append(f"{'server side (median)':24}" + "".join(f"{n:>12}" for n in names) + " " * 18 * len(ratios)
                 + "".join(f"{r + ' paired':>25}" for r in paired))
    for k in ("requests", "prompt_tokens_per_request", "generation_tokens_per_request", "max_tokens_per_request",
              "prefix_cache_hit_share", *SERVER_HISTOGRAMS, "cpu_ms_per_token",
              "cpu_share", "in_flight"):
        spec = ".1%" if k in ("prefix_cache_hit_share", "cpu_share") else ".2f"
        lines.append(f"{k:24}" + "".join(f"{fmt(med[n]['server'][k], spec):>12}" for n in names)
                     + (" " * 18 * len(ratios) + "".join(f"{fmt(paired[r]['server.' + k], '.3f'):>25}" for r in paired)
                        if "server." + k in next(iter(paired.values()), {}) else ""))  # fmt: skip
    lines.append(f"{'vs server (median)':24}" + "".join(f"{n:>12}" for n in names))
    for k in next(iter(med.values()))["vs_server"]:
        spec = ".3f" if k in ("tpot_p50_over_server_itl", "decode_seen_share") else ".1f"
        lines.append(f"{k:24}" + "".join(f"{fmt(med[n]['vs_server'][k], spec):>12}" for n in names))
    loads = report["load_1m"]
    lines.append(f"load average (1 min) at the start of each run: min {min(loads):.2f}, median "
                 f"{statistics.median(loads):.2f}, max {max(loads):.2f}; runs set aside and repeated because "
                 f"other work took the server's core: {len(report['set_aside'])}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--input-len", type=int, default=256)
    p.add_argument("--output-len", type=int, default=32)
    p.add_argument("--prompts", type=int, default=48)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--rounds", type=int, default=5, help="counted rounds, each client once per round, alternately")
    p.add_argument("--clients", default="ours,ours-again,vllm,vllm-seed0",
                   help=f"which of {', '.join(CLIENTS)}, in run order")
    p.add_argument("--server-cpus", default="0")
    p.add_argument("--client-cpus", default="1")
    p.add_argument("--no-prefix-caching", action="store_true", help="serve without prefix caching, so that no "
                   "client's prompts are answered from the cache (the work is then the same for all)")
    p.add_argument("--base-url", help="a running vLLM to measure instead of starting the tiny-cpu arm")
    p.add_argument("--model", help="its served model name (with --base-url)")
    p.add_argument("--server-session", type=int, help="the process session id of that server (its CPU time per "
                   "token is then reported too)")
    p.add_argument("--tokenizer", type=Path, help="its tokenizer directory (default: the tiny model's)")
    p.add_argument("--baseline", type=Path, metavar="DIR", help="a checkout whose agents/loadgen runs as the client "
                   "`baseline` (added to --clients after ours)")
    p.add_argument("--min-server-share", type=float, default=0.8, help="run a client again (up to --tries times) "
                   "when the server, busy with its requests, got less than this share of its core meanwhile")
    p.add_argument("--tries", type=int, default=3)
    p.add_argument("--json", type=Path, help="also write every run and the medians here")
    args = p.parse_args(argv)
    names = args.clients.split(",")
    if args.baseline and "baseline" not in names:
        names.insert(names.index("ours") + 1 if "ours" in names else 0, "baseline")
    if "baseline" in names and not args.baseline:
        p.error("the client baseline needs --baseline DIR")
    if unknown := [n for n in names if n not in CLIENTS]:
        p.error(f"--clients: unknown {', '.join(unknown)}; choose from {', '.join(CLIENTS)}")
    from tests.support import vllm_env, vllm_server  # the cached CPU vLLM venv and the tiny-cpu arm

    env = vllm_env.ensure()
    shape = Shape(args.input_len, args.output_len, args.prompts, args.concurrency)
    client_cpus, server_cpus = cpu_list(args.client_cpus), cpu_list(args.server_cpus)
    server = None
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        if args.base_url:
            if not args.model:
                p.error("--base-url needs --model (the served model name)")
            base_url, model, session = args.base_url.rstrip("/"), args.model, args.server_session
        else:
            log(f"starting the tiny-cpu arm pinned to CPU {server_cpus}")
            extra = ("--no-enable-prefix-caching",) if args.no_prefix_caching else ()
            server = vllm_server.start(env, tmp / "vllm.log", cpus=set(server_cpus), extra_args=extra)
            base_url, model, session = server.base_url, server.model, server.process.pid  # its own session
        os.sched_setaffinity(0, set(client_cpus))  # this process's scrapes and samples stay off the server's CPUs
        target = Target(base_url, model, args.tokenizer or env.model_dir, env.python)
        rng = random.Random()
        runners: dict[str, Runner] = {
            "ours": lambda s: run_ours(target, shape, client_cpus, tmp, s),
            "ours-again": lambda s: run_ours(target, shape, client_cpus, tmp, s),
            "vllm": lambda s: run_reference(target, shape, client_cpus, tmp, rng.randrange(1, 2**31), s),
            "vllm-seed0": lambda s: run_reference(target, shape, client_cpus, tmp, None, s),
            "baseline": lambda s: run_ours(target, shape, client_cpus, tmp, s, args.baseline),
        }
        runs: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
        set_aside: list[dict[str, Any]] = []
        try:
            for rnd in range(args.rounds + 1):  # round 0 warms the server up and is not counted
                for name in names:
                    for attempt in range(1, args.tries + 1):
                        log(f"round {rnd}/{args.rounds}{' (warm-up)' if rnd == 0 else ''}: {name}, try {attempt}")
                        got = measured(base_url, session, runners[name])
                        log(json.dumps(got))
                        if attempt == args.tries or not contended(got, shape.concurrency, args.min_server_share):
                            break
                        set_aside.append({"name": name, "round": rnd, **got})
                        log(f"the server got {got['server']['cpu_share']:.0%} of its core: other work; again in 10 s")
                        time.sleep(10)
                    if rnd:
                        runs[name].append(got)
        finally:
            if server is not None:
                vllm_server.stop(server.process)
    report = {"shape": asdict(shape), "server_cpus": server_cpus, "client_cpus": client_cpus,
              "server_argv": server.argv if server else None, "base_url": base_url, "rounds": args.rounds,
              "min_server_share": args.min_server_share, "set_aside": set_aside, "load_1m": [r["load_1m"] for rs in runs.values() for r in rs], "runs": runs, **summary(runs)}  # fmt: skip
    print(table(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
