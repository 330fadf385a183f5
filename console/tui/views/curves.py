"""Curves: every stored curve (arm, box, shape, points done/total, state) and, for the shape under the cursor,
out tok/s against interactivity, one series per curve, its Pareto frontier marked, each point's state beneath.

Reads console/readmodel/curves.py (``curves``) and ranks the frontier with console/readmodel/curve_frontier.py
(pareto.py's ``places`` over the repeats' spreads), so the view, ``campaign curve`` and the report say the same thing.
A curve walked by ``campaign curve`` in another process updates on the app's refresh tick; browse mode reads
the same state.db read-only. `i` toggles interactivity between 1000/TPOT and the per-slot definition.
"""

from __future__ import annotations

import textwrap

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Static

from console.charts import PlotPoint, scatter
from console.readmodel.curve_frontier import chart_points, frontier
from console.readmodel.curves import CurveView
from console.readmodel.pareto import X_DEFINITIONS, Interactivity
from console.tui import keymap
from console.tui.render import num
from console.tui.views.base import Cell, TableView, toned

COLUMNS = ("curve", "arm", "box", "shape", "points", "state")
CHART_HEIGHT = 14
"""Rows of the chart with its axes where the pane under the table has room."""
MIN_CHART_HEIGHT = 7
"""Below this the chart loses its axis values; a shorter pane scrolls instead."""
LEGEND_LINES = 2
"""The legend names the curves that fit in this many lines and says how many more the table lists."""
SERIES_MARKS = "oxs+*#@%"
"""One mark per curve of a shape; the frontier is drawn over them with FRONTIER_MARK."""
FRONTIER_MARK = "F"
EMPTY = "no curve in this state.db: `campaign curve ARM --box NAME --shape SHAPE`"


def chart_title(shape_curves: list[CurveView], interactivity: Interactivity, gpu: bool) -> str:
    y_name = "out tok/s per GPU" if gpu else "out tok/s per node (GPUs not recorded)"
    return f"{shape_curves[0].shape}: y {y_name}; x {X_DEFINITIONS[interactivity]}"


def legend_line(shape_curves: list[CurveView], marks: dict[int, str], width: int) -> str:
    """Each curve's mark, as many as fit LEGEND_LINES lines of ``width``, then how many more there are."""
    tail = f"; {FRONTIER_MARK} on the Pareto frontier"
    entries = [f"{marks[c.id]} #{c.id} {c.arm}@{c.box}" for c in shape_curves]

    def legend(n: int) -> str:
        more = len(entries) - n
        return ", ".join(entries[:n]) + (f" +{more} more (the table lists them)" if more else "") + tail

    n = len(entries)
    while n and len(textwrap.wrap(legend(n), width)) > LEGEND_LINES:
        n -= 1
    return legend(n)


def chart_lines(
    shape_curves: list[CurveView], interactivity: Interactivity, width: int, height: int = CHART_HEIGHT
) -> list[str]:
    points, gpu = chart_points(shape_curves, interactivity)
    if not points:
        shape = shape_curves[0].shape
        what = "1000/TPOT" if interactivity == "tpot" else "a per-slot rate"
        return [
            f"{shape}: no point with {what} to chart: `campaign curve` measures them, `i` switches the x axis"
        ]
    on = frontier(points)
    marks = {c.id: SERIES_MARKS[i % len(SERIES_MARKS)] for i, c in enumerate(shape_curves)}
    plotted = [PlotPoint(p.x.median, p.y.median, marks[p.curve.id]) for p in points]
    plotted += [PlotPoint(points[i].x.median, points[i].y.median, FRONTIER_MARK) for i in sorted(on)]
    lines = scatter(plotted, width, height, lambda v: f"{v:.1f}", lambda v: f"{v:,.0f}")
    return [chart_title(shape_curves, interactivity, gpu), *lines, legend_line(shape_curves, marks, width)]


def point_lines(c: CurveView, on: set[tuple[int, int]]) -> list[str]:
    """Each point of the curve under the cursor: its load, out tok/s, both interactivities and its state."""
    lines = [f"#{c.id} {c.arm} on {c.box} at {c.shape}: {c.state}, {c.done}/{len(c.points)} points"]
    for p in c.points:
        load = f"C={p.concurrency}" if p.rate is None else f"rate {p.rate:g}/s (cap C={p.concurrency})"
        star = " frontier" if (c.id, p.position) in on else ""
        lines.append(
            f"  {load:<22} out {num(p.out_tok_per_s)} tok/s  1000/TPOT {num(p.interactivity_tpot)}  "
            f"per slot {num(p.interactivity_per_slot)}  {p.state_text}{star}"
        )
    return lines


class CurvesScreen(TableView):
    VIEW = "curves"
    TITLE_TEXT = "Curves"
    BINDINGS = keymap.bindings("curves")

    def __init__(self) -> None:
        super().__init__()
        self.curves: list[CurveView] = []
        self.interactivity: Interactivity = "tpot"
        self.selected: int | None = None

    def below_table(self) -> ComposeResult:
        with VerticalScroll(id="curves-below"):
            yield Static("", id="curves-chart", markup=False)
            yield from super().below_table()

    def load(self) -> list[CurveView]:
        return self.console.model.curves()

    def topbar_extra(self) -> str:
        extra = f"interactivity {'1000/TPOT' if self.interactivity == 'tpot' else 'per slot'} (i)"
        return extra + (f" | {super().topbar_extra()}" if self.filter_text else "")

    def show(self, data: list[CurveView]) -> None:
        needle = self.filter_text.lower().strip()
        self.curves = [
            c for c in data if not needle or needle in f"{c.arm} {c.box} {c.shape} {c.state}".lower()
        ]
        rows: list[tuple[list[Cell], str]] = [
            ([f"#{c.id}", c.arm, c.box, c.shape, f"{c.done}/{len(c.points)}", toned(c.state)], str(c.id))
            for c in self.curves
        ]
        self.refill(self.table, COLUMNS, rows)
        self.call_after_refresh(
            self.draw
        )  # once the filled table has its height, the chart fits what is left

    def draw(self) -> None:
        chart = self.query_one("#curves-chart", Static)
        if not self.curves:
            chart.update(EMPTY)
            self.detail.update("")
            return
        current = next((c for c in self.curves if c.id == self.selected), self.curves[0])
        shape_curves = [c for c in self.curves if c.shape == current.shape]
        width = max(30, (chart.content_region.width or self.size.width) - 2)
        points, gpu = chart_points(shape_curves, self.interactivity)
        chart.update(
            "\n".join(
                chart_lines(
                    shape_curves,
                    self.interactivity,
                    width,
                    self.chart_height(len(chart_title(shape_curves, self.interactivity, gpu)), width),
                )
            )
        )
        on = {(points[i].curve.id, points[i].point.position) for i in frontier(points)} if points else set()
        self.detail.update("\n".join(point_lines(current, on)))

    def chart_height(self, title: int, width: int) -> int:
        """The chart's rows so that its title, axis values and legend show in the pane under the table, at
        most CHART_HEIGHT; the points below it scroll."""
        pane = self.query_one("#curves-below", VerticalScroll).content_region.height
        if not pane:
            return CHART_HEIGHT
        words = -(-title // width) + LEGEND_LINES
        return max(MIN_CHART_HEIGHT, min(CHART_HEIGHT, pane - words))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.selected = int(event.row_key.value or 0)
        self.draw()

    def action_interactivity(self) -> None:
        self.interactivity = "per-slot" if self.interactivity == "tpot" else "tpot"
        self.reload()
