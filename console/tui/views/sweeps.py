"""Sweep: every arm a sweep tried, its outcome in words and the engine's own reason; a running sweep's progress,
and for a sweep over several boxes its queue per box and GPU (what runs where, what waits, what is out).

Read-only on purpose: a sweep walks GPUs for hours and must survive the console, so it is started and
resumed from the CLI (``campaign sweep run``); this view reads what the walk committed to state.db.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import DataTable, Static

from console.readmodel import SweepArmRow, SweepBench, SweepEntry, SweepSlot
from console.timeutil import fmt_remaining, fmt_utc
from console.tui import keymap
from console.tui.render import num
from console.tui.views.base import Cell, TableView, toned, toned_block

COLUMNS = ("sweep", "outcome", "arm", "tries", "reason")
REASON_CELL = 100
"""The table shows the reason's first line cut to this; the detail below shows all of it."""


def _first_line(reason: str | None) -> str:
    line = (reason or "-").strip().splitlines()[0] if (reason or "").strip() else "-"
    return line if len(line) <= REASON_CELL else line[: REASON_CELL - 1] + "…"


def progress_line(s: SweepEntry, at: int) -> str:
    """``#3 tiny on local: running, 2/5 finished (...); now arm for 3m12s``."""
    line = (
        f"#{s.id} {s.list_name} on {s.where}: {s.state}, {s.finished}/{len(s.arms)} finished ({s.counts()})"
    )
    current = s.current
    if s.layout == "node" and current is not None and current.started_ms is not None:
        line += f"; now {current.arm} for {fmt_remaining(at - current.started_ms)}"
    if s.detail:
        line += f"; {s.detail}"
    return line


def _slot_text(slot: SweepSlot, at: int) -> str:
    where = "" if slot.gpu is None else f"GPU{slot.gpu} "
    if slot.excluded is not None:
        return f"{where}not used ({slot.excluded})"
    if slot.arm is not None and slot.arm.started_ms is not None:
        return f"{where}{slot.arm.arm} {fmt_remaining(at - slot.arm.started_ms)}"
    return where + slot.word


def queue_lines(s: SweepEntry, at: int) -> list[str]:
    """A sweep over several boxes: each box's GPUs (what runs on each, which are not used), the boxes out
    of the run and why, and the arms still waiting for a GPU."""
    if s.layout != "packed":
        return []
    lines = []
    slots = s.slots()
    for b in s.boxes:
        if b.state == "walking":
            lines.append(f"  {b.box}: " + " | ".join(_slot_text(x, at) for x in slots if x.box == b.box))
        else:
            lines.append(f"  {b.box}: {b.state.upper()}" + (f" ({b.detail})" if b.detail else ""))
    waiting = s.waiting
    if waiting and s.state == "running":
        names = ", ".join(a.arm for a in waiting[:6]) + (" ..." if len(waiting) > 6 else "")
        lines.append(f"  queue: {len(waiting)} waiting ({names})")
    return lines


def arm_detail(s: SweepEntry, a: SweepArmRow) -> list[str]:
    lines = [
        f"#{s.id}/{a.position} {a.arm}: {a.word} after {a.attempts} attempt(s), origin {a.origin}"
        + (f" (queued by {a.queued_by})" if a.queued_by else ""),
        *_engine_lines(a),
        *_placement_lines(s, a),
    ]
    if a.launch_ids:
        lines.append(f"launches: {', '.join(a.launch_ids)}")
    lines += [_bench_line(b) for b in a.benches]
    if a.started_ms:
        lines.append(
            f"started {fmt_utc(a.started_ms)}" + (f", ended {fmt_utc(a.ended_ms)}" if a.ended_ms else "")
        )
    return lines


def _engine_lines(a: SweepArmRow) -> list[str]:
    """What the engine said of the arm: its reason, the backends it accepts or could use, its budget."""
    lines = []
    if a.reason:
        lines.append(f"reason: {a.reason}")
    if a.backends_accepted:
        lines.append(f"engine accepts: {', '.join(a.backends_accepted)}")
    if a.backends_potential:
        lines.append(f"engine could use: {', '.join(a.backends_potential)}")
    if a.kv_cache_tokens or a.max_concurrency:
        lines.append(
            f"budget: KV cache {num(a.kv_cache_tokens)} tokens, max concurrency {num(a.max_concurrency)}"
        )
    return lines


def _placement_lines(s: SweepEntry, a: SweepArmRow) -> list[str]:
    """Where the arm ran and each attempt: always in a packed sweep, in a one-box sweep only after a retry."""
    lines = []
    if s.layout == "packed" and a.box is not None:
        lines.append(f"on {a.place}")
    if s.layout == "packed" or len(a.history) > 1:
        for t in a.history:
            memory = ", ".join(f"GPU{g} {num(m)} MiB" for g, m in t.mem_before)
            after = ", ".join(f"GPU{g} {num(m)} MiB" for g, m in t.mem_after)
            lines.append(
                f"attempt {t.attempt} on {t.place}: {t.outcome or 'running'}"
                + (f" ({t.reason})" if t.reason else "")
                + (f"; GPU memory before {memory}" if memory else "")
                + (f", serving {after}" if after else "")
            )
    return lines


def _bench_line(b: SweepBench) -> str:
    what = f"bench {b.shape} C{b.concurrency}"
    if b.error:
        return f"{what} failed: {b.error}"
    node = f" on {b.replicas} replicas" if b.replicas and b.replicas > 1 else ""
    return f"{what}: {num(b.out_tok_per_s)} out tok/s{node}" + (f" {b.marks}" if b.marks else "")


class SweepScreen(TableView):
    VIEW = "sweep"
    TITLE_TEXT = "Sweep"
    BINDINGS = keymap.bindings("sweep")

    def __init__(self) -> None:
        super().__init__()
        self.sweeps: list[SweepEntry] = []
        self.at = 0

    def above_table(self) -> ComposeResult:
        yield Static("", id="sweep-progress", markup=False)

    def load(self) -> tuple[list[SweepEntry], int]:
        return self.console.model.sweeps(), self.console.model.now()

    def show(self, data: tuple[list[SweepEntry], int]) -> None:
        self.sweeps, self.at = data
        needle = self.filter_text.lower().strip()
        progress = [
            line for s in self.sweeps for line in (progress_line(s, self.at), *queue_lines(s, self.at))
        ]
        self.query_one("#sweep-progress", Static).update(
            toned_block(progress)
            if progress
            else "no sweep in this state.db: `campaign sweep run LIST --box NAME`"
        )
        rows: list[tuple[list[Cell], str]] = [
            (
                [f"#{s.id}/{a.position}", toned(a.word), a.arm, str(a.attempts), _first_line(a.reason)],
                f"{s.id}:{a.position}",
            )
            for s in self.sweeps
            for a in s.arms
            if not needle or needle in f"{a.arm} {a.state} {a.reason or ''}".lower()
        ]
        self.refill(self.table, COLUMNS, rows)
        if not rows:
            self.detail.update("")

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        sweep_id, _, position = (event.row_key.value or "").partition(":")
        s = next((s for s in self.sweeps if str(s.id) == sweep_id), None)
        a = next((a for a in s.arms if str(a.position) == position), None) if s else None
        if s and a:
            self.detail.update(toned_block(arm_detail(s, a)))
