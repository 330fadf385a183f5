"""The console's action adapter over the real recipes and console.service (no box is contacted here)."""

from __future__ import annotations

from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from textual.widgets import DataTable

from console.errors import InputError, Refused
from console.store import Store
from console.tui.actions import ServiceActions
from console.tui.app import ConsoleApp
from console.tui.modals import ConfirmScreen
from testbed import tui_fixture as F
from testbed.tui_pilot import press, settle, table_rows

NVFP4_AUTO = "qwen3.8-27b-nvfp4-auto"  # the write-up's rule 1 control arm in recipes/


@pytest.fixture
def fx(tmp_path: Path) -> F.Fixture:
    return F.build(tmp_path / "state.db")


async def test_lint_runs_the_recipe_rules_and_the_boxs_failed_check(fx: F.Fixture) -> None:
    actions = ServiceActions(fx.path)
    try:
        lines = actions.lint(NVFP4_AUTO, "pro-a")
    finally:
        await actions.close()
    rules = {line.rule_id: line for line in lines}
    assert rules["R1-nvfp4-linear-backend"].blocking
    assert rules["check-failed"].blocking and "GPU 2 capped at 400 W" in rules["check-failed"].reason


async def test_browse_adapter_refuses_every_action(fx: F.Fixture) -> None:
    actions = ServiceActions(fx.path, read_only=True)
    for call in (
        actions.launch("pro-a", F.QWEN),
        actions.kill("pro-a", "L-qwen-0"),
        actions.arm_timer("pro-a", "1h", "stop-arms"),
        actions.supervise(lambda message: None),
    ):
        with pytest.raises(Refused, match="read-only view"):
            await call
    await actions.close()


async def test_a_launch_blocked_by_the_power_check_sends_nothing(fx: F.Fixture) -> None:
    app = ConsoleApp(
        fx.path,
        clock=lambda: F.NOW,
        local_tz=ZoneInfo("UTC"),
        keys_path=fx.path.with_name("k.toml"),
        refresh_s=None,
    )
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await press(pilot, "3")
        names = [r[0] for r in table_rows(app, "#arms-table")]
        assert F.QWEN in names and NVFP4_AUTO in names  # the real recipes, beside the store's launches
        app.screen.query_one("#arms-table", DataTable).move_cursor(row=names.index(F.QWEN))
        await press(pilot, "l")
        assert isinstance(app.screen, ConfirmScreen) and "blocked by lint" in app.screen.title_text
        assert any("check-failed" in line and "400 W" in line for line in app.screen.body)
        await press(pilot, "y")
    with Store(fx.path, read_only=True) as store:
        assert store.scalar("SELECT count(*) FROM commands") == 0


async def test_the_live_console_supervises_and_closes_its_actions(fx: F.Fixture) -> None:
    actions = F.FixedActions()
    app = ConsoleApp(
        fx.path,
        clock=lambda: F.NOW,
        local_tz=ZoneInfo("UTC"),
        actions=actions,
        keys_path=fx.path.with_name("k.toml"),
        refresh_s=None,
        supervise=True,
    )
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert ("supervise",) in actions.calls
    assert actions.calls[-1] == ("close",)


async def test_log_tail_of_an_unknown_launch_is_refused_before_any_box_is_reached(fx: F.Fixture) -> None:
    actions = ServiceActions(fx.path)
    try:
        with pytest.raises(InputError, match="no launch 'L-nope'"):
            await actions.log_tail("L-nope", 5)
    finally:
        await actions.close()
    with Store(fx.path, read_only=True) as store:
        assert store.scalar("SELECT count(*) FROM commands") == 0
