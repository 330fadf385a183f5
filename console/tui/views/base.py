"""What every view shares: the top bar (mode, cursor, box), the `/` filter line, and loading in a worker.

A view loads its data from the read model on a worker thread (never on the UI thread: a slow disk or
a big state.db must not freeze the keys) and then draws it on the UI thread. Only the visible view is
asked to reload, so eight boxes of background data cost nothing until the operator looks at them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

from rich.text import Text
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static
from textual.worker import get_current_worker

from console.timeutil import fmt_utc
from console.tui.render import fmt_window

if TYPE_CHECKING:
    from datetime import tzinfo
    from pathlib import Path

    from textual.screen import ScreenResultCallbackType
    from textual.widget import AwaitMount

    from console.readmodel import ReadModel
    from console.tui.actions import Actions, Recipes

_T = TypeVar("_T")
_R = TypeVar("_R")


class ConsoleHost(Protocol):
    """What a view needs of the app it runs in (``console.tui.app.ConsoleApp`` is the one): the read model and
    its lock, the operator's selection, the service's actions, and a way to say what happened. A protocol, so
    the views never import the app that lists them."""

    db_path: Path
    read_only: bool
    model: ReadModel
    local_tz: tzinfo
    actions: Actions
    selected_box: str | None
    last_target: str | None
    box_names: list[str]

    def read(self, query: Callable[[], _T]) -> _T: ...

    def recipes(self) -> Recipes: ...

    def record_redraw(self, view: str, seconds: float) -> None: ...

    def say(self, text: str, severity: str = "information") -> None: ...

    def refuse_if_read_only(self, verb: str) -> bool: ...

    def run_action_worker(self, coro: Coroutine[Any, Any, str], what: str) -> None: ...

    def action_view(self, name: str) -> None: ...

    def push_screen(
        self, screen: Screen[_R], callback: ScreenResultCallbackType[_R] | None = None
    ) -> AwaitMount: ...


class ViewScreen(Screen[None]):
    VIEW: ClassVar[str] = ""
    TITLE_TEXT: ClassVar[str] = ""

    def __init__(self) -> None:
        super().__init__()
        self.filter_text = ""
        self.loaded = False
        self.pending: str | None = None

    @property
    def console(self) -> ConsoleHost:
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        yield Static("", id="topbar", markup=False)
        yield from self.body()
        # Disabled while hidden, so it can never take focus (and swallow the view keys) by itself.
        yield Input(placeholder="filter (enter keeps it, esc clears it)", id="filter", disabled=True)
        yield Footer()

    def body(self) -> ComposeResult:
        raise NotImplementedError

    # -- loading ----------------------------------------------------------------------------------------
    def on_screen_resume(self) -> None:
        self.reload()

    def on_resize(self) -> None:
        """Charts are bucketed to the width they are drawn at; a browsed screen has no timer to catch up."""
        if self.is_current:
            self.reload()

    def reload(self) -> None:
        self.run_worker(self._load_then_show, thread=True, exclusive=True, group="load")

    def _load_then_show(self) -> None:
        started = time.perf_counter()
        data = self.prepare(self.console.read(self.load))
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._show, data, started)

    def _show(self, data: Any, started: float) -> None:
        self.show(data)
        self.query_one("#topbar", Static).update(
            self.topbar()
        )  # after show: the bar may name what was loaded
        self.loaded = True
        self.console.record_redraw(self.VIEW, time.perf_counter() - started)
        if self.pending:
            action, self.pending = self.pending, None
            self.call_later(self.run_action, action)

    def run_when_loaded(self, action: str) -> None:
        """Run one of this view's actions once its next load is drawn: a palette entry of a view that was
        not on screen acts on that view's rows (the selected arm, the selected box), so they come first."""
        self.pending = action

    def load(self) -> Any:
        """Runs on a worker thread with the read model locked: query only, touch no widget."""
        raise NotImplementedError

    def prepare(self, data: Any) -> Any:
        """Runs on the worker thread after the read model is unlocked: drawing that needs no widget (charts
        as text), kept off the UI thread so keys stay quick. By default nothing."""
        return data

    def show(self, data: Any) -> None:
        raise NotImplementedError

    def topbar(self) -> str:
        app = self.console
        model = app.model
        at = model.now()
        mode = "BROWSE read-only" if app.read_only else "LIVE" if model.cursor.live else "REPLAY"
        cursor = fmt_utc(at)
        if model.cursor.span and not model.cursor.live:
            end = model.cursor.span[1]
            cursor += " (end)" if at >= end else f" ({(end - at) // 60_000}m before end)"
        extra = self.topbar_extra()
        step = f"step {fmt_window(model.step_ms)}"  # what `[` and `]` move the cursor by
        return f"{self.TITLE_TEXT} | {mode} {cursor} {step}" + (f" | {extra}" if extra else "")

    def topbar_extra(self) -> str:
        return f"filter: {self.filter_text}" if self.filter_text else ""

    # -- the `/` filter -----------------------------------------------------------------------------------
    def open_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.disabled = False
        box.add_class("shown")
        box.value = self.filter_text
        box.focus()

    def close_filter(self, keep: bool) -> bool:
        """Hide the filter line; returns False when it was not open (so `esc` goes back instead)."""
        box = self.query_one("#filter", Input)
        if not box.has_class("shown"):
            return False
        box.remove_class("shown")
        box.disabled = True
        if not keep:
            self.filter_text = ""
            box.value = ""
            self.reload()
        self.focus_main()
        return True

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "filter" and event.value != self.filter_text:
            self.filter_text = event.value
            self.reload()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            self.close_filter(keep=True)

    def focus_main(self) -> None:
        """Give the keys back to the view's main widget."""

    def refill(
        self, table: DataTable[Cell], columns: tuple[str, ...], rows: Sequence[tuple[Sequence[Cell], str]]
    ) -> None:
        """Replace a table's rows in one frame, the highlighted row kept where it still exists."""
        cursor = (
            table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value if table.row_count else None
        )
        with self.app.batch_update():
            fill_table(table, columns, rows, cursor)


class TableView(ViewScreen):
    """A view whose main widget is one table of rows, the highlighted row's detail under it.

    The widgets' ids follow the view's name (``#fleet-table``, ``#fleet-detail``), which the stylesheet
    (console/tui/console.tcss) and the tests address; a view adds what it shows above or below the table.
    """

    def body(self) -> ComposeResult:
        yield from self.above_table()
        yield DataTable(id=f"{self.VIEW}-table", cursor_type="row", zebra_stripes=True)
        yield from self.below_table()

    def above_table(self) -> ComposeResult:
        yield from ()

    def below_table(self) -> ComposeResult:
        yield Static("", id=f"{self.VIEW}-detail", markup=False)

    @property
    def table(self) -> DataTable[Cell]:
        return self.query_one(f"#{self.VIEW}-table", DataTable)

    @property
    def detail(self) -> Static:
        return self.query_one(f"#{self.VIEW}-detail", Static)

    def focus_main(self) -> None:
        self.table.focus()


_TONES = (
    ("FAIL", "bold red"),
    ("DEGEN", "bold red"),
    ("WRONG", "bold red"),
    ("LEAK", "bold red"),
    ("DIAGNOSTIC-ONLY", "bold red"),
    ("down", "bold red"),
    ("failed", "bold red"),
    ("host-key", "bold red"),
    ("REFUSED", "bold red"),
    ("CRASHED", "bold red"),
    ("KERNEL-FALLBACK", "bold yellow"),
    ("CAPPED", "bold yellow"),
    ("WARN", "yellow"),
    ("CLIENT-BOUND", "yellow"),
    ("unchecked", "yellow"),
    ("INTERRUPTED", "yellow"),
    ("QUEUEING", "yellow"),
    ("TIE", "yellow"),
    ("borrowed", "yellow"),
    ("ok", "green"),
    ("up", "green"),
    ("serving", "green"),
    ("served", "green"),
    ("frontier", "green"),
)
"""Colour follows the words (worst first), so colour helps the eye and never carries meaning alone."""


def toned(text: str) -> Text:
    words = set(text.replace(",", " ").split())
    style = next((style for word, style in _TONES if word in words or text.startswith(word)), "")
    return Text(text, style=style)


def toned_block(lines: list[str]) -> Text:
    """A panel's lines with its alarm words (CAPPED, STALE, DEGEN, ...) coloured where they stand."""
    text = Text("\n".join(lines))
    for word, style in _TONES:
        if word.isupper():
            text.highlight_words([word], style)
    text.highlight_words(["STALE"], "bold red")
    return text


Cell = str | Text
"""What a table cell holds: plain text, or text styled with its word (never a colour alone)."""


def fill_table(
    table: DataTable[Cell],
    columns: tuple[str, ...],
    rows: Sequence[tuple[Sequence[Cell], str]],
    cursor_key: str | None = None,
) -> None:
    """Replace a table's rows, sizing each column to its widest cell.

    Widths are given explicitly instead of left to DataTable's measure-on-idle, which can paint a
    frame with columns cut to their header width; an operator must never read ``h20`` for ``h200-b``.
    """
    widths = [max([len(c)] + [len(str(cells[i])) for cells, _ in rows]) for i, c in enumerate(columns)]
    table.clear(columns=True)
    for label, width in zip(columns, widths, strict=True):
        table.add_column(label, width=width, key=label)
    for cells, key in rows:
        table.add_row(*cells, key=key)
    keys = [key for _, key in rows]
    if cursor_key in keys:
        table.move_cursor(row=keys.index(cursor_key))
