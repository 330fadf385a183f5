"""Results: every node row beside its arm, kernel line, tripwire verdict, power limit and marks.

Sort (`s`), filter (`/`), a chart comparing arms (`c`), and the repeat groups (`g`): each group's median,
min-max and coefficient of variation beside its verdict against the best group of its shape and
concurrency, ties marked ``TIE``.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import DataTable, Static

from console.charts import hbars
from console.readmodel import RESULT_SORTS, GroupStanding, ResultRow, best_by, standings
from console.tui import keymap
from console.tui.render import millis, num
from console.tui.views.base import Cell, TableView, toned

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


GROUP_COLUMNS = ("arm", "shape", "C", "runs", "median", "min-max", "CV", "vs best", "marks", "box")


def group_cells(s: GroupStanding) -> list[Cell]:
    g = s.group
    spread = f"{num(g.low)}-{num(g.high)}" if g.repeated else "-"
    cv = f"{g.cv:.1%}" if g.cv is not None else "-"
    return [
        g.arm,
        g.shape,
        str(g.concurrency),
        str(g.n),
        num(g.median),
        spread,
        cv,
        toned(s.word),
        toned(g.marks or "-"),
        g.box or "-",
    ]


def group_detail(s: GroupStanding) -> str:
    verdict = s.versus_best.text if s.versus_best else "the best group of its shape and concurrency"
    return f"{s.group.label}: {s.group.spread_text} | {verdict}"


CHART_FRAME = 6
"""Rows of a shape's chart that are not bars: its title, the frame's top, its axis and the values under it,
and the line naming the arms left out."""


def compare_chart(
    rows: list[ResultRow], width: int, height: int | None = None, shape: str | None = None
) -> list[str]:
    """The best out tok/s of each arm per shape as bars (plotext), each labelled with its arm, concurrency,
    number and tripwire verdict; diagnostic-only numbers say so. With ``height``, one shape (``shape``, else
    the first) and its fastest arms that fit, so the axis and its values stay on screen; a line says how
    many arms were left out."""
    best = best_by(rows, lambda r: (r.shape, r.arm))
    if not best:
        return ["no bench rows to compare yet: `campaign bench ARM --shape SHAPE -c C` records them"]
    lines = []
    shapes = sorted({s for s, _ in best})
    if height is not None:
        shapes = [shape if shape in shapes else shapes[0]]
    for shape in shapes:
        # Each shape is scaled to its own best: arms are compared within a workload, never across.
        ranked = sorted(
            (r for (s, _), r in best.items() if s == shape), key=lambda r: -(r.out_tok_per_s or 0)
        )
        left_out = 0 if height is None else max(0, len(ranked) - max(1, height - CHART_FRAME))
        ranked = ranked[: len(ranked) - left_out]
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
        lines += hbars(
            [(label.ljust(pad), r.out_tok_per_s or 0.0) for label, r in zip(labels, ranked, strict=True)],
            width,
            num,
        )
        if left_out:
            lines.append(
                f"+{left_out} slower arms at {shape} (`/` filters; the highlighted row's shape is drawn)"
            )
    return lines


def detail_line(r: ResultRow) -> str:
    """The highlighted row whole, so an 80-column terminal still shows its kernel, verdict and limit."""
    node = f" on {r.replicas} replicas" if r.replicas and r.replicas > 1 else ""
    parts = [
        f"{r.arm} {r.shape} C{r.concurrency}: out {num(r.out_tok_per_s)} tok/s{node}",
        *([r.speculation] if r.speculation else []),
        f"tripwire {r.tripwire.word}",
        f"limit {num(r.power_limit_w)} W",
        f"kernel {r.kernel_line or 'not recorded'}",
    ]
    parts += [f.text for f in r.fallbacks]
    if r.marks:
        parts.append(r.marks)
    return " | ".join(parts)


class ResultsScreen(TableView):
    VIEW = "results"
    TITLE_TEXT = "Results"
    BINDINGS = keymap.bindings("results")

    def __init__(self) -> None:
        super().__init__()
        self.sort = "arm"
        self.rows: list[ResultRow] = []
        self.groups: list[GroupStanding] = []
        self.chart_shown = False
        self.chart_shape: str | None = None  # the highlighted row's: the chart draws its shape
        self.groups_shown = False

    def below_table(self) -> ComposeResult:
        yield from super().below_table()
        yield Static("", id="results-chart", markup=False)

    def load(self) -> list[ResultRow]:
        return self.console.model.results(self.sort, self.filter_text)

    def topbar_extra(self) -> str:
        shown = (
            f"{len(self.groups)} repeat group{'' if len(self.groups) == 1 else 's'} of "
            if self.groups_shown
            else ""
        )
        return f"{shown}{len(self.rows)} row{'' if len(self.rows) == 1 else 's'}, sort {self.sort}" + (
            f" | {super().topbar_extra()}" if self.filter_text else ""
        )

    def show(self, rows: list[ResultRow]) -> None:
        self.rows = rows
        self.groups = standings(rows) if self.groups_shown else []
        self.query_one("#topbar", Static).update(self.topbar())
        table = self.table
        if self.groups_shown:
            self.refill(table, GROUP_COLUMNS, [(group_cells(s), f"g:{s.group.id}") for s in self.groups])
        else:
            self.refill(table, COLUMNS, self._row_cells(rows))
        self.draw_chart()

    def draw_chart(self, shape: str | None = None) -> None:
        """The highlighted row's shape (``shape``) as bars in the rows the chart may take (half the screen)."""
        chart = self.query_one("#results-chart", Static)
        chart.display = self.chart_shown
        if self.chart_shown:
            width = chart.content_region.width or self.size.width - 2
            height = self.size.height // 2 - 1  # console.tcss: #results-chart max-height 50%, its top border
            chart.update("\n".join(compare_chart(self.rows, width, height, shape or self.chart_shape)))

    @staticmethod
    def _row_cells(rows: list[ResultRow]) -> list[tuple[list[Cell], str]]:
        return [
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

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        key = event.row_key.value
        group = next((s for s in self.groups if f"g:{s.group.id}" == key), None)
        row = next((r for r in self.rows if str(r.id) == key), None)
        text = group_detail(group) if group else detail_line(row) if row else ""
        if row is not None and group is None:  # the model with its intelligence index, where one is published
            named = self.console.model.model_named(row.model)
            text += f" | {named}" if named != (row.model or "-") else ""
        self.detail.update(text)
        if row is not None and row.shape != self.chart_shape:
            self.chart_shape = row.shape
            self.draw_chart()

    def action_sort(self) -> None:
        names = list(RESULT_SORTS)
        self.sort = names[(names.index(self.sort) + 1) % len(names)]
        self.reload()

    def action_chart(self) -> None:
        self.chart_shown = not self.chart_shown
        self.reload()

    def action_groups(self) -> None:
        self.groups_shown = not self.groups_shown
        self.reload()
