"""Ingest progress on stderr for the CLI: a bar of committed seq against the box's newest seq.

How it is drawn is console/progress.py's: redrawn in place on a terminal, one plain line per step (at most
one every few seconds, and the last) when stderr is a pipe or a file.
"""

from __future__ import annotations

from console.fleet import BoxLink
from console.progress import ProgressLine, bar
from console.store.ingest import IngestReport


class IngestProgress:
    """One step per ingested batch; ``done`` shows the last and ends the line."""

    def __init__(self, link: BoxLink, width: int = 30, line: ProgressLine | None = None):
        self.link = link
        self.width = width
        self.line = line or ProgressLine()
        self.inserted = 0
        self._start: int | None = None

    def __call__(self, report: IngestReport) -> None:
        self.inserted += report.inserted
        if self._start is None:
            self._start = report.cursor - report.inserted
        last = self.link.box_last_seq
        frac = min(1.0, (report.cursor - self._start) / max(1, last - self._start))
        self.line.step(
            f"{self.link.name}: {bar(frac, self.width)} seq {report.cursor}/{last} (+{self.inserted} events)",
            now=report.cursor >= last,
        )
        if report.journal_only:
            self.line.say(f"{self.link.name}: kept in the journal only: {report.journal_only}")

    def done(self) -> None:
        self.line.end()
