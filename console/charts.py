"""Charts as plain text at a given size, drawn by plotext: the Live history, the Results comparison and the
quality/cost frontier (the Economics view, ``campaign export economics --chart`` and ``campaign report``).

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
    reaches it, the area shows. Two values fit one cell across: ``2 * width`` values fill the width.
    """
    n = max(2, len(values), len(level))
    with _figure(width, height) as f:
        f.axes(False)
        f.ruler("x").ticks([])
        f.ruler("y").ticks([])
        f.ruler("both").alignment(lim="edge")  # 0 on the bottom edge and ``top`` on the top one
        f.ruler("x").lim(0, n - 1)
        f.ruler("y").lim(0, top if top > 0 else 1)
        _draw(f, level, LEVEL_MARK, top, fill=False)
        _draw(f, values, "braille", top, fill=True)
        return _rows(f)


def _draw(f: Any, values: Sequence[float | None], marker: str, top: float, fill: bool) -> None:
    """One series as a connected line (an area when ``fill``), broken wherever a bucket has no value.

    plotext's cost grows with the points it is given (tens of microseconds each), so the inside of a run
    of equal values is left out: the line between the run's ends draws the same cells.
    """
    kept: list[tuple[int, float, bool]] = []  # (bucket, value, starts a segment)
    for i, raw in enumerate(values):
        if raw is None:
            continue
        v = min(raw, top)
        starts = i == 0 or values[i - 1] is None
        ends = i + 1 == len(values) or values[i + 1] is None
        same_before = not starts and min(values[i - 1] or 0.0, top) == v
        same_after = not ends and min(values[i + 1] or 0.0, top) == v
        if not (same_before and same_after):
            kept.append((i, v, starts))
    if not kept:
        return
    signal = f.signal([i for i, _, _ in kept], [v for _, v, _ in kept], marker=marker)
    signal.lines(True)
    if fill:
        signal.fillx(True)
    for k, (_, _, starts) in enumerate(kept):
        if k and starts:
            signal.line(k, False)  # a gap in the samples stays a gap
    f.draw(signal)


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
