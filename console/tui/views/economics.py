"""Economics: what a million tokens cost on each configuration's box against an API, and the frontier.

The sums are console.economics' (the campaign write-up's Economics section, tested there against its own
table); this view only lays them out: one row per configuration and API price, then the quality/cost
chart (``frontier_chart``) at the width it is drawn. `u` cycles the owner's utilisation, which divides
the box's price per hour into its price per active hour; `b` cycles the cost basis of the boxes bought on the
cost model (Scan list, committed, fully loaded, Vast on-demand), named in the top bar ("Scan list, 70 %:
$4.40/h"); `h` switches to the per-hour table (an hour of each configuration's output bought from each API
price, the write-up's "The same hour of output"). A row whose accuracy is borrowed from another
box or arm, or that ran on a power-capped box, says so and never stands on the frontier. Below the chart,
the quality ledger: each suite's noise floor, runs scored per item, and the paired comparisons with their
verdicts (``campaign quality`` has the rest).
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Static

from console.economics import (
    COST_BASES,
    DEFAULT_UTILISATION,
    FRONTIER_LEGEND,
    EconomicsRow,
    PerHourRow,
    Pricing,
    default_cost_model,
    economics_table,
    frontier_chart,
    per_hour_table,
)
from console.readmodel import QualityLedger
from console.tui import keymap
from console.tui.views.base import Cell, TableView, fill_table, toned

# Cost, quality and the frontier word first: at 80 columns they stay visible, the API and box follow.
COLUMNS = (
    "arm",
    "$/Mtok",
    "accuracy",
    "frontier",
    "API $/Mtok",
    "API/node",
    "box",
    "$/h active",
    "rows",
    "API acc",
    "fully loaded",
    "model (AA)",
)
HOUR_COLUMNS = (
    "arm",
    "shape",
    "M tok/h in+out",
    "API $/M in/out",
    "API bill",
    "API/node",
    "fully loaded",
    "box",
    "published",
)
UTILISATIONS = (0.70, 1.00, 0.50)
CHART_HEIGHT = 13
"""Rows of the frontier chart with its axes (ten rows of points) where the pane has room."""
MIN_CHART_HEIGHT = 7
"""Below this the chart loses its axis values; a shorter pane scrolls instead."""
PLACE_ORDER = ("frontier", "dominated", "borrowed", "CAPPED", "DIAGNOSTIC-ONLY", "no accuracy")
"""The table opens on the frontier: rows by their place on the chart (``EconomicsRow.place``), then cost."""


def by_place(rows: list[EconomicsRow]) -> list[EconomicsRow]:
    """Frontier rows first, then dominated, borrowed, capped, diagnostic-only and unscored, each by cost."""
    rank = {place: i for i, place in enumerate(PLACE_ORDER)}
    return sorted(rows, key=lambda r: (rank.get(r.place, len(PLACE_ORDER)), r.node_per_mtok))


@dataclass(frozen=True)
class EconomicsData:
    rows: list[EconomicsRow]
    skipped: list[str]
    quality: QualityLedger
    hours: tuple[PerHourRow, ...] = ()


def money(value: float | None, places: int = 3) -> str:
    """USD per million tokens needs three places (the campaign write-up's cheapest rows are fractions of a
    cent)."""
    return "-" if value is None else f"${value:.{places}f}"


def ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}x"


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
                f"{r.accuracy_text}  truncated {truncated}" + (f"  {r.short}" if r.short else "")
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
        self.basis = "list"
        self.per_hour = False
        self.cost = default_cost_model()
        self.rows: list[EconomicsRow] = []
        self.hours: list[PerHourRow] = []

    def below_table(self) -> ComposeResult:
        with VerticalScroll(id="economics-below"):
            yield from super().below_table()
            yield Static("", id="economics-chart", markup=False)

    def load(self) -> EconomicsData:
        inputs = self.console.model.economics_inputs()
        rows, skipped = economics_table(
            inputs, utilisation=self.utilisation, basis=self.basis, cost=self.cost
        )
        hours: tuple[PerHourRow, ...] = ()
        if self.per_hour:
            hours = tuple(per_hour_table(inputs, Pricing(self.basis, self.utilisation, cost=self.cost))[0])
        return EconomicsData(rows, skipped, self.console.model.quality(), hours)

    def topbar_extra(self) -> str:
        extra = f"utilisation {self.utilisation:.0%} (u) | {self.cost.basis_text(self.basis, self.utilisation)} (b basis, h per hour)"
        return extra + (f" | {super().topbar_extra()}" if self.filter_text else "")

    def show(self, data: EconomicsData) -> None:
        needle = self.filter_text.lower().strip()
        if self.per_hour:
            self.show_hours(data, needle)
            return
        self.rows = by_place(
            [
                r
                for r in data.rows
                if not needle or needle in f"{r.arm} {r.box} {r.model} {r.api_provider}".lower()
            ]
        )
        cells: list[tuple[list[Cell], str]] = [
            (
                [
                    r.arm,
                    money(r.node_per_mtok),
                    "-" if r.accuracy is None else f"{r.accuracy:.3f} ({r.accuracy_items})",
                    toned(r.place),
                    f"{money(r.api_per_mtok)} {r.api_provider}" if r.api_provider else "no API price",
                    ratio(r.api_over_node),
                    r.box or "-",
                    money(r.node_usd_per_hour, 2),
                    r.rows,
                    "-" if r.api_accuracy is None else f"{r.api_accuracy:.3f}",
                    ratio(r.api_over_node_fully_loaded),
                    f"{r.model} ({r.aa_index})" if r.aa_index else r.model or "-",
                ],
                f"{i}",
            )
            for i, r in enumerate(self.rows)
        ]
        with self.app.batch_update():
            fill_table(self.table, COLUMNS, cells)
            if not self.rows:
                self.detail.update(
                    "no configuration priced yet: a box needs a price per hour and bench rows at the "
                    "router and promptopt shapes (`campaign export economics` says the same)"
                )
        # Once the filled table has taken its height, the chart is sized to the pane left under it.
        self.call_after_refresh(self.draw_chart, data, needle)

    def draw_chart(self, data: EconomicsData, needle: str) -> None:
        chart = self.query_one("#economics-chart", Static)
        # Two cells stay free for the scrollbar of a short terminal.
        width = max(30, (chart.content_region.width or self.size.width) - 2)
        lines = [frontier_chart(self.rows, width=width, height=self.chart_height(width)).rstrip("\n")]
        lines += [f"not priced: {reason}" for reason in data.skipped]
        lines += quality_lines(data.quality, needle)
        chart.update("\n".join(lines))

    def chart_height(self, width: int) -> int:
        """The chart's rows so that its axis values and legend (with the frontier's rows) show in the pane
        under the table without scrolling, at most CHART_HEIGHT; the ledger below it scrolls. The detail
        above it is written when a row is highlighted, after this: it is given its border and three lines."""
        pane = self.query_one("#economics-below", VerticalScroll).content_region.height
        if not pane:
            return CHART_HEIGHT
        legend = -(-len(FRONTIER_LEGEND) // width) + len({(r.box, r.arm) for r in self.rows if r.on_frontier})
        detail = max(4, self.detail.outer_size.height)
        return max(MIN_CHART_HEIGHT, min(CHART_HEIGHT, pane - detail - legend))

    def show_hours(self, data: EconomicsData, needle: str) -> None:
        """The per-hour table: each configuration's hour of output at each shape, bought from each API price."""
        self.hours = [
            h
            for h in data.hours
            if not needle or needle in f"{h.arm} {h.box} {h.model} {h.api_provider}".lower()
        ]
        cells: list[tuple[list[Cell], str]] = [
            (
                [
                    h.arm,
                    f"{h.shape} C{h.concurrency}",
                    f"{h.in_m:,.0f} + {h.out_m:,.0f}",
                    "no API price"
                    if h.api_provider is None
                    else f"{h.api_in_per_mtok:g} / {h.api_out_per_mtok:g} {h.api_provider}",
                    money(h.api_bill_usd, 1),
                    ratio(h.api_over_node),
                    ratio(h.api_over_node_fully_loaded),
                    h.box or "-",
                    h.published or "-",
                ],
                f"{i}",
            )
            for i, h in enumerate(self.hours)
        ]
        with self.app.batch_update():
            fill_table(self.table, HOUR_COLUMNS, cells)
            chart = self.query_one("#economics-chart", Static)
            notes = [f"{h.arm} {h.shape} C{h.concurrency}: {h.note}" for h in self.hours if h.note]
            chart.update(
                "\n".join(["an hour of output bought from an API, no cache discount (h: back)", *notes])
            )

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        i = int(event.row_key.value or 0)
        if self.per_hour:
            if i < len(self.hours):
                h = self.hours[i]
                self.detail.update(f"{h.arm} on {h.box}: {h.node_basis}; {h.note or h.published or h.source}")
            return
        if i < len(self.rows):
            r = self.rows[i]
            where = f"; {r.marks}" if r.marks else ""
            self.detail.update(
                f"{r.arm} on {r.box}: {r.node_basis}"
                + (f" ({r.price_provenance})" if r.price_provenance else "")
                + f", {money(r.node_per_mtok)} per million tokens over {r.rows}"
                + (f"; {r.api_provider} {money(r.api_per_mtok)}" if r.api_provider else "")
                + (f"; {r.published_note}" if r.published_note else "")
                + f"{where}; {r.source}"
            )

    def action_basis(self) -> None:
        self.basis = COST_BASES[(COST_BASES.index(self.basis) + 1) % len(COST_BASES)]
        self.reload()

    def action_per_hour(self) -> None:
        self.per_hour = not self.per_hour
        self.reload()

    def action_utilisation(self) -> None:
        i = UTILISATIONS.index(self.utilisation) if self.utilisation in UTILISATIONS else -1
        self.utilisation = UTILISATIONS[(i + 1) % len(UTILISATIONS)]
        self.reload()
