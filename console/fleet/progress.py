"""Ingest progress on stderr for the CLI: a bar of committed seq against the box's newest seq."""

from __future__ import annotations

import sys
import time

from console.fleet import BoxLink
from console.store.ingest import IngestReport


class IngestProgress:
    """Redraws at most 10 times a second; the line ends with a newline on ``done``."""

    def __init__(self, link: BoxLink, width: int = 30):
        self.link = link
        self.width = width
        self.inserted = 0
        self._drawn = 0.0
        self._start: int | None = None

    def __call__(self, report: IngestReport) -> None:
        self.inserted += report.inserted
        if self._start is None:
            self._start = report.cursor - report.inserted
        now = time.monotonic()
        if now - self._drawn < 0.1 and report.cursor < self.link.box_last_seq:
            return
        self._drawn = now
        total = max(1, self.link.box_last_seq - self._start)
        frac = min(1.0, (report.cursor - self._start) / total)
        bar = "#" * int(frac * self.width)
        sys.stderr.write(
            f"\r{self.link.name}: [{bar:<{self.width}}] seq {report.cursor}/{self.link.box_last_seq} "
            f"(+{self.inserted} events)"
        )
        if report.journal_only:
            sys.stderr.write(f"\n{self.link.name}: kept in the journal only: {report.journal_only}\n")
        sys.stderr.flush()

    def done(self) -> None:
        if self._start is not None:
            sys.stderr.write("\n")
