"""The command palette reaches every action by its words, from any view; the help lists each heading once;
every view renders at 80x24."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from console.tui.app import VIEWS, ConsoleApp
from console.tui.modals import BenchScreen, ConfirmScreen, HelpScreen, TimerScreen
from console.tui.views.base import ViewScreen
from testbed import tui_fixture as F
from testbed.tui_pilot import press, settle, table_rows


@pytest.fixture
def fx(tmp_path: Path) -> F.Fixture:
    return F.build(tmp_path / "state.db")


def make_app(fx: F.Fixture, actions: F.FixedActions, read_only: bool = False) -> ConsoleApp:
    return ConsoleApp(
        fx.path,
        read_only=read_only,
        clock=lambda: F.NOW,
        local_tz=ZoneInfo("Europe/London"),
        actions=actions,
        keys_path=fx.path.with_name("no-keys.toml"),
        refresh_s=None,
    )


async def type_text(pilot: Pilot[None], text: str) -> None:
    for ch in text:
        await pilot.press("space" if ch == " " else ch)
    await settle(pilot)


async def palette(pilot: Pilot[None], words: str) -> None:
    """Open the palette, type the words, take the best match."""
    await press(pilot, "ctrl+p")
    await type_text(pilot, words)
    await press(pilot, "enter")


async def select_arm(pilot: Pilot[None], app: ConsoleApp, arm: str) -> None:
    await press(pilot, "3")
    names = [r[0] for r in table_rows(app, "#arms-table")]
    app.screen.query_one("#arms-table", DataTable).move_cursor(row=names.index(arm))
    await settle(pilot)


@asynccontextmanager
async def console(
    fx: F.Fixture, arm: str | None = None, view: str | None = None, read_only: bool = False
) -> AsyncIterator[tuple[Pilot[None], ConsoleApp, F.FixedActions]]:
    """The console on the fixture, ``arm`` selected in Arms, then on ``view`` (a number key)."""
    actions = F.FixedActions(read_only=read_only)
    app = make_app(fx, actions, read_only)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        if arm:
            await select_arm(pilot, app, arm)
        if view:
            await press(pilot, view)
        yield pilot, app, actions


# Each action from a view other than its own: the palette switches there, then runs it on that view's rows.
async def test_palette_launches_the_selected_arm_after_its_lint(fx: F.Fixture) -> None:
    async with console(fx, arm=F.QWEN, view="1") as (pilot, app, actions):
        await palette(pilot, "arms launch")
        assert app.current_mode == "arms" and isinstance(app.screen, ConfirmScreen)
        assert app.screen.title_text == f"Launch {F.QWEN} on pro-a?"
        await press(pilot, "y")
        assert actions.calls[-1] == ("launch", "pro-a", F.QWEN)


async def test_palette_kills_after_the_confirmation(fx: F.Fixture) -> None:
    async with console(fx, arm=F.QWEN, view="2") as (pilot, app, actions):
        await palette(pilot, "arms kill")
        assert isinstance(app.screen, ConfirmScreen) and app.screen.title_text == "Kill L-qwen-0 on pro-a?"
        await press(pilot, "y")
        assert actions.calls[-1] == ("kill", "pro-a", "L-qwen-0")


async def test_palette_benches_the_serving_launch_with_the_shape_and_concurrency_asked(fx: F.Fixture) -> None:
    async with console(fx, arm=F.QWEN, view="1") as (pilot, app, actions):
        await palette(pilot, "arms bench")
        assert app.current_mode == "arms" and isinstance(app.screen, BenchScreen)
        await type_text(pilot, "huge 64")
        check = str(app.screen.query_one("#bench-check", Static).render())
        assert "no shape 'huge' in the recipes" in check and "router" in check
        await press(pilot, "enter")
        assert isinstance(app.screen, BenchScreen)  # refused, not sent
        for _ in "huge 64":
            await pilot.press("backspace")
        await type_text(pilot, "router 0")
        assert "must be a whole number, 1 or more" in str(
            app.screen.query_one("#bench-check", Static).render()
        )
        await press(pilot, "backspace")
        await type_text(pilot, "64")
        await press(pilot, "enter")
        assert actions.calls[-1] == ("bench", "L-qwen-0", "pro-a", "router", 64)
        assert app.messages[-1].startswith("bench L-qwen-0: ") and "out 5.2k tok/s" in app.messages[-1]


async def test_palette_runs_the_tripwire(fx: F.Fixture) -> None:
    async with console(fx, arm=F.QWEN, view="4") as (pilot, app, actions):
        await palette(pilot, "arms tripwire")
        assert actions.calls[-1] == ("tripwire", "L-qwen-0", "pro-a")
        assert app.messages[-1] == f"tripwire L-qwen-0: {F.QWEN}: tripwire 20/20 ok"


async def test_bench_and_tripwire_need_a_serving_launch(fx: F.Fixture) -> None:
    async with console(fx, arm=F.GLM_FAILED) as (pilot, app, actions):
        await press(pilot, "b")
        assert not isinstance(app.screen, BenchScreen)
        assert app.messages[-1] == f"{F.GLM_FAILED}: no serving launch to measure; launch it first (l)"
        await press(pilot, "t")
        assert not any(c[0] in ("bench", "tripwire") for c in actions.calls)


@pytest.mark.parametrize(("words", "call"), [("fleet check", "check"), ("fleet connect", "connect")])
async def test_palette_checks_and_connects_the_selected_box(fx: F.Fixture, words: str, call: str) -> None:
    async with console(fx, view="3") as (pilot, app, actions):
        await palette(pilot, words)
        assert app.current_mode == "fleet"
        assert actions.calls[-1] == (call, "pro-a")
        assert app.messages[-2:] == [
            f"{call} pro-a: started",
            f"{call} pro-a: "
            + (
                "FAIL power (GPU 2 capped at 400 W of 600 W max)"
                if call == "check"
                else "already running; 0 new events ingested"
            ),
        ]


async def test_fleet_keys_check_and_connect(fx: F.Fixture) -> None:
    async with console(fx) as (pilot, app, actions):
        await press(pilot, "c", "r")
        assert [c for c in actions.calls if c[0] in ("check", "connect")] == [
            ("check", "pro-a"),
            ("connect", "pro-a"),
        ]


async def test_palette_sets_a_timer_from_another_view(fx: F.Fixture) -> None:
    async with console(fx) as (pilot, app, actions):
        await palette(pilot, "live timer")
        assert app.current_mode == "live" and isinstance(app.screen, TimerScreen)
        await type_text(pilot, "1h")
        await press(pilot, "enter")
        assert actions.calls[-1] == ("arm_timer", "pro-a", "1h", "stop-arms")


async def test_browse_refuses_the_new_actions(fx: F.Fixture) -> None:
    async with console(fx, read_only=True) as (pilot, app, actions):
        await press(pilot, "c", "r")
        await select_arm(pilot, app, F.QWEN)
        await press(pilot, "b", "t")
        assert not isinstance(app.screen, BenchScreen)
        refused = [
            m.split(" is disabled")[0] for m in app.messages if "is disabled: browse mode is read-only" in m
        ]
        assert refused == ["checking a box", "connecting a box", "benchmarking", "running the tripwire"]
        assert not any(c[0] in ("check", "connect", "bench", "tripwire") for c in actions.calls)


async def test_help_lists_each_heading_once(fx: F.Fixture) -> None:
    app = make_app(fx, F.FixedActions())
    async with app.run_test(size=(100, 60)) as pilot:
        await settle(pilot)
        await press(pilot, "question_mark")
        assert isinstance(app.screen, HelpScreen)
        lines = str(app.screen.query_one("#help Static", Static).render()).splitlines()
        headings = [line for line in lines if line.startswith("[")]
        assert headings == [
            "[everywhere]",
            "[fleet]",
            "[live]",
            "[arms]",
            "[results]",
            "[economics]",
            "[curves]",
            "[divergence]",
        ]
        palette_row = next(i for i, line in enumerate(lines) if "ctrl+p" in line)
        assert lines.index("[everywhere]") < palette_row < lines.index("[fleet]")
        for words in ("check", "connect", "bench", "tripwire", "timer (hard stop)", "replay: step back"):
            assert any(words in line for line in lines), words


async def test_every_view_renders_at_80x24(fx: F.Fixture) -> None:
    F.add_economics(fx.path)
    app = make_app(fx, F.FixedActions())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        for key, view in zip("123456", VIEWS[:6], strict=True):
            await press(pilot, key)
            assert app.current_mode == view and isinstance(app.screen, ViewScreen) and app.screen.loaded
        await press(pilot, "4", "d")  # the Divergence table is reached from Results
        assert app.current_mode == "divergence" and isinstance(app.screen, ViewScreen) and app.screen.loaded
        await press(pilot, "4", "c", "2", "w", "left_square_bracket", "question_mark", "escape")
        await select_arm(pilot, app, F.QWEN)
        await press(pilot, "b")
        assert isinstance(app.screen, BenchScreen)
        await press(pilot, "escape")
        assert app.current_mode == "arms"
