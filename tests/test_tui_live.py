"""The Live view's history over the chart window (throughput from the server or the load generator, each
GPU's draw against its enforced limit, SM clock) and the replay cursor's fixed, shown step."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from console.charts import LEVEL_MARK
from console.readmodel import ReadModel
from console.readmodel.queries import gpu_history, loadgen_throughput
from console.store import Store
from console.tui.app import ConsoleApp
from testbed import tui_fixture as F
from testbed.tui_pilot import press, settle, text_of


@pytest.fixture
def fx(tmp_path: Path) -> F.Fixture:
    return F.build(tmp_path / "state.db")


def make_app(fx: F.Fixture, read_only: bool = False) -> ConsoleApp:
    return ConsoleApp(
        fx.path,
        read_only=read_only,
        clock=lambda: F.NOW,
        local_tz=ZoneInfo("Europe/London"),
        actions=F.FixedActions(read_only=read_only),
        keys_path=fx.path.with_name("no-keys.toml"),
        refresh_s=None,
    )


def progress(bench_id: str, first_ms: int, out: float, seq: int) -> list[dict[str, Any]]:
    """A load generator's samples as the agent journals them (agents/jobs.py), once a second until NOW."""
    return [
        {
            "seq": seq + i,
            "t_ms": t,
            "kind": "bench_progress",
            "bench_id": bench_id,
            "launch_id": "L-qwen-0",
            "requests": i,
            "out_tokens": int(out * i),
            "in_tokens": int(3 * out * i),
            "out_tok_per_s": out,
            "in_tok_per_s": 3 * out,
        }
        for i, t in enumerate(range(first_ms, F.NOW + 1, 1000))
    ]


def add_two_benches(fx: F.Fixture, server: str) -> None:
    """Two runs measured by the load generator (one over the last 5 minutes, one over the last 2), ingested
    as the agent sends them; the server's own samples are gone, zero or kept (``server``)."""
    with Store(fx.path, clock=lambda: F.NOW) as store:
        with store.atomic() as db:
            if server == "missing":
                db.conn.execute("DELETE FROM server_samples")
            elif server == "zero":
                db.conn.execute("UPDATE server_samples SET gen_tok_per_s = 0, prompt_tok_per_s = 0")
        first = progress("bench-a", F.NOW - 299_000, 1000.0, 1)
        store.ingest.batch("pro-a", first + progress("bench-b", F.NOW - 119_000, 500.0, len(first) + 1))


@pytest.mark.parametrize("server", ["missing", "zero"])
def test_throughput_falls_back_to_the_load_generators_samples(fx: F.Fixture, server: str) -> None:
    add_two_benches(fx, server)
    with Store(fx.path, read_only=True) as store:
        view = ReadModel(store, lambda: F.NOW).live("pro-a", buckets=10)
        assert (
            view is not None
            and view.throughput_source == "loadgen"
            and view.throughput_from == "load generator"
        )
        # A minute a bucket: nothing before the first run, then its rate, then both runs summed.
        assert view.out_tok_s.values == (None,) * 5 + (1000.0,) * 3 + (1500.0,) * 2
        assert view.in_tok_s.values[-1] == 4500.0
        # Two hours in minute buckets: each bucket averages its first 20 s (probed, not scanned).
        wide, _ = loadgen_throughput(store, "pro-a", F.NOW - 2 * 3600_000, F.NOW, 120)
        assert wide.values[-5:] == (1000.0,) * 3 + (1500.0,) * 2 and set(wide.values[:-5]) == {None}


def test_the_servers_metrics_win_when_it_has_them(fx: F.Fixture) -> None:
    add_two_benches(fx, "kept")
    with Store(fx.path, read_only=True) as store:
        view = ReadModel(store, lambda: F.NOW).live("pro-a", buckets=10)
        assert view is not None and view.throughput_source == "server" and (view.out_tok_s.peak or 0) > 4000


def test_gpu_history_is_each_gpus_draw_limit_and_clock_averaged_in_sql(fx: F.Fixture) -> None:
    with Store(fx.path, read_only=True) as store:
        history = gpu_history(store, "pro-a", [0, 2], F.NOW - 60_000, F.NOW, 6)
        raw = store.rows(
            "SELECT t_ms, power_w FROM gpu_samples WHERE box = 'pro-a' AND gpu = 0 AND t_ms > ? "
            "AND t_ms <= ? ORDER BY t_ms",
            [F.NOW - 60_000, F.NOW],
        )
        first = [r["power_w"] for r in raw if r["t_ms"] <= F.NOW - 50_000]
        assert [h.gpu for h in history] == [0, 2]
        assert history[0].power_w.values[0] == pytest.approx(sum(first) / len(first))
        assert history[1].limit_w.values == (400.0,) * 6 and history[0].limit_w.values == (600.0,) * 6
        assert history[1].sm_clock_mhz.values == (2400.0,) * 6
        day = gpu_history(store, "pro-a", [2], F.NOW - 24 * 3600_000, F.NOW, 48)[0]  # each bucket probed
        assert (
            day.limit_w.values[-1] == 400.0 and day.limit_w.values[0] is None
        )  # a gap before the night began


async def test_live_charts_each_gpus_draw_against_its_limit_and_its_clock(fx: F.Fixture) -> None:
    app = make_app(fx)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        await press(pilot, "2")
        lines = text_of(app, "#live-power").splitlines()
        assert lines[0] == f"power 0-600 W, {LEVEL_MARK} enforced limit"
        clock = lines.index("SM clock 0-2.9 GHz")
        rows = {line[:4]: line for line in lines[:clock] if line.startswith("GPU")}
        assert rows["GPU2"].startswith("GPU2  400/400 W CAPPED") and "CAPPED" not in rows["GPU0"]
        assert all(
            LEVEL_MARK in rows[f"GPU{g}"] or LEVEL_MARK in lines[lines.index(rows[f"GPU{g}"]) + 1]
            for g in range(4)
        )
        assert [line[:11] for line in lines[clock + 1 : clock + 5]] == [
            "GPU0 2.9GHz",
            "GPU1 2.9GHz",
            "GPU2 2.4GHz",
            "GPU3 2.9GHz",
        ]
        throughput = text_of(app, "#live-throughput").splitlines()
        assert ["-10m", "now"] in [line.split() for line in throughput]  # the time axis under the charts
    app = make_app(fx)
    async with app.run_test(size=(80, 24)) as pilot:  # short: the clock is said beside the draw, no chart
        await settle(pilot)
        await press(pilot, "2")
        lines = text_of(app, "#live-power").splitlines()
        assert [line[:22] for line in lines if line.startswith("GPU")] == [
            "GPU0  372/600 W       ",
            "GPU1  549/600 W       ",
            "GPU2  400/400 W CAPPED",
            "GPU3  402/600 W       ",
        ]
        assert not any(line.startswith("SM clock") for line in lines)


async def test_live_says_the_throughput_comes_from_the_load_generator(fx: F.Fixture) -> None:
    add_two_benches(fx, "missing")
    app = make_app(fx)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await press(pilot, "2")
        panel = app.screen.query_one("#live-throughput")
        assert panel.border_title == "throughput (load generator)"
        lines = text_of(app, "#live-throughput").splitlines()
        assert lines[0] == "out 1.5k tok/s  in 4.5k tok/s"
        assert [line[:5].strip() for line in lines[1:3]] == ["1.5k", "out"]


async def test_replay_step_is_named_on_top_and_follows_the_window(fx: F.Fixture) -> None:
    app = make_app(fx)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await press(pilot, "2")
        assert "LIVE 2026-09-06 00:15:00 UTC step 1m | window 10m" in text_of(app, "#topbar")
        await press(pilot, "w")
        assert "step 5m | window 1h" in text_of(app, "#topbar")
        await press(pilot, "left_square_bracket", "left_square_bracket")
        assert "REPLAY 2026-09-06 00:05:00 UTC (10m before end) step 5m" in text_of(app, "#topbar")
        await press(pilot, "right_square_bracket")
        assert "REPLAY 2026-09-06 00:10:00 UTC (5m before end)" in text_of(app, "#topbar")


async def test_brace_jumps_to_the_start_in_live_mode_and_back_to_now(fx: F.Fixture) -> None:
    app = make_app(fx)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await press(pilot, "2", "left_curly_bracket")
        assert "Live | REPLAY 2026-09-05 22:45:00 UTC (90m before end) step 1m" in text_of(app, "#topbar")
        assert not app.model.cursor.live  # it stopped following now
        app.redraw_visible()  # what the live console's one-second timer does: the cursor stays parked
        await settle(pilot)
        assert "REPLAY 2026-09-05 22:45:00 UTC" in text_of(app, "#topbar")
        await press(pilot, "right_curly_bracket")
        assert (
            "Live | LIVE 2026-09-06 00:15:00 UTC step 1m" in text_of(app, "#topbar") and app.model.cursor.live
        )
