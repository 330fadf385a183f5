"""Live: one box's history over the chart window (output and input tok/s; each GPU's draw against its
enforced limit, and its SM clock), tripwire verdicts and timers.

The same screen replays a recorded night: everything is read as of the model's cursor.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Grid
from textual.widgets import Static

from console.readmodel import BenchNow, LiveView
from console.timeutil import fmt_remaining, fmt_utc
from console.tui import keymap
from console.tui.modals import TimerScreen
from console.tui.render import (
    GPU_LABEL,
    GUTTER,
    chart_lines,
    fmt_window,
    gpu_lines,
    millis,
    num,
    time_axis,
    timer_lines,
    tripwire_line,
)
from console.tui.views.base import ViewScreen, toned_block

TEXT_ROWS = 4
"""Rows of the throughput panel that are not chart: rates, run/wait/kv, arm, bench (a finished bench: 2)."""


def bench_lines(b: BenchNow, at: int) -> list[str]:
    """The load generator's own numbers beside the server's; it reports once, at the end of a run."""
    head = f"loadgen {b.shape} C{b.concurrency}"
    if b.running:
        since = f" {fmt_remaining(at - b.started_ms)}" if b.started_ms is not None else ""
        return [f"{head} running{since}"]
    return [
        f"{head} TTFT {millis(b.ttft_ms_p50)}",
        f"out {num(b.out_tok_per_s)} in {num(b.in_tok_per_s)} tok/s {num(b.req_per_s)} req/s",
    ]


NO_THROUGHPUT = "no throughput samples in this window: a serving launch's /metrics or a bench's records them"
NO_GPU = "no GPU samples yet: `campaign box connect {box} --follow` records them"
NO_TRIPWIRE = "no tripwire run on this box yet: `campaign tripwire LAUNCH` records one"
NO_TIMER = "no timer: `t` or `campaign timer set BOX` arms one"
"""What an empty panel says instead of an empty chart: one line naming what would fill it."""


def throughput_text(view: LiveView, width: int, height: int, window_ms: int, edge: str) -> str:
    """Output tok/s over input tok/s, each charted to its own peak ``width`` cells wide in a panel ``height``
    rows high, then the servers and the bench (where the numbers come from is the panel's title). ``edge``
    names the chart's right edge (now, cursor, end). A series with no sample in the window is one line saying
    so, its rows given to the other; with neither, the panel is the one line of what would fill it."""
    chart_width = max(10, width - GUTTER)
    bench = bench_lines(view.bench, view.at_ms) if view.bench else []
    pairs = ((view.out_tok_s, "out"), (view.in_tok_s, "in"))
    series = [(values, label) for values, label in pairs if values.peak is not None]
    lines = [] if series else [NO_THROUGHPUT]
    if series:
        rows = max(2, height - TEXT_ROWS - max(0, len(bench) - 1) - (len(series) == 1))
        axis = rows >= 7  # a time axis under the charts when they keep three rows each
        rows -= axis
        lines.append(f"out {num(view.out_tok_s.last)} tok/s  in {num(view.in_tok_s.last)} tok/s")
        first = max(1, (rows + 1) // 2) if len(series) == 2 else rows
        for i, (charted, label) in enumerate(series):
            lines += chart_lines(charted, label, chart_width, first if i == 0 else max(1, rows - first))
        if len(series) == 1:
            lines.append(f"{'in' if series[0][1] == 'out' else 'out'} tok/s: no samples in this window")
        if axis:
            lines.append(time_axis(window_ms, chart_width, edge))
    if view.servers:
        s = view.servers[0]
        more = f" (+{len(view.servers) - 1} more)" if len(view.servers) > 1 else ""
        lines.append(
            f"run {num(s.running)} wait {num(s.waiting)} kv "
            f"{'-' if s.kv_usage is None else f'{s.kv_usage:.0%}'}{more}"
        )
        lines.append(f"{s.arm}")
    elif series or bench:
        lines.append("nothing serving")
    lines += bench
    return "\n".join(lines)


@dataclass(frozen=True)
class Drawn:
    """A loaded LiveView with its charts already drawn as text (on the worker, at the measured sizes)."""

    view: LiveView
    throughput: str
    power: list[str]
    recorded: bool  # an imported box, read where its record ends (ReadModel.live)


T = TypeVar("T")


class Reused(Generic[T]):
    """One panel's last drawing and the data it was drawn from (its series, the panel's size): a redraw
    whose data did not move reuses the drawing instead of charting again. Set from the load worker; a
    worker that loses the race leaves a key and its own drawing, never a mismatched pair."""

    def __init__(self) -> None:
        self._last: tuple[Hashable, T] | None = None

    def get(self, key: Hashable, draw: Callable[[], T]) -> T:
        last = self._last
        if last is not None and last[0] == key:
            return last[1]
        drawn = draw()
        self._last = (key, drawn)
        return drawn


class Shown(Static):
    """Text that repaints only when it changes: Textual re-renders a widget on every update, and most of a
    Live redraw (a timer, a verdict, a box line) says what it said a second ago."""

    def __init__(self, id: str):
        super().__init__("", id=id, markup=False)
        self.shown: str | Text = ""

    def put(self, content: str | Text) -> None:
        """The size is the grid's, never the text's, so a change needs no layout pass."""
        if content != self.shown:
            self.shown = content
            self.update(content, layout=False)


class Panel(Shown):
    """A bordered text panel; its title is the border title so it costs no row."""

    def __init__(self, title: str, id: str):
        super().__init__(id=id)
        self.border_title = title


class LiveScreen(ViewScreen):
    VIEW = "live"
    TITLE_TEXT = "Live"
    BINDINGS = keymap.bindings("live")

    def __init__(self) -> None:
        super().__init__()
        self.view: LiveView | None = None
        self.buckets = 2
        self.gpu_buckets = 2
        self.sizes = (0, 0, 0, 0)  # throughput panel width, height; power panel width, height
        self.throughput_drawn: Reused[str] = Reused()
        self.power_drawn: Reused[list[str]] = Reused()

    def body(self) -> ComposeResult:
        yield Shown(id="live-box")
        with Grid(id="live-grid"):
            yield Panel("throughput", "live-throughput")
            yield Panel("power", "live-power")
            yield Panel("tripwire", "live-tripwire")
            yield Panel("timers", "live-timers")

    def reload(self) -> None:
        """Panel sizes are measured here, on the UI thread; the worker charts at them. Braille holds two
        buckets a cell: throughput gets both; each GPU trace one (an 8-GPU box has eight traces, and every
        bucket is a group the GPU history query computes)."""
        through = self.query_one("#live-throughput", Panel).content_region
        power = self.query_one("#live-power", Panel).content_region
        self.sizes = (through.width, through.height, power.width, power.height)
        self.buckets = 2 * max(10, through.width - GUTTER)
        self.gpu_buckets = max(4, power.width - GPU_LABEL)
        super().reload()

    def load(self) -> tuple[LiveView, int, str] | None:
        box = self.console.selected_box
        if box is None:
            return None
        model = self.console.model
        now = model.now()
        view = model.live(box, buckets=self.buckets, gpu_buckets=self.gpu_buckets)
        if view is None:
            return None
        recorded = model.cursor.live and view.at_ms < now
        return view, model.window_ms, "end" if recorded else "now" if model.cursor.live else "cursor"

    def prepare(self, loaded: tuple[LiveView, int, str] | None) -> Drawn | None:
        if loaded is None:
            return None
        view, window_ms, edge = loaded
        tw, th, pw, ph = self.sizes
        running = view.bench is not None and view.bench.running  # its line counts time from at_ms
        throughput = self.throughput_drawn.get(
            (
                view.out_tok_s,
                view.in_tok_s,
                view.servers,
                view.bench,
                running and view.at_ms,
                tw,
                th,
                window_ms,
                edge,
            ),
            lambda: throughput_text(view, tw, th, window_ms, edge),
        )
        power = self.power_drawn.get((view.gpus, view.gpu_history, pw, ph), lambda: gpu_lines(view, pw, ph))
        return Drawn(view, throughput, power, edge == "end")

    def topbar_extra(self) -> str:
        extra = f"window {fmt_window(self.console.model.window_ms)}"
        return extra + (f" | {super().topbar_extra()}" if self.filter_text else "")

    def show(self, drawn: Drawn | None) -> None:
        self.view = view = drawn.view if drawn else None
        if drawn is None or view is None:
            name = self.console.selected_box
            self.query_one("#live-box", Shown).put(
                f"no box {name!r} in this state.db" if name else "no box selected: pick one in Fleet (1)"
            )
            for panel in self.query(Panel):
                panel.put("")
            return
        b = view.box
        head = f"{b.name} ({b.gpu_summary or 'no GPU info'}) {b.status}"
        if drawn.recorded:  # said before the GPUs: a narrow screen cuts the line's end
            head = f"{b.name} {b.status}, at its record's end {fmt_utc(view.at_ms)} ({b.gpu_summary or 'no GPU info'})"
        elif b.last_sample_ms is not None and view.at_ms - b.last_sample_ms > 30_000:
            head += f", last sample {fmt_remaining(view.at_ms - b.last_sample_ms)} ago"
        if b.timer:
            head += f" | stop in {fmt_remaining(b.timer.remaining_ms)}"
        self.query_one("#live-box", Shown).put(head)
        throughput = self.query_one("#live-throughput", Panel)
        title = f"throughput ({view.throughput_from})"
        if throughput.border_title != title:  # setting it repaints the border even when it says the same
            throughput.border_title = title
        throughput.put(drawn.throughput)
        self.query_one("#live-power", Panel).put(
            toned_block(drawn.power) if drawn.power else NO_GPU.format(box=b.name)
        )
        trip_panel = self.query_one("#live-tripwire", Panel)
        needle = self.filter_text.lower().strip()
        trip = [
            tripwire_line(t, trip_panel.content_region.width)
            for t in view.tripwire
            if needle in t.arm.lower()
        ]
        trip_panel.put(toned_block(trip) if trip else NO_TRIPWIRE)
        timers = [line for t in view.timers for line in timer_lines(t, self.console.local_tz)]
        self.query_one("#live-timers", Panel).put("\n".join(timers) or NO_TIMER)

    def action_timer(self) -> None:
        app = self.console
        if app.refuse_if_read_only("setting a timer") or self.view is None:
            return
        box = self.view.box

        def armed(text: str | None) -> None:
            if text is not None:
                app.run_action_worker(
                    app.actions.arm_timer(box.name, text, "stop-arms"), f"hard stop on {box.name}"
                )

        app.push_screen(TimerScreen(box.name, box.tz, app.local_tz, app.model.now()), armed)
