"""One benchmark run: split the load over worker processes, merge their records, compute the result.

A run may drive several base URLs at once (every replica of a node): stream ``s`` of the run's C
streams goes to URL ``s mod N`` whichever worker holds it, so the replicas share the load evenly; the
result is the node's (throughput summed, latency percentiles over all requests) and ``per_url`` holds
each URL's share.

Workers are forked (Linux) and meet at a barrier after warm-up, so the timed phase starts together;
perf_counter is CLOCK_MONOTONIC, one clock for every process, so their records merge directly.

A rate-paced run draws one arrival schedule for the whole run from its seed (agents/loadgen/arrivals.py) and
deals its requests to the workers in turn (request i to worker i mod N, with its arrival time), so every
worker paces an even share of the schedule with its share of the concurrency cap.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import sys
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

from agents.journal import MAX_EVENT_BYTES
from agents.loadgen import memory, metrics
from agents.loadgen.arrivals import arrival_offsets
from agents.loadgen.prompts import PromptPlan
from agents.loadgen.wire import server_root
from agents.loadgen.worker import Record, Target, WorkerResult, WorkerSpec, request_fields, run_worker

BOUND_UTIL = 0.90
"""A worker above this share of one core, or workers above it of the cores they share, is the limit."""
PATH = "/v1/completions"


@dataclass(frozen=True)
class RunConfig:
    base_urls: tuple[str, ...]
    model: str
    shape: str
    input_len: int
    output_len: int
    prefix_len: int
    concurrency: int
    prompts: int
    seed: int
    processes: int
    warmup: int
    timeout_s: float
    records_path: Path
    exact_output: bool = True
    api_key: str | None = None
    progress: bool = True
    samples_path: Path | None = None
    mem_budget_bytes: int | None = None
    """The run's memory budget: each worker process is capped at its share (agents/loadgen/memory.py)."""
    request_rate: float | None = None
    """Requests/s the timed requests are released at (agents/loadgen/arrivals.py), at most ``concurrency`` in
    flight; None: the closed loop, ``concurrency`` streams back to back."""
    burstiness: float | None = None
    """The gamma shape of the arrival intervals (1: Poisson) of a rate-paced run; None without a rate."""


def split(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def slot_targets(concurrency: int, targets: int) -> list[int]:
    """The target of each of the run's streams: round-robin, so each gets C/N (the first C mod N one more)."""
    return [s % targets for s in range(concurrency)]


def target_of(base_url: str, model: str, api_key: str | None) -> Target:
    """Where one URL's streams go: its host, port and completions path (either form of ``--base-url``)."""
    url = urlsplit(server_root(base_url))
    assert url.hostname is not None  # server_root refuses an address without one
    return Target(url.hostname, url.port or 80, url.path + PATH, model, api_key)


COUNTS = 3
"""Per worker, in the shared counters: measured requests ended, their output tokens, their input tokens."""


def count(counters: Any, worker: int, record: Record) -> None:
    """Add an ended request to its worker's counters (a worker writes only its own slots: no lock)."""
    base = worker * COUNTS
    counters[base] += 1
    if record.ok:
        counters[base + 1] += (
            record.completion_tokens if record.completion_tokens is not None else sum(record.counts)
        )
        counters[base + 2] += record.prompt_tokens or 0


def _worker_entry(
    spec: WorkerSpec, barrier: Any, counters: Any, conn: Any, budget: int | None, share: float
) -> None:
    try:
        if budget is not None:
            memory.cap_worker(budget, share)
        conn.send(run_worker(spec, barrier.wait, lambda record: count(counters, spec.worker, record)))
    except MemoryError:  # over its cap (memory.cap_worker): one line for the parent, no traceback in the log
        memory.wind_down()
        conn.send(
            RuntimeError(
                f"worker {spec.worker} went over its memory cap (its share of the run's memory budget of "
                f"{memory.size(budget or 0)}); lower --concurrency or --prompts"
            )
        )
        raise SystemExit(1) from None
    except BaseException as exc:  # reported by the parent with the worker's number
        conn.send(RuntimeError(f"worker {spec.worker}: {type(exc).__name__}: {exc}"))
        raise
    finally:
        conn.close()


class Progress:
    """How far the run is, once a second: a line on stderr (redrawn in place on a terminal, a line every 10 s
    in a log file, a final line at the end) and, with ``samples``, one JSON line a second appended to that
    file: requests ended and their tokens so far, and the token rates over the last interval.

    Why the samples: the agent journals them as ``bench_progress`` events (agents/jobs.py), so the console
    charts a run's throughput as the client measures it while it runs, also against a server that exposes
    no metrics. Tokens count when their request ends, so a rate is steady only over several requests.
    """

    def __init__(self, counters: Any, total: int, enabled: bool, samples: Path | None = None) -> None:
        self.counters, self.total, self.enabled, self.samples = counters, total, enabled, samples
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.tty = sys.stderr.isatty()
        self.t0 = time.monotonic()
        self.last = (self.t0, 0, 0)

    def totals(self) -> tuple[int, int, int]:
        """(requests ended, output tokens, input tokens) over every worker."""
        sums = [0] * COUNTS
        for i in range(len(self.counters)):
            sums[i % COUNTS] += self.counters[i]
        return sums[0], sums[1], sums[2]

    def _line(self) -> str:
        done = self.totals()[0]
        bar = "#" * (30 * done // max(self.total, 1))
        return f"loadgen [{bar:<30}] {done}/{self.total} requests, {time.monotonic() - self.t0:.0f} s"

    def _sample(self, out: Any) -> None:
        now = time.monotonic()
        requests, out_tokens, in_tokens = self.totals()
        then, out_before, in_before = self.last
        # The last sample may follow a regular one closely: its totals count, a rate over so short a time not.
        span = now - then if now - then >= 0.2 else None
        out.write(
            json.dumps(
                {
                    "t_ms": int(time.time() * 1000),
                    "requests": requests,
                    "out_tokens": out_tokens,
                    "in_tokens": in_tokens,
                    "out_tok_per_s": None if span is None else round((out_tokens - out_before) / span, 1),
                    "in_tok_per_s": None if span is None else round((in_tokens - in_before) / span, 1),
                }
            )
            + "\n"
        )
        out.flush()  # whole lines only: the agent reads up to the last newline
        self.last = (now, out_tokens, in_tokens)

    def _loop(self) -> None:
        if self.samples:
            with open(self.samples, "a", encoding="utf-8") as out:
                self._tick_until_stopped(out)
        else:
            self._tick_until_stopped(None)
        if self.enabled:
            sys.stderr.write(("\r" if self.tty else "") + self._line() + "\n")
            sys.stderr.flush()

    def _tick_until_stopped(self, out: TextIO | None) -> None:
        """Once a second: a sample line to ``out`` if given, the progress line if enabled; one last
        sample when stopped, so the file ends at the run's end."""
        tick = 0
        while not self.stop_event.wait(1.0):
            tick += 1
            if out:
                self._sample(out)
            if self.enabled and (self.tty or tick % 10 == 0):
                sys.stderr.write(("\r" + self._line()) if self.tty else self._line() + "\n")
                sys.stderr.flush()
        if out:
            self._sample(out)

    def start(self) -> None:
        if self.enabled or self.samples:
            self.t0 = time.monotonic()
            self.last = (self.t0, 0, 0)
            self.thread.start()

    def stop(self) -> None:
        self.stop_event.set()
        if self.thread.is_alive():
            self.thread.join()


def execute(cfg: RunConfig, plan: PromptPlan) -> tuple[list[WorkerResult], float, float]:
    """Run the workers; returns their results and (wall clock, perf_counter) taken at the same instant."""
    targets = tuple(target_of(url, cfg.model, cfg.api_key) for url in cfg.base_urls)
    nproc = max(1, min(cfg.processes, cfg.concurrency, cfg.prompts))  # no idle worker skews the CPU figures
    conc, counts, warm = split(cfg.concurrency, nproc), split(cfg.prompts, nproc), split(cfg.warmup, nproc)
    streams = slot_targets(cfg.concurrency, len(targets))
    specs, first, wfirst, sfirst = [], 0, cfg.prompts, 0
    schedule = (
        None
        if cfg.request_rate is None
        else arrival_offsets(cfg.prompts, cfg.request_rate, cfg.burstiness or 1.0, cfg.seed)
    )
    for w in range(nproc):
        indices = (
            tuple(range(first, first + counts[w]))
            if schedule is None
            else tuple(range(w, cfg.prompts, nproc))
        )
        specs.append(
            WorkerSpec(
                w,
                targets,
                tuple(streams[sfirst : sfirst + conc[w]]),
                plan,
                cfg.output_len,
                indices,
                conc[w],
                tuple(range(wfirst, wfirst + warm[w])),
                cfg.timeout_s,
                cfg.exact_output,
                None if schedule is None else tuple(schedule[i] for i in indices),
            )
        )
        first += counts[w]
        wfirst += warm[w]
        sfirst += conc[w]
    ctx = mp.get_context("fork")
    counters = ctx.RawArray("q", COUNTS * nproc)
    progress_line = Progress(counters, cfg.prompts, cfg.progress, cfg.samples_path)
    wall0, perf0 = time.time(), time.perf_counter()
    if nproc == 1:
        progress_line.start()

        try:
            results = [run_worker(specs[0], lambda: None, lambda record: count(counters, 0, record))]
        finally:
            progress_line.stop()
        return results, wall0, perf0
    barrier = ctx.Barrier(nproc)
    pipes, procs = [], []
    for spec in specs:
        parent, child = ctx.Pipe(duplex=False)
        share = spec.concurrency / cfg.concurrency
        proc = ctx.Process(
            target=_worker_entry,
            args=(spec, barrier, counters, child, cfg.mem_budget_bytes, share),
            daemon=True,
        )
        proc.start()
        child.close()
        pipes.append(parent)
        procs.append(proc)
    progress_line.start()
    results = []
    try:
        for w, parent in enumerate(pipes):
            try:
                got = parent.recv()
            except EOFError:
                barrier.abort()
                raise RuntimeError(
                    f"worker {w} died without a result (exit code {procs[w].exitcode})"
                ) from None
            if isinstance(got, BaseException):
                barrier.abort()
                raise got
            results.append(got)
    finally:
        progress_line.stop()
        for proc in procs:
            proc.join(5)
            if proc.is_alive():
                proc.kill()
    return results, wall0, perf0


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def client_stats(results: list[WorkerResult], duration_s: float, cores: int) -> dict[str, Any]:
    """The client's own load: bound when one worker used >= 90% of a core, or the workers together used
    >= 90% of the cores they could run on (several workers squeezed onto fewer cores)."""
    workers: list[dict[str, Any]] = []
    for r in results:
        lags = sorted(r.lags_ms)
        span = max(r.t_end - r.t_start, 1e-9)
        workers.append(
            {
                "worker": r.worker,
                "cpu_s": round(r.cpu_s, 3),
                "util": round(r.cpu_s / span, 3),
                "loop_lag_ms_p99": metrics.percentile(lags, 99),
                "loop_lag_ms_max": lags[-1] if lags else None,
            }
        )
    total_cpu = sum(r.cpu_s for r in results)
    shared = total_cpu / max(duration_s * min(len(results), cores), 1e-9)
    busiest = max(w["util"] for w in workers)
    lag_p99 = [w["loop_lag_ms_p99"] for w in workers if w["loop_lag_ms_p99"] is not None]
    return {
        "client_cpu": busiest,
        "client_bound": busiest >= BOUND_UTIL or shared >= BOUND_UTIL,
        "client": {
            "processes": len(results),
            "cores": cores,
            "cpu_s": round(total_cpu, 3),
            "cores_used": round(total_cpu / max(duration_s, 1e-9), 3),
            "shared_util": round(shared, 3),
            "loop_lag_ms_p99": max(lag_p99) if lag_p99 else None,
            "workers": workers,
        },
    }


def checks(records: list[Record], cfg: RunConfig) -> dict[str, Any]:
    """Requests whose lengths or finish reason differ from what was asked: reported, never hidden."""
    ok = [r for r in records if r.ok]
    finish = Counter(r.finish_reason for r in ok if r.finish_reason != "length")
    return {
        "prompt_tokens": sum(1 for r in ok if r.prompt_tokens != cfg.prefix_len + cfg.input_len),
        "completion_tokens": sum(1 for r in ok if r.completion_tokens != cfg.output_len)
        if cfg.exact_output
        else 0,
        "finish_reason": {str(k): v for k, v in finish.items()} if cfg.exact_output else {},
        "no_usage": sum(1 for r in ok if r.completion_tokens is None),
    }


def per_url(cfg: RunConfig, records: list[Record], duration_s: float) -> list[dict[str, Any]]:
    """Each base URL's share of the run: its streams, requests and the same rate and latency keys, over
    the whole run's duration (every URL was driven for all of it)."""
    streams = Counter(slot_targets(cfg.concurrency, len(cfg.base_urls)))
    out = []
    for i, url in enumerate(cfg.base_urls):
        mine = [r for r in records if r.target == i]
        failed = sum(1 for r in mine if not r.ok)
        out.append(
            {
                "base_url": url,
                "streams": streams[i],
                "requests": len(mine),
                "failed": failed,
                **metrics.summarize(mine, duration_s),
            }
        )
    return out


def write_records(path: Path, records: list[Record], t0: float, header: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(json.dumps({"run": header}) + "\n")
        for r in sorted(records, key=lambda r: r.start):
            f.write(
                json.dumps(
                    {
                        "i": r.index,
                        "worker": r.worker,
                        "target": r.target,
                        "start_ms": round((r.start - t0) * 1000, 3),
                        "end_ms": round((r.end - t0) * 1000, 3),
                        "prompt_tokens": r.prompt_tokens,
                        "completion_tokens": r.completion_tokens,
                        "finish_reason": r.finish_reason,
                        "error": r.error,
                        "events": [
                            [round((t - t0) * 1000, 3), n] for t, n in zip(r.times, r.counts, strict=True)
                        ],
                    },
                    separators=(",", ":"),
                )
                + "\n"
            )
    os.replace(tmp, path)


TIMINGS_RESERVE_BYTES = 64 << 10
"""Room in the ``bench_result`` event kept for what is not measured when the timings are sized: what the CLI
adds to the result afterwards (``memory``, ``vocab_source``) and the event's own fields (ids, exit code)."""


def request_timings(records: list[Record], t0: float, budget_bytes: int) -> dict[str, Any]:
    """Every measured request's timings as one columnar block (``metrics.TIMING_COLUMNS``), sorted by start,
    within ``budget_bytes`` of compact JSON: rows past it are counted in ``omitted``, never a failed event.

    Why a bound: the whole result rides in one journal event of at most MAX_EVENT_BYTES (8 MiB), and an
    event over it is replaced by a warning, so the run's row would be lost. The arithmetic: a row is 60-75
    bytes of JSON (``[183422.716,1,412.093,23.581,23.102,61.877,3407.211,1024,128,null],`` is 67; 20,000
    synthetic requests of a 10-minute run averaged 66.8, at most 68), so 8 MiB less the rest of the result
    (a few KiB) and TIMINGS_RESERVE_BYTES (64 KiB) holds 110,000 (at 75 bytes) to 124,000 (at 67) rows.
    The largest bench console/bounds.py admits is C16384 at the default 8 prompts a stream (131,072
    requests), or 1,000,000 with an explicit ``--prompts``: rows could exceed the cap, hence ``omitted``
    (the latest-started rows are the ones left out). In practice none is: the default 8 prompts a stream
    fit up to C13,000 or more, far above what one node's servers admit at once, and an explicit
    ``--prompts`` up to 110,000. Every request is in the records file regardless. Each kept row is measured
    as the journal writes it (compact, ASCII), so the bound is exact, not an estimate; past the budget
    rows are only counted, so a huge run spends no time or memory on them."""
    rows: list[metrics.TimingRow] = []
    used = len('{"columns":[],"rows":[],"omitted":0000000}') + sum(len(c) + 3 for c in metrics.TIMING_COLUMNS)
    ordered = sorted(records, key=lambda r: r.start)
    for n, r in enumerate(ordered):
        row = metrics.request_timing(r, t0)
        used += len(json.dumps(row, separators=(",", ":"))) + 1
        if used > budget_bytes:
            return {"columns": list(metrics.TIMING_COLUMNS), "rows": rows, "omitted": len(ordered) - n}
        rows.append(row)
    return {"columns": list(metrics.TIMING_COLUMNS), "rows": rows, "omitted": 0}


def timings_budget(out: dict[str, Any]) -> int:
    """The bytes left for the timings block in one journal event beside the rest of the result ``out``."""
    return MAX_EVENT_BYTES - len(json.dumps(out, separators=(",", ":"))) - TIMINGS_RESERVE_BYTES


def result(cfg: RunConfig, results: list[WorkerResult], wall0: float, perf0: float) -> dict[str, Any]:
    records = [rec for r in results for rec in r.records]
    t0 = min(r.t_start for r in results)
    t1 = max(r.t_end for r in results)
    duration = t1 - t0
    failures = Counter(r.error for r in records if not r.ok)
    header = {
        k: v
        for k, v in asdict(cfg).items()
        if k not in ("api_key", "progress", "samples_path", "mem_budget_bytes")
    }
    header["records_path"] = str(cfg.records_path)
    out: dict[str, Any] = {
        **header,
        "endpoint": PATH,
        "request": request_fields(cfg.output_len, cfg.exact_output),
        "started_ms": int((wall0 + (t0 - perf0)) * 1000),
        "ended_ms": int((wall0 + (t1 - perf0)) * 1000),
        "requests": len(records),
        "completed": len(records) - sum(failures.values()),
        "failed": sum(failures.values()),
        "failures": dict(failures.most_common(10)),
        "duration_s": duration,
        **metrics.summarize(records, duration),
        **client_stats(results, duration, usable_cores()),
        "steady": metrics.steady_state(records, cfg.concurrency, duration),
        "definitions": metrics.DEFINITIONS,
        "mismatches": checks(records, cfg),
        "per_url": per_url(cfg, records, duration),
    }
    out["request_timings"] = request_timings(records, t0, timings_budget(out))
    write_records(cfg.records_path, records, t0, header)
    return out
