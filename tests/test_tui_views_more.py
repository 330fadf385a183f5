"""Pilot tests of the Economics (5) and Sweep (6) views, the Arms log tail and the Live charts and bench."""

from __future__ import annotations

from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from textual.widgets import DataTable

from console.readmodel import ReadModel
from console.store import Store
from console.tui.app import ConsoleApp
from ops.demo import build_demo
from testbed import tui_fixture as F
from testbed.tui_pilot import press, settle, table_rows, text_of


@pytest.fixture
def fx(tmp_path: Path) -> F.Fixture:
    return F.build(tmp_path / "state.db")


def make_app(fx: F.Fixture, actions: F.FixedActions | None = None, read_only: bool = False) -> ConsoleApp:
    return ConsoleApp(
        fx.path,
        read_only=read_only,
        clock=lambda: F.NOW,
        local_tz=ZoneInfo("Europe/London"),
        actions=actions or F.FixedActions(read_only=read_only),
        keys_path=fx.path.with_name("no-keys.toml"),
        refresh_s=None,
    )


# -- economics ---------------------------------------------------------------------------------------
async def test_economics_prices_each_configuration_and_marks_the_frontier(fx: F.Fixture) -> None:
    F.add_economics(fx.path)
    app = make_app(fx)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        await press(pilot, "5")
        assert app.current_mode == "economics"
        rows = {r[0]: r for r in table_rows(app, "#economics-table")}
        assert set(rows) == {F.QWEN, F.SMALL, F.GLM_DEGEN, "qwen3.8-27b-fp8-flashinfer"}
        assert [rows[a][3] for a in (F.SMALL, F.QWEN, "qwen3.8-27b-fp8-flashinfer", F.GLM_DEGEN)] == [
            "frontier",
            "frontier",
            "dominated",
            "DIAGNOSTIC-ONLY",
        ]
        # 2.74 $/h at 70% use is 3.91 per active hour; the API column is the stored openrouter price.
        assert rows[F.QWEN][7] == "$3.91" and rows[F.QWEN][4].endswith("openrouter-list")
        cost_70 = float(rows[F.QWEN][1].lstrip("$"))
        chart = text_of(app, "#economics-chart")
        assert "* frontier" in chart and "x tripwire failed" in chart
        assert f"{F.QWEN} (pro-a)" in chart and f"{F.GLM_DEGEN} (pro-a)" not in chart  # never on the frontier
        await press(pilot, "u")
        assert "utilisation 100%" in text_of(app, "#topbar")
        rows = {r[0]: r for r in table_rows(app, "#economics-table")}
        assert rows[F.QWEN][7] == "$2.74"
        assert float(rows[F.QWEN][1].lstrip("$")) == pytest.approx(cost_70 * 0.7, abs=0.0011)


async def test_economics_marks_borrowed_and_capped_rows_and_shows_the_quality_ledger(tmp_path: Path) -> None:
    """The write-up: the 400 W and 5090 boxes are capped, arms without their own accuracy borrow one, and the
    write-up's paired comparisons are read against its 0.022 floor below the chart."""
    db = tmp_path / "demo.db"
    with Store(db) as store:
        build_demo(store)
    app = ConsoleApp(
        db,
        read_only=True,
        clock=lambda: F.NOW,
        local_tz=ZoneInfo("Europe/London"),
        actions=F.FixedActions(read_only=True),
        keys_path=tmp_path / "no-keys.toml",
        refresh_s=None,
    )
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        await press(pilot, "5")
        places = {(r[6], r[0]): r[3] for r in table_rows(app, "#economics-table")}
        assert places[("seed-5090x8-400w", "gpt-oss-20b-mxfp8")] == "CAPPED"
        assert places[("seed-pro6000-600w", "deepseek-v4-flash-dp4-ep-512")] == "frontier"
        assert places[("seed-pro6000-600w", "deepseek-v4-flash-dp4-ep-256")] == "borrowed"
        chart = text_of(app, "#economics-chart")
        assert "b accuracy borrowed  c capped box" in chart
        assert "noise floor, seed 403-item suite: 0.022 from 4 repeat pairs" in chart
        assert " 16 to 15  +0.002  tie: inside the 0.022 floor" in chart


async def test_economics_without_priced_rows_says_what_is_missing(fx: F.Fixture) -> None:
    app = make_app(fx)  # the base fixture has no router/promptopt rows
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await press(pilot, "5")
        assert table_rows(app, "#economics-table") == []
        assert "no configuration priced yet" in text_of(app, "#economics-detail")


# -- sweep -------------------------------------------------------------------------------------------
async def test_sweep_lists_every_arm_with_its_outcome_and_the_engines_reason(fx: F.Fixture) -> None:
    app = make_app(fx)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        await press(pilot, "6")
        progress = text_of(app, "#sweep-progress")
        assert "#2 glm-5.3-moe-pairs on pro-a: running, 4/6 finished" in progress
        assert "now glm-5.3-flash-dp4-ep@auto+marlin for 3m12s" in progress
        rows = table_rows(app, "#sweep-table")
        assert [r[1] for r in rows] == [
            "served",
            "REFUSED",
            "CRASHED",
            "DEGEN",
            "running",
            "pending",
            "served",
        ]
        await press(pilot, "down")
        detail = text_of(app, "#sweep-detail")
        assert "moe_backend 'flashinfer_cutlass' is not supported for this model" in detail
        assert "engine accepts: triton, marlin" in detail
        await press(pilot, "slash", *"crashed", "enter")
        assert [r[2] for r in table_rows(app, "#sweep-table")] == ["glm-5.3-flash-dp4-ep@auto+triton"]


async def test_sweep_replays_with_the_cursor(fx: F.Fixture) -> None:
    """At the start of the record the second sweep had not begun: only the finished smoke sweep shows."""
    app = make_app(fx, read_only=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await press(pilot, "6", "left_curly_bracket")
        assert [r[2] for r in table_rows(app, "#sweep-table")] == [F.SMALL]
        assert "qwen3-smoke on pro-a: done" in text_of(app, "#sweep-progress")


def test_sweep_arm_states_follow_the_cursor(fx: F.Fixture) -> None:
    with Store(fx.path, read_only=True) as store:
        at = F.START - 450_000  # the refused pair was still starting then
        model = ReadModel(store, lambda: at)
        walk = model.sweeps()[0]
        assert [a.state for a in walk.arms] == [
            "served",
            "running",
            "pending",
            "pending",
            "pending",
            "pending",
        ]
        assert walk.arms[1].reason is None and walk.arms[1].backends_accepted == ()


# -- arms: the launch's log tail -------------------------------------------------------------------------
async def test_arms_fetch_the_log_tail_once_per_launch_and_o_asks_again(fx: F.Fixture) -> None:
    actions = F.FixedActions()
    app = make_app(fx, actions)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await press(pilot, "3")
        names = [r[0] for r in table_rows(app, "#arms-table")]
        app.screen.query_one("#arms-table", DataTable).move_cursor(row=names.index(F.QWEN))
        await settle(pilot)
        detail = text_of(app, "#arms-detail")
        assert "Starting vLLM API server 0 on http://127.0.0.1:8100" in detail
        assert "/root/.campaign-agent/logs/L-qwen-0.log" in detail
        await press(pilot, "4", "3")  # back to the view: no second request
        assert actions.calls.count(("log_tail", "L-qwen-0", 12)) == 1
        await press(pilot, "o")
        assert actions.calls.count(("log_tail", "L-qwen-0", 12)) == 2
        app.screen.query_one("#arms-table", DataTable).move_cursor(row=names.index(F.GLM_FAILED))
        await settle(pilot)
        assert "log tail: unavailable (box unreachable: no log for L-glm-0)" in text_of(app, "#arms-detail")


async def test_browse_says_where_the_log_lives_and_asks_no_box(fx: F.Fixture) -> None:
    actions = F.FixedActions(read_only=True)
    app = make_app(fx, actions, read_only=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await press(pilot, "3")
        names = [r[0] for r in table_rows(app, "#arms-table")]
        app.screen.query_one("#arms-table", DataTable).move_cursor(row=names.index(F.GLM_FAILED))
        await settle(pilot)
        assert "log: on box pro-a at /root/.campaign-agent/logs/L-glm-0.log; browse is offline" in text_of(
            app, "#arms-detail"
        )
        await press(pilot, "o")
        assert not [c for c in actions.calls if c[0] == "log_tail"]
        assert any("fetching a log tail is disabled" in m for m in app.messages)


# -- live: input chart and the load generator's numbers ---------------------------------------------------
async def test_live_charts_input_beside_output_and_names_the_running_bench(fx: F.Fixture) -> None:
    app = make_app(fx)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await press(pilot, "2")
        lines = text_of(app, "#live-throughput").splitlines()
        gutters = [line[:5].strip() for line in lines[1:]]
        assert app.screen.query_one("#live-throughput").border_title == "throughput (server /metrics)"
        assert gutters[:6] == ["5.2k", "out", "0", "16k", "in", "0"]  # input peaks at 3.1x output
        assert lines[-1].strip() == "loadgen chat-1k C1024 running 1m00s"


def test_a_sent_bench_command_is_the_run_in_progress(fx: F.Fixture) -> None:
    """A real bench has no row until the load generator reports; its command names the workload."""
    with Store(fx.path, clock=lambda: F.NOW - 20_000) as store:
        store.commands.add(
            "bench-abc",
            "pro-a",
            "bench",
            {"arm": F.QWEN, "workload": "router", "concurrency": 8, "launch_id": "L-qwen-0"},
        )
    with Store(fx.path, read_only=True) as store:
        view = ReadModel(store, lambda: F.NOW).live("pro-a", buckets=10)
        assert view is not None and view.bench is not None
        assert (view.bench.shape, view.bench.concurrency, view.bench.running) == ("router", 8, True)
        assert view.bench.started_ms == F.NOW - 20_000
