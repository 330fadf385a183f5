"""The priced table: what a token costs on each configuration's node and from an API, and the quality/cost
frontier (the package docstring, console/economics/__init__.py, gives the arithmetic)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from console.charts import PlotPoint, scatter
from console.economics.accuracy import BORROWED, MEASURED, Found, Lenders
from console.economics.costs import (
    DEFAULT_UTILISATION,
    FOLLOWS_BASIS,
    CostModel,
    EconomicsError,
    NodePrice,
    check_basis,
    check_utilisation,
    default_cost_model,
    node_price,
)
from console.quality.stats import wilson
from console.readmodel.campaign import index_text
from console.readmodel.records import EconomicsInputs, EvalRow, ResultRow, below_maximum
from console.readmodel.results import best_by
from console.store.results import ApiPrice

DEFAULT_SHAPES = ("router", "promptopt")
FRONTIER_TABLE = "Every configuration on one chart"
"""The write-up's table the published frontier figures come from (ops/demo.py files them under this name)."""


@dataclass(frozen=True)
class Throughput:
    """One measured row at one shape: what the economics needs of a bench run."""

    shape: str
    concurrency: int
    out_tok_per_s: float
    in_tok_per_s: float | None
    input_len: int
    output_len: int
    prefix_len: int = 0

    @property
    def req_per_s(self) -> float:
        """Requests a second from output throughput: every request of a shape writes output_len tokens."""
        return self.out_tok_per_s / self.output_len

    @property
    def in_tok_per_hour(self) -> float:
        if self.in_tok_per_s is not None:
            return self.in_tok_per_s * 3600
        return self.req_per_s * (self.input_len + self.prefix_len) * 3600

    @property
    def out_tok_per_hour(self) -> float:
        return self.out_tok_per_s * 3600


def api_cost_per_request(price: ApiPrice, t: Throughput) -> float:
    """USD for one request of the shape: the shared prefix is a cache hit at the cache-read price."""
    cached = price.cached_in_per_mtok if price.cached_in_per_mtok is not None else price.in_per_mtok
    return (t.input_len * price.in_per_mtok + t.prefix_len * cached + t.output_len * price.out_per_mtok) / 1e6


@dataclass(frozen=True)
class HourOfOutput:
    in_m: float  # million input tokens per node-hour
    out_m: float
    node_usd: float
    api_usd: float | None

    @property
    def ratio(self) -> float | None:
        return None if self.api_usd is None else self.api_usd / self.node_usd


def hour_of_output(t: Throughput, node_usd_per_hour: float, price: ApiPrice | None) -> HourOfOutput:
    """The campaign write-up's per-hour table: the same hour of tokens bought from an API at list price (no
    cache)."""
    in_m, out_m = t.in_tok_per_hour / 1e6, t.out_tok_per_hour / 1e6
    api = None if price is None else in_m * price.in_per_mtok + out_m * price.out_per_mtok
    return HourOfOutput(in_m, out_m, node_usd_per_hour, api)


@dataclass(frozen=True)
class Blended:
    shapes: tuple[str, ...]
    avg_in_tokens: float  # per request, prefix included
    avg_out_tokens: float
    node_per_mtok: float
    api_per_mtok: float | None

    @property
    def ratio(self) -> float | None:
        return None if self.api_per_mtok is None else self.api_per_mtok / self.node_per_mtok


def blended(rows: Sequence[Throughput], node_usd_per_hour: float, price: ApiPrice | None) -> Blended:
    """USD per million tokens (in + out) averaged per request over the rows' shapes (the campaign write-up's
    chart)."""
    if not rows:
        raise EconomicsError("no throughput rows to price")
    n = len(rows)
    avg_in = sum(t.input_len + t.prefix_len for t in rows) / n
    avg_out = sum(t.output_len for t in rows) / n
    per_request_tokens = avg_in + avg_out
    node = sum(node_usd_per_hour / (t.req_per_s * 3600) for t in rows) / n
    api = None if price is None else sum(api_cost_per_request(price, t) for t in rows) / n
    return Blended(
        shapes=tuple(t.shape for t in rows),
        avg_in_tokens=avg_in,
        avg_out_tokens=avg_out,
        node_per_mtok=node / per_request_tokens * 1e6,
        api_per_mtok=None if api is None else api / per_request_tokens * 1e6,
    )


@dataclass(frozen=True)
class Point:
    key: Any
    cost: float
    quality: float
    diagnostic_only: bool = False


def frontier(points: Iterable[Point]) -> set[Any]:
    """Keys of the points nothing dominates: no other point is at most as dear and at least as good
    with one of the two strictly. Diagnostic-only points neither join nor dominate."""
    usable = [p for p in points if not p.diagnostic_only]
    on = set()
    for p in usable:
        dominated = any(
            q.cost <= p.cost and q.quality >= p.quality and (q.cost < p.cost or q.quality > p.quality)
            for q in usable
        )
        if not dominated:
            on.add(p.key)
    return on


def parse_api_price(text: str) -> ApiPrice:
    """``MODEL=IN/OUT[/CACHED]`` in USD per million tokens, as the operator types it on the CLI."""
    model, sep, prices = text.partition("=")
    parts = prices.split("/")
    if not sep or not model.strip() or len(parts) not in (2, 3):
        raise EconomicsError(
            f"--api-price {text!r}: write MODEL=IN/OUT or MODEL=IN/OUT/CACHED in USD per million tokens, "
            "e.g. GLM-5.3-Flash=0.15/0.50"
        )
    try:
        numbers = [float(p) for p in parts]
    except ValueError:
        raise EconomicsError(f"--api-price {text!r}: prices must be numbers, e.g. 0.15/0.50") from None
    if any(x < 0 for x in numbers):
        raise EconomicsError(f"--api-price {text!r}: a price cannot be negative")
    return ApiPrice(
        model.strip(), "operator", numbers[0], numbers[1], numbers[2] if len(numbers) == 3 else None
    )


@dataclass(frozen=True)
class EconomicsRow:
    """One configuration (box, arm) priced against one API provider, with its place on the frontier."""

    box: str | None
    arm: str
    model: str | None
    rows: str  # the shapes and concurrencies averaged, e.g. "router C1024 + promptopt C1024"
    node_usd_per_hour: float
    node_per_mtok: float
    accuracy: float | None
    accuracy_items: int | None
    accuracy_box: str | None  # where the accuracy was measured
    accuracy_basis: str | None  # measured (on this box and arm) or borrowed (another box or arm); None: none
    accuracy_arm: str | None  # the arm the accuracy was measured on
    api_provider: str | None
    api_per_mtok: float | None
    api_over_node: float | None
    on_frontier: bool
    diagnostic_only: bool
    power_limit_w: float | None  # the lowest limit the priced rows ran under
    max_power_w: float | None  # the box's board maximum
    source: str
    node_basis: str = ""  # the node's cost basis in words, e.g. "Scan list, 70 %: $4.40/h"
    price_provenance: str | None = None  # where the box's price comes from
    api_over_node_fully_loaded: float | None = None  # the ratio with the node at the fully-loaded basis
    api_accuracy: float | None = None  # what the endpoint this price buys scored on the suite's items
    api_accuracy_items: int | None = None
    api_accuracy_run: str | None = None
    missing_shapes: tuple[str, ...] = ()  # asked-for shapes the configuration has no row at
    held: str | None = None  # why it cannot stand on the frontier, e.g. "precision changed: ..."
    aa_index: str | None = None  # the model's intelligence index as printed: "46", "16 (estimate)", "-"
    published_node_per_mtok: float | None = None  # the write-up's printed node $/M for this configuration
    published_note: str | None = None  # published and computed differ: both, and why
    accuracy_unscored: int = 0  # items the accuracy's run left out (timed out): it reads high by them

    @property
    def accuracy_interval(self) -> tuple[float, float] | None:
        """The Wilson 95% interval of the accuracy over its items (console/quality/stats.py)."""
        if self.accuracy is None or not self.accuracy_items:
            return None
        return wilson(self.accuracy * self.accuracy_items, self.accuracy_items)

    @property
    def capped(self) -> bool:
        """Run below the board's maximum power: it ranks configurations but does not transfer."""
        return below_maximum(self.power_limit_w, self.max_power_w)

    @property
    def borrowed(self) -> bool:
        return self.accuracy_basis == BORROWED

    @property
    def place(self) -> str:
        """The row's place on the chart in one word; only a measured, uncapped row can be on the frontier."""
        if self.diagnostic_only:
            return "DIAGNOSTIC-ONLY"
        if self.accuracy is None:
            return "no accuracy"
        if self.on_frontier:
            return "frontier"
        if self.capped:
            return "CAPPED"
        if self.held:
            return "held"
        return "borrowed" if self.borrowed else "dominated"

    @property
    def shapes_note(self) -> str | None:
        """The write-up's footnote for a row priced on fewer shapes than asked: "router only: promptopt not
        measured"."""
        if not self.missing_shapes:
            return None
        present = " + ".join(dict.fromkeys(part.split(" ")[0] for part in self.rows.split(" + ")))
        return f"{present} only: {', '.join(self.missing_shapes)} not measured"

    @property
    def marks(self) -> str:
        """What must travel with the row's cost and accuracy, in words."""
        words = []
        if self.diagnostic_only:
            words.append("DIAGNOSTIC-ONLY")
        if self.capped:
            words.append(f"CAPPED at {self.power_limit_w:.0f} of {self.max_power_w:.0f} W")
        if self.borrowed:
            words.append(
                f"accuracy borrowed from {self.accuracy_arm} on {self.accuracy_box or 'an unnamed box'}"
            )
        if self.held:
            words.append(self.held)
        if self.shapes_note:
            words.append(self.shapes_note)
        if self.accuracy_unscored:
            words.append(f"accuracy short: {self.accuracy_unscored} unscored (flattered)")
        return "; ".join(words)


def _throughput(row: ResultRow) -> Throughput | None:
    if not row.out_tok_per_s or not row.output_len or row.input_len is None:
        return None
    return Throughput(
        row.shape,
        row.concurrency,
        row.out_tok_per_s,
        row.in_tok_per_s,
        row.input_len,
        row.output_len,
        row.prefix_len or 0,
    )


@dataclass(frozen=True)
class Pricing:
    """How a table is priced: the cost basis of the boxes bought on the cost model, the owner's utilisation,
    the shapes averaged per request and the operator's own API prices."""

    basis: str = "list"
    utilisation: float = DEFAULT_UTILISATION
    shapes: tuple[str, ...] = DEFAULT_SHAPES
    extra_prices: tuple[ApiPrice, ...] = ()
    cost: CostModel | None = None

    def model(self) -> CostModel:
        return self.cost if self.cost is not None else default_cost_model()


def economics_table(
    inputs: EconomicsInputs,
    *,
    utilisation: float = DEFAULT_UTILISATION,
    extra_prices: Sequence[ApiPrice] = (),
    shapes: Sequence[str] = DEFAULT_SHAPES,
    basis: str = "list",
    cost: CostModel | None = None,
) -> tuple[list[EconomicsRow], list[str]]:
    """Every configuration with throughput at ``shapes``, priced on its box and against each API price.

    ``inputs`` is the campaign's record as the read model gathers it (console.readmodel.economics_inputs).
    Returns the rows and the configurations left out, each with the reason (no price, no such shape).
    For each shape the configuration's fastest usable row counts; a configuration whose rows are all
    diagnostic-only is priced but marked and kept off the frontier. A box bought on the cost model is priced
    on ``basis`` (console/economics/costs.py says how each box's price is read).
    """
    check_utilisation(utilisation)
    check_basis(basis)
    pricing = Pricing(basis, utilisation, tuple(shapes), tuple(extra_prices), cost)
    skipped: list[str] = []
    priced: list[_Priced] = []
    for configuration in priced_configurations(inputs, pricing):
        if isinstance(configuration, str):
            skipped.append(configuration)
        else:
            priced.append(configuration)
    on = _frontier_keys(priced)
    prices = _api_prices(inputs.api_prices, pricing.extra_prices)
    out = [row for c in priced for row in _economics_rows(c, prices.get(c.first.model or "", []), on, inputs)]
    return out, skipped


def priced_configurations(inputs: EconomicsInputs, pricing: Pricing) -> list[_Priced | str]:
    """Each (box, arm) with rows at the shapes, priced on its box with its accuracy found, or why it is left
    out; in box, arm order."""
    lenders = Lenders.of(
        inputs.evals, dict(inputs.arm_precision), _refused_arms(inputs.bench), inputs.quality_pairs
    )
    cost = pricing.model()
    return [
        _price_configuration(inputs, box, arm, rows, pricing, lenders, cost)
        for (box, arm), rows in sorted(
            _bench_groups(inputs.bench, pricing.shapes).items(), key=lambda kv: (kv[0][0] or "", kv[0][1])
        )
    ]


def _refused_arms(bench: Sequence[ResultRow]) -> frozenset[str]:
    """Arms whose every bench row failed its tripwire: their accuracy is not lent to anything."""
    seen: dict[str, bool] = {}
    for r in bench:
        seen[r.arm] = seen.get(r.arm, True) and r.diagnostic_only
    return frozenset(arm for arm, all_failed in seen.items() if all_failed)


def _api_prices(stored: Sequence[ApiPrice], extra: Sequence[ApiPrice]) -> dict[str, list[ApiPrice]]:
    """The API prices by model. An operator's price replaces the stored ones for that model: it is the price
    they are comparing."""
    prices: dict[str, list[ApiPrice]] = {}
    for p in extra:
        prices.setdefault(p.model, []).append(p)
    for p in stored:
        if not any(e.model == p.model for e in extra):
            prices.setdefault(p.model, []).append(p)
    return prices


def _bench_groups(
    bench: Sequence[ResultRow], shapes: Sequence[str]
) -> dict[tuple[str | None, str], list[ResultRow]]:
    """The bench rows at ``shapes``, by (box, arm)."""
    groups: dict[tuple[str | None, str], list[ResultRow]] = {}
    for r in bench:
        if r.shape in shapes:
            groups.setdefault((r.box, r.arm), []).append(r)
    return groups


def _price_configuration(
    inputs: EconomicsInputs,
    box: str | None,
    arm: str,
    rows: list[ResultRow],
    pricing: Pricing,
    lenders: Lenders,
    cost: CostModel,
) -> _Priced | str:
    """One configuration priced on its box, or why it is left out."""
    diagnostic = all(r.diagnostic_only for r in rows)
    usable = [r for r in rows if (diagnostic or not r.diagnostic_only) and _throughput(r) is not None]
    fastest = best_by(usable, lambda r: r.shape)
    chosen = [fastest[shape] for shape in pricing.shapes if shape in fastest]
    if not chosen:
        return f"{box}/{arm}: no row with token lengths at {', '.join(pricing.shapes)}"
    price = inputs.box_prices.get(box) if box else None
    price_basis = inputs.box_price_basis.get(box) if box else None
    if price is None and price_basis != FOLLOWS_BASIS:
        return f"{box}/{arm}: box has no price per hour (campaign box add --price-per-hour)"
    tps = [t for t in map(_throughput, chosen) if t is not None]
    found = lenders.find(box, arm, chosen[0].model)
    limits = [r.power_limit_w for r in chosen if r.power_limit_w is not None]
    node = node_price(
        cost,
        price or 0.0,
        price_basis,
        inputs.box_price_provenance.get(box) if box else None,
        pricing.basis,
        pricing.utilisation,
    )
    return _Priced(
        box,
        arm,
        chosen[0],
        tps,
        diagnostic,
        found,
        min(limits) if limits else None,
        inputs.box_max_power.get(box) if box else None,
        node,
        tuple(s for s in pricing.shapes if s not in fastest),
        pricing.utilisation,
    )


def _frontier_keys(priced: Sequence[_Priced]) -> set[tuple[str | None, str]]:
    """The (box, arm) on the cost/accuracy frontier: only measured accuracy on an uncapped box, held back by
    nothing, competes."""
    return frontier(
        Point(
            (c.box, c.arm),
            blended(c.tps, c.node.usd_per_active_hour, None).node_per_mtok,
            c.ev.overall,
            c.diagnostic,
        )
        for c in priced
        if c.ev is not None
        and c.found.basis == MEASURED
        and c.found.held is None
        and not below_maximum(c.power_limit_w, c.max_power_w)
    )


def _published(c: _Priced, node_per_mtok: float, inputs: EconomicsInputs) -> tuple[float | None, str | None]:
    """The write-up's printed node $/M for this configuration and, where the computed figure differs from
    it at the printed precision under the write-up's conditions (Scan list, its utilisation), both figures
    and the reason the data file records."""
    for f in inputs.published:
        printed = f.figures.get("node_per_m")
        if f.source_table != FRONTIER_TABLE or (f.arm, f.box) != (c.arm, c.box) or printed is None:
            continue
        same_conditions = c.node.basis == "list" and math.isclose(
            f.figures.get("utilisation", DEFAULT_UTILISATION), c.utilisation
        )
        if not same_conditions or abs(node_per_mtok - printed) <= 0.5e-3 + 1e-9:
            return printed, None
        why = f.note or "the data file gives no reason"
        return printed, f"published ${printed:.3f}, computed ${node_per_mtok:.3f}: {why}"
    return None, None


def _economics_rows(
    c: _Priced, api_prices: Sequence[ApiPrice], on: set[tuple[str | None, str]], inputs: EconomicsInputs
) -> list[EconomicsRow]:
    """The configuration's row against each API price of its model, or one row without an API price."""
    rows: list[EconomicsRow] = []
    offers: list[ApiPrice | None] = [*api_prices]
    node = c.node
    fully_factor = (
        round(node.usd_per_active_hour, 2) / round(node.fully_loaded_usd, 2)
        if node.fully_loaded_usd and round(node.fully_loaded_usd, 2) > 0
        else None
    )
    model = c.first.model or ""
    for offer in offers or [None]:
        b = blended(c.tps, node.usd_per_active_hour, offer)
        api_acc = inputs.api_accuracy.get(offer.accuracy_run or "") if offer else None
        published, published_note = _published(c, b.node_per_mtok, inputs)
        ev = c.ev
        rows.append(
            EconomicsRow(
                box=c.box,
                arm=c.arm,
                model=c.first.model,
                rows=" + ".join(f"{t.shape} C{t.concurrency}" for t in c.tps),
                node_usd_per_hour=node.usd_per_active_hour,
                node_per_mtok=b.node_per_mtok,
                accuracy=ev.overall if ev else None,
                accuracy_items=ev.items if ev else None,
                accuracy_box=ev.box if ev else None,
                accuracy_basis=c.found.basis,
                accuracy_arm=ev.arm if ev else None,
                api_provider=offer.provider if offer else None,
                api_per_mtok=b.api_per_mtok,
                api_over_node=b.ratio,
                on_frontier=(c.box, c.arm) in on,
                diagnostic_only=c.diagnostic,
                power_limit_w=c.power_limit_w,
                max_power_w=c.max_power_w,
                source=c.first.source,
                node_basis=node.text,
                price_provenance=node.provenance,
                api_over_node_fully_loaded=None
                if b.ratio is None or fully_factor is None
                else b.ratio * fully_factor,
                api_accuracy=api_acc.accuracy if api_acc else None,
                api_accuracy_items=api_acc.items if api_acc else None,
                api_accuracy_run=api_acc.label if api_acc else None,
                missing_shapes=c.missing_shapes,
                held=c.found.held,
                aa_index=index_text(inputs.model_index.get(model)),
                published_node_per_mtok=published,
                published_note=published_note,
                accuracy_unscored=ev.unscored if ev else 0,
            )
        )
    return rows


@dataclass(frozen=True)
class _Priced:
    box: str | None
    arm: str
    first: ResultRow
    tps: list[Throughput]
    diagnostic: bool
    found: Found
    power_limit_w: float | None
    max_power_w: float | None
    node: NodePrice
    missing_shapes: tuple[str, ...]
    utilisation: float

    @property
    def ev(self) -> EvalRow | None:
        return self.found.ev


CHART_MARKS = {
    "frontier": "*",
    "dominated": "o",
    "borrowed": "b",
    "held": "h",
    "CAPPED": "c",
    "DIAGNOSTIC-ONLY": "x",
}
"""The mark of each place on the chart (``EconomicsRow.place``), drawn in this order so the frontier is on top."""


FRONTIER_LEGEND = (
    "node USD per million tokens (log scale) across, accuracy up.  * frontier  o dominated  "
    "b accuracy borrowed  c capped box  x tripwire failed  h precision changed, unpaired"
)


def frontier_chart(rows: Sequence[EconomicsRow], width: int = 72, height: int = 18) -> str:
    """The quality/cost chart as text, ``width`` x ``height`` cells with its axes, then the legend and the
    frontier in cost order: log10 node USD per million tokens across, accuracy up.

    ``*`` is on the frontier, ``o`` is dominated, ``b`` has accuracy borrowed from another box or arm, ``c``
    ran on a power-capped box, ``x`` failed its tripwire (kept visible, never a result). Each configuration
    is drawn once, the frontier last (on top); the legend lists the frontier in cost order.
    """
    points: dict[tuple[str | None, str], EconomicsRow] = {}
    for r in rows:
        if r.accuracy is not None and r.node_per_mtok > 0:
            points.setdefault((r.box, r.arm), r)
    if not points:
        return "no configuration has both a cost and an accuracy yet\n"
    rank = {place: i for i, place in enumerate(reversed(CHART_MARKS))}
    drawn = sorted(points.values(), key=lambda r: rank[r.place])  # frontier drawn last, on top
    lines = scatter(
        [PlotPoint(math.log10(r.node_per_mtok), r.accuracy or 0.0, CHART_MARKS[r.place]) for r in drawn],
        width,
        height,
        x_label=lambda v: f"${10**v:.3f}",
        y_label=lambda v: f"{v:.3f}",
    )
    lines = [line.rstrip() for line in lines] + [FRONTIER_LEGEND]
    frontier_rows = sorted((r for r in points.values() if r.on_frontier), key=lambda r: r.node_per_mtok)
    lines += [f"  * ${r.node_per_mtok:.3f}  {r.accuracy:.3f}  {r.arm} ({r.box})" for r in frontier_rows]
    return "\n".join(lines) + "\n"
