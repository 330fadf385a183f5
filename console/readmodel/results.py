"""Bench and tripwire rows as records: the one query every reader of a throughput number goes through.

The Results view, ``campaign export``, the report, economics and ``campaign bench`` all read bench rows
here, so a number can only leave the store with its kernel line, tripwire verdict, power limit and
marks beside it. "The fastest row per key" is ``best_by``, also here, for the same reason.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import fields
from typing import Any, TypeVar

from console.errors import InputError
from console.readmodel.records import (
    KernelUse,
    ReplicaResult,
    ResultRow,
    TripwireRun,
    TripwireVerdict,
)
from console.store import Store
from console.store.jsonutil import json_list

K = TypeVar("K", bound=Hashable)

RESULT_SORTS: dict[str, str] = {
    "arm": "arm, shape, concurrency",
    "shape": "shape, concurrency, arm",
    "out tok/s": "out_tok_per_s DESC",
    "req/s": "req_per_s DESC",
    "ttft": "ttft_ms_p50",
    "tpot": "tpot_ms_p50",
    "time": "started_ms DESC",
}

_BENCH_SELECT = """SELECT b.*, t.ok AS tw_ok, t.degenerate AS tw_degenerate, t.wrong AS tw_wrong, t.total AS tw_total,
                          t.passed AS tw_passed, t.reasoning_leak AS tw_leak
                   FROM bench_runs b LEFT JOIN tripwire_runs t ON t.id = b.tripwire_id"""
_FLAGS = ("client_bound", "diagnostic_only", "queueing", "kernel_fallback")
_PLAIN = tuple(
    f.name
    for f in fields(ResultRow)
    if f.name not in (*_FLAGS, "tripwire", "prefix_caching", "kernel_check", "spec_accepted_per_pos")
)
"""The record's other fields are bench_runs columns of the same name."""


def _kernel_check(text: str | None) -> tuple[KernelUse, ...]:
    return tuple(
        KernelUse(
            str(c["kind"]),
            str(c["requested"]),
            str(c["status"]),
            tuple(c.get("used") or ()),
            tuple(c.get("other_than_requested") or ()),
        )
        for c in json_list(text)
        if isinstance(c, dict)
    )


def _result(r: dict[str, Any]) -> ResultRow:
    values: dict[str, Any] = {name: r[name] for name in _PLAIN}
    values.update({flag: bool(r[flag]) for flag in _FLAGS})
    values["prefix_caching"] = None if r["prefix_caching"] is None else bool(r["prefix_caching"])
    values["kernel_check"] = _kernel_check(r["kernel_check"])
    values["spec_accepted_per_pos"] = tuple(int(x) for x in json_list(r["spec_accepted_per_pos"]))
    values["tripwire"] = TripwireVerdict.of(
        r["tw_ok"], r["tw_degenerate"], r["tw_wrong"], r["tw_total"], r["tw_passed"], r["tw_leak"]
    )
    return ResultRow(**values)


def bench_rows(store: Store, at: int | None = None, sort: str = "arm", text: str = "") -> list[ResultRow]:
    """Every bench row, or those finished by ``at`` (imported rows have no instant: always).

    ``sort`` is one of RESULT_SORTS; ``text`` keeps rows containing every word of it (arm, model, shape,
    box, kernel, verdict, marks).
    """
    if sort not in RESULT_SORTS:
        raise ValueError(f"unknown sort {sort!r}; choose one of {', '.join(RESULT_SORTS)}")
    where, params = "", []
    if at is not None:
        where = "WHERE coalesce(b.ended_ms, b.started_ms) IS NULL OR coalesce(b.ended_ms, b.started_ms) <= ?"
        params = [at]
    rows = [
        _result(r) for r in store.rows(f"{_BENCH_SELECT} {where} ORDER BY {RESULT_SORTS[sort]}, b.id", params)
    ]
    needle = text.strip().lower().split()
    return [r for r in rows if all(word in r.text() for word in needle)]


def bench_run(store: Store, run_id: str) -> ResultRow | None:
    """The bench row of the bench command ``run_id`` (what ``campaign bench`` shows), once ingested."""
    rows = store.rows(f"{_BENCH_SELECT} WHERE b.run_id = ? ORDER BY b.id", [run_id])
    return _result(rows[0]) if rows else None


def bench_row(store: Store, spec: str) -> ResultRow:
    """The bench row named by its id or its bench command's run id; an unknown one is a one-line InputError."""
    rows = store.rows(f"{_BENCH_SELECT} WHERE b.id = ? OR b.run_id = ? ORDER BY b.id LIMIT 1", [spec, spec])
    if not rows:
        raise InputError(
            f"no bench row {spec!r} in {store.path}",
            "`campaign export summary` lists the rows with their ids; a run id is what `campaign bench` printed",
        )
    return _result(rows[0])


def latest_bench(store: Store, box: str, start: int, at: int) -> ResultRow | None:
    """The bench row on ``box`` that began by ``at`` and had not ended by ``start``, the latest one begun."""
    rows = store.rows(
        f"""{_BENCH_SELECT} WHERE b.box = ? AND b.started_ms <= ? AND coalesce(b.ended_ms, b.started_ms) > ?
            ORDER BY b.started_ms DESC LIMIT 1""",
        [box, at, start],
    )
    return _result(rows[0]) if rows else None


def replica_results(store: Store, bench_run_id: int) -> list[ReplicaResult]:
    """The per-replica detail of a node row, in the order of its base URLs."""
    rows = store.rows("SELECT * FROM bench_replicas WHERE bench_run_id = ? ORDER BY replica", [bench_run_id])
    return [ReplicaResult(**{f.name: r[f.name] for f in fields(ReplicaResult)}) for r in rows]


def best_by(rows: Iterable[ResultRow], key: Callable[[ResultRow], K]) -> dict[K, ResultRow]:
    """The fastest row (output tok/s) for each key; a row without a throughput never counts, a tie
    keeps the row seen first."""
    best: dict[K, ResultRow] = {}
    for r in rows:
        if r.out_tok_per_s is None:
            continue
        k = key(r)
        held = best.get(k)
        if held is None or r.out_tok_per_s > (held.out_tok_per_s or 0.0):
            best[k] = r
    return best


def best_per_model(rows: Iterable[ResultRow]) -> list[ResultRow]:
    """The fastest row of each model per source and shape, never a diagnostic-only one."""
    best = best_by(
        (r for r in rows if not r.diagnostic_only), lambda r: (r.source, r.model or r.arm, r.shape)
    )
    return [best[k] for k in sorted(best)]


# -- tripwire -----------------------------------------------------------------------------------------
def latest_tripwires(store: Store, at: int, box: str | None = None) -> list[TripwireRun]:
    """The latest tripwire run of each arm on each box (or on ``box``) as of ``at``."""
    rows = store.rows(
        f"""SELECT * FROM tripwire_runs r
            WHERE t_ms <= :at {"AND box = :box" if box else ""} AND id = (
              SELECT id FROM tripwire_runs s WHERE s.arm = r.arm AND s.box IS r.box
              AND s.t_ms <= :at ORDER BY s.t_ms DESC, s.id DESC LIMIT 1)
            ORDER BY box, arm""",
        {"at": at, "box": box},
    )
    return [TripwireRun.from_row(r) for r in rows]


def failed_tripwires(store: Store, at: int) -> list[TripwireRun]:
    """Arms whose latest tripwire on a box failed: their throughput must not be trusted."""
    return [t for t in latest_tripwires(store, at) if t.verdict.failed]


def tripwire_run(store: Store, run_id: str) -> TripwireRun | None:
    """The tripwire run of the tripwire command ``run_id`` (what ``campaign tripwire`` shows), once ingested."""
    rows = store.rows("SELECT * FROM tripwire_runs WHERE run_id = ? ORDER BY id", [run_id])
    return TripwireRun.from_row(rows[0]) if rows else None
