"""Results: every bench row beside its arm, kernel line, tripwire verdict and power limit.

Sort (`s`), filter (`/`) and a chart comparing arms (`c`).
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import DataTable, Static

from console.charts import hbars
from console.readmodel import RESULT_SORTS, ResultRow, best_by
from console.tui import keymap
from console.tui.render import millis, num
from console.tui.views.base import Cell, ViewScreen, fill_table, toned

# The verdict, the power limit and the marks come right after the number: at 80 columns they stay visible.
COLUMNS = (
    "arm",
    "shape",
    "C",
    "out tok/s",
    "tripwire",
    "limit W",
    "marks",
    "kernel",
    "req/s",
    "TTFT p50",
    "TPOT p50",
    "E2E p99",
    "box",
)


def compare_chart(rows: list[ResultRow], width: int) -> list[str]:
    """The best out tok/s of each arm per shape as bars (plotext), each labelled with its arm, concurrency,
    number and tripwire verdict; diagnostic-only numbers say so."""
    best = best_by(rows, lambda r: (r.shape, r.arm))
    if not best:
        return ["no rows to compare"]
    lines = []
    for shape in sorted({s for s, _ in best}):
        # Each shape is scaled to its own best: arms are compared within a workload, never across.
        ranked = sorted(
            (r for (s, _), r in best.items() if s == shape), key=lambda r: -(r.out_tok_per_s or 0)
        )
        words = [
            f"C{r.concurrency:<5} {num(r.out_tok_per_s):>5} trip {r.tripwire.word}"
            + (" DIAGNOSTIC-ONLY" if r.diagnostic_only else "")
            for r in ranked
        ]
        # The bars keep at least a third of the width; long arm names give way first.
        room = max(8, min(max(len(r.arm) for r in ranked), 2 * width // 3 - max(map(len, words)) - 2))
        labels = [
            f"{r.arm if len(r.arm) <= room else r.arm[: room - 1] + '…':{room}} {w}"
            for r, w in zip(ranked, words, strict=True)
        ]
        pad = max(map(len, labels))
        lines.append(f"{shape} (best out tok/s per arm)")
        lines += hbars([(label.ljust(pad), r.out_tok_per_s or 0.0) for label, r in zip(labels, ranked, strict=True)],
                       width, num)  # fmt: skip
    return lines


def detail_line(r: ResultRow) -> str:
    """The highlighted row whole, so an 80-column terminal still shows its kernel, verdict and limit."""
    parts = [
        f"{r.arm} {r.shape} C{r.concurrency}: out {num(r.out_tok_per_s)} tok/s",
        f"tripwire {r.tripwire.word}",
        f"limit {num(r.power_limit_w)} W",
        f"kernel {r.kernel_line or 'not recorded'}",
    ]
    if r.marks:
        parts.append(r.marks)
    return " | ".join(parts)


class ResultsScreen(ViewScreen):
    VIEW = "results"
    TITLE_TEXT = "Results"
    BINDINGS = keymap.bindings("results")

    def __init__(self) -> None:
        super().__init__()
        self.sort = "arm"
        self.rows: list[ResultRow] = []
        self.chart_shown = False

    def body(self) -> ComposeResult:
        yield DataTable(id="results-table", cursor_type="row", zebra_stripes=True)
        yield Static("", id="results-detail", markup=False)
        yield Static("", id="results-chart", markup=False)

    def focus_main(self) -> None:
        self.query_one("#results-table", DataTable).focus()

    def load(self) -> list[ResultRow]:
        return self.console.model.results(self.sort, self.filter_text)

    def topbar_extra(self) -> str:
        return f"{len(self.rows)} row{'' if len(self.rows) == 1 else 's'}, sort {self.sort}" + (
            f" | {super().topbar_extra()}" if self.filter_text else ""
        )

    def show(self, rows: list[ResultRow]) -> None:
        self.rows = rows
        self.query_one("#topbar", Static).update(self.topbar())
        cells: list[tuple[list[Cell], str]] = [
            (
                [
                    r.arm,
                    r.shape,
                    str(r.concurrency),
                    num(r.out_tok_per_s),
                    toned(r.tripwire.word),
                    num(r.power_limit_w),
                    toned(r.marks or "-"),
                    r.kernel_line or "-",
                    num(r.req_per_s),
                    millis(r.ttft_ms_p50),
                    millis(r.tpot_ms_p50),
                    millis(r.e2e_ms_p99),
                    r.box or "-",
                ],
                str(r.id),
            )
            for r in rows
        ]
        table = self.query_one("#results-table", DataTable)
        cursor = None
        if table.row_count:
            cursor = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        with self.app.batch_update():
            fill_table(table, COLUMNS, cells, cursor)
        chart = self.query_one("#results-chart", Static)
        chart.display = self.chart_shown
        if self.chart_shown:
            chart.update("\n".join(compare_chart(rows, chart.content_region.width or self.size.width - 2)))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        row = next((r for r in self.rows if str(r.id) == event.row_key.value), None)
        self.query_one("#results-detail", Static).update(detail_line(row) if row else "")

    def action_sort(self) -> None:
        names = list(RESULT_SORTS)
        self.sort = names[(names.index(self.sort) + 1) % len(names)]
        self.reload()

    def action_chart(self) -> None:
        self.chart_shown = not self.chart_shown
        self.reload()
