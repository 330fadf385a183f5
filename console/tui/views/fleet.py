"""Fleet: every box at a glance — connection, GPUs, price, check verdicts in words, arms, timer.

`c` checks the selected box (probe, then the verdicts), `r` connects it (agent up, journal ingested).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from textual.widgets import DataTable

from console.readmodel import FleetRow
from console.timeutil import fmt_remaining
from console.tui import keymap
from console.tui.render import timer_lines
from console.tui.views.base import Cell, TableView, fill_table, toned

COLUMNS = ("box", "state", "GPUs", "$/h", "checks", "serving", "stop in")


def checks_word(row: FleetRow) -> str:
    """Non-ok verdicts named (``FAIL power``), else ``ok``; a capped GPU is named even if unchecked."""
    bad = [f"{c.word} {c.name}" for c in row.checks if c.verdict != "ok"]
    if row.capped_gpus and not any(c.name == "power" and c.verdict != "ok" for c in row.checks):
        bad.insert(0, f"CAPPED x{row.capped_gpus}")
    if bad:
        return ", ".join(bad)
    return "ok" if row.checks else "unchecked"


class FleetScreen(TableView):
    VIEW = "fleet"
    TITLE_TEXT = "Fleet"
    BINDINGS = keymap.bindings("fleet")

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[FleetRow] = []

    def load(self) -> list[FleetRow]:
        return self.console.model.fleet()

    def show(self, rows: list[FleetRow]) -> None:
        self.console.box_names = [r.name for r in rows]
        if self.console.selected_box is None and rows:
            # Start on a rented box rather than the laptop itself.
            ranked = sorted(rows, key=lambda r: (r.kind == "local", r.status != "up"))
            self.console.selected_box = ranked[0].name
        needle = self.filter_text.lower().strip()
        self.rows = [
            r for r in rows if not needle or needle in f"{r.name} {r.status} {r.gpu_summary}".lower()
        ]
        table: list[tuple[list[Cell], str]] = []
        for r in self.rows:
            stop = fmt_remaining(r.timer.remaining_ms) if r.timer else "-"
            price = "-" if r.price_per_hour is None else f"{r.price_per_hour:.2f}"
            cells: list[Cell] = [
                r.name,
                toned(r.status),
                r.gpu_summary or "-",
                price,
                toned(checks_word(r)),
                ", ".join(r.serving) or "-",
                stop,
            ]
            table.append((cells, r.name))
        with self.app.batch_update():
            fill_table(self.table, COLUMNS, table, self.console.selected_box)
        self.show_detail()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value:
            self.console.selected_box = event.row_key.value
            self.show_detail()

    def show_detail(self) -> None:
        row = next((r for r in self.rows if r.name == self.console.selected_box), None)
        lines: list[str] = []
        if row:
            lines.append(
                f"{row.name}: {row.status}" + (f" ({row.status_detail})" if row.status_detail else "")
            )
            if row.ingest.line:
                lines.append(f"  {row.ingest.line}; kept in the quarantine and lost_events tables")
            lines += [f"  {c.word:>4} {c.name}: {c.reason}" for c in row.checks]
            if row.timer:
                lines += timer_lines(row.timer, self.console.local_tz)
        self.detail.update("\n".join(lines))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """The table keeps enter for itself; selecting a row opens it, as the binding says."""
        self.action_open_box()

    def action_open_box(self) -> None:
        if self.console.selected_box:
            self.console.action_view("live")

    def action_check(self) -> None:
        self._act("checking a box", "check", self.console.actions.check)

    def action_connect(self) -> None:
        self._act("connecting a box", "connect", self.console.actions.connect)

    def _act(self, verb: str, what: str, act: Callable[[str], Coroutine[Any, Any, str]]) -> None:
        """One service intent on the selected box, said when it starts (a probe takes seconds) and when done."""
        app = self.console
        box = app.selected_box
        if app.refuse_if_read_only(verb) or box is None:
            return
        app.say(f"{what} {box}: started")
        app.run_action_worker(act(box), f"{what} {box}")
