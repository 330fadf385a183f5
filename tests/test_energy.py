"""A bench run's GPU energy: NVML's energy counter difference where every measured GPU journals it across the
window, else the trapezoid over the agent's power samples with its edges interpolated, summed over the GPUs
the run measured, J/out token and out tok/s per W beside the throughput, and an invalid figure (with its
reasons) when a gap, too few samples, a power limit change or a counter reset leaves the joules unknown. The state.db is built through the store's own ingest, as a box journals it."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.loadgen.metrics import TIMING_COLUMNS
from console.readmodel import bench_row, energy_note, request_figures, run_energy
from console.readmodel.energy import COUNTER_SOURCE, SAMPLES_SOURCE, integrate_power, power_at
from console.store import Box, Store
from tests.support.cli import run_cli

T0 = 1_788_658_020_000  # 2026-09-06 01:27:00 UTC: the run's window is [T0, T0 + 10 s]
WINDOW_MS = 10_000
OUT_TOK_PER_S = 800.0
IN_TOK_PER_S = 400.0

Power = Callable[[int, int], dict[str, float]]
"""(gpu, t_ms) -> that GPU's reading at t_ms (power_w and the limits)."""


def _constant(watts: float, limit: float = 600.0) -> Power:
    return lambda gpu, t: {"power_w": watts, "enforced_limit_w": limit, "power_limit_w": limit}


def _timings(n: int = 20) -> dict[str, Any]:
    rows = [[float(i), 0, 20.0, 10.0, 10.0, 12.0, 340.0, 16, 33, None] for i in range(n)]
    return {"columns": list(TIMING_COLUMNS), "rows": rows, "omitted": 0}


def _state(
    db: Path,
    power: Power | None,
    times: list[int],
    launches: dict[str, list[int] | None],
    replicas: bool = False,
    window_ms: int = WINDOW_MS,
) -> int:
    """A box ``b1`` with ``launches`` (id -> GPUs; None: not journaled), a gpu_sample for GPUs 0 and 1 at
    each of ``times`` (ms after T0) unless ``power`` is None (a CPU box), and one bench run over
    [T0, T0 + window_ms] measuring every launch (as replicas of a node run when ``replicas``)."""
    events: list[dict[str, Any]] = []
    for launch_id, gpus in launches.items():
        state = {"kind": "launch_state", "launch_id": launch_id, "arm": "qwen", "state": "serving"}
        events.append({**state, "t_ms": T0 - 60_000, **({"gpus": gpus} if gpus is not None else {})})
    for t in times if power is not None else []:
        assert power is not None
        events.append(
            {"kind": "gpu_sample", "t_ms": T0 + t, "gpus": [{"gpu": g, **power(g, t)} for g in (0, 1)]}
        )
    with Store(db, clock=lambda: T0) as store:
        store.boxes.add(Box(name="b1", host="127.0.0.1", ssh_user="u"))
        report = store.ingest.batch("b1", [{"v": 1, "seq": i + 1, **e} for i, e in enumerate(events)])
        assert not report.quarantined, report.quarantined
        ids = list(launches)
        result: dict[str, Any] = {
            "requests": 20,
            "failed": 0,
            "out_tok_per_s": OUT_TOK_PER_S,
            "in_tok_per_s": IN_TOK_PER_S,
            "duration_s": window_ms / 1000,
            "started_ms": T0,
            "ended_ms": T0 + window_ms,
            "request_timings": _timings(),
        }
        if replicas:
            result["per_url"] = [
                {"base_url": f"http://127.0.0.1:{8000 + i}", "requests": 10} for i in range(len(ids))
            ]
        row = {**result, "arm": "qwen", "shape": "short", "concurrency": 8, "box": "b1", "run_id": "bench-1"}
        return store.results.add_bench_run(
            {
                **row,
                **({"launch_ids": ids} if replicas else {"launch_id": ids[0]}),
                "t_ms": T0 + window_ms,
                "raw": result,
            }
        )


STRADDLING = [-500 + 1000 * k for k in range(12)]
"""1 Hz samples from 0.5 s before the window to 0.5 s after it: both edges fall between two samples."""


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "state.db"


def _energy(db: Path) -> Any:
    with Store(db, read_only=True) as store:
        return run_energy(store, bench_row(store, "bench-1"))


def test_constant_300_w_on_two_gpus_over_10_s_is_6000_j_and_per_token_figures_follow(db: Path) -> None:
    _state(db, _constant(300.0), STRADDLING, {"L1": [0, 1]})
    e = _energy(db)
    assert e is not None and e.valid and e.reasons == ()
    assert e.joules == pytest.approx(6_000.0)
    assert [(g.gpu, g.joules, g.samples) for g in e.gpus] == [
        (0, pytest.approx(3_000.0), 10),
        (1, pytest.approx(3_000.0), 10),
    ]
    assert e.avg_power_w == pytest.approx(600.0) and e.avg_power_per_gpu_w == pytest.approx(300.0)
    assert e.j_per_out_token == pytest.approx(6_000.0 / (OUT_TOK_PER_S * 10.0))
    assert e.j_per_total_token == pytest.approx(6_000.0 / ((OUT_TOK_PER_S + IN_TOK_PER_S) * 10.0))
    assert e.out_tok_per_s_per_w == pytest.approx(OUT_TOK_PER_S / 600.0)
    assert e.source == SAMPLES_SOURCE and e.source_note is None  # no GPU journals a counter here

    code, out, _ = run_cli(db, "requests", "bench-1")
    assert code == 0
    line = next(x for x in out.splitlines() if x.strip().startswith("energy"))
    assert f"energy ({SAMPLES_SOURCE})" in line  # each figure names its own source
    assert "6,000 J over the 10.0 s window" in line and "0.75 J/out token" in line
    assert "1.333 out tok/s per W" in line and "600 W average (2 GPUs)" in line
    assert "per GPU (2 GPUs): 400.0 out tok/s" in out  # the same GPUs as the energy sums

    code, out, _ = run_cli(db, "requests", "bench-1", "--json")
    data = json.loads(out)
    assert data["energy"]["joules"] == pytest.approx(6_000.0) and data["energy"]["valid"] is True
    assert data["energy"]["source"] == SAMPLES_SOURCE and data["energy_note"] is None
    assert "energy" in data["definitions"] and "J/out token" in data["definitions"]


def test_the_window_edges_are_interpolated_between_the_samples_that_straddle_them(db: Path) -> None:
    """A ramp of 10 W a second: the trapezoid is exact for it only when the edges are interpolated (holding
    the nearest sample would be off by 5 W over half a second at each edge)."""
    _state(db, lambda g, t: {"power_w": 100.0 + t / 100}, STRADDLING, {"L1": [0, 1]})
    e = _energy(db)
    assert e is not None and e.valid
    per_gpu = 100.0 * 10 + 0.5 * 100.0 * 10  # 100 W + 10 W/s over 10 s: mean 150 W
    assert e.joules == pytest.approx(2 * per_gpu)


def test_the_replicas_gpus_are_the_ones_measured(db: Path) -> None:
    """A node run of two replicas, one GPU each: both count, through bench_replicas."""
    _state(db, _constant(300.0), STRADDLING, {"L1": [0], "L2": [1]}, replicas=True)
    e = _energy(db)
    assert e is not None and [(g.box, g.gpu) for g in e.gpus] == [("b1", 0), ("b1", 1)]
    assert e.joules == pytest.approx(6_000.0)


def test_only_the_gpus_the_run_measured_count(db: Path) -> None:
    _state(db, _constant(300.0), STRADDLING, {"L1": [1]})
    e = _energy(db)
    assert e is not None and [g.gpu for g in e.gpus] == [1] and e.joules == pytest.approx(3_000.0)


def test_a_5_s_gap_inside_the_window_makes_it_invalid_with_the_reason(db: Path) -> None:
    times = [t for t in STRADDLING if not 2_500 < t < 7_500]  # nothing between 2.5 s and 7.5 s
    _state(db, _constant(300.0), times, {"L1": [0, 1]})
    e = _energy(db)
    assert e is not None and not e.valid
    assert e.joules == pytest.approx(6_000.0)  # integrated all the same, and shown as invalid
    assert any("GPU 0 on b1" in r and "5 s gap" in r for r in e.reasons), e.reasons
    assert any("GPU 1 on b1" in r for r in e.reasons)
    code, out, _ = run_cli(db, "requests", "bench-1")
    energy = out[out.index("  energy (") :]
    assert "not valid" in energy and " J over" not in energy
    assert "    GPU 0 on b1: a 5 s gap between power samples (over 3 s)" in energy.splitlines()


def test_a_power_limit_change_mid_window_makes_it_invalid_naming_both_limits(db: Path) -> None:
    def power(gpu: int, t: int) -> dict[str, float]:
        limit = 400.0 if gpu == 0 and t > 4_000 else 600.0
        return {"power_w": 300.0, "enforced_limit_w": limit, "power_limit_w": limit}

    _state(db, power, STRADDLING, {"L1": [0, 1]})
    e = _energy(db)
    assert e is not None and not e.valid
    [reason] = e.reasons
    assert "GPU 0 on b1" in reason and "from 600 W to 400 W" in reason
    assert "2026-09-06 01:27:03 UTC and 01:27:04 UTC" in reason  # the two samples around the change


def test_fewer_than_2_samples_in_the_window_is_invalid(db: Path) -> None:
    _state(db, _constant(300.0), [-500, 500, 1_500], {"L1": [0]}, window_ms=1_000)
    e = _energy(db)
    assert e is not None and not e.valid
    assert e.joules == pytest.approx(300.0)
    assert any("1 power sample(s) inside the window, fewer than 2" in r for r in e.reasons), e.reasons


def test_a_cpu_run_has_no_energy_and_the_cli_says_nothing_about_it(db: Path) -> None:
    _state(db, None, [], {"L1": []})
    with Store(db, read_only=True) as store:
        bench = bench_row(store, "bench-1")
        assert run_energy(store, bench) is None and energy_note(store, bench) is None
        figures = request_figures(store, "bench-1")
    assert figures.energy is None and figures.energy_note is None
    code, out, _ = run_cli(db, "requests", "bench-1")
    assert code == 0 and "energy" not in out.lower()
    code, out, _ = run_cli(db, "requests", "bench-1", "--json")
    assert json.loads(out)["energy"] is None


def test_gpus_not_recorded_are_not_guessed_and_the_cli_says_why(db: Path) -> None:
    """The box has power samples over the run, but the launch never said which GPUs it used: summing the
    whole box would charge the run for its neighbours, so there is no figure, and the reason is shown."""
    _state(db, _constant(300.0), STRADDLING, {"L1": None})
    with Store(db, read_only=True) as store:
        bench = bench_row(store, "bench-1")
        assert run_energy(store, bench) is None
        note = energy_note(store, bench)
    assert note is not None and "not recorded" in note
    code, out, _ = run_cli(db, "requests", "bench-1")
    assert "not computed" in out and "not recorded" in out


def test_a_gpu_box_without_samples_over_the_run_has_no_figure(db: Path) -> None:
    _state(db, _constant(300.0), [60_000, 61_000], {"L1": [0, 1]})
    assert _energy(db) is None


_series = st.lists(
    st.tuples(st.integers(-5_000, 15_000), st.floats(0.0, 1_500.0, allow_nan=False)), min_size=1, max_size=40
).map(lambda xs: sorted(dict(xs).items()))


@settings(max_examples=300, deadline=None)
@given(samples=_series, start=st.integers(-2_000, 8_000), length=st.integers(1, 12_000))
def test_the_trapezoid_lies_between_min_and_max_power_times_the_window(
    samples: list[tuple[int, float]], start: int, length: int
) -> None:
    end = start + length
    joules = integrate_power(samples, start, end)
    powers = [p for _, p in samples]
    window_s = length / 1000
    assert min(powers) * window_s - 1e-6 <= joules <= max(powers) * window_s + 1e-6
    assert min(powers) - 1e-9 <= power_at(samples, start) <= max(powers) + 1e-9


E0_MJ = 9_876_543_210
"""An energy counter's value at T0: mJ since the driver loaded, as large as a box up for days reads."""


def _with_counter(watts: float, counter_w: dict[int, float], limit: float = 600.0) -> Power:
    """Power samples of ``watts`` and, for each GPU in ``counter_w``, an energy counter rising at that many W
    (W x ms = mJ): a counter that disagrees with the samples shows which one a figure came from."""

    def reading(gpu: int, t: int) -> dict[str, float]:
        counter = {"energy_mj": E0_MJ + int(counter_w[gpu] * t)} if gpu in counter_w else {}
        return {**_constant(watts, limit)(gpu, t), **counter}

    return reading


def test_the_counter_difference_is_the_joules_where_every_gpu_has_one(db: Path) -> None:
    _state(db, _with_counter(300.0, {0: 310.0, 1: 320.0}), STRADDLING, {"L1": [0, 1]})
    e = _energy(db)
    assert e is not None and e.valid and e.source == COUNTER_SOURCE and e.source_note is None
    # 310 W and 320 W for 10 s from the counters (the 300 W samples would give 3,000 J each)
    assert [(g.gpu, g.joules) for g in e.gpus] == [(0, pytest.approx(3_100.0)), (1, pytest.approx(3_200.0))]
    assert e.j_per_out_token == pytest.approx(6_300.0 / (OUT_TOK_PER_S * 10.0))
    code, out, _ = run_cli(db, "requests", "bench-1", "--json")
    assert code == 0 and json.loads(out)["energy"]["source"] == COUNTER_SOURCE


def test_the_counter_is_interpolated_at_the_window_edges(db: Path) -> None:
    # the counter jumps 1,000 J between the two readings straddling the start (-500 ms, +500 ms), then
    # stays still: half the jump lies inside the window
    def power(gpu: int, t: int) -> dict[str, float]:
        return {**_constant(300.0)(gpu, t), "energy_mj": E0_MJ + (1_000_000 if t >= 500 else 0)}

    _state(db, power, STRADDLING, {"L1": [0]})
    e = _energy(db)
    assert e is not None and e.valid and e.source == COUNTER_SOURCE
    assert e.joules == pytest.approx(500.0)


def test_one_gpu_without_a_counter_means_samples_for_all_and_says_which(db: Path) -> None:
    _state(db, _with_counter(300.0, {0: 310.0}), STRADDLING, {"L1": [0, 1]})
    e = _energy(db)
    assert e is not None and e.valid and e.source == SAMPLES_SOURCE
    assert e.joules == pytest.approx(6_000.0)  # both from the 300 W samples, alike
    assert e.source_note is not None and "GPU 1 on b1 has no NVML energy counter" in e.source_note


def test_a_counter_that_does_not_straddle_the_window_end_means_samples(db: Path) -> None:
    def power(gpu: int, t: int) -> dict[str, float]:
        counter = {"energy_mj": E0_MJ + 310 * t} if t < 5_000 else {}  # an agent without it took over
        return {**_constant(300.0)(gpu, t), **counter}

    _state(db, power, STRADDLING, {"L1": [0]})
    e = _energy(db)
    assert e is not None and e.valid and e.source == SAMPLES_SOURCE
    assert e.joules == pytest.approx(3_000.0)


def test_a_counter_that_goes_backwards_makes_the_figure_invalid_saying_so(db: Path) -> None:
    def power(gpu: int, t: int) -> dict[str, float]:
        restarted = t >= 4_500  # the driver reloaded: the counter starts again from near 0
        counter = 310 * (t - 4_500) if restarted else E0_MJ + 310 * t
        return {**_constant(300.0)(gpu, t), "energy_mj": counter}

    _state(db, power, STRADDLING, {"L1": [0]})
    e = _energy(db)
    assert e is not None and not e.valid and e.source == COUNTER_SOURCE
    assert len(e.reasons) == 1 and "GPU 0 on b1: the NVML energy counter went backwards" in e.reasons[0]
    code, out, _ = run_cli(db, "requests", "bench-1")
    assert code == 0 and "went backwards" in out


def test_a_power_limit_change_is_judged_on_the_counter_path_too(db: Path) -> None:
    _state(
        db,
        lambda gpu, t: _with_counter(300.0, {0: 310.0}, limit=600.0 if t < 5_000 else 400.0)(gpu, t),
        STRADDLING,
        {"L1": [0]},
    )
    e = _energy(db)
    assert e is not None and not e.valid and e.source == COUNTER_SOURCE
    assert any("from 600 W to 400 W" in r for r in e.reasons)
