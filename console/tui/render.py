"""Text for the panels: the Live history (charted by console.charts), compact numbers, timers
and verdicts. Pure functions, no Textual. Meaning never rides on colour alone: a capped GPU says CAPPED,
a chart's rows carry their names and scales in words beside them.
"""

from __future__ import annotations

from datetime import tzinfo

from console.charts import LEVEL_MARK, trace
from console.readmodel.records import GpuPower, LiveView, Series, TimerRow, TripwireRun
from console.timeutil import fmt_remaining, fmt_utc, fmt_zone, zone


def num(value: float | None, unit: str = "") -> str:
    """``5.2k``, ``812``, ``0.71``; ``-`` for a missing value (never a fake zero)."""
    if value is None:
        return "-"
    a = abs(value)
    if a >= 1e6:
        text = f"{value / 1e6:.1f}M"
    elif a >= 1e4:
        text = f"{value / 1e3:.0f}k"
    elif a >= 1e3:
        text = f"{value / 1e3:.1f}k"
    elif a >= 100 or value == int(value):
        text = f"{value:.0f}"
    else:
        text = f"{value:.2f}".rstrip("0").rstrip(".")
    return text + unit


def millis(value: float | None) -> str:
    """A latency: ``436ms`` below a second, ``2.2s`` above."""
    if value is None:
        return "-"
    return f"{value:.0f}ms" if value < 1000 else f"{value / 1000:.1f}s"


GUTTER = 6
"""Cells left of a throughput chart: its peak, its name and 0, right-aligned in five."""


def chart_lines(series: Series, label: str, width: int, rows: int) -> list[str]:
    """``series`` charted to its own peak, ``width`` cells after the gutter: the peak on the top row, its
    name below it and 0 at the bottom (one row: the name alone)."""
    chart = trace(series.values, width, rows, top=series.peak or 1.0)
    gutter = [num(series.peak)] + [""] * (rows - 1)
    if rows >= 3:
        gutter[1] = label
    if rows >= 2:
        gutter[-1] = "0" if rows >= 3 else f"{label} 0"
    else:
        gutter[0] = label
    return [f"{g:>5} {row}" for g, row in zip(gutter, chart, strict=True)]


def time_axis(window_ms: int, width: int, edge: str) -> str:
    """The row under a chart: how far back its left edge is, and what its right edge is: ``now``, the
    replay ``cursor``, or the ``end`` of an imported box's record."""
    left = f"-{fmt_window(window_ms)}"
    return " " * GUTTER + left + edge.rjust(max(1, width - len(left)))


def fmt_window(ms: int) -> str:
    """``10m``, ``1h``, ``24h``, ``7d``: a chart window or a replay step (days past a day, hours up to it)."""
    minutes = ms // 60_000
    if minutes > 24 * 60 and minutes % (24 * 60) == 0:
        return f"{minutes // (24 * 60)}d"
    if minutes >= 60 and minutes % 60 == 0:
        return f"{minutes // 60}h"
    return f"{minutes}m" if minutes else f"{ms // 1000}s"


GPU_LABEL = 23
"""Cells left of a GPU's trace, for ``GPU2  400/400 W CAPPED``; a longer label (STALE, a clock) takes more."""


def gpu_label(g: GpuPower, clock: bool = False) -> str:
    """``GPU2  400/400 W CAPPED``: draw against the enforced limit, the words that must never be lost, and
    the SM clock when asked."""
    text = f"GPU{g.gpu} {num(g.power_w):>4}/{num(g.enforced_limit_w)} W"
    if clock:
        text += " -" if g.sm_clock_mhz is None else f" {g.sm_clock_mhz / 1000:.1f}GHz"
    return text + (" CAPPED" if g.capped else "") + (" STALE" if g.stale else "")


def gpu_lines(view: LiveView, width: int, height: int) -> list[str]:
    """Each GPU's draw over the window against its enforced limit (the LEVEL_MARK line), one row or more
    per GPU on a common scale (the board maximum), then each GPU's SM clock when the panel is tall enough
    (else the clock is a number beside the draw)."""
    gpus = view.gpus
    if not gpus:
        return []
    history = {h.gpu: h for h in view.gpu_history}
    n = len(gpus)
    room = height - 1  # the header
    power_rows, clock_rows = (
        (3, 2) if room >= 5 * n + 1 else (2, 1) if room >= 3 * n + 1 else (max(1, min(3, room // n)), 0)
    )
    shown = gpus if n <= room else gpus[: max(1, room - 1)]
    labels = [gpu_label(g, clock=not clock_rows and width >= 60) for g in shown]
    label_width = max([GPU_LABEL] + [len(label) + 1 for label in labels])
    chart_width = max(4, width - label_width)
    top = max((g.max_limit_w or g.enforced_limit_w or 0.0) for g in gpus) or max(
        (h.power_w.peak or 0.0 for h in view.gpu_history), default=0.0
    )
    lines = [f"power 0-{num(top)} W, {LEVEL_MARK} enforced limit"]
    for g, label in zip(shown, labels, strict=True):
        h = history.get(g.gpu)
        values, limits = (h.power_w.values, h.limit_w.values) if h else ((), ())
        chart = trace(values, chart_width, power_rows, top=top or 1.0, level=limits if power_rows > 1 else ())
        lines += [f"{label if i == 0 else '':{label_width}}{row}" for i, row in enumerate(chart)]
    if len(shown) < n:
        lines.append(f"+{n - len(shown)} more: " + ", ".join(gpu_label(g) for g in gpus[len(shown) :]))
    if clock_rows:
        clocks = [history[g.gpu].sm_clock_mhz if g.gpu in history else None for g in gpus]
        peak = max((c.peak or 0.0 for c in clocks if c is not None), default=0.0)
        lines.append(f"SM clock 0-{peak / 1000:.1f} GHz")
        for g, clock in zip(gpus, clocks, strict=True):
            label = f"GPU{g.gpu} " + ("-" if g.sm_clock_mhz is None else f"{g.sm_clock_mhz / 1000:.1f}GHz")
            chart = trace(clock.values if clock else (), chart_width, clock_rows, top=peak or 1.0)
            lines += [f"{label if i == 0 else '':{label_width}}{row}" for i, row in enumerate(chart)]
    return lines


def timer_lines(t: TimerRow, local: tzinfo) -> list[str]:
    """A deadline in UTC, in the console's zone and in the box's zone, each with its offset."""
    when = f" in {fmt_remaining(t.remaining_ms)}" if t.live else ""
    lines = [
        f"#{t.id} {t.action} {t.state}{when}",
        f"utc   {fmt_utc(t.deadline_ms)}",
        f"local {fmt_zone(t.deadline_ms, local)}",
    ]
    if t.box_tz:
        try:
            lines.append(f"box   {fmt_zone(t.deadline_ms, zone(t.box_tz))}")
        except ValueError:
            lines.append(f"box   zone {t.box_tz!r} unknown")
    if t.warnings:
        lines.append("warned: " + ", ".join(t.warnings))
    return lines


def tripwire_line(t: TripwireRun, width: int) -> str:
    """``glm…dp2tp2 11/20 DEGEN 8d 1w``: the verdict word and counts first, the arm name shortened to fit."""
    v = t.verdict
    split = v.ok + v.degenerate + v.wrong == v.total  # else printed as ok/total only (an import)
    tail = f" {v.ok:>2}/{v.total} {v.word:5}" + (
        "" if v.passed or not split else f" {v.degenerate}d {v.wrong}w"
    )
    room = max(8, width - 19)  # the verdicts line up whatever the arm names
    arm = t.arm if len(t.arm) <= room else t.arm[: room - 1] + "…"
    return f"{arm:{room}}{tail}".rstrip()
