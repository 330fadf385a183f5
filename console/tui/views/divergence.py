"""Divergence: every logit-level comparison of two servers, beside its control and its verdict.

Reached from Results (`d`): it answers the question a throughput table cannot (did the fast kernel or
the four-bit build change the model?). A pair's verdict is read against its control pair, the same
configuration served twice; a pair measured without one says so.
"""

from __future__ import annotations

from textual.widgets import DataTable

from console.readmodel import KldiffRun
from console.timeutil import fmt_utc
from console.tui import keymap
from console.tui.views.base import Cell, TableView, toned

COLUMNS = (
    "pair",
    "top-1",
    "mean KL",
    "floor",
    "excess",
    "verdict",
    "pos",
    "kernel a",
    "kernel b",
    "box",
    "source",
)


def kl(value: float | None) -> str:
    return "-" if value is None else f"{value:.5f}"


def share(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def detail_lines(r: KldiffRun) -> list[str]:
    """The highlighted comparison whole: figures, its control's, the verdict sentence, kernels, provenance."""
    lines = [
        f"{r.pair} ({r.role}{', ' + r.model if r.model else ''}): top-1 agreement {share(r.top1_agreement)}, "
        f"top-5 overlap {share(r.top5_overlap)}, mean KL {kl(r.mean_kl)}, p50 {kl(r.p50_kl)}, p99 {kl(r.p99_kl)}, "
        f"{r.positions if r.positions is not None else 'unstated'} positions",
        f"verdict: {r.verdict.text}",
    ]
    if r.control_mean_kl is not None:
        lines.append(
            f"control {r.control_arm_a} vs {r.control_arm_b}: top-1 agreement "
            f"{share(r.control_top1_agreement)}, mean KL {kl(r.control_mean_kl)}"
        )
    lines.append(f"kernels: a {r.kernel_a or 'not recorded'} | b {r.kernel_b or 'not recorded'}")
    origin = f"measured {fmt_utc(r.t_ms)}" if r.source == "measured" else f"imported: {r.provenance or '-'}"
    lines.append(origin + (f"; {r.note}" if r.note else ""))
    return lines


class DivergenceScreen(TableView):
    VIEW = "divergence"
    TITLE_TEXT = "Divergence"
    BINDINGS = keymap.bindings("divergence")

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[KldiffRun] = []

    def load(self) -> list[KldiffRun]:
        return self.console.model.kldiff(self.filter_text)

    def show(self, rows: list[KldiffRun]) -> None:
        self.rows = rows
        cells: list[tuple[list[Cell], str]] = [
            (
                [
                    r.pair if r.role == "pair" else f"control: {r.pair}",
                    share(r.top1_agreement),
                    kl(r.mean_kl),
                    kl(r.control_mean_kl),
                    "-" if r.excess_kl is None else f"{r.excess_kl:+.5f}",
                    toned(r.verdict.word),
                    "-" if r.positions is None else str(r.positions),
                    r.kernel_a or "-",
                    r.kernel_b or "-",
                    r.box or "-",
                    r.source,
                ],
                str(r.id),
            )
            for r in rows
        ]
        self.refill(self.table, COLUMNS, cells)
        if not rows:
            self.detail.update(
                "no divergence measured: `campaign kldiff LAUNCH_A LAUNCH_B --control LAUNCH_C LAUNCH_D`"
            )

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        row = next((r for r in self.rows if str(r.id) == event.row_key.value), None)
        self.detail.update("\n".join(detail_lines(row)) if row else "")
