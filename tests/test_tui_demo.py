"""A newcomer's first screens: the console opened at 140x42 on a fresh `campaign demo` state.db, walked view by
view with Textual's Pilot, each asserted on the text the screen renders (Textual's own SVG screenshot)."""

from __future__ import annotations

import asyncio
import html
import re
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from textual.pilot import Pilot
from textual.widgets import Static

from console.cli import main
from console.economics import FRONTIER_LEGEND
from console.tui.app import ConsoleApp
from console.tui.views.economics import EconomicsScreen
from console.tui.views.live import NO_GPU, NO_THROUGHPUT, NO_TIMER, NO_TRIPWIRE

AFTER = int(datetime(2026, 9, 6, 9, 0, tzinfo=UTC).timestamp() * 1000)
SIZE = (140, 42)
_TEXT = re.compile(
    r'<text class="[^"]*" x="([\d.]+)" y="[\d.]+" textLength="[\d.]+" clip-path="url\(#[\w-]+-line-(\d+)\)">(.*?)</text>'
)


def screen_lines(app: ConsoleApp) -> list[str]:
    """The screen as text, line by line, from the SVG Textual exports (what a screenshot shows)."""
    lines: dict[int, list[tuple[float, str]]] = defaultdict(list)
    for x, line, text in _TEXT.findall(app.export_screenshot()):
        lines[int(line)].append((float(x), html.unescape(text).replace("\xa0", " ")))
    return ["".join(t for _, t in sorted(lines[i])) for i in range(max(lines) + 1)] if lines else []


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("newcomer") / "state.db"
    assert main(["--db", str(db), "demo"]) == 0
    return db


async def _settle(pilot: Pilot[None]) -> None:
    for _ in range(3):
        await pilot.pause()
        await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def _walk(demo: Path, *steps: str, size: tuple[int, int] = SIZE) -> dict[str, list[str]]:
    """Press each key in turn; the screen's lines after each, by key."""
    app = ConsoleApp(
        demo,
        clock=lambda: AFTER,
        local_tz=ZoneInfo("UTC"),
        keys_path=Path("/etc/campaign-console-test/keys.toml"),
        refresh_s=None,
    )
    seen: dict[str, list[str]] = {}

    async def run() -> None:
        async with app.run_test(size=size) as pilot:
            await _settle(pilot)
            seen["start"] = screen_lines(app)
            for key in steps:
                await pilot.press(key)
                await _settle(pilot)
                seen[key] = screen_lines(app)
                if key == "5":
                    screen = app.screen
                    assert isinstance(screen, EconomicsScreen)
                    seen["economics-places"] = [r.place for r in screen.rows]
                if key == "2":
                    for panel in ("throughput", "power", "tripwire", "timers"):
                        text = str(app.screen.query_one(f"#live-{panel}", Static).render())
                        seen[f"live-{panel}"] = text.splitlines()

    asyncio.run(run())
    return seen


def test_fleet_names_both_capped_boxes_power_verdicts_with_their_figures(demo: Path) -> None:
    seen = _walk(demo, "down")
    text = "\n".join(seen["start"])
    for box in ("seed-5090x8-400w", "seed-pro6000-400w"):
        row = next(line for line in seen["start"] if box in line)
        assert "WARN power" in row and "unchecked" not in row
    assert "seed-pro6000-600w " in text
    # The first rented box is selected (the 5090 host); a row down, the 400 W Workstation box.
    assert any(
        "WARN power: GPU0-7 capped at 400 W of a 575 W maximum (-30%)" in line for line in seen["start"]
    )
    assert any(
        "WARN power: GPU0-3 capped at 400 W of a 600 W maximum (-33%)" in line for line in seen["down"]
    )


def test_live_shows_a_demo_boxs_gpu_and_throughput_history(demo: Path) -> None:
    lines = _walk(demo, "down", "2")["2"]
    text = "\n".join(lines)
    assert "seed-pro6000-400w" in lines[1] and "at its record's end 2026-09-03" in lines[1]
    assert NO_THROUGHPUT not in text and "no GPU samples" not in text and "no tripwire run" not in text
    assert "throughput (server /metrics)" in text
    assert re.search(r"out \d[\d.k]* tok/s +in \d[\d.k]* tok/s", text)
    assert "GPU0" in text and "/400 W CAPPED" in text and "enforced limit" in text and "SM clock" in text
    assert re.search(r"-10m +end", text)  # the time axis: its right edge is the record's end
    assert "⣿" in text  # the braille traces are drawn
    assert "hy3" in text  # what served last on the box, the tripwires of the night beside it
    assert re.search(r"qwen3\.6-35b-a3b +16/20 FAIL", text)  # printed as ok/total only: no split claimed


def test_sweep_shows_the_write_ups_lists_with_their_outcomes(demo: Path) -> None:
    text = "\n".join(_walk(demo, "6")["6"])
    assert "no sweep in this state.db" not in text
    assert "glm_hour on seed-pro6000-600w-b: interrupted" in text
    for word in ("served", "degenerate", "refused", "pending"):
        assert word in text, word


def test_economics_opens_on_the_frontier_with_the_charts_axes_and_legend(demo: Path) -> None:
    seen = _walk(demo, "5")
    places = seen["economics-places"]
    frontier = places.count("frontier")
    assert frontier >= 1 and places[:frontier] == ["frontier"] * frontier
    lines = seen["5"]
    rows = [line for line in lines if "frontier" in line and "$" in line]
    assert rows, "a frontier row is on screen"
    words = " ".join(" ".join(lines).split())
    assert " ".join(FRONTIER_LEGEND.split()) in words, "the legend is visible"
    ticks = [line for line in lines if len(re.findall(r"\$\d+\.\d{3}", line)) >= 3]
    assert ticks, "the x axis values are visible"
    axis = lines.index(ticks[-1])
    assert any(re.search(r"\d\.\d{3}", line) for line in lines[axis - 12 : axis]), "y axis values"


def test_every_chart_keeps_its_axis_values_and_legend_at_120x36(demo: Path) -> None:
    """Results' bars (the highlighted row's shape, as many arms as fit, then how many were left out), Curves'
    scatter and Economics' frontier chart, each with its axis values and words on screen."""
    seen = _walk(demo, "4", "c", "7", "i", "5", size=(120, 36))
    bars = seen["c"]
    axis = next(i for i, line in enumerate(bars) if "└" in line and "┬" in line)
    assert re.search(r"^\s+0\s+\d+k\s*$", bars[axis + 1])  # 0 and the shape's best under the bars
    assert re.search(r"^\+\d+ slower arms at \w+", bars[axis + 2])
    curves = seen["i"]
    axis = next(i for i, line in enumerate(curves) if "└" in line and "┬" in line)
    assert len(re.findall(r"\d+\.\d", curves[axis + 1])) == 5  # the x values
    assert "on the Pareto frontier" in " ".join(curves[axis + 2 : axis + 4])
    economics = seen["5"]
    axis = next(i for i, line in enumerate(economics) if "└" in line and "┬" in line)
    assert len(re.findall(r"\$\d+\.\d{3}", economics[axis + 1])) == 5
    assert "accuracy up" in economics[axis + 2] and "x tripwire failed" in economics[axis + 3]


def test_an_empty_panel_is_one_line_of_what_would_fill_it(demo: Path) -> None:
    """The laptop itself (`local`, never connected) has no samples, tripwire or timer: each Live panel says so
    in one line, with no chart frame, axis label or zero drawn."""
    seen = _walk(demo, "up", "2")
    assert "local" in seen["2"][1]
    assert seen["live-throughput"] == [NO_THROUGHPUT]
    assert seen["live-power"] == [NO_GPU.format(box="local")]
    assert seen["live-tripwire"] == [NO_TRIPWIRE]
    assert seen["live-timers"] == [NO_TIMER]
