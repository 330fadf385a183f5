"""Snapshots of each view at a fixed size, fixed clock, fixed zone and the fixture state.db.

The SVGs live in tests/snapshots/; after a deliberate UI change, review them with
``pytest tests/test_tui_snapshots.py --snapshot-update`` and look at the diff before committing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from pytest_textual_snapshot import SVGImageExtension  # type: ignore[import-untyped]  # no py.typed
from syrupy.assertion import SnapshotAssertion
from syrupy.location import PyTestLocation

from console.tui.app import ConsoleApp
from testbed import tui_fixture as F
from tests.test_tui_curves import store_curve


class TuiSnapshots(SVGImageExtension):  # type: ignore[misc]  # its base is untyped (no py.typed)
    """pytest-textual-snapshot's SVG files (normalised as its ``snap_compare`` stores them), kept beside this
    module in tests/snapshots/<module>/."""

    @classmethod
    def dirname(cls, *, test_location: PyTestLocation) -> str:
        module = Path(test_location.filepath)
        return str(module.parent / "snapshots" / module.stem)


@pytest.fixture
def shoot(tmp_path: Path, snapshot: SnapshotAssertion) -> Callable[..., None]:
    fx = F.build(tmp_path / "state.db")

    def shoot(
        keys: Iterable[str],
        size: tuple[int, int] = (80, 24),
        read_only: bool = False,
        economics: bool = False,
        curves: bool = False,
    ) -> None:
        if economics:
            F.add_economics(fx.path)
        if curves:
            store_curve(fx.path)
        app = ConsoleApp(
            fx.path,
            read_only=read_only,
            clock=lambda: F.NOW,
            local_tz=ZoneInfo("Europe/London"),
            actions=F.FixedActions(read_only=read_only),
            keys_path=Path("/etc/campaign-console-test/keys.toml"),
            refresh_s=None,
        )

        async def screenshot() -> str:
            """Textual's public test harness, settled as pytest-textual-snapshot settles an app before its
            screenshot: each key, then its messages and workers, then any scheduled animation."""
            async with app.run_test(size=size, tooltips=True, notifications=True) as pilot:
                for key in ["", *keys]:
                    if key:
                        await pilot.press(key)
                    for _ in range(3):
                        await pilot.pause()
                        await pilot.app.workers.wait_for_complete()
                await pilot.pause()
                await pilot.wait_for_scheduled_animations()
                await pilot.pause()
                await pilot.pause()
                await pilot.wait_for_scheduled_animations()
                return app.export_screenshot(title=app.title, simplify=True)

        svg = asyncio.run(screenshot())
        assert snapshot(extension_class=TuiSnapshots) == svg

    return shoot


def test_fleet_80x24(shoot: Callable[..., None]) -> None:
    shoot([])


def test_live_80x24(shoot: Callable[..., None]) -> None:
    shoot(["2"])


def test_arms_80x24(shoot: Callable[..., None]) -> None:
    shoot(["3"])


def test_results_80x24(shoot: Callable[..., None]) -> None:
    shoot(["4"])


def test_live_120x36_browse_replayed_back(shoot: Callable[..., None]) -> None:
    shoot(["2", "left_square_bracket", "left_square_bracket", "w"], size=(120, 36), read_only=True)


def test_live_120x36_gpu_history_and_clock(shoot: Callable[..., None]) -> None:
    shoot(["2"], size=(120, 36))


def test_results_chart_120x36(shoot: Callable[..., None]) -> None:
    shoot(["4", "c"], size=(120, 36))


def test_help_80x24(shoot: Callable[..., None]) -> None:
    shoot(["question_mark"])


def test_launch_confirmation_80x24(shoot: Callable[..., None]) -> None:
    shoot(["3", "down", "l"])


def test_bench_prompt_80x24(shoot: Callable[..., None]) -> None:
    shoot(["3", "down", "down", "down", "b", *"router", "space", "6", "4"])


def test_economics_80x24(shoot: Callable[..., None]) -> None:
    shoot(["5"], economics=True)


def test_economics_frontier_chart_120x36(shoot: Callable[..., None]) -> None:
    shoot(["5"], size=(120, 36), economics=True)


def test_sweep_80x24(shoot: Callable[..., None]) -> None:
    shoot(["6"])


def test_curves_140x42(shoot: Callable[..., None]) -> None:
    shoot(["7"], size=(140, 42), curves=True)


def test_sweep_refused_arm_120x36(shoot: Callable[..., None]) -> None:
    shoot(["6", "down"], size=(120, 36))
