"""One bench run read from its requests: tails as honest as the request count allows, interactivity by both
definitions the field uses, throughput per GPU, and, for any SLO, attainment, goodput and a verdict.

Every figure is computed here from the stored request timings (``bench_requests``), never re-measured: a new
SLO asks nothing of the box; the energy is integrated from the journaled GPU power samples
(``console/readmodel/energy.py``). Which definition each figure uses travels with it (``DEFINITIONS``), since
the field's tools disagree (vLLM's plot_pareto divides output tok/s by the concurrency; InferenceX inverts the
median TPOT; ``console/tails.py`` says how an early-stopping estimate differs from a plain percentile).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from console.errors import InputError
from console.readmodel.energy import ENERGY_SOURCE, RunEnergy, energy_note, measured_gpus, run_energy
from console.readmodel.records import ResultRow
from console.readmodel.requests import RequestTiming, bench_requests
from console.readmodel.results import bench_row
from console.store import Store
from console.tails import SloVerdict, TailEstimate, slo_verdict, tail, wilson

METRICS: tuple[tuple[str, str], ...] = (("ttft", "ttft_ms"), ("tpot", "tpot_ms"), ("e2el", "e2e_ms"))
"""The latency metrics with tails, by the names ``--slo`` uses (vLLM's ``--goodput`` keys), and their field."""
SLO_PERCENTILE = 0.99
"""The percentile an SLO verdict is taken at: the p99 the field quotes."""

DEFINITIONS: dict[str, str] = {
    "ttft": "time to the first token, per request (vLLM)",
    "tpot": "(E2E - TTFT) / (output tokens - 1), per request with more than one token (vLLM)",
    "e2el": "end-to-end latency of a request (vLLM)",
    "p90/p99 estimate": "MLPerf LoadGen's early-stopping estimate at 99% confidence for this many requests",
    "interactivity (1000/TPOT)": "1000 / median TPOT: decode speed a user sees (InferenceX)",
    "interactivity (per slot)": "output tok/s / concurrency, prefill and tails included (vLLM plot_pareto)",
    "per GPU": "the run's tok/s divided by the GPUs of the replicas it measured",
    "attainment": "share of all requests (errors count against) meeting every limit, Wilson 95% interval",
    "goodput": "requests meeting every limit per second of the run (vLLM --goodput, DistServe)",
    "energy": "each measured GPU's power integrated over the run's window by the trapezoidal rule, edges "
    f"interpolated, GPUs summed (InferenceX aggregate_power); from {ENERGY_SOURCE}; invalid past a 3 s "
    "sample gap, under 2 samples a GPU, or a power limit change",
    "J/out token": "joules / (output tok/s x duration): the load generator's output tokens",
    "out tok/s per W": "output tok/s / average power of the measured GPUs together: output tokens per joule",
}


@dataclass(frozen=True)
class MetricTails:
    """One latency metric over a run's successful requests."""

    name: str  # ttft, tpot, e2el
    n: int
    p50: float | None
    p90: TailEstimate
    p99: TailEstimate


@dataclass(frozen=True)
class SloFigures:
    """A run read against one SLO: how many requests met every limit, and the verdict per limit at p99."""

    limits: dict[str, float]
    good: int
    n: int
    attainment: float | None
    interval: tuple[float, float] | None  # Wilson 95%
    goodput_req_per_s: float | None
    verdicts: tuple[tuple[str, SloVerdict], ...]  # failed requests count as over every limit

    @property
    def verdict(self) -> str:
        """``meets`` when every limit's p99 verdict does, ``misses`` when any misses, else ``too-few``."""
        words = {v.verdict for _, v in self.verdicts}
        return "misses" if "misses" in words else "too-few" if "too-few" in words else "meets"


@dataclass(frozen=True)
class RequestFigures:
    bench: ResultRow
    requests: int
    ok: int
    tails: tuple[MetricTails, ...]
    interactivity_tpot: float | None
    interactivity_per_slot: float | None
    gpus: int | None  # GPUs of the replicas measured; None: not known (or CPU replicas)
    slo: SloFigures | None
    energy: RunEnergy | None = (
        None  # None: no window, no samples (a CPU box, an imported row) or GPUs unknown
    )
    energy_note: str | None = None  # why a box with power samples over the run still gives no energy figure

    @property
    def out_per_gpu(self) -> float | None:
        return _per(self.bench.out_tok_per_s, self.gpus)

    @property
    def total_per_gpu(self) -> float | None:
        return _per(self.bench.total_tok_per_s, self.gpus)


def _per(value: float | None, gpus: int | None) -> float | None:
    return None if value is None or not gpus else value / gpus


def _values(rows: Sequence[RequestTiming], field: str) -> list[float]:
    out = []
    for r in rows:
        value = getattr(r, field)
        if r.error is None and value is not None:
            out.append(float(value))
    return out


def _tails(rows: Sequence[RequestTiming]) -> tuple[MetricTails, ...]:
    out = []
    for name, field in METRICS:
        values = _values(rows, field)
        out.append(
            MetricTails(
                name=name,
                n=len(values),
                p50=statistics.median(values) if values else None,
                p90=tail(values, 0.90),
                p99=tail(values, 0.99),
            )
        )
    return tuple(out)


def meets_slo(limits: dict[str, float]) -> Callable[[RequestTiming], bool]:
    fields = dict(METRICS)

    def meets(r: RequestTiming) -> bool:
        if r.error is not None:
            return False
        for key, limit in limits.items():
            value = getattr(r, fields[key])
            if key == "tpot" and value is None:
                continue  # one output token has no TPOT: vLLM counts it as 0, inside any limit
            if value is None or value > limit:
                return False
        return True

    return meets


def _with_failures(rows: Sequence[RequestTiming], field: str) -> list[float]:
    """A metric's values for a verdict: a failed request counts as over any limit (it served nothing in time)."""
    return _values(rows, field) + [math.inf] * sum(1 for r in rows if r.error is not None)


def slo_figures(
    rows: Sequence[RequestTiming], limits: dict[str, float], duration_s: float | None
) -> SloFigures:
    good = sum(1 for r in rows if meets_slo(limits)(r))
    n = len(rows)
    fields = dict(METRICS)
    return SloFigures(
        limits=dict(limits),
        good=good,
        n=n,
        attainment=good / n if n else None,
        interval=wilson(good, n),
        goodput_req_per_s=good / duration_s if duration_s else None,
        verdicts=tuple(
            (key, slo_verdict(_with_failures(rows, fields[key]), limit, SLO_PERCENTILE))
            for key, limit in limits.items()
        ),
    )


def _gpus(store: Store, bench: ResultRow) -> int | None:
    """The GPUs of the replicas a run measured (``energy.measured_gpus``, the same ones its energy sums);
    None when any is unknown or none has one."""
    keys = measured_gpus(store, bench)
    return len(keys) if keys else None


def request_figures(store: Store, spec: str, limits: dict[str, float] | None = None) -> RequestFigures:
    """The figures of the bench run ``spec`` (its row id or run id) from its stored requests; ``limits``
    (``console.tails.parse_slo``) adds attainment, goodput and a verdict per limit."""
    bench = bench_row(store, spec)
    rows = bench_requests(store, bench.id)
    if not rows:
        raise InputError(
            f"bench row {bench.id} ({bench.arm}, C{bench.concurrency}) has no request timings: it was "
            "imported, or measured before they were stored",
            "run `campaign bench` again to measure them",
        )
    tpot = [v for v in _values(rows, "tpot_ms") if v > 0]
    return RequestFigures(
        bench=bench,
        requests=len(rows),
        ok=sum(1 for r in rows if r.error is None),
        tails=_tails(rows),
        interactivity_tpot=1000 / statistics.median(tpot) if tpot else None,
        interactivity_per_slot=bench.per_slot,
        gpus=_gpus(store, bench),
        slo=slo_figures(rows, limits, bench.duration_s) if limits else None,
        energy=run_energy(store, bench),
        energy_note=energy_note(store, bench),
    )
