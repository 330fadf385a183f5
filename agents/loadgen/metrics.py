"""Run statistics with vLLM's definitions (docs/facts.md, "The reference client"), full run and steady state.

- TTFT: first token-bearing SSE event minus request start; E2E: last token-bearing event minus start
  (the usage trailer and [DONE] excluded); TPOT = (E2E - TTFT) / (output tokens - 1), requests with more
  than one token; ITL: gaps between consecutive token-bearing events pooled over all requests (events
  that arrived in one read share its stamp, so all but the first have a gap of 0, as in vLLM's client).
- Percentiles use linear interpolation between order statistics (numpy's default).
- Steady state (vllm-bench's definition): from the first time in-flight requests reach ceil(0.95 C) to
  the last time they drop below it, ties processed end before start. TTFT/TPOT/E2E from requests that
  started in the window; output tokens counted per event inside the window; input tokens of requests
  that started in it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from agents.loadgen.worker import Record

RATE_KEYS = ("req_per_s", "in_tok_per_s", "out_tok_per_s", "total_tok_per_s")
LATENCY_KEYS = tuple(f"{m}_ms_{p}" for m in ("ttft", "tpot", "itl", "e2e") for p in ("p50", "p99"))
STEADY_RATIO = 0.95
DEFINITIONS = {
    "full_run": "top-level rates and latencies: every measured request, over the timed run from the first request "
    "sent to the last response (vllm bench serve's duration and definitions; warm-up requests excluded)",
    "steady": "the same keys over the steady-state window alone: from the first time ceil(0.95 C) requests are in "
    "flight to the last time they drop below it (vllm-bench's window); vllm bench serve reports no such window",
    "ttft": "request sent to its first token event; prompts go as token ids, so it holds no tokenization, which the "
    "server's own TTFT of a text prompt (vllm bench serve's) does",
    "tpot": "per request, (E2E - TTFT) / (output tokens - 1)",
    "itl": "gaps between token events pooled over requests; events that arrived in one socket read share its stamp",
    "e2e": "request sent to its last token event",
    "request_timings": "one row per measured request, sorted by start: start_ms from the timed run's start, "
    "TTFT, TPOT, E2E by the definitions above, itl_p50_ms/itl_max_ms the median and largest of that request's "
    "ITL gaps; a failed request's times cover what arrived before its error",
}
"""Which figure is which, carried in every result (a run's JSON says what its numbers mean)."""


def percentile(sorted_values: Sequence[float], q: float) -> float | None:
    if not sorted_values:
        return None
    pos = (len(sorted_values) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def tokens_out(r: Record) -> int:
    """Server-reported completion tokens; the event count when the server sent no usage."""
    return r.completion_tokens if r.completion_tokens is not None else sum(r.counts)


def itl_gaps(r: Record, gaps: list[float], lo: float = -math.inf, hi: float = math.inf) -> int:
    """Pool one request's ITL gaps stamped within [lo, hi]: each gap above 0, in ms, is appended to ``gaps``;
    returns how many are 0 (the later events of a read that carried several share its stamp).

    Why not a Counter of gaps: nearly every gap is a distinct float, so a Counter (and the sorted pairs made
    from it) held ~157 bytes per token event, the largest share of a run's memory (agents/loadgen/memory.py);
    a list of the gaps above 0 and a count of the rest hold ~32, and give the same percentiles."""
    zeros = 0
    prev = None
    for t, n in zip(r.times, r.counts, strict=True):
        if lo <= t <= hi:
            if prev is None:
                zeros += n - 1  # the first event of a request is its TTFT, not a gap
            else:
                gap = (t - prev) * 1000
                if gap:
                    gaps.append(gap)
                else:
                    zeros += 1
                zeros += n - 1
        prev = t
    return zeros


TIMING_COLUMNS = (
    "start_ms",
    "target",
    "ttft_ms",
    "tpot_ms",
    "itl_p50_ms",
    "itl_max_ms",
    "e2e_ms",
    "in_tokens",
    "out_tokens",
    "error",
)
"""The columns of a result's ``request_timings`` rows (``request_timing``), in their order."""
TimingRow = list[float | int | str | None]
"""One request's values in TIMING_COLUMNS order."""


def _ms(seconds: float | None) -> float | None:
    """Seconds as ms to the microsecond: finer than the clock's worth here, and 3 digits of JSON at most."""
    return None if seconds is None else round(seconds * 1000, 3)


def _ms_of(ms: float | None) -> float | None:
    """A value already in ms (an ITL gap), rounded as ``_ms`` rounds."""
    return None if ms is None else round(ms, 3)


def request_timing(r: Record, t0: float) -> TimingRow:
    """One request's row of TIMING_COLUMNS, by the same definitions as ``summarize`` (its TTFT, TPOT, E2E and
    ITL gaps come from the same fields and helpers), so a figure computed later from the rows is the one the
    run reported. Why per request: a new SLO or tail is then read from the stored rows, never re-measured.

    ``t0`` is the timed run's start (the records file's origin); TPOT is None with one output token or none,
    TTFT, E2E and the ITL summary None without a token event."""
    first, last = (r.times[0], r.times[-1]) if r.times else (None, None)
    n_out = tokens_out(r)
    gaps: list[float] = []
    zeros = itl_gaps(r, gaps)
    gaps.sort()
    tpot = (last - first) / (n_out - 1) if first is not None and last is not None and n_out > 1 else None
    return [
        _ms(r.start - t0),
        r.target,
        _ms(None if first is None else first - r.start),
        _ms(tpot),
        _ms_of(pooled_percentile(zeros, gaps, 50)),
        _ms_of(pooled_percentile(zeros, gaps, 100)),
        _ms(None if last is None else last - r.start),
        r.prompt_tokens,
        n_out,
        r.error,
    ]


def pooled_percentile(zeros: int, sorted_gaps: Sequence[float], q: float) -> float | None:
    """Percentile of ``zeros`` gaps of 0 followed by ``sorted_gaps`` (all above 0), without building the list."""
    total = zeros + len(sorted_gaps)
    if not total:
        return None
    pos = (total - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, total - 1)
    a = 0.0 if lo < zeros else sorted_gaps[lo - zeros]
    b = 0.0 if hi < zeros else sorted_gaps[hi - zeros]
    return a + (b - a) * (pos - lo)


def summarize(
    records: Iterable[Record],
    duration_s: float,
    lo: float = -math.inf,
    hi: float = math.inf,
    events_in_window: bool = False,
) -> dict[str, float | int | None]:
    """Rate and latency keys over ``records``; with ``events_in_window`` output tokens and ITL gaps
    count only events stamped within [lo, hi] (the steady-state window)."""
    ok = [r for r in records if r.ok]
    ttft, e2e, tpot = [], [], []
    gaps: list[float] = []
    zeros = 0
    out_tokens = 0.0
    in_tokens = 0
    for r in ok:
        first, last, n_out = r.times[0], r.times[-1], tokens_out(r)
        ttft.append((first - r.start) * 1000)
        e2e.append((last - r.start) * 1000)
        if n_out > 1:
            tpot.append((last - first) * 1000 / (n_out - 1))
        in_tokens += r.prompt_tokens or 0
        if events_in_window:
            events = sum(r.counts)
            inside = sum(n for t, n in zip(r.times, r.counts, strict=True) if lo <= t <= hi)
            out_tokens += n_out * inside / events
            zeros += itl_gaps(r, gaps, lo, hi)
        else:
            out_tokens += n_out
            zeros += itl_gaps(r, gaps)
    gaps.sort()
    out: dict[str, float | int | None] = {
        "req_per_s": len(ok) / duration_s if duration_s > 0 else None,
        "in_tok_per_s": in_tokens / duration_s if duration_s > 0 else None,
        "out_tok_per_s": out_tokens / duration_s if duration_s > 0 else None,
        "total_tok_per_s": (in_tokens + out_tokens) / duration_s if duration_s > 0 else None,
    }
    for name, values in (("ttft", sorted(ttft)), ("tpot", sorted(tpot)), ("e2e", sorted(e2e))):
        out[f"{name}_ms_p50"] = percentile(values, 50)
        out[f"{name}_ms_p99"] = percentile(values, 99)
    out["itl_ms_p50"] = pooled_percentile(zeros, gaps, 50)
    out["itl_ms_p99"] = pooled_percentile(zeros, gaps, 99)
    return out


def steady_window(records: Sequence[Record], concurrency: int) -> tuple[float, float] | None:
    """The span where in-flight requests stayed at or above ceil(0.95 C), or None if never reached."""
    threshold = math.ceil(STEADY_RATIO * concurrency)
    edges = sorted([(r.end, 0) for r in records] + [(r.start, 1) for r in records])  # 0: end sorts first
    inflight = 0
    first_up = last_down = None
    for t, is_start in edges:
        before = inflight
        inflight += 1 if is_start else -1
        if before < threshold <= inflight and first_up is None:
            first_up = t
        if before >= threshold > inflight:
            last_down = t
    if first_up is None or last_down is None or last_down <= first_up:
        return None
    return first_up, last_down


def steady_state(records: Sequence[Record], concurrency: int, run_s: float) -> dict[str, object]:
    window = steady_window(records, concurrency)
    if window is None:
        return {
            "window_s": 0.0,
            "reason": f"in-flight requests never reached {math.ceil(STEADY_RATIO * concurrency)} "
            f"(0.95 x C{concurrency}); use more prompts or a lower concurrency",
            **dict.fromkeys(RATE_KEYS + LATENCY_KEYS),
        }
    lo, hi = window
    started = [r for r in records if lo <= r.start <= hi]
    span = hi - lo
    stats = summarize(started, span)
    # Output tokens and ITL from every request's events inside the window, not only those that started in it.
    in_window = summarize(records, span, lo, hi, events_in_window=True)
    stats["out_tok_per_s"] = in_window["out_tok_per_s"]
    stats["itl_ms_p50"], stats["itl_ms_p99"] = in_window["itl_ms_p50"], in_window["itl_ms_p99"]
    stats["req_per_s"] = sum(1 for r in records if r.ok and lo <= r.end <= hi) / span
    stats["total_tok_per_s"] = (stats["in_tok_per_s"] or 0) + (stats["out_tok_per_s"] or 0)
    return {
        "window_s": span,
        "requests": len(started),
        # vllm-bench warns below max(10 s, 10% of the run): such a window is too short to trust alone.
        "short": span < max(10.0, 0.1 * run_s),
        **stats,
    }
