"""A bench run's GPU energy over the run's measurement window: NVML's energy counter where it exists, else
the agent's 1 Hz power samples integrated.

Why the counter first: the agent journals each GPU's cumulative energy (``gpu_samples.energy_mj``, NVML's
``nvmlDeviceGetTotalEnergyConsumption``, which the driver updates every 100 ms) beside its instantaneous
board power (``power_w``) once a second. The counter needs no integration and sees the spikes between
samples; when every measured GPU has counter readings straddling both window edges, a GPU's joules are the
counter's difference, its value at each edge interpolated linearly between the readings that straddle it.
A counter that goes backwards there (the driver reloaded) makes the figure invalid, saying so. Where any
GPU lacks the counter (nvidia-smi boxes, older agents, GPUs without it) every GPU is integrated from samples,
so the GPUs' joules are measured alike, and ``RunEnergy.source_note`` names the GPU that forced it.

The samples method is InferenceX's (``utils/aggregate_power.py``): each GPU is integrated on its own by the
trapezoidal rule, its power at the window's two edges linearly interpolated between the samples that
straddle them, and the GPUs' joules summed. Its validity rule is kept too: a sample gap over 3 s inside the
window makes the figure invalid. Two rules are added: fewer than 2 samples inside the window on a GPU (1 Hz
cannot measure a shorter run), and a power limit read back that changed during the window (the run then
measured two configurations, and its joules belong to neither).

Only the GPUs the run measured count: those of its replicas' launches. When they are not recorded the
figure is None and ``energy_note`` says why; summing every GPU of the box would charge the run for its
neighbours. Times are integer UTC epoch ms; power in W; energy in J. Only reads.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from console.readmodel.records import ResultRow
from console.store import Store
from console.store.jsonutil import json_list_or_none
from console.timeutil import fmt_utc, from_ms

COUNTER_SOURCE = "NVML energy counter"
SAMPLES_SOURCE = "GPU samples, 1 Hz"
ENERGY_SOURCE = f"{COUNTER_SOURCE} where every measured GPU has one, else {SAMPLES_SOURCE}"
"""Where the joules come from: the counter read (not integrated) when all of a run's GPUs journal it over the
window, else the power samples integrated. A figure's own ``RunEnergy.source`` says which of the two."""
MAX_GAP_MS = 3_000
"""InferenceX's rule: a gap between two samples (or a window edge and its nearest sample) over 3 s inside the
window leaves the power there unknown, and the figure invalid."""
MIN_SAMPLES = 2
"""Fewer samples than this inside the window on a GPU: too short a run for 1 Hz sampling to measure."""

GpuKey = tuple[str, int]
"""(box, GPU index): how ``gpu_samples`` names a GPU."""
Sample = tuple[int, float]
"""(t_ms, power_w): one power reading of one GPU; (t_ms, energy_mj) for its energy counter."""


@dataclass(frozen=True)
class GpuEnergy:
    """One GPU over the window: its joules, the samples inside it, and the widest gap the integral bridged."""

    box: str
    gpu: int
    joules: float  # 0.0 when the GPU has no power sample near the window (then the run is invalid)
    samples: int  # power samples inside [started_ms, ended_ms]
    max_gap_ms: int  # the widest stretch of the window between two samples, or an edge and its nearest
    sampled: bool  # any power sample inside the window or within MAX_GAP_MS of it


@dataclass(frozen=True)
class RunEnergy:
    """A run's GPU energy over its measurement window, summed over the GPUs it measured.

    ``joules``: each GPU's energy counter difference over [started_ms, ended_ms] (``source`` is
    ``COUNTER_SOURCE``), else the trapezoidal integral of its power (``SAMPLES_SOURCE``), summed (J).
    ``avg_power_w``: joules / window seconds, the measured GPUs together (W); InferenceX's ``avg_power_w`` is
    per GPU (here ``avg_power_per_gpu_w``) and its ``avg_total_gpu_power_w`` is this one.
    ``j_per_out_token``: joules / output tokens, the tokens being out_tok_per_s x duration_s, the load
    generator's own count. ``j_per_total_token``: the same over input plus output tokens.
    ``out_tok_per_s_per_w``: out_tok_per_s / avg_power_w, i.e. output tokens per joule.
    ``valid``: False when the samples cannot support the figure; ``reasons`` then says why, GPU by GPU.
    """

    source: str
    started_ms: int
    ended_ms: int
    gpus: tuple[GpuEnergy, ...]
    joules: float
    avg_power_w: float
    j_per_out_token: float | None
    j_per_total_token: float | None
    out_tok_per_s_per_w: float | None
    valid: bool
    reasons: tuple[str, ...]
    source_note: str | None
    """Why samples were used although some GPU had a counter (the GPUs without one), else None."""

    @property
    def window_s(self) -> float:
        return (self.ended_ms - self.started_ms) / 1000

    @property
    def avg_power_per_gpu_w(self) -> float:
        return self.avg_power_w / len(self.gpus) if self.gpus else 0.0


def power_at(samples: Sequence[Sample], t_ms: int) -> float:
    """A GPU's power at ``t_ms``: linearly interpolated between the samples straddling it (InferenceX); past
    the last sample (or before the first) the nearest is held, and the gap rule judges whether that is fair.
    ``samples`` is sorted by time and not empty."""
    times = [t for t, _ in samples]
    i = bisect.bisect_left(times, t_ms)
    if i < len(samples) and times[i] == t_ms:
        return samples[i][1]
    if i == 0:
        return samples[0][1]
    if i == len(samples):
        return samples[-1][1]
    (t0, p0), (t1, p1) = samples[i - 1], samples[i]
    return p0 + (p1 - p0) * (t_ms - t0) / (t1 - t0)


def integrate_power(samples: Sequence[Sample], started_ms: int, ended_ms: int) -> float:
    """Joules of one GPU over [started_ms, ended_ms]: the trapezoid over its samples inside the window and its
    power interpolated at both edges (``power_at``). ``samples`` is sorted by time and not empty."""
    points = [(started_ms, power_at(samples, started_ms))]
    points += [(t, p) for t, p in samples if started_ms < t < ended_ms]
    points.append((ended_ms, power_at(samples, ended_ms)))
    return sum((t1 - t0) / 1000 * (p0 + p1) / 2 for (t0, p0), (t1, p1) in pairwise(points))


def max_gap_ms(samples: Sequence[Sample], started_ms: int, ended_ms: int) -> int:
    """The widest stretch of the window without a sample: between the sample at or before the start (else the
    start itself) and the one at or after the end (else the end), as InferenceX measures it."""
    times = [t for t, _ in samples]
    first = bisect.bisect_right(times, started_ms) - 1
    last = bisect.bisect_left(times, ended_ms)
    span = times[max(first, 0) : last + 1]
    if first < 0:
        span.insert(0, started_ms)
    if last >= len(times):
        span.append(ended_ms)
    return max((b - a for a, b in pairwise(span)), default=0)


def _clock(ms: int) -> str:
    return from_ms(ms).strftime("%H:%M:%S")


def _limit_change(key: GpuKey, limits: Sequence[tuple[int, float]]) -> str | None:
    """The first change of the power limit read back (enforced, else requested) among ``limits``, the GPU's
    readings inside the window and the last one before it, as a reason naming the GPU, both limits, when."""
    changes = [(a, b) for a, b in pairwise(limits) if a[1] != b[1]]
    if not changes:
        return None
    (t0, w0), (t1, w1) = changes[0]
    more = f" ({len(changes)} changes in all)" if len(changes) > 1 else ""
    return (
        f"GPU {key[1]} on {key[0]}: the power limit read back changed from {w0:g} W to {w1:g} W between "
        f"{fmt_utc(t0)} and {_clock(t1)} UTC{more}: the run measured two configurations"
    )


def _gpu_reasons(key: GpuKey, samples: Sequence[Sample], inside: int, gap: int) -> list[str]:
    where = f"GPU {key[1]} on {key[0]}"
    if not samples:
        return [f"{where}: no power sample within {MAX_GAP_MS / 1000:g} s of the window"]
    reasons = []
    if inside < MIN_SAMPLES:
        reasons.append(f"{where}: {inside} power sample(s) inside the window, fewer than {MIN_SAMPLES}")
    if gap > MAX_GAP_MS:
        reasons.append(
            f"{where}: a {gap / 1000:g} s gap between power samples (over {MAX_GAP_MS / 1000:g} s)"
        )
    return reasons


def measured_gpus(store: Store, bench: ResultRow) -> tuple[GpuKey, ...] | None:
    """The GPUs the run measured: its replicas' launches' GPUs (the row's own launch when it names no
    replicas), each on its launch's box. None when any launch or its GPU list is not recorded; () when the
    replicas ran on CPUs."""
    launch_ids = [
        r["launch_id"]
        for r in store.rows("SELECT launch_id FROM bench_replicas WHERE bench_run_id = ?", [bench.id])
    ] or ([bench.launch_id] if bench.launch_id else [])
    if not launch_ids or None in launch_ids:
        return None
    keys: list[GpuKey] = []
    for launch_id in launch_ids:
        rows = store.rows("SELECT box, gpus FROM launches WHERE id = ?", [launch_id])
        gpus = json_list_or_none(rows[0]["gpus"]) if rows else None
        if gpus is None:
            return None
        keys += [(rows[0]["box"], int(g)) for g in gpus]
    return tuple(sorted(set(keys)))


def _window(bench: ResultRow) -> tuple[int, int] | None:
    """The run's measurement window as the load generator timed it; None when it did not (an imported row,
    or one measured before the window was journaled): ``started_ms`` alone is then the result's time."""
    if bench.started_ms is None or bench.ended_ms is None or bench.ended_ms <= bench.started_ms:
        return None
    return bench.started_ms, bench.ended_ms


def _readings(store: Store, key: GpuKey, start: int, end: int) -> list[dict[str, Any]]:
    """One GPU's readings inside the window and within ``MAX_GAP_MS`` of it (the edges' neighbours)."""
    return store.rows(
        """SELECT t_ms, power_w, energy_mj, coalesce(enforced_limit_w, power_limit_w) AS limit_w FROM gpu_samples
           WHERE box = ? AND gpu = ? AND t_ms BETWEEN ? AND ? ORDER BY t_ms""",
        [key[0], key[1], start - MAX_GAP_MS, end + MAX_GAP_MS],
    )


def _limits(rows: Sequence[dict[str, Any]], start: int, end: int) -> list[tuple[int, float]]:
    """The limits read back inside the window, after the last reading before it (a change between that one
    and the first inside happened while the run may already have been measuring)."""
    read = [(int(r["t_ms"]), float(r["limit_w"])) for r in rows if r["limit_w"] is not None]
    before = [x for x in read if x[0] < start][-1:]
    return before + [x for x in read if start <= x[0] <= end]


def counter_span(counter: Sequence[Sample], started_ms: int, ended_ms: int) -> Sequence[Sample] | None:
    """The counter readings from the last at or before the window's start to the first at or after its end;
    None when the readings do not straddle both edges. ``counter`` is sorted by time."""
    times = [t for t, _ in counter]
    first = bisect.bisect_right(times, started_ms) - 1
    last = bisect.bisect_left(times, ended_ms)
    return None if first < 0 or last >= len(times) else counter[first : last + 1]


def counter_joules(span: Sequence[Sample], started_ms: int, ended_ms: int) -> float:
    """Joules of one GPU from its energy counter: its value at the end minus at the start, each interpolated
    (``power_at`` works on any reading) within ``span`` (``counter_span``), mJ to J."""
    return (power_at(span, ended_ms) - power_at(span, started_ms)) / 1000


def _counter_reset(key: GpuKey, span: Sequence[Sample]) -> str | None:
    back = [(a, b) for a, b in pairwise(span) if b[1] < a[1]]
    if not back:
        return None
    (_, v0), (t1, v1) = back[0]
    return (
        f"GPU {key[1]} on {key[0]}: the NVML energy counter went backwards from {v0:.0f} to {v1:.0f} mJ "
        f"at {fmt_utc(t1)} (the driver reloaded): its joules over the window are unknown"
    )


@dataclass(frozen=True)
class _Gpu:
    """One GPU's readings near the window, as ``_per_gpu`` turns them into joules either way."""

    key: GpuKey
    rows: list[dict[str, Any]]
    span: Sequence[Sample] | None  # energy counter readings straddling the window, None when they do not


def _gpu(store: Store, key: GpuKey, start: int, end: int) -> _Gpu:
    rows = _readings(store, key, start, end)
    counter = [(int(r["t_ms"]), float(r["energy_mj"])) for r in rows if r["energy_mj"] is not None]
    return _Gpu(key, rows, counter_span(counter, start, end))


def _per_gpu(gpu: _Gpu, start: int, end: int, by_counter: bool) -> tuple[GpuEnergy, list[str]]:
    """One GPU's energy over the window and what invalidates it: by its counter (a reset), or by its
    samples (no sample near it at all, too few, a gap); a power limit changed, either way."""
    key, rows = gpu.key, gpu.rows
    samples = [(int(r["t_ms"]), float(r["power_w"])) for r in rows if r["power_w"] is not None]
    inside = sum(1 for t, _ in samples if start <= t <= end)
    gap = max_gap_ms(samples, start, end) if samples else end - start
    if by_counter and gpu.span is not None:
        reset = _counter_reset(key, gpu.span)
        reasons = [reset] if reset else []
        joules = 0.0 if reset else counter_joules(gpu.span, start, end)
    else:
        reasons = _gpu_reasons(key, samples, inside, gap)
        joules = integrate_power(samples, start, end) if samples else 0.0
    change = _limit_change(key, _limits(rows, start, end))
    if change:
        reasons.append(change)
    sampled = bool(samples) or (by_counter and gpu.span is not None)
    return (
        GpuEnergy(box=key[0], gpu=key[1], joules=joules, samples=inside, max_gap_ms=gap, sampled=sampled),
        reasons,
    )


def _samples_note(gpus: Sequence[_Gpu]) -> str | None:
    """Why samples for all although some GPU journals its counter: the GPUs whose counter misses the window."""
    without = [g.key for g in gpus if g.span is None]
    if len(without) == len(gpus):
        return None
    named = ", ".join(f"GPU {gpu} on {box}" for box, gpu in without)
    return f"{SAMPLES_SOURCE} for every GPU: {named} has no NVML energy counter reading on both sides of the window"


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    return None if numerator is None or not denominator else numerator / denominator


def run_energy(store: Store, bench: ResultRow) -> RunEnergy | None:
    """The run's GPU energy over [started_ms, ended_ms] from its GPUs' energy counters, else their power
    samples (module docstring; see ``RunEnergy``).

    None when there is nothing to integrate: no measurement window, GPUs not recorded (``energy_note`` says
    so), CPU replicas, or no sample of any of its GPUs near the window (a CPU box, an imported row)."""
    window = _window(bench)
    keys = measured_gpus(store, bench) if window else None
    if window is None or not keys:
        return None
    start, end = window
    readings = [_gpu(store, key, start, end) for key in keys]
    by_counter = all(g.span is not None for g in readings)
    found = [_per_gpu(g, start, end, by_counter) for g in readings]
    gpus = [g for g, _ in found]
    if not any(g.sampled for g in gpus):
        return None
    reasons = [reason for _, why in found for reason in why]
    joules = sum(g.joules for g in gpus)
    avg_w = joules / ((end - start) / 1000)
    duration_s = bench.duration_s or (end - start) / 1000
    out_tokens = None if bench.out_tok_per_s is None else bench.out_tok_per_s * duration_s
    all_tokens = None if bench.total_tok_per_s is None else bench.total_tok_per_s * duration_s
    return RunEnergy(
        source=COUNTER_SOURCE if by_counter else SAMPLES_SOURCE,
        started_ms=start,
        ended_ms=end,
        gpus=tuple(gpus),
        joules=joules,
        avg_power_w=avg_w,
        j_per_out_token=_ratio(joules, out_tokens),
        j_per_total_token=_ratio(joules, all_tokens),
        out_tok_per_s_per_w=_ratio(bench.out_tok_per_s, avg_w),
        valid=not reasons,
        reasons=tuple(reasons),
        source_note=None if by_counter else _samples_note(readings),
    )


def energy_note(store: Store, bench: ResultRow) -> str | None:
    """Why a run whose box has power samples over its window has no energy figure: its GPUs are not recorded.
    None otherwise (a figure exists, or the box has no samples then: nothing to say about a CPU box)."""
    window = _window(bench)
    if window is None or bench.box is None or measured_gpus(store, bench) is not None:
        return None
    sampled = store.scalar(
        "SELECT 1 FROM gpu_samples WHERE box = ? AND t_ms BETWEEN ? AND ? AND power_w IS NOT NULL LIMIT 1",
        [bench.box, window[0], window[1]],
    )
    if not sampled:
        return None
    return (
        f"{bench.box} has power samples over the run, but the GPUs its replicas used are not recorded: "
        "summing every GPU of the box would charge the run for its neighbours"
    )
