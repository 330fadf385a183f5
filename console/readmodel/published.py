"""Two configurations read through the figures someone published, when no repeats exist to judge them.

An imported row has no repeats, so ``campaign compare`` has no spread to read a verdict against. What the
write-up's tables do give is readings: each shape's throughput and time to first token on each side, from
every table that printed them, with the ratio. Where two tables disagree about one configuration (the
write-up's "gpt-oss-120b measured both ways" column repeats gpt-oss-20b's 600 W figures), both readings are
printed, each under its table's name with its note, never one silently.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from console.readmodel.campaign import published_figures
from console.readmodel.records import ResultRow
from console.readmodel.results import bench_rows
from console.store import Store


def seconds(value: float) -> str:
    """A time to first token as the write-up prints it: 0.7 s, 1.0 s, 324 s."""
    return f"{value:.1f} s" if value < 10 else f"{value:,.0f} s"


@dataclass(frozen=True)
class Reading:
    """One side's figure at one shape, as one table printed it."""

    arm: str
    box: str | None
    shape: str
    concurrency: int | None
    out_tok_per_s: float
    ttft_s: float | None
    table: str
    note: str | None

    @property
    def text(self) -> str:
        at = f" C{self.concurrency}" if self.concurrency is not None else ""
        ttft = "" if self.ttft_s is None else f", TTFT {seconds(self.ttft_s)}"
        return f"{self.out_tok_per_s:,.0f} out tok/s{at}{ttft} on {self.box} ({self.table})"


@dataclass(frozen=True)
class ReadingPair:
    """A reading of A against one of B at the same shape, and A's throughput over B's."""

    shape: str
    a: Reading
    b: Reading

    @property
    def ratio(self) -> float:
        return self.a.out_tok_per_s / self.b.out_tok_per_s

    @property
    def text(self) -> str:
        ttft = ""
        if self.a.ttft_s is not None and self.b.ttft_s is not None:
            ttft = f"; TTFT {seconds(self.a.ttft_s)} vs {seconds(self.b.ttft_s)}"
        return f"{self.shape}: {self.ratio:.1f}x ({self.a.text} vs {self.b.text}){ttft}"


@dataclass(frozen=True)
class PublishedComparison:
    """Every reading pair of two imported configurations at the shapes both were printed at."""

    a: str
    b: str
    pairs: tuple[ReadingPair, ...]
    notes: tuple[str, ...]  # each conflicting table's note, once


def _table(row: ResultRow) -> str:
    """The table an imported row came from: the first part of its provenance (ops/demo.py writes it so)."""
    return (row.provenance or "imported").split(";")[0].strip()


def _readings(rows: Sequence[ResultRow], arm: str, box: str | None, store: Store) -> list[Reading]:
    out = [
        Reading(
            r.arm,
            r.box,
            r.shape,
            r.concurrency,
            r.out_tok_per_s,
            None if r.ttft_ms_p50 is None else r.ttft_ms_p50 / 1000,
            _table(r),
            None,
        )
        for r in rows
        if r.arm == arm and (box is None or r.box == box) and r.out_tok_per_s
    ]
    out += [
        Reading(
            f.arm,
            f.box,
            f.shape or "",
            f.concurrency,
            f.figures["out_tok_s"],
            f.figures.get("ttft_p50_s"),
            f.source_table,
            f.note,
        )
        for f in published_figures(store)
        if f.arm == arm and (box is None or f.box == box) and "out_tok_s" in f.figures and f.shape
    ]
    return out


def published_comparison(store: Store, a: str, b: str, box: str | None = None) -> PublishedComparison | None:
    """A and B as arms whose every row is imported, read table by table at each shape both have; None when
    either is not such an arm (then ``campaign compare`` judges measured repeats as usual)."""
    rows = [r for r in bench_rows(store) if r.arm in (a, b)]
    if not rows or any(r.source == "measured" for r in rows) or {r.arm for r in rows} != {a, b}:
        return None
    ra, rb = _readings(rows, a, box, store), _readings(rows, b, box, store)
    shapes = [s for s in dict.fromkeys(x.shape for x in ra) if any(y.shape == s for y in rb)]
    pairs = tuple(
        ReadingPair(s, x, y) for s in shapes for x in ra if x.shape == s for y in rb if y.shape == s
    )
    notes = tuple(dict.fromkeys(f"{x.table}: {x.note}" for x in (*ra, *rb) if x.note))
    return PublishedComparison(a, b, pairs, notes)
