"""Economics: what a million tokens cost on each configuration's box against an API, and the frontier.

The sums are console.economics' (the campaign write-up's Economics section, tested there against its own
table); this view only lays them out: one row per configuration and API price, then the quality/cost
chart (``frontier_chart``) at the width it is drawn. `u` cycles the owner's utilisation, which divides
the box's price per hour into its price per active hour. A row whose accuracy is borrowed from another
box or arm, or that ran on a power-capped box, says so and never stands on the frontier. Below the chart,
the quality ledger: each suite's noise floor, runs scored per item, and the paired comparisons with their
verdicts (``campaign quality`` has the rest).
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Static

from console.economics import DEFAULT_UTILISATION, EconomicsRow, economics_table, frontier_chart
from console.readmodel import QualityLedger
from console.tui import keymap
from console.tui.views.base import Cell, TableView, fill_table, toned

# Cost, quality and the frontier word first: at 80 columns they stay visible, the API and box follow.
COLUMNS = ("arm", "$/Mtok", "accuracy", "frontier", "API $/Mtok", "API/node", "box", "$/h active", "rows")
UTILISATIONS = (0.70, 1.00, 0.50)
CHART_HEIGHT = 13
"""Rows of the frontier chart with its axes (ten rows of points)."""


@dataclass(frozen=True)
class EconomicsData:
    rows: list[EconomicsRow]
    skipped: list[str]
    quality: QualityLedger


def money(value: float | None, places: int = 3) -> str:
    """USD per million tokens needs three places (the campaign write-up's cheapest rows are fractions of a
    cent)."""
    return "-" if value is None else f"${value:.{places}f}"


def quality_lines(ledger: QualityLedger, needle: str) -> list[str]:
    """The ledger in a few lines: floors, runs scored per item, then comparisons (``needle`` filters)."""
    if not (ledger.runs or ledger.comparisons):
        return []
    lines = ["", "quality ledger (campaign quality list / compare A B)"]
    lines += [f"noise floor, {f.suite}: {f.text}" for f in ledger.floors]
    for r in ledger.runs:
        if needle in f"{r.label} {r.harness} {' '.join(r.tasks)}".lower():
            truncated = "-" if r.truncation_rate is None else f"{r.truncation_rate:.1%}"
            lines.append(
                f"run {r.id}  {r.label}  {r.harness} {', '.join(r.tasks)}  {r.items} items  "
                f"{r.accuracy:.3f}  truncated {truncated}"
            )
    for c in ledger.comparisons:
        if needle in f"{c.a.label} {c.b.label}".lower():
            lines.append(
                f"{c.paired.split:>9}  {c.paired.diff:+.3f}  {c.verdict}  ({c.a.id} {c.a.label} / "
                f"{c.b.id} {c.b.label})"
            )
    return lines


class EconomicsScreen(TableView):
    VIEW = "economics"
    TITLE_TEXT = "Economics"
    BINDINGS = keymap.bindings("economics")

    def __init__(self) -> None:
        super().__init__()
        self.utilisation = DEFAULT_UTILISATION
        self.rows: list[EconomicsRow] = []

    def below_table(self) -> ComposeResult:
        with VerticalScroll(id="economics-below"):
            yield from super().below_table()
            yield Static("", id="economics-chart", markup=False)

    def load(self) -> EconomicsData:
        rows, skipped = economics_table(self.console.model.economics_inputs(), utilisation=self.utilisation)
        return EconomicsData(rows, skipped, self.console.model.quality())

    def topbar_extra(self) -> str:
        extra = f"utilisation {self.utilisation:.0%} (u)"
        return extra + (f" | {super().topbar_extra()}" if self.filter_text else "")

    def show(self, data: EconomicsData) -> None:
        needle = self.filter_text.lower().strip()
        self.rows = [
            r
            for r in data.rows
            if not needle or needle in f"{r.arm} {r.box} {r.model} {r.api_provider}".lower()
        ]
        cells: list[tuple[list[Cell], str]] = [
            (
                [
                    r.arm,
                    money(r.node_per_mtok),
                    "-" if r.accuracy is None else f"{r.accuracy:.3f} ({r.accuracy_items})",
                    toned(r.place),
                    f"{money(r.api_per_mtok)} {r.api_provider}" if r.api_provider else "no API price",
                    "-" if r.api_over_node is None else f"{r.api_over_node:.1f}x",
                    r.box or "-",
                    money(r.node_usd_per_hour, 2),
                    r.rows,
                ],
                f"{i}",
            )
            for i, r in enumerate(self.rows)
        ]
        with self.app.batch_update():
            fill_table(self.table, COLUMNS, cells)
            chart = self.query_one("#economics-chart", Static)
            # Two cells stay free for the scrollbar of a short terminal.
            width = max(30, (chart.content_region.width or self.size.width) - 2)
            lines = [frontier_chart(self.rows, width=width, height=CHART_HEIGHT).rstrip("\n")]
            lines += [f"not priced: {reason}" for reason in data.skipped]
            lines += quality_lines(data.quality, needle)
            chart.update("\n".join(lines))
            if not self.rows:
                self.detail.update(
                    "no configuration priced yet: a box needs a price per hour and bench rows at the "
                    "router and promptopt shapes (`campaign export economics` says the same)"
                )

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        i = int(event.row_key.value or 0)
        if i < len(self.rows):
            r = self.rows[i]
            where = f"; {r.marks}" if r.marks else ""
            self.detail.update(
                f"{r.arm} on {r.box}: {money(r.node_usd_per_hour, 2)} per active hour at "
                f"{self.utilisation:.0%} use, {money(r.node_per_mtok)} per million tokens over {r.rows}"
                + (f"; {r.api_provider} {money(r.api_per_mtok)}" if r.api_provider else "")
                + f"{where}; {r.source}"
            )

    def action_utilisation(self) -> None:
        i = UTILISATIONS.index(self.utilisation) if self.utilisation in UTILISATIONS else -1
        self.utilisation = UTILISATIONS[(i + 1) % len(UTILISATIONS)]
        self.reload()
