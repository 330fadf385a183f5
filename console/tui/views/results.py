"""Results: every bench row beside its arm, kernel line, tripwire verdict and power limit.

Sort (`s`), filter (`/`) and a chart comparing arms (`c`).
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import DataTable, Static

from console.readmodel import RESULT_SORTS, ResultRow
from console.tui import keymap
from console.tui.render import bar, millis, num
from console.tui.views.base import ViewScreen, fill_table

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
    """The best out tok/s of each arm per shape as bars; diagnostic-only numbers say so."""
    best: dict[tuple[str, str], ResultRow] = {}
    for r in rows:
        key = (r.shape, r.arm)
        if r.out_tok_per_s is not None and (
            key not in best or r.out_tok_per_s > (best[key].out_tok_per_s or 0)
        ):
            best[key] = r
    if not best:
        return ["no rows to compare"]
    top = max(r.out_tok_per_s or 0 for r in best.values())
    label = min(24, max(len(a) for _, a in best))
    bar_width = max(5, width - label - 30)
    lines = []
    for shape in sorted({s for s, _ in best}):
        lines.append(f"{shape} (best out tok/s per arm)")
        for (s, arm), r in sorted(best.items(), key=lambda kv: -(kv[1].out_tok_per_s or 0)):
            if s != shape:
                continue
            word = f"trip {r.tripwire}" + (" DIAGNOSTIC-ONLY" if r.diagnostic_only else "")
            lines.append(
                f" {arm[:label]:{label}} {bar((r.out_tok_per_s or 0) / top, bar_width)} "
                f"{num(r.out_tok_per_s):>5} C{r.concurrency} {word}"
            )
    return lines


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
        cells = [
            (
                [
                    r.arm,
                    r.shape,
                    str(r.concurrency),
                    num(r.out_tok_per_s),
                    r.tripwire,
                    num(r.power_limit_w),
                    r.marks or "-",
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
            chart.update("\n".join(compare_chart(rows, chart.size.width or self.size.width)))

    def action_sort(self) -> None:
        names = list(RESULT_SORTS)
        self.sort = names[(names.index(self.sort) + 1) % len(names)]
        self.reload()

    def action_chart(self) -> None:
        self.chart_shown = not self.chart_shown
        self.reload()
