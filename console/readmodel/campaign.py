"""The rest of the campaign's record, for the report and the exports: task accuracy, API prices, box
prices and power maximums, imports, and what economics prices (gathered here so console.economics stays
arithmetic)."""

from __future__ import annotations

import json

from console.errors import InputError
from console.readmodel.records import (
    ApiAccuracy,
    ArmPrecision,
    EconomicsInputs,
    EvalRow,
    ImportedCounts,
    ImportRow,
)
from console.readmodel.results import bench_rows
from console.recipes import load_catalog
from console.recipes.model import Catalog
from console.store import Store
from console.store.results import ApiPrice, ModelIndexEntry, PublishedFigure


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
            unscored=r["unscored"],
        )
        for r in store.rows(
            """SELECT e.*, COALESCE((SELECT SUM(q.unscored) FROM quality_runs q WHERE q.eval_run_id = e.id), 0)
                      AS unscored
               FROM eval_runs e ORDER BY e.model, e.overall DESC, e.id"""
        )
    ]


def api_prices(store: Store, model: str | None = None) -> list[ApiPrice]:
    """The stored API prices (of ``model`` when given), by model and provider."""
    sql = "SELECT * FROM api_prices" + (" WHERE model = ?" if model else "") + " ORDER BY model, provider"
    return [
        ApiPrice(
            r["model"],
            r["provider"],
            r["in_per_mtok"],
            r["out_per_mtok"],
            r["cached_in_per_mtok"],
            r["note"],
            r["accuracy_run"],
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


def model_index(store: Store) -> dict[str, ModelIndexEntry]:
    """Each model's place on the published intelligence index (absent models: value None), by model."""
    return {
        r["model"]: ModelIndexEntry(
            r["model"],
            r["value"],
            bool(r["estimate"]),
            r["index_name"],
            r["version"],
            r["as_of"],
            r["provenance"] or "",
        )
        for r in store.rows("SELECT * FROM model_index ORDER BY model")
    }


def index_text(entry: ModelIndexEntry | None) -> str | None:
    """A model's intelligence index as the write-up prints it: ``46``, ``16 (estimate)``, ``-`` (absent from
    the index's view); None when the index does not list the model at all."""
    if entry is None:
        return None
    if entry.value is None:
        return "-"
    value = f"{entry.value:g}"
    return f"{value} (estimate)" if entry.estimate else value


def published_figures(store: Store, source_table: str | None = None) -> list[PublishedFigure]:
    """Figures a write-up printed that are read beside the campaign's own (of ``source_table`` when given)."""
    sql = (
        "SELECT * FROM published_figures"
        + (" WHERE source_table = ?" if source_table else "")
        + " ORDER BY id"
    )
    return [
        PublishedFigure(
            r["source_table"],
            r["arm"],
            r["box"],
            r["shape"],
            r["concurrency"],
            json.loads(r["figures"]),
            r["note"],
            r["provenance"] or "",
        )
        for r in store.rows(sql, [source_table] if source_table else [])
    ]


def _api_accuracy(store: Store) -> dict[str, ApiAccuracy]:
    """The quality runs that scored an endpoint an API price buys, by label."""
    return {
        r["label"]: ApiAccuracy(r["label"], r["accuracy"], r["items"])
        for r in store.rows(
            "SELECT label, accuracy, items FROM quality_runs WHERE label IN "
            "(SELECT accuracy_run FROM api_prices WHERE accuracy_run IS NOT NULL) ORDER BY id"
        )
    }


def _quality_pairs(store: Store) -> frozenset[tuple[str, str]]:
    """Arms with a paired quality comparison between them: a published pair, or two runs of theirs on one
    suite scored per item (``campaign quality compare`` pairs them on their common items)."""
    rows = store.rows(
        """SELECT a.arm AS a, b.arm AS b FROM quality_pairs p
           JOIN quality_runs a ON a.id = p.a_run JOIN quality_runs b ON b.id = p.b_run
           WHERE p.kind = 'comparison' AND a.arm IS NOT NULL AND b.arm IS NOT NULL
           UNION SELECT a.arm, b.arm FROM quality_runs a JOIN quality_runs b
           ON a.suite = b.suite AND a.arm < b.arm
           WHERE a.harness != 'published' AND b.harness != 'published'"""
    )
    return frozenset(p for r in rows for p in ((r["a"], r["b"]), (r["b"], r["a"])))


def arm_precision(catalog: Catalog) -> dict[str, ArmPrecision]:
    """Each recipe arm's precision keys (checkpoint, quantization, KV cache, SSM state and compute dtypes),
    the arm's own values over its profile's defaults and flags."""
    out = {}
    for name, arm in catalog.arms.items():
        profile = catalog.profiles.get(arm.profile)
        if profile is None:
            continue
        flags: dict[str, object] = {**profile.defaults, **profile.flags, **arm.flags}

        def pick(own: object, key: str, flag: str, flags: dict[str, object] = flags) -> str | None:
            value = own if own is not None else flags.get(flag, flags.get(key))
            return None if value is None else str(value)

        out[name] = ArmPrecision(
            arm=name,
            profile=profile.name,
            checkpoint=profile.checkpoint,
            quantization=profile.quantization,
            kv_cache_dtype=pick(arm.kv_cache_dtype, "kv_cache_dtype", "--kv-cache-dtype"),
            mamba_ssm_cache_dtype=pick(None, "mamba_ssm_cache_dtype", "--mamba-ssm-cache-dtype"),
            dtype=pick(arm.dtype, "dtype", "--dtype"),
            drafter=arm.speculative_config is not None,
            tensor_parallel=arm.tensor_parallel,
            expert_parallel=arm.expert_parallel,
        )
    return out


def economics_inputs(store: Store, catalog: Catalog | None = None) -> EconomicsInputs:
    """The campaign's whole record, as console.economics.economics_table prices it. The recipes (``catalog``,
    else the shipped and the user's) say each arm's precision; recipes that do not load leave it unknown,
    which borrows accuracy as before rather than hiding the campaign's economics behind a recipe typo."""
    if catalog is None:
        try:
            catalog = load_catalog()
        except InputError:
            catalog = Catalog()
    boxes = store.rows("SELECT name, price_basis, price_provenance FROM boxes")
    return EconomicsInputs(
        bench=tuple(bench_rows(store)),
        evals=tuple(eval_runs(store)),
        api_prices=tuple(api_prices(store)),
        box_prices=box_prices(store),
        box_max_power=box_max_power(store),
        box_price_basis={r["name"]: r["price_basis"] for r in boxes},
        box_price_provenance={r["name"]: r["price_provenance"] for r in boxes},
        model_index=model_index(store),
        api_accuracy=_api_accuracy(store),
        published=tuple(published_figures(store)),
        arm_precision=arm_precision(catalog),
        quality_pairs=_quality_pairs(store),
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
