"""Driving the console under Pilot: wait for the load workers a key started, read what a panel shows."""

from __future__ import annotations

from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from console.tui.app import ConsoleApp


async def settle(pilot: Pilot[None]) -> None:
    """Let key handlers run, then the load workers they started, then the redraw those posted."""
    for _ in range(3):
        await pilot.pause()
        await pilot.app.workers.wait_for_complete()
    await pilot.pause()


async def press(pilot: Pilot[None], *keys: str) -> None:
    for key in keys:
        await pilot.press(key)
        await settle(pilot)


def text_of(app: ConsoleApp, selector: str) -> str:
    return str(app.screen.query_one(selector, Static).render())


def table_rows(app: ConsoleApp, selector: str) -> list[list[str]]:
    table = app.screen.query_one(selector, DataTable)
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
