"""Curves: every stored curve (arm, box, shape, points done/total, state) and, for the shape under the cursor,
out tok/s against interactivity, one series per curve, its Pareto frontier marked, each point's state beneath.

Reads console/readmodel/curves.py (``curves``) and ranks the frontier with console/readmodel/curve_frontier.py
(pareto.py's ``places`` over the repeats' spreads), so the view, ``campaign curve`` and the report say the same thing.
A curve walked by ``campaign curve`` in another process updates on the app's refresh tick; browse mode reads
the same state.db read-only. `i` toggles interactivity between 1000/TPOT and the per-slot definition.
"""

from __future__ import annotations

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
SERIES_MARKS = "oxs+*#@%"
"""One mark per curve of a shape; the frontier is drawn over them with FRONTIER_MARK."""
FRONTIER_MARK = "F"
EMPTY = "no curve in this state.db: `campaign curve ARM --box NAME --shape SHAPE`"


def chart_lines(shape_curves: list[CurveView], interactivity: Interactivity, width: int) -> list[str]:
    points, gpu = chart_points(shape_curves, interactivity)
    y_name = "out tok/s per GPU" if gpu else "out tok/s per node (GPUs not recorded)"
    x_name = X_DEFINITIONS[interactivity]
    if not points:
        return [f"{shape_curves[0].shape}: no measured point yet", f"y: {y_name}; x: {x_name}"]
    on = frontier(points)
    marks = {c.id: SERIES_MARKS[i % len(SERIES_MARKS)] for i, c in enumerate(shape_curves)}
    plotted = [PlotPoint(p.x.median, p.y.median, marks[p.curve.id]) for p in points]
    plotted += [PlotPoint(points[i].x.median, points[i].y.median, FRONTIER_MARK) for i in sorted(on)]
    lines = scatter(plotted, width, CHART_HEIGHT, lambda v: f"{v:.1f}", lambda v: f"{v:,.0f}")
    legend = ", ".join(f"{marks[c.id]} #{c.id} {c.arm}@{c.box}" for c in shape_curves)
    return [
        f"{shape_curves[0].shape}: y {y_name}; x {x_name}",
        *lines,
        f"{legend}; {FRONTIER_MARK} on the Pareto frontier",
    ]


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
        self.draw()

    def draw(self) -> None:
        chart = self.query_one("#curves-chart", Static)
        if not self.curves:
            chart.update(EMPTY)
            self.detail.update("")
            return
        current = next((c for c in self.curves if c.id == self.selected), self.curves[0])
        shape_curves = [c for c in self.curves if c.shape == current.shape]
        width = max(30, (chart.content_region.width or self.size.width) - 2)
        chart.update("\n".join(chart_lines(shape_curves, self.interactivity, width)))
        points, _ = chart_points(shape_curves, self.interactivity)
        on = {(points[i].curve.id, points[i].point.position) for i in frontier(points)} if points else set()
        self.detail.update("\n".join(point_lines(current, on)))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.selected = int(event.row_key.value or 0)
        self.draw()

    def action_interactivity(self) -> None:
        self.interactivity = "per-slot" if self.interactivity == "tpot" else "tpot"
        self.reload()
