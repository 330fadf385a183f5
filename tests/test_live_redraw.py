"""The Live view draws only what changed: a redraw whose data did not move charts nothing and repaints no
panel; a new sample is charted and shown; a one-row chart is a sparkline; the braille area keeps its size,
its gaps and its scale whatever the series (hypothesis)."""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from console.charts import SPARKS, sparkline, trace
from console.readmodel import ReadModel
from console.store import Store
from console.tui.app import ConsoleApp
from console.tui.render import fmt_window, gpu_lines
from console.tui.views import live
from testbed import backlog
from testbed import tui_fixture as F
from testbed.tui_pilot import press, settle, text_of


@pytest.fixture
def fx(tmp_path: Path) -> F.Fixture:
    return F.build(tmp_path / "state.db")


def counted(calls: Counter[str], name: str, real: Callable[..., Any]) -> Callable[..., Any]:
    """``real``, counting its calls under ``name``."""

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls[name] += 1
        return real(*args, **kwargs)

    return spy


def _app(fx: F.Fixture, clock: Callable[[], int]) -> ConsoleApp:
    """The console on the fixture's state.db at a clock the test moves, in UTC, redrawn only when asked."""
    return ConsoleApp(
        fx.path,
        clock=clock,
        local_tz=ZoneInfo("UTC"),
        actions=F.FixedActions(),
        keys_path=fx.path.with_name("no-keys.toml"),
        refresh_s=None,
    )


async def test_a_redraw_whose_data_did_not_move_charts_and_repaints_nothing_and_a_new_sample_shows(
    fx: F.Fixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: Counter[str] = Counter()
    monkeypatch.setattr(live, "throughput_text", counted(calls, "throughput", live.throughput_text))
    monkeypatch.setattr(live, "gpu_lines", counted(calls, "power", gpu_lines))
    real_update = live.Shown.update

    def update(self: live.Shown, *args: Any, **kwargs: Any) -> None:
        calls[f"paint {self.id}"] += 1
        real_update(self, *args, **kwargs)

    monkeypatch.setattr(live.Shown, "update", update)
    now = [F.NOW]
    app = _app(fx, lambda: now[0])
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        await press(pilot, "2")
        assert calls["throughput"] >= 1 and calls["power"] >= 1
        assert text_of(app, "#live-power").splitlines()[1].startswith("GPU0  372/600 W")
        before = Counter(calls)
        for _ in range(3):
            app.redraw_visible()
            await settle(pilot)
        assert calls == before  # loaded three times, nothing charted, no panel repainted

        now[0] = F.NOW + 1000  # a second later, one new GPU sample arrives
        sample = {"gpus": [{**backlog.gpu(g, 0), "power_w": 100.0 + g} for g in range(4)]}
        with Store(fx.path, clock=lambda: now[0]) as store:
            store.ingest.batch("pro-a", [{"seq": 1, "t_ms": now[0], "kind": "gpu_sample", **sample}])
        app.redraw_visible()
        await settle(pilot)
        assert (
            calls["power"] == before["power"] + 1
            and calls["paint live-power"] == before["paint live-power"] + 1
        )
        lines = text_of(app, "#live-power").splitlines()
        assert [line[:15] for line in lines if line.startswith("GPU") and " W" in line][:2] == [
            "GPU0  100/600 W",
            "GPU1  101/600 W",
        ]


def test_the_same_data_and_size_reuse_the_drawing_and_a_new_size_draws_again() -> None:
    drawn: list[str] = []
    reused: live.Reused[str] = live.Reused()

    def draw(text: str) -> Callable[[], str]:
        def drawing() -> str:
            drawn.append(text)
            return text

        return drawing

    assert reused.get(((1.0, 2.0), 40, 10), draw("a")) == "a"
    assert reused.get(((1.0, 2.0), 40, 10), draw("b")) == "a"  # equal data, equal size: not drawn
    assert reused.get(((1.0, 2.0), 41, 10), draw("c")) == "c"  # the panel was resized
    assert reused.get(((1.0, 3.0), 41, 10), draw("d")) == "d"  # the last sample moved
    assert drawn == ["a", "c", "d"]


def test_a_panel_too_short_for_two_rows_a_gpu_shows_sparklines(tmp_path: Path) -> None:
    fx = F.build(tmp_path / "state.db")
    with Store(fx.path, read_only=True) as store:
        view = ReadModel(store, lambda: F.NOW).live("pro-a", buckets=20, gpu_buckets=20)
    assert view is not None
    lines = gpu_lines(view, 43, 6)  # a header and one row for each of 4 GPUs
    rows = {line[:4]: line[23:] for line in lines if line.startswith("GPU")}
    assert list(rows) == ["GPU0", "GPU1", "GPU2", "GPU3"]
    assert all(len(row) == 20 and set(row) <= set(SPARKS) for row in rows.values())
    # GPU1 draws 549 W now, GPU0 372 W: the last bucket of GPU1 stands taller, on the board's scale
    assert SPARKS.index(rows["GPU1"][-1]) > SPARKS.index(rows["GPU0"][-1])


async def test_a_short_live_screen_draws_one_row_charts_as_sparklines(fx: F.Fixture) -> None:
    app = _app(fx, lambda: F.NOW)
    async with app.run_test(size=(80, 18)) as pilot:
        await settle(pilot)
        await press(pilot, "2")
        gpus = [line for line in text_of(app, "#live-power").splitlines() if line.startswith("GPU")]
        assert [line[:4] for line in gpus] == ["GPU0", "GPU1", "GPU2", "GPU3"]  # one row each
        assert all(set(line[23:]) <= set(SPARKS) and len(line) > 23 for line in gpus)
        one_row = [
            line for line in text_of(app, "#live-throughput").splitlines() if line.startswith("   in ")
        ]
        assert len(one_row) == 1 and set(one_row[0][6:]) <= set(SPARKS)  # the input chart got one row


def test_a_sparkline_keeps_gaps_zero_and_the_scale() -> None:
    assert sparkline([0.0, None, 5.0, 10.0, 20.0], 5, top=10) == "▁ ▄██"  # 0 is present, None is a gap
    assert sparkline([1.0, 9.0, 2.0, 3.0], 2, top=10) == "▇▂"  # two values a cell: the larger shows
    assert trace([10.0, 5.0], 2, 1, top=10) == ["█▄"]  # one row high: the sparkline, 8 heights a cell


values = st.lists(st.one_of(st.none(), st.floats(-1e6, 1e6, allow_nan=False)), max_size=200)


@given(values, st.integers(1, 60), st.integers(1, 8), st.floats(0, 1e6, allow_nan=False), values)
def test_a_trace_is_its_size_blank_where_there_is_nothing_and_full_at_the_top(
    series: list[float | None], width: int, height: int, top: float, level: list[float | None]
) -> None:
    rows = trace(series, width, height, top, level)
    assert len(rows) == height and all(len(row) == width for row in rows)
    if all(v is None for v in series) and all(v is None for v in level):
        assert rows == [" " * width] * height
    full = trace([max(top, 1.0)] * len(series), width, height, top)
    if series and height > 1:
        assert full == ["⣿" * width] * height


@pytest.mark.parametrize(
    ("window_ms", "label"),
    [
        (30_000, "30s"),
        (10 * 60_000, "10m"),
        (90 * 60_000, "90m"),
        (3600_000, "1h"),
        (24 * 3600_000, "24h"),
        (3 * 24 * 3600_000, "3d"),
        (7 * 24 * 3600_000, "7d"),
        (30 * 24 * 3600_000, "30d"),
        (36 * 3600_000, "36h"),
    ],
)
def test_windows_past_a_day_are_named_in_days(window_ms: int, label: str) -> None:
    assert fmt_window(window_ms) == label


async def test_a_view_once_drawn_is_frozen_out_of_the_collectors_passes_until_the_console_ends(
    fx: F.Fixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unfrozen, each full pass of the garbage collector walked the App's ~45,000 objects, 30-90 ms, several a
    minute while a backlog ingested (bench/tui_ingest.py); once the App is gone they may be collected again."""
    calls: Counter[str] = Counter()
    monkeypatch.setattr(gc, "freeze", counted(calls, "freeze", gc.freeze))
    app = _app(fx, lambda: F.NOW)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        assert calls["freeze"] == 1 and gc.get_freeze_count() > 0
        await press(pilot, "2")
        assert calls["freeze"] == 2
        for _ in range(2):
            app.redraw_visible()
            await settle(pilot)
        assert calls["freeze"] == 2  # a view already drawn freezes nothing more
    assert gc.get_freeze_count() == 0
