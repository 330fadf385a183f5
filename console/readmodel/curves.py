"""Curves read from the store: each point's bench rows summarised the way a curve is plotted.

A point is the median of its repeats (with their min-max), its latencies and interactivity from the stored
request timings (``request_figures``: the same definitions ``campaign requests`` prints, labelled), and its
throughput per GPU only where the GPUs of the measured replicas are known (``request_figures``' count, never
re-derived here). A row without request timings falls back to the row's own p50 columns.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from console.errors import InputError
from console.readmodel.curve_validity import PointValidity, point_validity
from console.readmodel.energy import MIN_SAMPLES
from console.readmodel.request_figures import DEFINITIONS as REQUEST_DEFINITIONS
from console.readmodel.request_figures import request_figures
from console.readmodel.results import bench_row
from console.store import Store, StoreError
from console.tails import min_queries

P99_REQUESTS = min_queries(0.99)
P90_REQUESTS = min_queries(0.90)
MINIMUMS = (
    f"each point states what it rests on: its succeeded requests pooled over its repeats (a p99 needs at least "
    f"{P99_REQUESTS}, a p90 {P90_REQUESTS}: MLPerf LoadGen's early-stopping minimum at 99% confidence) and its "
    f"shortest measurement window (energy and validity need {MIN_SAMPLES} GPU samples inside it, 1 Hz, where the "
    "GPUs are sampled)"
)
"""The minimum request count and duration every point is held to, said once beside every curve."""

CURVE_DEFINITIONS: dict[str, str] = {
    "out tok/s": "output tokens per second of the node, the median of the point's repeats (min-max beside it)",
    "out tok/s per GPU": REQUEST_DEFINITIONS["per GPU"] + "; blank where they are not known (CPU replicas)",
    "interactivity (1000/TPOT)": REQUEST_DEFINITIONS["interactivity (1000/TPOT)"] + ", median of the repeats",
    "interactivity (per slot)": REQUEST_DEFINITIONS["interactivity (per slot)"] + ", median of the repeats",
    "rate": "requests/s a rate point's arrivals were paced at (Poisson, or gamma of the curve's burstiness), "
    "its concurrency the cap on requests in flight; null: a closed loop of C streams",
    "ttft p50": "median time to the first token over the run's requests, ms, median of the repeats",
    "tpot p50": "median " + REQUEST_DEFINITIONS["tpot"] + ", ms, median of the repeats",
    "requests": MINIMUMS,
}


@dataclass(frozen=True)
class RunPoint:
    """One bench row of a point, read as a curve needs it."""

    row_id: int
    out_tok_per_s: float | None
    gpus: int | None
    interactivity_tpot: float | None
    interactivity_per_slot: float | None
    ttft_ms_p50: float | None
    tpot_ms_p50: float | None
    requests: int | None = (
        None  # requests that succeeded, from its timings (else the row's count less failed)
    )
    window_s: float | None = None  # its measurement window, as the load generator timed it


@dataclass(frozen=True)
class CurvePointView:
    concurrency: int
    position: int
    state: str  # pending, running, done, failed
    reason: str | None
    repeat_group: str | None
    runs: tuple[RunPoint, ...]
    started_ms: int | None
    ended_ms: int | None
    validity: PointValidity | None = None  # None until the point has rows (curve_validity.py)
    replaced_run_ids: tuple[int, ...] = ()  # rows of its earlier, invalid measurements (--rerun-invalid)
    rate: float | None = (
        None  # requests/s its arrivals were paced at (concurrency: the cap); None: closed loop
    )

    @property
    def requests(self) -> int | None:
        """Succeeded requests pooled over the point's repeats: what its tails rest on."""
        counts = [r.requests for r in self.runs]
        return None if not counts or None in counts else sum(c for c in counts if c is not None)

    @property
    def shortest_window_s(self) -> float | None:
        windows = [r.window_s for r in self.runs if r.window_s is not None]
        return min(windows) if windows else None

    @property
    def tail_claim(self) -> str:
        """Which tail the pooled requests can support (console/tails.py ``min_queries``): a p99 needs
        P99_REQUESTS, a p90 P90_REQUESTS; fewer, and the tail is shown but bounds nothing."""
        n = self.requests
        if n is None:
            return "-"
        if n >= P99_REQUESTS:
            return "p99"
        return f"p90 (p99 needs {P99_REQUESTS})" if n >= P90_REQUESTS else f"none (p90 needs {P90_REQUESTS})"

    @property
    def state_text(self) -> str:
        """The point's state as every view says it: a stored point is valid, or invalid with its reasons (kept
        and shown either way); any other state with its reason."""
        if self.state == "done" and self.validity is not None:
            return "valid" if self.validity.valid else f"invalid: {'; '.join(self.validity.reasons)}"
        return self.state if self.reason is None else f"{self.state}: {self.reason}"

    @property
    def out_tok_per_s(self) -> float | None:
        return _median([r.out_tok_per_s for r in self.runs])

    @property
    def out_low(self) -> float | None:
        values = [r.out_tok_per_s for r in self.runs if r.out_tok_per_s is not None]
        return min(values) if values else None

    @property
    def out_high(self) -> float | None:
        values = [r.out_tok_per_s for r in self.runs if r.out_tok_per_s is not None]
        return max(values) if values else None

    @property
    def gpus(self) -> int | None:
        """The GPUs of the measured replicas when every run knows the same count; None otherwise."""
        counts = {r.gpus for r in self.runs}
        return counts.pop() if len(counts) == 1 else None

    @property
    def out_per_gpu(self) -> float | None:
        out, gpus = self.out_tok_per_s, self.gpus
        return None if out is None or not gpus else out / gpus

    @property
    def interactivity_tpot(self) -> float | None:
        return _median([r.interactivity_tpot for r in self.runs])

    @property
    def interactivity_per_slot(self) -> float | None:
        return _median([r.interactivity_per_slot for r in self.runs])

    @property
    def ttft_ms_p50(self) -> float | None:
        return _median([r.ttft_ms_p50 for r in self.runs])

    @property
    def tpot_ms_p50(self) -> float | None:
        return _median([r.tpot_ms_p50 for r in self.runs])

    def summary(self) -> dict[str, object]:
        """The point as ``campaign curve --json`` gives it: figures named as in CURVE_DEFINITIONS."""
        return {
            "concurrency": self.concurrency,
            "rate": self.rate,
            "state": self.state,
            "reason": self.reason,
            "repeat_group": self.repeat_group,
            "bench_run_ids": [r.row_id for r in self.runs],
            "out_tok_per_s": self.out_tok_per_s,
            "out_tok_per_s_min": self.out_low,
            "out_tok_per_s_max": self.out_high,
            "gpus": self.gpus,
            "out_tok_per_s_per_gpu": self.out_per_gpu,
            "interactivity_tpot": self.interactivity_tpot,
            "interactivity_per_slot": self.interactivity_per_slot,
            "ttft_ms_p50": self.ttft_ms_p50,
            "tpot_ms_p50": self.tpot_ms_p50,
            "started_ms": self.started_ms,
            "ended_ms": self.ended_ms,
            "valid": None if self.validity is None else self.validity.valid,
            "invalid_reasons": [] if self.validity is None else list(self.validity.reasons),
            "notes": [] if self.validity is None else list(self.validity.notes),
            "replaced_run_ids": list(self.replaced_run_ids),
            "requests": self.requests,
            "shortest_window_s": self.shortest_window_s,
            "tails_supported": self.tail_claim,
        }


@dataclass(frozen=True)
class CurveView:
    id: int
    arm: str
    box: str
    shape: str
    concurrency: tuple[int, ...]
    repeat: int
    prompts_per_slot: int | None
    state: str  # running, done, interrupted
    created_ms: int
    updated_ms: int
    points: tuple[CurvePointView, ...]
    rate: tuple[float, ...] | None = None  # a rate curve's rates (req/s), ``concurrency`` its cap or none
    burstiness: float | None = None  # gamma shape of a rate curve's arrivals (1: Poisson)

    @property
    def done(self) -> int:
        return sum(1 for p in self.points if p.state == "done")

    def summary(self) -> dict[str, object]:
        return {
            "id": self.id,
            "arm": self.arm,
            "box": self.box,
            "shape": self.shape,
            "concurrency": list(self.concurrency),
            "repeat": self.repeat,
            "prompts_per_slot": self.prompts_per_slot,
            "rate": None if self.rate is None else list(self.rate),
            "burstiness": self.burstiness,
            "state": self.state,
            "created_ms": self.created_ms,
            "updated_ms": self.updated_ms,
        }


def _median(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _run_point(store: Store, row_id: int) -> RunPoint:
    """One row's figures from its request timings; a row without them (none stored) from its own columns."""
    try:
        f = request_figures(store, str(row_id))
    except InputError:
        row = bench_row(store, str(row_id))
        ok = None if row.requests is None else row.requests - (row.failed or 0)
        return RunPoint(
            row.id,
            row.out_tok_per_s,
            None,
            row.per_tpot_p50,
            row.per_slot,
            row.ttft_ms_p50,
            row.tpot_ms_p50,
            ok,
            row.duration_s,
        )
    tails = {t.name: t for t in f.tails}
    return RunPoint(
        row_id=f.bench.id,
        out_tok_per_s=f.bench.out_tok_per_s,
        gpus=f.gpus,
        interactivity_tpot=f.interactivity_tpot,
        interactivity_per_slot=f.interactivity_per_slot,
        ttft_ms_p50=tails["ttft"].p50,
        tpot_ms_p50=tails["tpot"].p50,
        requests=f.ok,
        window_s=f.bench.duration_s,
    )


def curve(store: Store, curve_id: int) -> CurveView:
    """The curve ``curve_id`` with each point's figures; an unknown id is a one-line InputError."""
    try:
        c = store.curves.get(curve_id)
    except StoreError as exc:
        raise InputError(
            f"no curve #{curve_id} in {store.path}", "`campaign curve ARM ...` starts one"
        ) from exc
    points = tuple(
        CurvePointView(
            concurrency=p.concurrency,
            position=p.position,
            state=p.state,
            reason=p.reason,
            repeat_group=p.repeat_group,
            runs=tuple(_run_point(store, i) for i in p.bench_run_ids) if p.state == "done" else (),
            started_ms=p.started_ms,
            ended_ms=p.ended_ms,
            validity=point_validity(store, p.bench_run_ids, paced=p.rate is not None)
            if p.state == "done"
            else None,
            replaced_run_ids=p.replaced_run_ids,
            rate=p.rate,
        )
        for p in store.curves.points(curve_id)
    )
    return CurveView(
        c.id,
        c.arm,
        c.box,
        c.shape,
        c.concurrency,
        c.repeat,
        c.prompts_per_slot,
        c.state,
        c.created_ms,
        c.updated_ms,
        points,
        c.rate,
        c.burstiness,
    )


def curves(store: Store) -> list[CurveView]:
    """Every curve, oldest first."""
    return [curve(store, c.id) for c in store.curves.all()]
