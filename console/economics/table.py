"""What a token costs on the node and from an API, and the quality/cost frontier.

The arithmetic is the campaign write-up's Economics section, so its tables can be re-derived from the
store and checked (tests/test_economics.py cites the rows):

- A node costs its price per hour divided by the owner's utilisation: USD 3.08 an hour of the month
  at 70% use is USD 4.40 per active hour. The fully-loaded basis subtracts tax relief and the resale of
  idle GPU-hours (``CostModel``).
- An hour of output at one shape is ``in_tok/s x 3600`` and ``out_tok/s x 3600`` tokens; the API bill
  for the same tokens is their list price.
- Blended over shapes, cost is averaged per request: the node's hour divided by the requests it
  serves at each shape; the API prices each request's input, cached prefix and output separately.
- The frontier keeps configurations that nothing beats on both axes (cheaper and at least as good,
  or as cheap and better). Diagnostic-only rows (a failed tripwire) never enter it.
- Accuracy is ``measured`` only when it was measured on the exact (box, arm); one found for the same arm
  on another box, or only by model name, is ``borrowed`` (the campaign write-up's DP2 x TP2 point
  borrowed TP4's accuracy and had to leave the chart). Rows from a box whose power limit is below its board
  maximum are ``capped`` (the 400 W host). Borrowed and capped rows are priced and drawn, marked, but never
  stand on the frontier.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib.resources.abc import Traversable
from typing import Any

from console.charts import PlotPoint, scatter
from console.errors import InputError
from console.readmodel.records import EconomicsInputs, EvalRow, ResultRow, below_maximum
from console.readmodel.results import best_by
from console.store.results import ApiPrice

DEFAULT_UTILISATION = 0.70
DEFAULT_SHAPES = ("router", "promptopt")
COST_BASES = ("list", "committed", "fully_loaded", "vast_on_demand")
MEASURED, BORROWED = "measured", "borrowed"


class EconomicsError(InputError, ValueError):
    """Input the arithmetic cannot use; the message says which value and what is allowed."""


def check_utilisation(utilisation: float) -> float:
    if not 0.0 < utilisation <= 1.0:
        raise EconomicsError(f"utilisation {utilisation} must be above 0 and at most 1 (0.7 means 70%)")
    return utilisation


def node_cost_per_active_hour(price_per_hour: float, utilisation: float) -> float:
    """A box paid by the hour of the month costs more per hour the owner actually uses it."""
    return price_per_hour / check_utilisation(utilisation)


@dataclass(frozen=True)
class CostModel:
    """The campaign write-up's cost bases: Scan list, committed, fully loaded (relief and resale) and Vast on
    demand."""

    monthly_gbp: float
    hours_per_month: float
    usd_per_gbp: float
    commitment_discount: float
    eris_per_gbp: float
    eris_qualifying: float
    resale_usd_per_gpu_hour: float
    resale_fill: float
    resale_platform_take: float
    gpus: int
    storage_gbp_per_month: float
    vast_usd_per_gpu_hour: float
    vast_gpus: int

    @classmethod
    def from_toml(cls, path: Traversable) -> CostModel:
        try:
            data = tomllib.loads(path.read_text())
            scan, full, vast = data["scan"], data["fully_loaded"], data["vast_on_demand"]
            return cls(
                monthly_gbp=scan["monthly_gbp"],
                hours_per_month=scan["hours_per_month"],
                usd_per_gbp=scan["usd_per_gbp"],
                commitment_discount=scan["commitment_discount"],
                eris_per_gbp=full["eris_per_gbp"],
                eris_qualifying=full["eris_qualifying"],
                resale_usd_per_gpu_hour=full["resale_usd_per_gpu_hour"],
                resale_fill=full["resale_fill"],
                resale_platform_take=full["resale_platform_take"],
                gpus=full["gpus"],
                storage_gbp_per_month=full["storage_gbp_per_month"],
                vast_usd_per_gpu_hour=vast["usd_per_gpu_hour"],
                vast_gpus=vast["gpus"],
            )
        except (OSError, tomllib.TOMLDecodeError, KeyError) as exc:
            raise EconomicsError(
                f"{path}: cannot read the cost model ({exc!r}); see ops/data/seed/cost_model.toml for the keys"
            ) from exc

    def gbp_per_active_hour(self, basis: str, utilisation: float = 1.0) -> float:
        check_utilisation(utilisation)
        active_hours = self.hours_per_month * utilisation
        committed = self.monthly_gbp * (1 - self.commitment_discount)
        if basis == "list":
            return self.monthly_gbp / active_hours
        if basis == "committed":
            return committed / active_hours
        if basis == "fully_loaded":
            relief = committed * self.eris_qualifying * self.eris_per_gbp
            idle_gpu_hours = self.gpus * self.hours_per_month * (1 - utilisation)
            resale_usd = (
                idle_gpu_hours
                * self.resale_fill
                * self.resale_usd_per_gpu_hour
                * (1 - self.resale_platform_take)
            )
            monthly = committed - relief - resale_usd / self.usd_per_gbp + self.storage_gbp_per_month
            return monthly / active_hours
        if basis == "vast_on_demand":
            return self.vast_usd_per_gpu_hour * self.vast_gpus / self.usd_per_gbp
        raise EconomicsError(f"unknown cost basis {basis!r}; choose one of {', '.join(COST_BASES)}")

    def usd_per_active_hour(self, basis: str, utilisation: float = 1.0) -> float:
        return self.gbp_per_active_hour(basis, utilisation) * self.usd_per_gbp


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
        return "borrowed" if self.borrowed else "dominated"

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


def economics_table(
    inputs: EconomicsInputs,
    *,
    utilisation: float = DEFAULT_UTILISATION,
    extra_prices: Sequence[ApiPrice] = (),
    shapes: Sequence[str] = DEFAULT_SHAPES,
) -> tuple[list[EconomicsRow], list[str]]:
    """Every configuration with throughput at ``shapes``, priced on its box and against each API price.

    ``inputs`` is the campaign's record as the read model gathers it (console.readmodel.economics_inputs).
    Returns the rows and the configurations left out, each with the reason (no price, no such shape).
    For each shape the configuration's fastest usable row counts; a configuration whose rows are all
    diagnostic-only is priced but marked and kept off the frontier.
    """
    check_utilisation(utilisation)
    prices = _api_prices(inputs.api_prices, extra_prices)
    accuracy = _Accuracy.of(inputs.evals)
    skipped: list[str] = []
    priced: list[_Priced] = []
    for (box, arm), rows in sorted(
        _bench_groups(inputs.bench, shapes).items(), key=lambda kv: (kv[0][0] or "", kv[0][1])
    ):
        configuration = _price_configuration(inputs, box, arm, rows, shapes, accuracy, utilisation)
        if isinstance(configuration, str):
            skipped.append(configuration)
        else:
            priced.append(configuration)
    on = _frontier_keys(priced)
    out = [row for c in priced for row in _economics_rows(c, prices.get(c.first.model or "", []), on)]
    return out, skipped


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


@dataclass(frozen=True)
class _Accuracy:
    """The eval rows a configuration's accuracy can come from, the first of each kind as the inputs list them."""

    exact: dict[tuple[str | None, str], EvalRow]  # measured on this box and arm
    by_arm: dict[str, EvalRow]  # the same arm on another box
    by_model: dict[str, EvalRow]  # the same model, any arm

    @classmethod
    def of(cls, evals: Sequence[EvalRow]) -> _Accuracy:
        exact: dict[tuple[str | None, str], EvalRow] = {}
        by_arm: dict[str, EvalRow] = {}
        by_model: dict[str, EvalRow] = {}
        for e in evals:
            by_model.setdefault(e.model, e)
            if e.arm:
                exact.setdefault((e.box, e.arm), e)
                by_arm.setdefault(e.arm, e)
        return cls(exact, by_arm, by_model)

    def find(self, box: str | None, arm: str, model: str | None) -> tuple[EvalRow | None, str | None]:
        """The eval row and its basis: measured on this box and arm, else borrowed from the arm or model."""
        ev = self.exact.get((box, arm))
        if ev is not None:
            return ev, MEASURED
        ev = self.by_arm.get(arm) or self.by_model.get(model or "")
        return ev, BORROWED if ev else None


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
    shapes: Sequence[str],
    accuracy: _Accuracy,
    utilisation: float,
) -> _Priced | str:
    """One configuration priced on its box, or why it is left out."""
    diagnostic = all(r.diagnostic_only for r in rows)
    usable = [r for r in rows if (diagnostic or not r.diagnostic_only) and _throughput(r) is not None]
    fastest = best_by(usable, lambda r: r.shape)
    chosen = [fastest[shape] for shape in shapes if shape in fastest]
    if not chosen:
        return f"{box}/{arm}: no row with token lengths at {', '.join(shapes)}"
    price = inputs.box_prices.get(box) if box else None
    if price is None:
        return f"{box}/{arm}: box has no price per hour (campaign box add --price-per-hour)"
    tps = [t for t in map(_throughput, chosen) if t is not None]
    ev, basis = accuracy.find(box, arm, chosen[0].model)
    limits = [r.power_limit_w for r in chosen if r.power_limit_w is not None]
    return _Priced(
        box,
        arm,
        chosen[0],
        tps,
        diagnostic,
        ev,
        basis,
        min(limits) if limits else None,
        inputs.box_max_power.get(box) if box else None,
        node_cost_per_active_hour(price, utilisation),
    )


def _frontier_keys(priced: Sequence[_Priced]) -> set[tuple[str | None, str]]:
    """The (box, arm) on the cost/accuracy frontier: only measured accuracy on an uncapped box competes."""
    return frontier(
        Point((c.box, c.arm), blended(c.tps, c.node_hour, None).node_per_mtok, c.ev.overall, c.diagnostic)
        for c in priced
        if c.ev is not None and c.basis == MEASURED and not below_maximum(c.power_limit_w, c.max_power_w)
    )


def _economics_rows(
    c: _Priced, api_prices: Sequence[ApiPrice], on: set[tuple[str | None, str]]
) -> list[EconomicsRow]:
    """The configuration's row against each API price of its model, or one row without an API price."""
    rows: list[EconomicsRow] = []
    offers: list[ApiPrice | None] = [*api_prices]
    for offer in offers or [None]:
        b = blended(c.tps, c.node_hour, offer)
        rows.append(
            EconomicsRow(
                box=c.box,
                arm=c.arm,
                model=c.first.model,
                rows=" + ".join(f"{t.shape} C{t.concurrency}" for t in c.tps),
                node_usd_per_hour=c.node_hour,
                node_per_mtok=b.node_per_mtok,
                accuracy=c.ev.overall if c.ev else None,
                accuracy_items=c.ev.items if c.ev else None,
                accuracy_box=c.ev.box if c.ev else None,
                accuracy_basis=c.basis,
                accuracy_arm=c.ev.arm if c.ev else None,
                api_provider=offer.provider if offer else None,
                api_per_mtok=b.api_per_mtok,
                api_over_node=b.ratio,
                on_frontier=(c.box, c.arm) in on,
                diagnostic_only=c.diagnostic,
                power_limit_w=c.power_limit_w,
                max_power_w=c.max_power_w,
                source=c.first.source,
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
    ev: EvalRow | None
    basis: str | None
    power_limit_w: float | None
    max_power_w: float | None
    node_hour: float


CHART_MARKS = {"frontier": "*", "dominated": "o", "borrowed": "b", "CAPPED": "c", "DIAGNOSTIC-ONLY": "x"}
"""The mark of each place on the chart (``EconomicsRow.place``), drawn in this order so the frontier is on top."""


FRONTIER_LEGEND = (
    "node USD per million tokens (log scale) across, accuracy up.  * frontier  o dominated  "
    "b accuracy borrowed  c capped box  x tripwire failed"
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
