"""Text drawing for the panels: braille charts, power bars, compact numbers. Pure functions, no Textual.

We draw charts ourselves instead of through plotext: plotext 6 is a rewrite with a new API and a
compiled core (FACTS.md), while a braille area chart is forty lines, deterministic in snapshots, and
costs nothing per frame. Meaning never rides on colour alone: a capped GPU says CAPPED.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import tzinfo

from console.readmodel.records import GpuPower, TimerRow, TripwireRow
from console.timeutil import fmt_remaining, fmt_utc, fmt_zone, zone

_LEFT = (0x01, 0x02, 0x04, 0x40)  # braille dots of the left column, top to bottom
_RIGHT = (0x08, 0x10, 0x20, 0x80)
_BLOCKS = " ▏▎▍▌▋▊▉█"


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


def braille_area(
    values: Sequence[float | None], width: int, height: int, top: float | None = None
) -> list[str]:
    """An area chart ``width`` cells wide and ``height`` rows high; two values per cell, gaps stay empty.

    ``values`` are resampled by taking the maximum of the values that fall into each dot column, so a
    short burst is never averaged away.
    """
    width, height = max(1, width), max(1, height)
    cols = 2 * width
    n = len(values)
    points: list[float | None] = []
    for x in range(cols):
        lo, hi = x * n // cols, max(x * n // cols + 1, (x + 1) * n // cols)
        chunk = [v for v in values[lo:hi] if v is not None] if n else []
        points.append(max(chunk) if chunk else None)
    peak = top if top is not None else max((p for p in points if p is not None), default=0.0)
    levels = 4 * height
    heights = [
        0 if p is None or peak <= 0 else max(1 if p > 0 else 0, min(levels, round(p / peak * levels)))
        for p in points
    ]
    rows = []
    for r in range(height):
        cells = []
        for c in range(width):
            code = 0x2800
            for k in range(4):
                level = (height - 1 - r) * 4 + (3 - k)  # dot level counted from the bottom
                if heights[2 * c] > level:
                    code |= _LEFT[k]
                if heights[2 * c + 1] > level:
                    code |= _RIGHT[k]
            cells.append(chr(code))
        rows.append("".join(cells))
    return rows


def bar(fraction: float, width: int) -> str:
    """A horizontal bar in eighth blocks, ``width`` cells, clamped to [0, 1]."""
    fraction = max(0.0, min(1.0, fraction))
    eighths = round(fraction * width * 8)
    full, part = divmod(eighths, 8)
    text = "█" * full + (_BLOCKS[part] if part else "")
    return text.ljust(width)


def power_line(g: GpuPower, bar_width: int = 10, compact: bool = False) -> str:
    """``GPU2  400/400 W ██████▋░░░ CAPPED max 600 2.4GHz 95% 63C``: draw against enforced against max.

    ``compact`` (80 columns) drops the maximum and the clocks but never the word CAPPED.
    """
    draw, limit, top = g.power_w, g.enforced_limit_w, g.max_limit_w
    scale = top or limit
    if scale:
        gauge = bar((draw or 0.0) / scale, bar_width)
        if g.capped and limit:
            cut = round(limit / scale * bar_width)  # headroom the cap takes away is hatched
            gauge = gauge[:cut] + "░" * (bar_width - cut)
    else:
        gauge = "?" * bar_width
    head = f"GPU{g.gpu} {num(draw):>4}/{num(limit)} W {gauge}"
    if compact:
        return head + (" CAPPED" if g.capped else "") + (" STALE" if g.stale else "")
    return head + power_detail(g)


def power_detail(g: GpuPower) -> str:
    """What the compact power line leaves out: the board maximum, SM clock, utilisation, temperature."""
    top = g.max_limit_w
    tail = f" CAPPED max {num(top)}" if g.capped else f" max {num(top)}"
    clock = "-" if g.sm_clock_mhz is None else f"{g.sm_clock_mhz / 1000:.1f}GHz"
    extra = f" {clock} {num(g.util_pct)}% {num(g.temp_c)}C"
    return tail + extra + (" STALE" if g.stale else "")


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


def tripwire_line(t: TripwireRow, width: int) -> str:
    """``glm…dp2tp2 11/20 DEGEN 8d 1w``: the verdict word and counts first, the arm name shortened to fit."""
    v = t.verdict
    tail = f" {v.ok:>2}/{v.total} {v.word:5}" + ("" if v.passed else f" {v.degenerate}d {v.wrong}w")
    room = max(8, width - 19)  # the verdicts line up whatever the arm names
    arm = t.arm if len(t.arm) <= room else t.arm[: room - 1] + "…"
    return f"{arm:{room}}{tail}".rstrip()
