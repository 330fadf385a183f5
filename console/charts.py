"""Charts as plain text at a given size: the Live history (braille areas and sparklines, drawn here cell by
cell), and, drawn by plotext, the Results comparison and the quality/cost frontier (the Economics view,
``campaign export economics --chart`` and ``campaign report``).

Each function returns the chart's rows, ``width`` cells each, without colour: meaning rides on the marks
and the words the caller puts beside them (a console colours words, never a bare mark). plotext keeps one
figure per process, so every drawing holds a lock; it is imported on the first chart, not by every
``campaign`` command (its import costs a few hundred milliseconds).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

_LOCK = threading.Lock()

LEVEL_MARK = "─"
"""The mark of a level drawn across a trace (a GPU's enforced power limit)."""


@contextmanager
def _figure(width: int, height: int) -> Iterator[Any]:
    import plotext

    with _LOCK:
        plotext.terminal.limit(False, False)  # the size asked for, not the size of whatever terminal runs us
        figure = plotext.figure
        figure.clear()
        figure.plot_size(max(1, width), max(1, height))
        yield figure


def _rows(figure: Any) -> list[str]:
    return str(figure.build().string(colorless=True)).rstrip("\n").split("\n")


_LEFT = (0x00, 0x40, 0x44, 0x46, 0x47)
_RIGHT = (0x00, 0x80, 0xA0, 0xB0, 0xB8)
"""Braille bits of a cell's left and right dot column filled 0..4 dots from the bottom (U+2800 block)."""

SPARKS = "▁▂▃▄▅▆▇█"
"""A sparkline's eight heights; a present value is at least the lowest, a gap is a blank."""


def _columns(values: Sequence[float | None], count: int) -> list[float | None]:
    """``values`` spread over ``count`` columns, oldest first: the nearest value where there are fewer
    values than columns, the largest of a column's values where there are more (a peak is never dropped)."""
    n = len(values)
    if n == 0:
        return [None] * count
    if n <= count:
        last = max(1, count - 1)
        return [values[(2 * c * (n - 1) + last) // (2 * last)] for c in range(count)]
    out: list[float | None] = []
    for c in range(count):
        present = [v for v in values[c * n // count : (c + 1) * n // count] if v is not None]
        out.append(max(present) if present else None)
    return out


def _heights(values: Sequence[float | None], count: int, top: float, steps: int) -> list[int]:
    """Each column's height in ``steps`` (0 for a gap; a present value, even 0, is at least 1), clipped at
    ``top``: above the scale is drawn full height, never wrapped."""
    scale = top if top > 0 else 1.0
    return [
        0 if v is None else max(1, min(steps, round(max(0.0, min(v, scale)) / scale * steps)))
        for v in _columns(values, count)
    ]


def sparkline(values: Sequence[float | None], width: int, top: float) -> str:
    """``values`` (oldest first, None a gap) as one row of ``width`` SPARKS from 0 to ``top``: eight heights
    a cell where one row of braille has four, so a one-row chart is drawn this way."""
    return "".join(" " if h == 0 else SPARKS[h - 1] for h in _heights(values, width, top, len(SPARKS)))


def trace(
    values: Sequence[float | None],
    width: int,
    height: int,
    top: float,
    level: Sequence[float | None] = (),
) -> list[str]:
    """``values`` (one per time bucket, oldest first; None is a gap, drawn as one) as a braille area on a
    ``width`` x ``height`` canvas from 0 at the bottom edge to ``top`` at the top edge, no axes. ``level``
    (the same buckets: a GPU's enforced limit) is drawn underneath as a line of LEVEL_MARK; where the area
    reaches it, the area shows. Two values fit one cell across: ``2 * width`` values fill the width. One row
    high, it is a sparkline (the level is left to the caller's words).

    Drawn cell by cell from the columns' heights: a few microseconds a cell, where plotext took tens of
    microseconds a point (an 8-GPU Live view draws ten of these a redraw).
    """
    width, height = max(1, width), max(1, height)
    if height == 1:
        return [sparkline(values, width, top)]
    dots = 4 * height
    area = _heights(values, 2 * width, top, dots)
    limit = _heights(level, 2 * width, top, dots) if level else [0] * (2 * width)
    rows: list[list[str]] = [[] for _ in range(height)]
    for x in range(width):
        left, right = area[2 * x], area[2 * x + 1]
        mark = max(limit[2 * x], limit[2 * x + 1])
        mark_row = height - 1 - (mark - 1) // 4 if mark else -1
        for r in range(height):
            floor = 4 * (height - 1 - r)
            k0, k1 = min(4, max(0, left - floor)), min(4, max(0, right - floor))
            if k0 or k1:
                rows[r].append(chr(0x2800 | _LEFT[k0] | _RIGHT[k1]))
            else:
                rows[r].append(LEVEL_MARK if r == mark_row else " ")
    return ["".join(row) for row in rows]


def hbars(rows: Sequence[tuple[str, float]], width: int, scale_label: Callable[[float], str]) -> list[str]:
    """One horizontal bar per (label, value), top to bottom, from 0 to the largest value; the labels sit
    left of the axis (they carry the words), ``scale_label`` names 0 and the largest value below it."""
    top = max((v for _, v in rows), default=0.0) or 1.0
    n = len(rows)
    positions = list(range(n, 0, -1))
    with _figure(width, n + 3) as f:
        f.draw(f.bar(positions, [max(0.0, v) for _, v in rows], orientation="h", width=0.5))
        f.ruler("y").ticks(positions, [label for label, _ in rows])
        f.ruler("x").alignment(lim="edge")
        f.ruler("x").lim(0, top)
        f.ruler("x").ticks([0, top], [scale_label(0.0), scale_label(top)])
        return _rows(f)


@dataclass(frozen=True)
class PlotPoint:
    x: float
    y: float
    mark: str  # one character, explained by the caller's legend


def scatter(
    points: Sequence[PlotPoint],
    width: int,
    height: int,
    x_label: Callable[[float], str],
    y_label: Callable[[float], str],
    x_ticks: int = 5,
) -> list[str]:
    """Points drawn with their own marks, later marks on top; axes from the smallest to the largest
    value, labelled by ``x_label``/``y_label`` at ``x_ticks`` and three places."""
    xs, ys = [p.x for p in points], [p.y for p in points]
    x0, x1 = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
    y0, y1 = min(ys), max(ys) if max(ys) > min(ys) else min(ys) + 0.01
    with _figure(width, height) as f:
        marks = list(dict.fromkeys(p.mark for p in points))
        for mark in marks:
            mine = [p for p in points if p.mark == mark]
            f.draw(f.signal([p.x for p in mine], [p.y for p in mine], marker=mark))
        f.ruler("x").lim(x0, x1)
        f.ruler("y").lim(y0, y1)
        xt = [x0 + (x1 - x0) * i / (x_ticks - 1) for i in range(x_ticks)]
        yt = [y0, (y0 + y1) / 2, y1]
        f.ruler("x").ticks(xt, [x_label(v) for v in xt])
        f.ruler("y").ticks(yt, [y_label(v) for v in yt])
        return _rows(f)
