"""The rest of the campaign's record, for the report and the exports: task accuracy, API prices, box
prices and power maximums, imports, and what economics prices (gathered here so console.economics stays
arithmetic)."""

from __future__ import annotations

import json

from console.readmodel.records import EconomicsInputs, EvalRow, ImportedCounts, ImportRow
from console.readmodel.results import bench_rows
from console.store import Store
from console.store.results import ApiPrice


def eval_runs(store: Store) -> list[EvalRow]:
    """Every task-accuracy run, by model, most accurate first."""
    return [
        EvalRow(
            id=r["id"],
            box=r["box"],
            arm=r["arm"],
            model=r["model"],
            configuration=r["configuration"],
            t_ms=r["t_ms"],
            items=r["items"],
            overall=r["overall"],
            families=json.loads(r["families"]) if r["families"] else {},
            note=r["note"],
            source=r["source"],
            provenance=r["provenance"],
        )
        for r in store.rows("SELECT * FROM eval_runs ORDER BY model, overall DESC, id")
    ]


def api_prices(store: Store, model: str | None = None) -> list[ApiPrice]:
    """The stored API prices (of ``model`` when given), by model and provider."""
    sql = "SELECT * FROM api_prices" + (" WHERE model = ?" if model else "") + " ORDER BY model, provider"
    return [
        ApiPrice(
            r["model"], r["provider"], r["in_per_mtok"], r["out_per_mtok"], r["cached_in_per_mtok"], r["note"]
        )
        for r in store.rows(sql, [model] if model else [])
    ]


def box_prices(store: Store) -> dict[str, float | None]:
    """What each box costs an hour (destroyed boxes too: their rows are still priced)."""
    return {r["name"]: r["price_per_hour"] for r in store.rows("SELECT name, price_per_hour FROM boxes")}


def box_max_power(store: Store) -> dict[str, float | None]:
    """Each box's board maximum per GPU: its newest GPU sample's, else the imported figure (None: unknown)."""
    return {
        r["name"]: r["max_w"]
        for r in store.rows(
            """SELECT b.name, coalesce(
               (SELECT max(g.max_limit_w) FROM gpu_samples g WHERE g.box = b.name
                AND g.t_ms = (SELECT max(t_ms) FROM gpu_samples WHERE box = b.name)), b.max_power_w) AS max_w
           FROM boxes b"""
        )
    }


def economics_inputs(store: Store) -> EconomicsInputs:
    """The campaign's whole record, as console.economics.economics_table prices it."""
    return EconomicsInputs(
        bench=tuple(bench_rows(store)),
        evals=tuple(eval_runs(store)),
        api_prices=tuple(api_prices(store)),
        box_prices=box_prices(store),
        box_max_power=box_max_power(store),
    )


def imports(store: Store) -> list[ImportRow]:
    """Every imported campaign, oldest first."""
    return [
        ImportRow(r["id"], r["t_ms"], r["source"], r["provenance"], r["rows"])
        for r in store.rows("SELECT id, t_ms, source, provenance, rows FROM imports ORDER BY t_ms, id")
    ]


def imported_counts(store: Store) -> ImportedCounts:
    """How many throughput rows, tripwire verdicts, task-accuracy and divergence rows were imported."""
    r = store.rows(
        """SELECT (SELECT count(*) FROM bench_runs WHERE source = 'imported') AS bench_runs,
                  (SELECT count(*) FROM tripwire_runs WHERE source = 'imported') AS tripwire_runs,
                  (SELECT count(*) FROM eval_runs WHERE source = 'imported') AS eval_runs,
                  (SELECT count(*) FROM kldiff_runs WHERE source = 'imported') AS kldiff_runs"""
    )[0]
    return ImportedCounts(r["bench_runs"], r["tripwire_runs"], r["eval_runs"], r["kldiff_runs"])
