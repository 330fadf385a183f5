"""Logit-level divergence rows as records: what ``campaign kldiff``, its export and the TUI read.

Every reader gets the verdict from ``KldiffRun.verdict`` (console/readmodel/records.py), computed from
the pair's and its control's figures: the rule and its words exist once.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from console.readmodel.records import KldiffRun
from console.store import Store

_COLUMNS = tuple(f.name for f in fields(KldiffRun) if f.name != "recorded_verdict")
"""The record's other fields are kldiff_runs columns of the same name."""


def _run(r: dict[str, Any]) -> KldiffRun:
    return KldiffRun(**{name: r[name] for name in _COLUMNS}, recorded_verdict=r["verdict"])


def kldiff_runs(store: Store, at: int | None = None, text: str = "") -> list[KldiffRun]:
    """Every comparison (measured ones finished by ``at``; imported ones have no instant: always), measured
    first and newest first, then imported in the order of their source; ``text`` keeps rows containing
    every word of it."""
    where, params = "", []
    if at is not None:
        where, params = "WHERE source != 'measured' OR t_ms <= ?", [at]
    rows = [
        _run(r)
        for r in store.rows(
            f"SELECT * FROM kldiff_runs {where} "
            "ORDER BY source != 'measured', CASE WHEN source = 'measured' THEN -t_ms END, id",
            params,
        )
    ]
    needle = text.strip().lower().split()
    return [r for r in rows if all(word in r.text() for word in needle)]


def kldiff_run(store: Store, run_id: str) -> KldiffRun | None:
    """The row of the kldiff command ``run_id`` (what ``campaign kldiff`` shows), once ingested."""
    rows = store.rows("SELECT * FROM kldiff_runs WHERE run_id = ?", [run_id])
    return _run(rows[0]) if rows else None
