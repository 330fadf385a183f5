"""A bench run's requests, one record each: the timings its load generator measured per request.

Why per request: a tail, a curve or an SLO is then computed from the stored rows whenever it is asked,
with any definition, and a new SLO never needs the run again (console/readmodel/request_figures.py builds
on these). The definitions are vLLM's (agents/loadgen/metrics.py); ``bench_requests`` holds the rows.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from console.store import Store


@dataclass(frozen=True)
class RequestTiming:
    """One measured request of a bench run; durations and offsets in ms, None where nothing was measured."""

    bench_run_id: int
    i: int
    """Its place in the run's requests, sorted by when each was sent."""
    start_ms: float | None
    """Sent, ms after the timed run's start."""
    target: int | None
    """The base URL (replica) that served it, in the order of the run's base URLs."""
    ttft_ms: float | None
    tpot_ms: float | None
    """(E2E - TTFT) / (out_tokens - 1); None at one output token or none."""
    itl_p50_ms: float | None
    itl_max_ms: float | None
    e2e_ms: float | None
    in_tokens: int | None
    out_tokens: int | None
    error: str | None
    """Why it failed; None: it succeeded."""

    @property
    def ok(self) -> bool:
        return self.error is None


_COLUMNS = ", ".join(f.name for f in fields(RequestTiming))


def bench_requests(store: Store, bench_run_id: int) -> list[RequestTiming]:
    """Every stored request of bench row ``bench_run_id``, in the order they were sent; empty for a row
    measured before request timings were stored, an imported row, or one whose block was malformed."""
    rows = store.rows(
        f"SELECT {_COLUMNS} FROM bench_requests WHERE bench_run_id = ? ORDER BY i", [bench_run_id]
    )
    return [RequestTiming(**r) for r in rows]


def bench_request_count(store: Store, bench_run_id: int) -> int:
    """How many requests of bench row ``bench_run_id`` are stored, without reading them."""
    return int(store.scalar("SELECT count(*) FROM bench_requests WHERE bench_run_id = ?", [bench_run_id]))
