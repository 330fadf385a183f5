"""Pilot tests: every key action of the console against the fixture state.db and a fixed clock."""

from __future__ import annotations

from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from textual.widgets import DataTable, Input, Static

from console.tui.app import ConsoleApp
from console.tui.modals import ConfirmScreen, HelpScreen, TimerScreen
from testbed import tui_fixture as F
from testbed.tui_pilot import press, settle, table_rows, text_of

LONDON = ZoneInfo("Europe/London")


@pytest.fixture
def fixture_db(tmp_path: Path) -> F.Fixture:
    return F.build(tmp_path / "state.db")


def make_app(
    fx: F.Fixture, actions: F.FixedActions | None = None, read_only: bool = False, keys: Path | None = None
) -> ConsoleApp:
    return ConsoleApp(
        fx.path,
        read_only=read_only,
        clock=lambda: F.NOW,
        local_tz=LONDON,
        actions=actions or F.FixedActions(read_only=read_only),
        keys_path=keys or fx.path.with_name("no-keys.toml"),
        refresh_s=None,
    )


async def test_number_keys_switch_views_and_esc_goes_back(fixture_db: F.Fixture) -> None:
    app = make_app(fixture_db)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert app.current_mode == "fleet"
        await press(pilot, "2")
        assert app.current_mode == "live"
        await press(pilot, "4")
        assert app.current_mode == "results"
        await press(pilot, "3")
        assert app.current_mode == "arms"
        await press(pilot, "escape")
        assert app.current_mode == "results"
        await press(pilot, "escape", "escape")
        assert app.current_mode == "fleet"


async def test_fleet_shows_verdicts_in_words_and_enter_opens_the_box(fixture_db: F.Fixture) -> None:
    app = make_app(fixture_db)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        rows = {r[0]: r for r in table_rows(app, "#fleet-table")}
        assert rows["pro-a"][4] == "FAIL power, WARN topology"
        assert rows["pro-a"][6] == "1h12m" and rows["h200-b"][1] == "down"
        assert app.selected_box == "pro-a"  # the first rented box that is up
        table = app.screen.query_one("#fleet-table", DataTable)
        table.move_cursor(row=0)
        await settle(pilot)
        assert app.selected_box == "h200-b"
        await press(pilot, "enter")
        assert app.current_mode == "live"
        assert "h200-b" in text_of(app, "#live-box") and "last sample 20m00s ago" in text_of(app, "#live-box")
        assert "STALE" in text_of(app, "#live-power")  # a dead box never looks alive


async def test_live_view_names_the_capped_gpu_and_the_deadline_in_three_zones(fixture_db: F.Fixture) -> None:
    app = make_app(fixture_db)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await press(pilot, "2")
        power = text_of(app, "#live-power").splitlines()
        assert [line[:23] for line in power if line.startswith("GPU2")] == ["GPU2  400/400 W CAPPED "]
        assert not any("CAPPED" in line for line in power if line.startswith(("GPU0", "GPU1", "GPU3")))
        timers = text_of(app, "#live-timers")
        assert "utc   2026-09-06 01:27:00 UTC" in timers
        assert "local 2026-09-06 02:27:00 BST (+01:00)" in timers
        trip = text_of(app, "#live-tripwire")
        assert "11/20 DEGEN 8d 1w" in trip and "20/20 ok" in trip
        assert "loadgen chat-1k C1024 running 1m00s" in text_of(app, "#live-throughput")


async def test_replay_cursor_steps_back_through_the_night(fixture_db: F.Fixture) -> None:
    app = make_app(fixture_db, read_only=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert "BROWSE read-only 2026-09-06 00:15:00 UTC (end)" in text_of(app, "#topbar")
        await press(pilot, "3")
        assert table_rows(app, "#arms-table")[-1][:2] == ["qwen3.8-27b-nvfp4-b12x", "serving"]
        for _ in range(5):  # a step is a tenth of the 10-minute chart window
            await press(pilot, "left_square_bracket")
        assert "(5m before end)" in text_of(app, "#topbar")
        app.model.step(-40 * 60_000)
        await press(pilot, "4")
        arms = [r[0] for r in table_rows(app, "#results-table")]
        assert "qwen3.8-27b-nvfp4-b12x" not in arms  # its benches had not run yet at that instant
        await press(pilot, "right_curly_bracket")
        assert "(end)" in text_of(app, "#topbar")
        await press(pilot, "left_curly_bracket")
        assert "2026-09-05 22:45:00 UTC (90m before end)" in text_of(app, "#topbar")


async def test_results_filter_sort_and_chart(fixture_db: F.Fixture) -> None:
    app = make_app(fixture_db)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        await press(pilot, "4")
        assert len(table_rows(app, "#results-table")) == 6
        await press(pilot, "slash")
        assert isinstance(app.focused, Input)
        for ch in "diagnostic":
            await pilot.press(ch)
        await settle(pilot)
        rows = table_rows(app, "#results-table")
        assert [r[0] for r in rows] == ["glm-4.7-dp2tp2"] and rows[0][4] == "DEGEN"
        assert rows[0][6] == "DIAGNOSTIC-ONLY"
        await press(pilot, "enter")  # keep the filter, keys go back to the table
        assert "filter: diagnostic" in text_of(app, "#topbar")
        await press(pilot, "slash", "escape")
        assert len(table_rows(app, "#results-table")) == 6
        await press(pilot, "s", "s")
        assert "sort out tok/s" in text_of(app, "#topbar")
        outs = [r[0] for r in table_rows(app, "#results-table")]
        assert outs[0] == "qwen3-0.6b-bf16"
        assert table_rows(app, "#results-table")[0][6] == "CLIENT-BOUND QUEUEING"
        await press(pilot, "c")
        chart = text_of(app, "#results-chart")
        assert "chat-1k (best out tok/s per arm)" in chart
        assert "trip DEGEN DIAGNOSTIC-ONLY" in chart


async def test_results_show_repeat_groups_with_their_spread_and_ties(fixture_db: F.Fixture) -> None:
    from console.store import Store

    with Store(fixture_db.path) as store:
        for arm, group, outs in (
            ("fast-arm", "group-f", [3000.0, 3050.0, 3100.0]),
            ("close-arm", "group-c", [2950.0, 3040.0, 3010.0]),
            ("slow-arm", "group-s", [2000.0, 2010.0, 2020.0]),
        ):
            for i, out in enumerate(outs):
                store.results.add_bench_run(
                    {
                        "arm": arm,
                        "box": "pro-a",
                        "shape": "chat-1k",
                        "concurrency": 64,
                        "out_tok_per_s": out,
                        "repeat_group": group,
                        "started_ms": F.START + i * 60_000,
                        "ended_ms": F.START + i * 60_000 + 30_000,
                    }
                )
    app = make_app(fixture_db)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        await press(pilot, "4", "g")
        assert "3 repeat groups of 15 rows" in text_of(app, "#topbar")
        rows = {r[0]: r for r in table_rows(app, "#results-table")}
        assert rows["fast-arm"][3:8] == ["3", "3.0k", "3.0k-3.1k", "1.6%", "best"]
        assert rows["close-arm"][7] == "TIE" and rows["slow-arm"][7] == "-34.1%"
        await press(pilot, "down")
        assert "close-arm chat-1k C64 (group group-c, 3 runs)" in text_of(app, "#results-detail")
        assert "tie: the difference (1.3%) is inside the spread" in text_of(app, "#results-detail")
        await press(pilot, "g")
        assert len(table_rows(app, "#results-table")) == 15


async def test_launch_shows_lint_then_confirms_then_calls_the_service(fixture_db: F.Fixture) -> None:
    actions = F.FixedActions()
    app = make_app(fixture_db, actions)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await press(pilot, "3")
        names = [r[0] for r in table_rows(app, "#arms-table")]
        app.screen.query_one("#arms-table", DataTable).move_cursor(row=names.index(F.QWEN))
        await press(pilot, "l")
        assert isinstance(app.screen, ConfirmScreen)
        assert app.screen.title_text == f"Launch {F.QWEN} on pro-a?"
        assert any("R7-no-nvlink" in line for line in app.screen.body)
        await press(pilot, "n")
        assert ("launch", "pro-a", F.QWEN) not in actions.calls
        await press(pilot, "l", "y")
        assert actions.calls[-1] == ("launch", "pro-a", F.QWEN)
        assert app.messages[-1] == f"launch {F.QWEN} on pro-a: launch of {F.QWEN} on pro-a requested"


async def test_lint_error_blocks_the_launch(fixture_db: F.Fixture) -> None:
    actions = F.FixedActions()
    app = make_app(fixture_db, actions)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await press(pilot, "3")
        names = [r[0] for r in table_rows(app, "#arms-table")]
        app.screen.query_one("#arms-table", DataTable).move_cursor(row=names.index(F.UNFORCED))
        await press(pilot, "l")
        assert isinstance(app.screen, ConfirmScreen) and "blocked by lint" in app.screen.title_text
        await press(pilot, "y")
        assert not any(c[0] == "launch" for c in actions.calls)
        assert not isinstance(app.screen, ConfirmScreen)


async def test_kill_always_confirms_naming_launch_and_box(fixture_db: F.Fixture) -> None:
    actions = F.FixedActions()
    app = make_app(fixture_db, actions)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await press(pilot, "3")
        names = [r[0] for r in table_rows(app, "#arms-table")]
        table = app.screen.query_one("#arms-table", DataTable)
        table.move_cursor(row=names.index(F.GLM_FAILED))
        await press(pilot, "k")
        assert not isinstance(app.screen, ConfirmScreen)  # a failed launch has nothing to kill
        assert "nothing running to kill" in app.messages[-1]
        table.move_cursor(row=names.index(F.QWEN))
        await press(pilot, "k")
        assert isinstance(app.screen, ConfirmScreen)
        assert app.screen.title_text == "Kill L-qwen-0 on pro-a?"
        await press(pilot, "escape")
        assert not any(c[0] == "kill" for c in actions.calls)
        await press(pilot, "k", "y")
        assert actions.calls[-1] == ("kill", "pro-a", "L-qwen-0")


async def test_arms_detail_shows_kernel_lines_and_the_engines_refusal(fixture_db: F.Fixture) -> None:
    app = make_app(fixture_db)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await press(pilot, "3")
        names = [r[0] for r in table_rows(app, "#arms-table")]
        table = app.screen.query_one("#arms-table", DataTable)
        table.move_cursor(row=names.index(F.QWEN))
        await settle(pilot)
        assert "linear    Using B12xNvFp4LinearKernel for NVFP4 GEMM" in text_of(app, "#arms-detail")
        table.move_cursor(row=names.index(F.GLM_FAILED))
        await settle(pilot)
        detail = text_of(app, "#arms-detail")
        assert "failed: vllm/model_executor/layers/fused_moe/oracle.py:211 ValueError" in detail
        assert "engine accepts: triton, marlin" in detail
        assert f"{F.GLM_DEGEN} (not in recipes)" in names


@pytest.mark.parametrize("key", ["l", "k"])
async def test_browse_refuses_launch_and_kill(fixture_db: F.Fixture, key: str) -> None:
    actions = F.FixedActions(read_only=True)
    app = make_app(fixture_db, actions, read_only=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await press(pilot, "3", key)
        assert not isinstance(app.screen, ConfirmScreen)
        assert app.messages[-1].startswith(
            (
                "launching is disabled: browse mode is read-only",
                "killing is disabled: browse mode is read-only",
            )
        )
        assert "campaign --db" in app.messages[-1]
        assert [c for c in actions.calls if c[0] in ("launch", "kill", "lint")] == []


async def test_browse_refuses_timers_and_live_console_arms_one(fixture_db: F.Fixture) -> None:
    app = make_app(fixture_db, read_only=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await press(pilot, "2", "t")
        assert not isinstance(app.screen, TimerScreen)
        assert app.messages[-1].startswith("setting a timer is disabled")
    actions = F.FixedActions()
    app = make_app(fixture_db, actions)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await press(pilot, "2", "t")
        assert isinstance(app.screen, TimerScreen)
        for ch in "2026-09-06 01:27":
            await pilot.press(ch if ch != " " else "space")
        await press(pilot, "enter")
        assert isinstance(app.screen, TimerScreen)  # a naive time is refused, not guessed
        assert "refused" in str(app.screen.query_one("#timer-check", Static).render())
        for ch in " UTC":
            await pilot.press(ch if ch != " " else "space")
        await settle(pilot)
        assert "local 2026-09-06 02:27:00 BST (+01:00)" in str(
            app.screen.query_one("#timer-check", Static).render()
        )
        await press(pilot, "enter")
        assert actions.calls[-1] == ("arm_timer", "pro-a", "2026-09-06 01:27 UTC", "stop-arms")


async def test_help_lists_every_binding_with_remapped_keys(fixture_db: F.Fixture, tmp_path: Path) -> None:
    keys = tmp_path / "keys.toml"
    keys.write_text('[keys]\n"arms.kill" = "ctrl+k"\n"view.results" = "f4"\n')
    actions = F.FixedActions()
    app = make_app(fixture_db, actions, keys=keys)
    async with app.run_test(size=(100, 40)) as pilot:
        await settle(pilot)
        await press(pilot, "question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = str(app.screen.query_one("#help Static", Static).render())
        from console.tui import keymap

        for spec in keymap.SPECS:
            assert spec.description in text, spec.id
        assert "ctrl+k" in text and "f4" in text and "ctrl+p" in text
        await press(pilot, "escape", "f4")
        assert app.current_mode == "results"
        await press(pilot, "3")
        names = [r[0] for r in table_rows(app, "#arms-table")]
        app.screen.query_one("#arms-table", DataTable).move_cursor(row=names.index(F.QWEN))
        await press(pilot, "k")
        assert not isinstance(app.screen, ConfirmScreen)  # k no longer kills
        await press(pilot, "ctrl+k")
        assert isinstance(app.screen, ConfirmScreen)


async def test_command_palette_switches_views(fixture_db: F.Fixture) -> None:
    app = make_app(fixture_db)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await press(pilot, "ctrl+p")
        for ch in "results":
            await pilot.press(ch)
        await settle(pilot)
        await press(pilot, "enter")
        assert app.current_mode == "results"


async def test_q_quits(fixture_db: F.Fixture) -> None:
    app = make_app(fixture_db)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0 and not app.is_running
