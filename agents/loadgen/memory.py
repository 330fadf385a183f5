"""What a load-generator run holds in memory, the budget it must fit, and the hard cap that enforces it.

Why: ``bench -c`` had no upper bound, and one run at a huge concurrency grew the load generator to
22.5 GB RSS: it outlived the console, the agent and sshd, which the kernel's OOM killer took first. So
a run is sized before anything is allocated: ``estimate_bytes`` of its load against a budget, a stated
share (``MEMORY_SHARE``) of the box's MemAvailable, and refused with a one-line reason when it does not
fit. The console sizes a bench the same way from the box's latest probe (console/service/runs.py), so
one definition lives here and both import it.

What a run holds (measured, see the constants): per stream (one per unit of concurrency) a keep-alive
connection, its protocol and coroutine, the request bytes it has in flight (the prompt's token ids as
JSON text, about 7 bytes a token for a 150k vocabulary) and the last 16 KiB of the response; per measured
request a record kept until the result (one time stamp and one count per socket read that carried a
token event: one read per token at a real server's decode pace), in the worker that ran it, then in the
parent, then in the statistics the parent computes over every token event (the ITL multiset).

The estimate is checked as a hard cap too, where Linux makes that cheap (``capped``, ``cap_worker``):
RLIMIT_DATA (private writable memory) of each process is its use at start plus its share of the budget,
so a run the estimate misjudged ends with a MemoryError instead of growing until the box falls over.
"""

from __future__ import annotations

import math
import resource
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from agents.protocol import MemoryInfo

MEMORY_SHARE = 0.25
"""The load generator's budget: this share of the box's MemAvailable when the run starts. The rest is
the servers' (vLLM holds host memory beside the GPU's), the agent's and sshd's; a quarter also leaves the
hard cap (each process's use at start plus its share of the budget, parent and workers: at most about
twice the budget in all) below what the box has."""

FALLBACK_BUDGET_BYTES = 4 << 30
"""The console's budget for a box it has no probe of (so no MemAvailable): 4 GiB, the budget of a box
with 16 GiB available. The load generator on the box sizes the run again by what it finds there."""

STREAMS_PER_PROCESS = 256
"""Worker processes: one per 256 streams, up to the cores the load generator may use."""
PROMPTS_PER_STREAM = 8
"""Measured requests per stream by default: the write-up's 6-8 x concurrency, so the steady window is long."""
VOCAB_BOUND = 262_144
"""Largest vocabulary the base figure allows for (the prompt plan holds one int per allowed id)."""

# Measured figures (MEASURED says how), each rounded up from the largest reading.
BASE_BYTES = 48 << 20
"""The parent process at C1: interpreter, modules and the prompt plan of a VOCAB_BOUND vocabulary
(measured 39.7 MB peak RSS)."""
WORKER_BYTES = 12 << 20
"""Each worker process's own pages beyond those it shares with the parent, when there are two or more
(measured 10.6 MB PSS each: two workers at C512 against one process)."""
STREAM_BYTES = 32 << 10
"""Each stream mid-response: its connection, transport, protocol, coroutine and the last 16 KiB of its
response (wire.TAIL), the prompt aside (measured 29.6 KB at one process, 33.2 KB at two, PSS)."""
PROMPT_TOKEN_BYTES = 10
"""Per prompt token of each stream's request in flight: the token ids as JSON text, about 7 bytes an id
of a 150k vocabulary, and the transport's copy while the socket is full (measured 7.7 to 9.3)."""
RECORD_BYTES = 1780
"""Each measured request's record, in worker and parent, and its share of the statistics and of the
records file's writing (measured 977 B peak RSS at one process, 1,182 B PSS at two), plus its row of the
result's ``request_timings`` (run.request_timings: 289 B held a row, 497 B at the peak of encoding the
block as JSON, traced with tracemalloc over 20,000 requests of 128 tokens)."""
EVENT_BYTES = 72
"""Each token event of each record, at one socket read per token (a decode pace): its stamp and count
in worker and parent, and its gap in the pooled ITL list (measured 68 B peak RSS at one process, 43 B
PSS at two; 220 B before the stamps became arrays and the ITL multiset a list)."""
MEASURED = (
    "Measured 2026-12-04 on Linux 6.18, CPython 3.11.7, 2 cores, 23 GiB, against bench/zero_server.py: each "
    "figure is the growth of the load generator's peak memory between two runs that differ in one term, "
    "divided by that term's change; at one process the run's own peak RSS (ru_maxrss), at two the peak "
    "PSS of parent and workers summed (shared pages split), polled every 2 ms from /proc/PID/smaps_rollup. "
    "Streams: C256 and C1024 against the server paced at one token per 20 ms, 2048-token responses, read "
    "after 15 s (every tail full). Prompt tokens: input 16 and 4096 at C1024 and C4096. Records: 16,384 and "
    "65,536 prompts at C256 of 16 tokens. Events: 128 and 1024 output tokens at C64, 512 prompts, paced at "
    "2 ms (one read per event: 523,879 reads for 524,288 events). Workers: 2 processes against 1 at C512."
)
"""How and when the figures above were measured: re-measure after changing what a run holds."""

WORKER_SLACK_BYTES = 64 << 20
"""Headroom of a worker's hard cap above its share of the budget: its event loop and allocator's own
pages, which the estimate counts once for the parent."""


@dataclass(frozen=True)
class Load:
    """What sizes a run's memory."""

    concurrency: int
    prompts: int
    prompt_tokens: int
    """Tokens per request: the shared prefix and the unique input."""
    output_len: int
    processes: int
    """Worker processes (1: the parent runs the one worker itself)."""

    def with_concurrency(self, concurrency: int, prompts_per_stream: int | None, cores: int | None) -> Load:
        """The same run at another concurrency: prompts follow it when they are per stream (the default),
        the worker count when it is the default one per STREAMS_PER_PROCESS streams (``cores`` given)."""
        prompts = self.prompts if prompts_per_stream is None else prompts_per_stream * concurrency
        processes = self.processes if cores is None else processes_for(concurrency, cores)
        return Load(concurrency, prompts, self.prompt_tokens, self.output_len, processes)


def processes_for(concurrency: int, cores: int) -> int:
    """The default worker count: one per STREAMS_PER_PROCESS streams, at most one per core."""
    return max(1, min(cores, -(-concurrency // STREAMS_PER_PROCESS)))


def estimate_bytes(load: Load) -> int:
    """The bytes a run holds at its peak, by the measured figures (never less than the C1 run)."""
    processes = max(1, min(load.processes, load.concurrency, load.prompts))  # as run.execute starts them
    workers = processes if processes > 1 else 0
    streams = max(load.concurrency, 0) * (STREAM_BYTES + PROMPT_TOKEN_BYTES * max(load.prompt_tokens, 0))
    records = max(load.prompts, 0) * (RECORD_BYTES + EVENT_BYTES * max(load.output_len, 0))
    return BASE_BYTES + workers * WORKER_BYTES + streams + records


def per_request_bytes(load: Load) -> int:
    """The bytes each in-flight request adds: its stream and its share of the records (prompts / C); the
    estimate is BASE_BYTES and the workers' WORKER_BYTES plus C times this."""
    stream = STREAM_BYTES + PROMPT_TOKEN_BYTES * max(load.prompt_tokens, 0)
    records = max(load.prompts, 0) * (RECORD_BYTES + EVENT_BYTES * max(load.output_len, 0))
    return stream + math.ceil(records / max(load.concurrency, 1))


def largest_fitting(budget_bytes: int, load: Load, prompts_per_stream: int | None, cores: int | None) -> int:
    """The largest concurrency whose run fits ``budget_bytes`` (0: none does), searched over the same run
    at other concurrencies; ``prompts_per_stream`` None keeps the run's prompts fixed, ``cores`` None its
    worker count (an explicit --processes)."""

    def fits(c: int) -> bool:
        return estimate_bytes(load.with_concurrency(c, prompts_per_stream, cores)) <= budget_bytes

    if not fits(1):
        return 0
    lo, hi = 1, 2
    while fits(hi):
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def budget_of(available_bytes: int) -> int:
    """The load generator's budget on a box with ``available_bytes`` MemAvailable."""
    return int(available_bytes * MEMORY_SHARE)


def size(n: float) -> str:
    """Bytes in binary units, 3 significant figures: 5.81 GiB, 163 KiB."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.3g} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def refusal(
    load: Load,
    budget_bytes: int,
    budget_source: str,
    prompts_per_stream: int | None,
    cores: int | None,
    concurrency_flag: str = "--concurrency",
) -> str | None:
    """None when the run fits the budget, else one line: what it needs, the budget and where it comes from,
    the bytes per in-flight request, and the largest concurrency that fits (or that none does)."""
    need = estimate_bytes(load)
    if need <= budget_bytes:
        return None
    records = f"{load.prompts / max(load.concurrency, 1):.3g} records of {load.output_len} tokens"
    most = largest_fitting(budget_bytes, load, prompts_per_stream, cores)
    if most:
        advice = f"at most {concurrency_flag} {most} fits: lower it"
        if prompts_per_stream is None:
            advice += " or the prompts"
    else:
        advice = (
            "no concurrency fits: lower the prompts or the shape's lengths"
            if prompts_per_stream is None
            else "no concurrency fits: pick a shorter shape or a box with more memory"
        )
    return (
        f"{concurrency_flag} {load.concurrency} with {load.prompts} prompts needs ~{size(need)} ({need} bytes), "
        f"over the load generator's memory budget of {size(budget_bytes)} ({budget_bytes} bytes: {budget_source}) "
        f"at ~{size(per_request_bytes(load))} ({per_request_bytes(load)} bytes) per in-flight request "
        f"(its stream, {records}); {advice}"
    )


def meminfo(path: Path = Path("/proc/meminfo")) -> MemoryInfo | None:
    """The box's MemTotal and MemAvailable in bytes (``total_bytes``, ``available_bytes``); None off Linux or
    on a kernel before 3.14 (no MemAvailable)."""
    try:
        text = path.read_text(encoding="ascii")
    except OSError:
        return None
    fields: dict[str, int] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if name in ("MemTotal", "MemAvailable") and parts and parts[0].isdigit():
            fields[name] = int(parts[0]) * (1024 if parts[1:] == ["kB"] else 1)
    if "MemTotal" not in fields or "MemAvailable" not in fields:
        return None
    return {"total_bytes": fields["MemTotal"], "available_bytes": fields["MemAvailable"]}


def data_bytes() -> int | None:
    """This process's private writable memory now (VmData: what RLIMIT_DATA counts); None off Linux."""
    try:
        for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
            if line.startswith("VmData:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def set_cap(headroom_bytes: int) -> tuple[int, int] | None:
    """Lower this process's soft RLIMIT_DATA to its use now plus ``headroom_bytes`` (never raising it);
    returns the limits it replaced, None where there is no VmData to start from."""
    now = data_bytes()
    if now is None:
        return None
    before = resource.getrlimit(resource.RLIMIT_DATA)
    soft, hard = before
    cap = now + max(headroom_bytes, 0)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    if soft != resource.RLIM_INFINITY:
        cap = min(cap, soft)
    resource.setrlimit(resource.RLIMIT_DATA, (cap, hard))
    return before


WIND_DOWN_BYTES = 64 << 20
"""Room given above the cap once it was hit, so the run unwinds (its tasks cancelled, one reason sent to
the parent) instead of failing every step of that with another MemoryError."""


def wind_down() -> None:
    """The cap was hit: raise this process's soft RLIMIT_DATA by WIND_DOWN_BYTES for the way out."""
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if soft == resource.RLIM_INFINITY:
        return
    raised = soft + WIND_DOWN_BYTES
    resource.setrlimit(
        resource.RLIMIT_DATA, (raised if hard == resource.RLIM_INFINITY else min(raised, hard), hard)
    )


@contextmanager
def capped(budget_bytes: int) -> Iterator[int | None]:
    """The whole budget as this process's hard cap for the ``with``; yields the cap (None: not capped).

    Only the soft limit moves, and it is put back after, so a caller in the same process (a test calling
    ``main``) is not left capped. The parent gets the whole budget: it ends up holding every record."""
    before = set_cap(budget_bytes)
    try:
        yield None if before is None else resource.getrlimit(resource.RLIMIT_DATA)[0]
    finally:
        if before is not None:
            resource.setrlimit(resource.RLIMIT_DATA, before)


def cap_worker(budget_bytes: int, share: float) -> None:
    """A forked worker's hard cap: its use at the fork plus its share of the budget (its streams' share of the
    run) and WORKER_SLACK_BYTES. It exits after its run, so nothing is put back."""
    set_cap(math.ceil(budget_bytes * share) + WORKER_SLACK_BYTES)
