"""Progress on stderr: redrawn in place on a terminal, one plain line per step anywhere else.

On a terminal a ``ProgressLine`` redraws one line (``\\r`` and erase-line) at most ``REDRAW_S`` apart. To
a pipe or a file (``campaign box connect NAME --follow 2>>follow.log``) a redrawn line would be one endless
line, so there it writes no ``\\r`` and no escape: one plain line per step, at most one every
``EVERY_S`` seconds. A step held back by either limit is not lost: the next step after the interval
replaces it, and ``end`` writes it, so the last state is always the last line.

The one place the CLI's progress writers decide how to draw; they say what a step is.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

REDRAW_S = 0.1
"""On a terminal: at most ten redraws a second."""
EVERY_S = 5.0
"""Anywhere else: at most one line every five seconds (and the last step at the end)."""


def is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or the stream is closed
        return False


def bar(fraction: float, width: int) -> str:
    """``[####      ]``: ``fraction`` (0..1) of ``width`` cells filled."""
    filled = int(min(1.0, max(0.0, fraction)) * width)
    return f"[{'#' * filled}{' ' * (width - filled)}]"


class ProgressLine:
    """One progress line on ``stream`` (default: stderr as it is when made)."""

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        every_s: float = EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.stream = stream if stream is not None else sys.stderr
        self.tty = is_terminal(self.stream)
        self.interval_s = REDRAW_S if self.tty else every_s
        self._clock = clock
        self._written_at: float | None = None
        self._held: str | None = None  # the newest step not yet written
        self._open = False  # a terminal line is drawn and not yet ended

    def step(self, text: str, *, now: bool = False) -> None:
        """Show ``text`` as the current step: at once when ``now`` (on a terminal) or the interval has
        passed since the last line, else held until the next step or ``end``."""
        at = self._clock()
        due = self._written_at is None or at - self._written_at >= self.interval_s
        if due or (now and self.tty):
            self._write(text)
            self._written_at = at
        else:
            self._held = text

    def say(self, text: str) -> None:
        """A line of its own (a notice) below the progress; the next step draws after it."""
        self._end_line()
        self.stream.write(text + "\n")
        self.stream.flush()

    def end(self) -> None:
        """Write the step held back, if any, and end the line, so what follows starts on its own line."""
        if self._held is not None:
            self._write(self._held)
        self._end_line()
        self.stream.flush()

    def _write(self, text: str) -> None:
        self._held = None
        if self.tty:
            self.stream.write(f"\r\x1b[2K{text}")
            self._open = True
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def _end_line(self) -> None:
        if self._open:
            self.stream.write("\n")
            self._open = False
