"""Pilot tests of the Curves view (7): the list, the chart with its frontier, live point states, the per-slot
toggle, the empty state.db; and Divergence on 8. Curves are stored through the store API over the fixture's
bench rows (testbed/tui_fixture.py), as ``campaign curve`` in another process would."""

from __future__ import annotations

from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from console.report import build_report
from console.store import Store
from console.tui.app import ConsoleApp
from testbed import tui_fixture as F
from testbed.tui_pilot import press, settle, table_rows, text_of


@pytest.fixture
def fx(tmp_path: Path) -> F.Fixture:
    return F.build(tmp_path / "state.db")


def make_app(path: Path) -> ConsoleApp:
    return ConsoleApp(
        path,
        clock=lambda: F.NOW,
        local_tz=ZoneInfo("Europe/London"),
        actions=F.FixedActions(),
        keys_path=path.with_name("no-keys.toml"),
        refresh_s=None,
    )


def store_curve(path: Path) -> int:
    """A QWEN curve at chat-1k: C=64 (invalid: a gap in its GPU samples) and C=1024 (valid) linked to the
    fixture's rows, C=2048 still pending."""
    with Store(path) as store:
        rows = [
            r["id"]
            for r in store.rows(
                "SELECT id FROM bench_runs WHERE arm = ? AND shape = 'chat-1k' AND concurrency IN (64, 1024) "
                "ORDER BY concurrency",
                [F.QWEN],
            )
        ]
        c = store.curves.create(F.QWEN, "pro-a", "chat-1k", [64, 1024, 2048], 1, None)
        for position, row in enumerate(rows):
            store.curves.start_point(c.id, position)
            store.curves.finish_point(c.id, position, None, [row])
        return c.id


async def test_key_7_lists_the_curve_draws_it_and_marks_the_frontier(fx: F.Fixture) -> None:
    curve_id = store_curve(fx.path)
    app = make_app(fx.path)
    async with app.run_test(size=(140, 42)) as pilot:
        await settle(pilot)
        await press(pilot, "7")
        rows = table_rows(app, "#curves-table")
        assert len(rows) == 1 and rows[0][:5] == [f"#{curve_id}", F.QWEN, "pro-a", "chat-1k", "2/3"]
        chart = text_of(app, "#curves-chart")
        assert "1000 / TPOT" in chart and "F on the Pareto frontier" in chart
        assert "F" in "\n".join(chart.splitlines()[1:-1])  # the frontier mark is drawn in the plot
        detail = text_of(app, "#curves-detail")
        assert "C=2048" in detail and "pending" in detail and "frontier" in detail
        assert "invalid: " in detail  # the validity reader's verdict, with its reason
        lines = {x.split()[0]: x for x in detail.splitlines() if x.strip().startswith("C=")}
        assert "frontier" in lines["C=1024"] and "invalid" not in lines["C=1024"]
        assert "frontier" not in lines["C=64"]  # invalid: shown with its reason, never ranked


async def test_a_point_started_in_another_process_shows_running_after_the_tick(fx: F.Fixture) -> None:
    curve_id = store_curve(fx.path)
    app = make_app(fx.path)
    async with app.run_test(size=(140, 42)) as pilot:
        await settle(pilot)
        await press(pilot, "7")
        line = next(x for x in text_of(app, "#curves-detail").splitlines() if "C=2048" in x)
        assert line.endswith("pending")
        with Store(fx.path) as store:
            store.curves.start_point(curve_id, 2)
        app.redraw_visible()
        await settle(pilot)
        line = next(x for x in text_of(app, "#curves-detail").splitlines() if "C=2048" in x)
        assert "running" in line


async def test_i_relabels_the_axis_with_the_per_slot_definition(fx: F.Fixture) -> None:
    store_curve(fx.path)
    app = make_app(fx.path)
    async with app.run_test(size=(140, 42)) as pilot:
        await settle(pilot)
        await press(pilot, "7")
        assert "per-slot" not in text_of(app, "#curves-chart")
        await press(pilot, "i")
        chart = text_of(app, "#curves-chart")
        assert "output tok/s / concurrency" in chart and "1000 / TPOT" not in chart


async def test_an_empty_state_db_says_so_without_axes(tmp_path: Path) -> None:
    Store(tmp_path / "state.db").close()
    app = make_app(tmp_path / "state.db")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await press(pilot, "7")
        chart = text_of(app, "#curves-chart")
        assert chart.startswith("no curve in this state.db")
        assert "│" not in chart and "─" not in chart


async def test_key_8_opens_divergence(fx: F.Fixture) -> None:
    app = make_app(fx.path)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await press(pilot, "8")
        assert app.current_mode == "divergence"
        await press(pilot, "7")
        assert app.current_mode == "curves"


def test_the_report_lists_a_curves_points_and_its_frontier(fx: F.Fixture) -> None:
    curve_id = store_curve(fx.path)
    with Store(fx.path) as store:
        text = build_report(store, now_ms=F.NOW, operator_tz="UTC")
    section = text[text.index("## Curves") :]
    assert f"### #{curve_id} {F.QWEN} on pro-a at chat-1k" in section
    for load in ("C=64", "C=1024", "C=2048"):
        assert load in section
    assert "| pending" in section or "pending |" in section
    frontier = section[section.index("Frontier at chat-1k") :].splitlines()
    assert frontier[1].startswith(f"- #{curve_id} {F.QWEN} C=")
    assert "C=2048" not in "\n".join(frontier)  # a pending point stands on no frontier
    assert "C=64 " not in "\n".join(frontier)  # nor an invalid one
