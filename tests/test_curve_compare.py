"""``campaign compare A B --at-interactivity X | --at-slo ... | --at-power W``: two arms' curves read at one
operating point, and what a million tokens cost there.

Curves are stored through the store's own API as a measured curve is (bench rows with their request
timings, points finished one by one), on a box with a price; the CLI is the real one. Figures are
hand-computed in each test's comments.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.loadgen.metrics import TIMING_COLUMNS
from console.readmodel.curve_compare import Knot, envelope, interpolate
from console.readmodel.curve_cost import box_price, goodput, usd_per_m
from console.readmodel.curves import CurvePointView
from console.readmodel.pareto import Spread
from console.store import Box, Store
from tests.support.cli import run_cli

T0 = 1_788_658_020_000
WINDOW_MS = 10_000
REQUESTS = 160
"""Requests a run: three repeats pool 480, above the 459 a p99 verdict of "meets" needs with none over
(console/tails.py: LoadGen's early stopping at 99% confidence)."""
PRICE = 3.6
"""USD an hour: 1e-3 USD a second, so $/M = 1000 / tok/s."""
IN_TOKENS, OUT_TOKENS = 16, 8

Point = tuple[int, Sequence[float], float]
"""(concurrency, output tok/s of each repeat, TPOT ms of every request): interactivity is 1000 / TPOT."""

A: list[Point] = [(1, [90, 100, 110], 10.0), (2, [290, 300, 310], 20.0), (4, [490, 500, 510], 40.0)]
"""x 100, 50, 25 tok/s/user; at x 75 (midway between C1 and C2): 200 [190-210] output tok/s."""


def _requests(streams: int, tpot: float, ttft: float = 50.0) -> list[list[Any]]:
    """REQUESTS requests of a closed loop over ``streams`` streams, each TTFT + 7 TPOT long."""
    e2e = ttft + (OUT_TOKENS - 1) * tpot
    return [
        [(k // streams) * e2e, 0, ttft, tpot, tpot, tpot, e2e, IN_TOKENS, OUT_TOKENS, None]
        for k in range(REQUESTS)
    ]


def _bench(store: Store, arm: str, c: int, k: int, out: float, rows: list[list[Any]], **extra: Any) -> int:
    """Run ``k`` of ``arm`` at C ``c``, measured over window ``k`` (WINDOW_MS long from T0)."""
    start = T0 + k * WINDOW_MS
    result: dict[str, Any] = {
        "requests": len(rows),
        "failed": sum(1 for r in rows if r[-1] is not None),
        "out_tok_per_s": out,
        "total_tok_per_s": out * (IN_TOKENS + OUT_TOKENS) / OUT_TOKENS,
        "duration_s": WINDOW_MS / 1000,
        "started_ms": start,
        "ended_ms": start + WINDOW_MS,
        "request_timings": {"columns": list(TIMING_COLUMNS), "rows": rows, "omitted": 0},
    }
    return store.results.add_bench_run(
        {
            **result,
            "arm": arm,
            "shape": extra.pop("shape", "short"),
            "concurrency": c,
            "box": extra.pop("box", "b1"),
            "run_id": f"{arm}-{extra.pop('tag', '')}-C{c}-{k}",
            "t_ms": start + WINDOW_MS,
            "raw": result,
            **extra,
        }
    )


def _journal_power(store: Store, box: str, arm: str, watts: Sequence[float], repeats: int) -> None:
    """Launch L-``arm`` serving on GPU 0 of ``box``, and GPU 0 drawing ``watts[p]`` at 1 Hz through the
    windows of point ``p``'s runs (``_curve`` gives point p windows p x repeats onwards)."""
    events: list[dict[str, Any]] = [
        {
            "kind": "launch_state",
            "launch_id": f"L-{arm}",
            "arm": arm,
            "state": "serving",
            "t_ms": T0 - 60_000,
            "gpus": [0],
        }
    ]
    for p, w in enumerate(watts):
        reading = {"gpu": 0, "power_w": w, "enforced_limit_w": 600.0, "power_limit_w": 600.0}
        first, last = p * repeats * WINDOW_MS, (p + 1) * repeats * WINDOW_MS
        events += [
            {"kind": "gpu_sample", "t_ms": T0 + t, "gpus": [reading]} for t in range(first, last, 1000)
        ]
    report = store.ingest.batch(box, [{"v": 1, "seq": i + 1, **e} for i, e in enumerate(events)])
    assert not report.quarantined, report.quarantined


def _curve(
    db: Path,
    arm: str,
    points: Sequence[Point],
    box: str = "b1",
    price: float | None = PRICE,
    watts: Sequence[float] | None = None,
    shape: str = "short",
) -> int:
    """A done curve of ``arm`` on ``box`` (added with ``price`` if new), one repeat group per point; with
    ``watts``, its launch on GPU 0 of ``box`` drawing ``watts[p]`` through point p's runs."""
    repeats = len(points[0][1])
    with Store(db, clock=lambda: T0) as store:
        if box not in {b.name for b in store.boxes.every()}:
            store.boxes.add(Box(name=box, host="127.0.0.1", ssh_user="u", price_per_hour=price))
        launch = {}
        if watts is not None:
            _journal_power(store, box, arm, watts, repeats)
            launch = {"launch_id": f"L-{arm}"}
        made = store.curves.create(arm, box, shape, [c for c, _, _ in points], repeats, None)
        for position, (c, outs, tpot) in enumerate(points):
            group = f"group-{arm}-{made.id}-C{c}"
            ids = [
                _bench(
                    store,
                    arm,
                    c,
                    position * repeats + k,
                    out,
                    _requests(c, tpot),
                    box=box,
                    tag=made.id,
                    repeat_group=group,
                    shape=shape,
                    **launch,
                )
                for k, out in enumerate(outs)
            ]
            store.curves.finish_point(made.id, position, group, ids)
        store.curves.set_state(made.id, "done")
        return made.id


def _scaled(
    points: Sequence[Point], by: float = 1.0, plus: float = 0.0, spread: float | None = None
) -> list[Point]:
    """``points`` with each repeat's output scaled and shifted; ``spread``: repeats at median -/+ spread."""
    out: list[Point] = []
    for c, outs, tpot in points:
        mid = sorted(outs)[1] * by + plus
        runs = [mid - spread, mid, mid + spread] if spread is not None else [v * by + plus for v in outs]
        out.append((c, runs, tpot))
    return out


def _compare(db: Path, *argv: str) -> tuple[int, dict[str, Any], str]:
    code, out, err = run_cli(db, "compare", *argv, "--json")
    return code, json.loads(out) if out else {}, err


def test_inside_the_range_the_curve_is_read_linearly_between_its_two_points(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    _curve(db, "a", A)
    _curve(db, "b", _scaled(A, by=1.5))  # 300 [285-315] at x 75
    code, data, err = _compare(db, "a", "b", "--at-interactivity", "75")
    assert code == 0, err
    a, b = data["a"], data["b"]
    assert a["out_tok_per_s"] == {"median": 200.0, "min": 190.0, "max": 210.0, "n": 3}
    assert [p["concurrency"] for p in a["points"]] == [2, 1] and a["measured_range"] == [25.0, 100.0]
    assert b["out_tok_per_s"]["median"] == pytest.approx(300.0)
    assert data["ratio_b_over_a"]["median"] == pytest.approx(1.5)
    assert data["ratio_b_over_a"]["min"] == pytest.approx(285 / 210)
    assert data["ratio_b_over_a"]["max"] == pytest.approx(315 / 190)
    assert data["verdict"] == "faster" and data["winner"] == "b" and data["per"] == "node"
    # $/M output tokens at 3.6 USD/h: 1000 / tok/s; total tokens are 3x the output ones here
    assert a["usd_per_m_out"] == pytest.approx(1000 / 200) and a["usd_per_m_total"] == pytest.approx(
        1000 / 600
    )

    code, out, err = run_cli(db, "compare", "a", "b", "--at-interactivity", "75")
    assert code == 0, err
    assert "200.0 [190.0-210.0]" in out and "25.0-100.0" in out and "5.000" in out
    assert "B (b) 50.0% more output tok/s per node at 75 tok/s/user (1000/TPOT)" in out


def test_at_a_measured_point_the_value_is_that_point(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    first = _curve(db, "a", A)
    second = _curve(db, "a2", _scaled(A, by=2.0))
    code, data, err = _compare(db, f"#{first}", f"#{second}", "--at-interactivity", "50")
    assert code == 0, err
    assert data["a"]["out_tok_per_s"]["median"] == 300.0 and data["b"]["out_tok_per_s"]["median"] == 600.0
    assert [p["concurrency"] for p in data["a"]["points"]] == [2]


def test_outside_the_measured_range_is_refused_naming_it(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    _curve(db, "a", A)
    _curve(db, "b", A[:2])  # x 50-100 only
    for x in ("150", "30"):  # above both; inside a's range, below b's
        code, out, err = run_cli(db, "compare", "a", "b", "--at-interactivity", x)
        assert code == 2 and out == "", (code, out, err)
        assert (
            "measured range" in err
            and "no value is extrapolated" in err
            and len(err.strip().splitlines()) == 1
        )
    assert "25.0-100.0" in run_cli(db, "compare", "a", "b", "--at-interactivity", "150")[2]
    assert (
        "curve #2 (b)'s measured range 50.0-100.0"
        in run_cli(db, "compare", "a", "b", "--at-interactivity", "30")[2]
    )


def test_overlapping_spreads_are_a_tie(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    _curve(db, "a", A)
    _curve(db, "b", _scaled(A, plus=15))  # 215 [205-225] against 200 [190-210] at x 75
    code, data, err = _compare(db, "a", "b", "--at-interactivity", "75")
    assert code == 0, err
    assert data["verdict"] == "tie" and data["winner"] is None and "inside the spreads" in data["text"]


def test_a_difference_inside_the_noise_floor_is_a_tie_and_outside_it_is_not(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    _curve(db, "a", _scaled(A, spread=1.0))  # 200 [199-201] at x 75
    _curve(db, "b", _scaled(A, by=1.05, spread=1.0))  # 210 [209-211]: 5% apart, spreads apart
    code, data, err = _compare(db, "a", "b", "--at-interactivity", "75")
    assert code == 0, err
    assert data["verdict"] == "faster" and data["winner"] == "b" and data["noise_floor"] is None

    # a control pair: arm ctl launched twice, benched alike at C2 (a point x 75 lies beside), 8% apart
    with Store(db, clock=lambda: T0) as store:
        for launch, base in (("L-ctl1", 1000.0), ("L-ctl2", 1080.0)):
            for k, out in enumerate((base - 1, base, base + 1)):
                _bench(
                    store,
                    "ctl",
                    2,
                    k,
                    out,
                    _requests(2, 20.0),
                    launch_id=launch,
                    tag=launch,
                    repeat_group=f"g-{launch}",
                )
    code, data, err = _compare(db, "a", "b", "--at-interactivity", "75")
    assert code == 0, err
    assert data["verdict"] == "tie" and data["noise_floor"] == pytest.approx(0.08)
    assert "inside the noise floor of 8.0%" in data["text"]


def test_two_curves_of_one_arm_are_not_their_own_noise_floor(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    first = _curve(db, "a", _scaled(A, spread=1.0))
    second = _curve(db, "a", _scaled(A, by=1.05, spread=1.0))  # 315 [314-316] against 300 [299-301] at C2
    code, data, err = _compare(db, f"#{first}", f"#{second}", "--at-interactivity", "50")
    assert code == 0, err
    assert data["verdict"] == "faster" and data["noise_floor"] is None, data["text"]


def test_per_slot_interactivity_reads_the_envelope_of_out_over_c(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    # out / C: C1 100, C2 150, C4 125 tok/s/user. C1 is beaten by C2 (more of both): the envelope is
    # C4 (125, 500 [490-510]) and C2 (150, 300 [290-310]); at 140, 3/5 of the way: 380 [370-390].
    _curve(db, "a", A)
    _curve(db, "b", A)
    code, data, err = _compare(db, "a", "b", "--interactivity", "per-slot", "--at-interactivity", "140")
    assert code == 0, err
    assert data["a"]["out_tok_per_s"]["median"] == pytest.approx(380.0)
    assert data["a"]["out_tok_per_s"]["min"] == pytest.approx(370.0)
    assert data["a"]["measured_range"] == [125.0, 150.0] and "output tok/s / concurrency" in data["x"]
    assert data["a"]["dropped"] == ["C1: below the curve's envelope (beaten by C2 on both medians)"]
    code, _, err = run_cli(db, "compare", "a", "b", "--interactivity", "per-slot", "--at-slo", "tpot:30")
    assert code == 2 and "--interactivity says how --at-interactivity's X is defined" in err


def test_curves_of_two_shapes_are_refused(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    _curve(db, "a", A)
    _curve(db, "b", A, shape="long")
    code, _, err = run_cli(db, "compare", "a", "b", "--at-interactivity", "50")
    assert code == 2 and "curve #1 (a) ran shape short and curve #2 (b) shape long" in err


def test_one_run_a_point_gives_no_verdict(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    _curve(db, "a", [(c, [outs[1]], tpot) for c, outs, tpot in A])
    _curve(db, "b", _scaled(A, by=3.0))
    code, data, _ = _compare(db, "a", "b", "--at-interactivity", "75")
    assert code == 1 and data["verdict"] == "no-verdict" and "one run" in data["text"]


def test_a_point_below_the_envelope_is_dropped_and_said_so(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    # C8 at x 20 makes less than C4 at x 25: more concurrency bought nothing; it is not read from
    _curve(db, "a", [*A, (8, [440, 450, 460], 50.0)])
    _curve(db, "b", _scaled(A, by=2.0))
    code, data, err = _compare(db, "a", "b", "--at-interactivity", "25")
    assert code == 0, err
    assert data["a"]["measured_range"] == [25.0, 100.0]
    assert data["a"]["dropped"] == ["C8: below the curve's envelope (beaten by C4 on both medians)"]


def test_at_an_slo_each_arm_is_read_at_its_best_point_meeting_it_and_priced_at_goodput(
    tmp_path: Path,
) -> None:
    db = tmp_path / "state.db"
    _curve(db, "a", A)  # TPOT 10, 20, 40 ms: C1 and C2 meet tpot:30, C4 misses
    _curve(db, "b", [(1, [190, 200, 210], 5.0), (2, [390, 400, 410], 28.0), (4, [690, 700, 710], 31.0)])
    code, data, err = _compare(db, "a", "b", "--at-slo", "tpot:30")
    assert code == 0, err
    assert [p["concurrency"] for p in data["a"]["points"]] == [2]
    assert [p["concurrency"] for p in data["b"]["points"]] == [2]
    assert data["ratio_b_over_a"]["median"] == pytest.approx(400 / 300) and data["verdict"] == "faster"
    # goodput: every request inside; 3 x 160 requests x 8 output tokens over 3 x 10 s = 128 tok/s
    a = data["a"]
    assert a["good_out_tok_per_s"] == pytest.approx(128.0) and a["attainment"] == 1.0
    assert a["usd_per_m_good_out"] == pytest.approx(1000 / 128)  # 7.8125
    assert a["usd_per_m_out"] == pytest.approx(1000 / 300)
    code, out, _ = run_cli(db, "compare", "a", "b", "--at-slo", "tpot:30")
    assert code == 0 and "$/M GOOD OUT" in out and "7.812" in out and "misses tpot:30" in out

    code, out, err = run_cli(db, "compare", "a", "b", "--at-slo", "tpot:4")
    assert code == 2 and "no valid point of curve #1 (a) meets tpot:4 at p99" in err
    code, _, err = run_cli(db, "compare", "a", "b", "--at-slo", "ttft=3")
    assert code == 2 and "--at-slo 'ttft=3'" in err


def test_cost_at_goodput_counts_only_the_tokens_of_requests_inside_the_slo(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    good = [[i * 10.0, 0, 100.0, 5.0, 5.0, 5.0, 135.0, IN_TOKENS, OUT_TOKENS, None] for i in range(10)]
    slow = [[i * 10.0, 0, 900.0, 5.0, 5.0, 5.0, 935.0, IN_TOKENS, OUT_TOKENS, None] for i in range(5)]
    failed = [[i * 10.0, 0, None, None, None, None, None, IN_TOKENS, 0, "HTTP 500"] for i in range(5)]
    with Store(db, clock=lambda: T0) as store:
        store.boxes.add(Box(name="b1", host="127.0.0.1", ssh_user="u", price_per_hour=PRICE))
        row = _bench(store, "a", 4, 0, 12.0, good + slow + failed)
        g = goodput(store, [row], {"ttft": 500.0})
        price = box_price(store, "b1")
    assert g is not None and g.slo.good == 10 and g.slo.n == 20
    # 10 good requests x 8 output tokens over the whole 10 s: 8 tok/s; with their input tokens, 24 tok/s
    assert g.out_tok_per_s == pytest.approx(8.0) and g.total_tok_per_s == pytest.approx(24.0)
    assert usd_per_m(price.per_hour, g.out_tok_per_s) == pytest.approx(125.0)  # 3.6 / (8 x 3600) x 1e6
    assert usd_per_m(price.per_hour, g.total_tok_per_s) == pytest.approx(3.6 / (24 * 3600) * 1e6)
    assert usd_per_m(price.per_hour, 12.0) == pytest.approx(3.6 / (12 * 3600) * 1e6)  # all tokens: cheaper


def test_a_box_without_a_price_gives_no_cost_and_says_why(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    _curve(db, "a", A, box="free", price=None)
    _curve(db, "b", _scaled(A, by=2.0))
    code, data, err = _compare(db, "a", "b", "--box", "free", "--at-interactivity", "75")
    assert code == 2 and "'b' is no arm with a done curve on free" in err  # --box narrows both arms
    code, data, err = _compare(db, "a", "b", "--at-interactivity", "75")
    assert code == 0, err
    assert data["a"]["usd_per_m_out"] is None and "box free has no price" in data["a"]["no_price"]
    assert data["b"]["usd_per_m_out"] == pytest.approx(1000 / 400)
    code, out, _ = run_cli(db, "compare", "a", "b", "--at-interactivity", "75")
    assert "A: no cost: box free has no price" in out

    code, out, _ = run_cli(db, "pareto", "--json")
    points = {(p["arm"], p["concurrency"]): p for f in json.loads(out)["frontiers"] for p in f["points"]}
    assert points[("a", 2)]["usd_per_m_out"] is None and "has no price" in points[("a", 2)]["no_price"]
    assert points[("b", 2)]["usd_per_m_out"] == pytest.approx(1000 / 600)
    assert points[("b", 2)]["usd_per_m_total"] == pytest.approx(1000 / 1800)
    code, out, _ = run_cli(db, "pareto")
    assert code == 0 and "$/M OUT" in out and "1.667" in out and "no $/M: box free has no price" in out


def test_at_power_without_energy_figures_is_refused_saying_why(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    _curve(db, "a", A)
    _curve(db, "b", A)
    code, out, err = run_cli(db, "compare", "a", "b", "--at-power", "300")
    assert code == 2 and out == ""
    assert "curve #1 (a) C1 has no average GPU power: no GPU power samples" in err


def test_at_power_each_curve_is_read_at_its_average_gpu_power_per_gpu(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    _curve(db, "p", A, box="g1", watts=[200.0, 300.0, 400.0])  # at 350 W: midway C2-C4, 400 [390-410]
    _curve(db, "q", A, box="g2", watts=[250.0, 350.0, 450.0])  # at 350 W: its C2, 300 [290-310]
    code, data, err = _compare(db, "p", "q", "--shape", "short", "--box", "g1", "--at-power", "350")
    assert code == 2 and "'q' is no arm with a done curve on g1 at short" in err
    code, data, err = _compare(db, "p", "q", "--at-power", "350")
    assert code == 0, err
    assert data["per"] == "GPU" and data["a"]["gpus"] == 1 and data["a"]["measured_range"] == [200.0, 400.0]
    assert data["a"]["conditions"].startswith("kernel: none reported; power limit: 600 W; tripwire: ")
    assert data["a"]["out_tok_per_s"] == {"median": 400.0, "min": 390.0, "max": 410.0, "n": 3}
    assert data["b"]["out_tok_per_s"]["median"] == pytest.approx(300.0)
    assert data["ratio_b_over_a"]["median"] == pytest.approx(0.75)
    assert data["verdict"] == "faster" and data["winner"] == "a"
    code, _, err = run_cli(db, "compare", "p", "q", "--at-power", "220")
    assert code == 2 and "curve #2 (q)'s measured range 250.0-450.0 W" in err


def test_the_operating_points_are_exclusive_and_bounded(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    _curve(db, "a", A)
    code, _, err = run_cli(db, "compare", "a", "a", "--at-interactivity", "50", "--at-power", "3")
    assert code == 2 and "not allowed with" in err
    code, _, err = run_cli(db, "compare", "a", "a", "--at-interactivity", "-1")
    assert code == 2 and "an interactivity must be" in err
    code, _, err = run_cli(db, "compare", "a", "a", "-c", "4", "--at-interactivity", "50")
    assert code == 2 and "-c does not apply" in err
    code, _, err = run_cli(db, "compare", "nope", "a", "--at-interactivity", "50")
    assert code == 2 and "'nope' is no arm with a done curve" in err
    code, _, err = run_cli(db, "compare", "#9", "a", "--at-interactivity", "50")
    assert code == 2 and "no curve #9" in err
    _curve(db, "a", A, box="b2")
    code, _, err = run_cli(db, "compare", "a", "a", "--at-interactivity", "50")
    assert code == 2 and "arm a has done curves on b1 at short, b2 at short" in err
    code, data, err = _compare(db, "a", "#1", "--box", "b2", "--at-interactivity", "50")
    assert code == 0 and data["a"]["curve_id"] == 2 and data["b"]["curve_id"] == 1, err


@settings(max_examples=200, deadline=None)
@given(
    steps=st.lists(st.floats(0.01, 1e4), min_size=1, max_size=8),
    ys=st.lists(st.floats(-1e6, 1e6), min_size=9, max_size=9),
    start=st.floats(-1e4, 1e4),
    where=st.floats(0.0, 1.0),
)
def test_the_interpolated_value_lies_between_its_two_neighbours(
    steps: list[float], ys: list[float], start: float, where: float
) -> None:
    xs = [start]
    for s in steps:
        xs.append(xs[-1] + s)
    ys = ys[: len(xs)]
    x = min(xs[0] + where * (xs[-1] - xs[0]), xs[-1])
    value = interpolate(xs, ys, x)
    i = max(i for i in range(len(xs)) if xs[i] <= x)
    j = min(i + 1, len(xs) - 1)
    low, high = min(ys[i], ys[j]), max(ys[i], ys[j])
    assert low - 1e-6 * max(1.0, abs(low)) <= value <= high + 1e-6 * max(1.0, abs(high))


@settings(max_examples=200, deadline=None)
@given(
    points=st.lists(st.tuples(st.integers(1, 40), st.integers(0, 40)), min_size=1, max_size=10),
    lower_x_better=st.booleans(),
)
def test_the_envelope_is_strictly_monotone_and_every_dropped_point_is_beaten(
    points: list[tuple[int, int]], lower_x_better: bool
) -> None:
    knots = [
        Knot(
            CurvePointView(c, c, "done", None, None, (), None, None),
            float(x),
            Spread(float(y), float(y), float(y), 1),
            None,
            (),
        )
        for c, (x, y) in enumerate(points, start=1)
    ]
    kept, dropped = envelope(knots, lower_x_better)
    assert len(kept) + len(dropped) == len(knots) and kept
    ys = [k.out.median for k in kept]
    xs = [k.x for k in kept]
    assert xs == sorted(set(xs))  # distinct x, ascending
    # along x, throughput strictly falls as interactivity rises, strictly rises with power
    assert all((b > a) if lower_x_better else (b < a) for a, b in zip(ys, ys[1:], strict=False))
    best = max(y for _, y in points)
    assert best in ys  # the point with the most throughput is never dropped
    sign = -1 if lower_x_better else 1
    for k in knots:
        if k not in kept:  # some kept point is at least as good on both axes
            assert any(sign * q.x >= sign * k.x and q.out.median >= k.out.median for q in kept), k
