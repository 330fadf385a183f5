"""Whether a curve point measured what it claims, and if not, why: a point is kept and shown either way.

A curve compares points, so a point measured under other conditions than its neighbours bends the curve
without saying so. Each run of a point is judged on what the store holds about its measurement window:

- its GPUs' power limit read back changed, or their power samples have a gap (``energy.run_energy``'s own
  validity, the same rules the energy figure uses: one definition, never two);
- its GPUs' clocks were slowed by heat or by the hardware (NVML's clocks event reasons, journaled with each
  sample). Reaching the software power cap is not a fault: the power limit is part of the configuration
  being measured, so it is only noted;
- the concurrency it achieved fell short of the one asked for (a closed-loop point only: a rate-paced point's
  concurrency is a cap, not a target);
- the load generator was the limit (client-bound), requests failed, or the tripwire failed.

A run without the facts to judge (an imported row, a CPU box with no GPU samples) is not made invalid by what
is missing; ``notes`` say what could not be checked. Only reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from console.readmodel.energy import measured_gpus, run_energy
from console.readmodel.records import ResultRow
from console.readmodel.requests import RequestTiming, bench_requests
from console.readmodel.results import bench_row
from console.store import Store
from console.timeutil import fmt_utc

ACHIEVED_SHARE = 0.9
"""A closed-loop point whose streams were in flight less than this share of the time it asked for them did
not measure its concurrency: the server or the client held requests back."""

THROTTLE_FAULTS: dict[int, str] = {
    0x8: "hardware slowdown",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "hardware power brake slowdown",
}
"""NVML clocks event reasons (nvml.h ``nvmlClocksEventReason*``) that make a point invalid: the clocks fell for
a cause other than the configuration being measured."""
THROTTLE_NOTED: dict[int, str] = {0x4: "software power cap"}
"""Reasons only noted: the GPU held its power limit, which is the configuration the campaign chose."""


@dataclass(frozen=True)
class RunValidity:
    """One bench row judged: ``reasons`` make it invalid; ``notes`` say what was seen or could not be checked."""

    row_id: int
    reasons: tuple[str, ...]
    notes: tuple[str, ...]
    achieved_concurrency: float | None  # time-weighted requests in flight (see ``achieved_concurrency``)

    @property
    def valid(self) -> bool:
        return not self.reasons


@dataclass(frozen=True)
class PointValidity:
    """A point judged by its runs: invalid when any run is, each reason naming its row when there are several."""

    runs: tuple[RunValidity, ...]

    @property
    def valid(self) -> bool:
        return all(r.valid for r in self.runs)

    def _said(self, field: str) -> tuple[str, ...]:
        several = len(self.runs) > 1
        out: list[str] = []
        for run in self.runs:
            for text in getattr(run, field):
                line = f"row {run.row_id}: {text}" if several else text
                if line not in out:
                    out.append(line)
        return tuple(out)

    @property
    def reasons(self) -> tuple[str, ...]:
        return self._said("reasons")

    @property
    def notes(self) -> tuple[str, ...]:
        return self._said("notes")

    @property
    def word(self) -> str:
        return "valid" if self.valid else "invalid"


def achieved_concurrency(requests: Sequence[RequestTiming], concurrency: int) -> float | None:
    """The mean number of requests in flight, weighted by time, from the first send to the send that leaves only
    ``concurrency`` requests unsent: until then a closed loop has every stream busy, after it the streams drain
    one by one and fewer in flight is no fault. With too few requests for that stretch (one or two per stream),
    the most in flight at once instead. None without timed requests."""
    spans = sorted(
        (r.start_ms, r.start_ms + r.e2e_ms)
        for r in requests
        if r.start_ms is not None and r.e2e_ms is not None
    )
    if not spans:
        return None
    starts = [s for s, _ in spans]
    t0 = starts[0]
    cut = len(spans) - concurrency
    t1 = starts[cut] if cut > 0 else t0
    if t1 - t0 <= 0 or cut < concurrency:
        return float(_most_in_flight(spans))
    busy = sum(max(0.0, min(end, t1) - max(start, t0)) for start, end in spans)
    return busy / (t1 - t0)


def _most_in_flight(spans: Sequence[tuple[float, float]]) -> int:
    edges = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans], key=lambda x: (x[0], x[1]))
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def _throttling(store: Store, row: ResultRow) -> tuple[list[str], list[str]]:
    """Reasons (faults) and notes (power cap) from the clocks event reasons of the run's GPUs in its window."""
    keys = measured_gpus(store, row)
    if not keys or row.started_ms is None or row.ended_ms is None:
        return [], []
    reasons: list[str] = []
    notes: list[str] = []
    for box, gpu in keys:
        found = store.rows(
            """SELECT t_ms, throttle_reasons FROM gpu_samples WHERE box = ? AND gpu = ? AND t_ms BETWEEN ? AND ?
               AND throttle_reasons IS NOT NULL AND throttle_reasons != 0 ORDER BY t_ms""",
            [box, gpu, row.started_ms, row.ended_ms],
        )
        for bits, words, into in (
            (THROTTLE_FAULTS, "clocks slowed", reasons),
            (THROTTLE_NOTED, "held", notes),
        ):
            for bit, name in bits.items():
                hits = [r["t_ms"] for r in found if int(r["throttle_reasons"]) & bit]
                if hits:
                    into.append(
                        f"GPU {gpu} on {box}: {words} by {name} in {len(hits)} sample(s) from {fmt_utc(hits[0])}"
                    )
    return reasons, notes


def run_validity(store: Store, row: ResultRow, *, paced: bool = False) -> RunValidity:
    """One bench row judged (see the module's docstring); ``paced``: its arrivals were paced by a rate, so its
    concurrency is a cap and is not checked."""
    reasons: list[str] = []
    notes: list[str] = []
    requests = bench_requests(store, row.id)
    failed = sum(1 for r in requests if r.error is not None) if requests else (row.failed or 0)
    if failed:
        total = len(requests) or row.requests or failed
        reasons.append(f"{failed} of {total} requests failed")
    if row.client_bound:
        cpu = f" ({row.client_cpu:.0%} of its core)" if row.client_cpu is not None else ""
        reasons.append(f"client-bound: the load generator{cpu}, not the server, set the pace")
    if row.tripwire.total is not None and not row.tripwire.passed:
        reasons.append(f"tripwire {row.tripwire.text}")
    elif row.tripwire.total is None and row.source != "imported":
        notes.append("no tripwire recorded for its launch")
    energy = run_energy(store, row)
    if energy is not None and not energy.valid:
        reasons.extend(energy.reasons)
    faults, held = _throttling(store, row)
    reasons.extend(faults)
    notes.extend(held)
    achieved = achieved_concurrency(requests, row.concurrency) if requests else None
    if not paced and achieved is not None and achieved < ACHIEVED_SHARE * row.concurrency:
        reasons.append(
            f"achieved concurrency {achieved:.1f} of {row.concurrency} asked "
            f"(below {ACHIEVED_SHARE:.0%}: requests were held back)"
        )
    if row.source == "imported":
        notes.append("imported: kernel, tripwire and power are what the import gave")
    elif not requests:
        notes.append("no request timings stored: achieved concurrency and failures read from the row")
    return RunValidity(row.id, tuple(reasons), tuple(notes), achieved)


def point_validity(
    store: Store, bench_run_ids: Sequence[int], *, paced: bool = False
) -> PointValidity | None:
    """A stored point's runs judged; None for a point with no rows (not measured yet)."""
    if not bench_run_ids:
        return None
    return PointValidity(
        tuple(run_validity(store, bench_row(store, str(i)), paced=paced) for i in bench_run_ids)
    )
