"""``campaign pareto``: the frontier of output tok/s per GPU against interactivity, on medians with spreads.

A point is dominated only beyond the spreads; overlapping spreads on the frontier share a rank; a point
with equal y and lower x is dominated (the class of vllm#55561) only when that is so beyond the spreads;
DIAGNOSTIC-ONLY rows never stand on the frontier. Rows are stored through the store's own API, with
launches journaled (their GPUs) so y is per GPU.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator, Sequence
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.cli import main
from console.readmodel.pareto import Box2, Frontier, Spread, dominates, pareto, places
from console.store import Box, Store

T0 = 1_788_658_020_000
GPUS = 2

Run = tuple[float, float]
"""(output tok/s, TPOT p50 ms) of one run."""


def _store(
    db: Path,
    arms: dict[str, Sequence[Run]],
    concurrency: int = 64,
    diagnostic: frozenset[str] = frozenset(),
    failing: frozenset[str] = frozenset(),
) -> None:
    """Each arm launched on ``GPUS`` GPUs of box b1 and benched once per run, the runs one repeat group
    (a single run: no group); the arms in ``diagnostic`` have their rows marked DIAGNOSTIC-ONLY."""
    with Store(db, clock=lambda: T0) as store:
        store.boxes.add(Box(name="b1", host="127.0.0.1", ssh_user="u"))
        events = [
            {
                "v": 1,
                "seq": 1 + i,
                "kind": "launch_state",
                "launch_id": f"L-{arm}",
                "arm": arm,
                "state": "serving",
                "t_ms": T0 - 60_000,
                "gpus": list(range(GPUS)),
            }
            for i, arm in enumerate(arms)
        ]
        report = store.ingest.batch("b1", events)
        assert not report.quarantined, report.quarantined
        for arm, runs in arms.items():
            for k, (out, tpot) in enumerate(runs):
                row = {
                    "arm": arm,
                    "shape": "short",
                    "concurrency": concurrency,
                    "box": "b1",
                    "launch_id": f"L-{arm}",
                    "run_id": f"{arm}-C{concurrency}-{k}",
                    "t_ms": T0 + k,
                    "out_tok_per_s": out,
                    "tpot_ms_p50": tpot,
                    "requests": 100,
                    "failed": 3 if arm in failing else 0,
                    **({"repeat_group": f"group-{arm}-C{concurrency}"} if len(runs) > 1 else {}),
                    "diagnostic_only": int(arm in diagnostic),
                }
                store.results.add_bench_run({**row, "raw": {}})


def _frontier(db: Path, interactivity: str = "tpot") -> Frontier:
    with Store(db) as store:
        (f,) = pareto(store, interactivity=interactivity)  # type: ignore[arg-type]
    return f


def _by_arm(f: Frontier) -> dict[str, Any]:
    return {p.group.arm: p for p in f.points}


def _campaign(db: Path, *argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["--db", str(db), *argv])
    return code, out.getvalue() + err.getvalue()


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "state.db"


def test_three_arms_form_a_clear_frontier_and_a_fourth_is_dominated(db: Path) -> None:
    # TPOT 50 ms -> 20 tok/s/user; 25 ms -> 40; 10 ms -> 100. Per GPU: out / 2.
    _store(
        db,
        {
            "batchy": [(4000, 50), (4100, 50), (4050, 50)],
            "middle": [(2000, 25), (2050, 25), (2020, 25)],
            "snappy": [(800, 10), (810, 10), (805, 10)],
            "worse": [(1000, 50), (1010, 50), (1005, 50)],
        },
    )
    f = _frontier(db)
    assert f.per == "GPU" and "per GPU" in f.y_label and "1000 / TPOT p50" in f.x_label
    arms = _by_arm(f)
    assert [p.group.arm for p in f.frontier] == ["batchy", "middle", "snappy"]
    assert [arms[a].rank for a in ("batchy", "middle", "snappy")] == [1, 2, 3]
    assert arms["batchy"].y is not None and arms["batchy"].y.median == pytest.approx(4050 / GPUS)
    assert arms["worse"].rank is None and arms["worse"].standing == "dominated by batchy C64"

    code, out = _campaign(db, "pareto")
    assert code == 0, out
    assert "1000 / TPOT p50" in out and "per GPU" in out and "dominated by batchy C64" in out
    assert "rank 3" in out and "*" in out

    code, out = _campaign(db, "pareto", "--json")
    data = json.loads(out)
    (frontier,) = data["frontiers"]
    assert frontier["frontier"] == ["batchy C64", "middle C64", "snappy C64"]
    assert frontier["per"] == "GPU" and "dominated" in data["definitions"]


def test_overlapping_spreads_share_a_rank_and_neither_is_dominated(db: Path) -> None:
    # a: x 20 [19.6-20.4], y 1000 [975-1025]; b: x 20.4 [20-20.8], y ~990 [965-1010]: overlap on both axes.
    _store(
        db,
        {
            "a": [(1950, 1000 / 19.6), (2000, 50), (2050, 1000 / 20.4)],
            "b": [(1930, 1000 / 20.0), (1980, 1000 / 20.4), (2020, 1000 / 20.8)],
        },
    )
    arms = _by_arm(_frontier(db))
    assert arms["a"].rank == arms["b"].rank == 1
    assert arms["a"].dominated_by is None and arms["b"].dominated_by is None


def test_equal_y_lower_x_is_dominated_only_beyond_the_spreads(db: Path) -> None:
    # vllm#55561: same y, lower x. One run each: no spread, so "fast" (x 40) dominates "slow" (x 20).
    _store(db, {"fast": [(2000, 25)], "slow": [(2000, 50)]})
    arms = _by_arm(_frontier(db))
    assert arms["fast"].rank == 1 and arms["slow"].standing == "dominated by fast C64"


def test_equal_y_lower_x_inside_the_y_spread_is_a_tie_not_dominated(db: Path) -> None:
    # fast's y spread reaches below slow's max: not beyond the spreads, so both stay on the frontier.
    _store(db, {"fast": [(1900, 25), (2000, 25), (2100, 25)], "slow": [(1950, 50), (2000, 50), (2050, 50)]})
    arms = _by_arm(_frontier(db))
    assert arms["fast"].rank is not None and arms["slow"].rank is not None
    assert arms["slow"].dominated_by is None


def test_a_diagnostic_only_row_is_shown_with_its_mark_but_never_on_the_frontier(db: Path) -> None:
    # broken is better on both axes, but its number is not valid
    _store(db, {"plain": [(1000, 50)], "broken": [(9000, 5)]}, diagnostic=frozenset({"broken"}))
    f = _frontier(db)
    arms = _by_arm(f)
    assert arms["broken"].rank is None and arms["broken"].dominated_by is None
    assert "DIAGNOSTIC-ONLY" in arms["broken"].standing
    assert arms["plain"].rank == 1 and [p.group.arm for p in f.frontier] == ["plain"]
    code, out = _campaign(db, "pareto")
    assert code == 0 and "off: DIAGNOSTIC-ONLY" in out


def test_an_invalid_run_is_shown_with_its_reason_but_never_on_the_frontier(db: Path) -> None:
    # lossy is better on both axes, but 3 of its 100 requests failed (console/readmodel/curve_validity.py)
    _store(db, {"plain": [(1000, 50)], "lossy": [(9000, 5)]}, failing=frozenset({"lossy"}))
    f = _frontier(db)
    arms = _by_arm(f)
    assert arms["lossy"].rank is None and arms["lossy"].left_off == "invalid: 3 of 100 requests failed"
    assert [p.group.arm for p in f.frontier] == ["plain"]


def test_per_slot_interactivity_is_output_over_concurrency(db: Path) -> None:
    _store(db, {"a": [(3200, 50)]}, concurrency=32)
    f = _frontier(db, "per-slot")
    (p,) = f.points
    assert p.x is not None and p.x.median == pytest.approx(3200 / 32)
    assert "output tok/s / concurrency" in f.x_label
    code, out = _campaign(db, "pareto", "--interactivity", "per-slot", "--json")
    data = json.loads(out)
    assert data["frontiers"][0]["points"][0]["x"]["median"] == pytest.approx(100.0)
    assert "output tok/s / concurrency" in data["frontiers"][0]["x"]


def test_rows_without_recorded_gpus_are_per_replica_on_a_frontier_of_their_own(db: Path) -> None:
    with Store(db, clock=lambda: T0) as store:
        store.boxes.add(Box(name="b1", host="127.0.0.1", ssh_user="u"))
        row = {"arm": "imp", "shape": "short", "concurrency": 8, "box": "b1", "t_ms": T0}
        store.results.add_bench_run(
            {
                **row,
                "out_tok_per_s": 800.0,
                "tpot_ms_p50": 20.0,
                "replicas": 2,
                "source": "imported",
                "raw": {},
            }
        )
    f = _frontier(db)
    assert f.per == "replica" and "per replica" in f.y_label
    (p,) = f.points
    assert p.y is not None and p.y.median == pytest.approx(400.0) and p.rank == 1
    code, out = _campaign(db, "pareto")
    assert "per replica" in out


_bounds = st.tuples(st.integers(0, 40), st.integers(0, 6)).map(lambda t: (float(t[0]), float(t[0] + t[1])))
_points = st.lists(st.tuples(_bounds, _bounds), min_size=1, max_size=12).map(
    lambda ps: [
        (
            Spread((xl + xh) / 2, xl, xh, 3 if xh > xl else 1),
            Spread((yl + yh) / 2, yl, yh, 3 if yh > yl else 1),
        )
        for (xl, xh), (yl, yh) in ps
    ]
)


@settings(max_examples=300, deadline=None)
@given(_points)
def test_the_frontier_is_undominated_and_dominates_every_other_point(points: list[Box2]) -> None:
    found = places(points)
    on = [i for i, pl in enumerate(found) if pl.rank is not None]
    assert on, "a finite set always has an undominated point"
    for i in on:
        assert not any(dominates(q, points[i]) for q in points)
    for i, pl in enumerate(found):
        if pl.rank is None:
            assert pl.dominated_by in on and dominates(points[pl.dominated_by], points[i])
            assert any(dominates(points[j], points[i]) for j in on)
    ranks = [
        found[i].rank or 0 for i in sorted(on, key=lambda i: (points[i][0].median, -points[i][1].median))
    ]
    assert ranks == sorted(ranks)  # ranks count along the frontier by x
