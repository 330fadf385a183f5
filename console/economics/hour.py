"""The same hour of output, bought from an API: the campaign write-up's per-hour table, per configuration.

For each configuration and each shape it was priced on, an hour of the node's measured throughput is
``in`` and ``out`` million tokens; the API bill is what the model's API price charges for that token mix
(no cache discount: the write-up's footnote 1 says the shared-prefix shape bills all input at full price),
and the ratio is the bill over the node's active hour, at the chosen basis and fully loaded. Where the
write-up printed a row for the same arm, shape, concurrency and API price, the row carries it, and the
reason whenever the computed figures differ at the printed precision (its two gpt-oss rows bill output
again as input).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from console.economics.costs import DEFAULT_UTILISATION
from console.economics.table import (
    Pricing,
    _api_prices,
    _Priced,
    hour_of_output,
    priced_configurations,
)
from console.readmodel.records import EconomicsInputs, below_maximum
from console.store.results import ApiPrice, PublishedFigure

PER_HOUR_TABLE = "The same hour of output, bought from an API"
"""The write-up's table the published per-hour figures come from (ops/demo.py files them under this name)."""


@dataclass(frozen=True)
class PerHourRow:
    """One configuration at one shape: an hour of its output, and that hour bought from one API price."""

    box: str | None
    arm: str
    model: str | None
    shape: str
    concurrency: int
    in_m: float  # million input tokens per node-hour (prefix included)
    out_m: float  # million output tokens per node-hour
    api_provider: str | None
    api_in_per_mtok: float | None
    api_out_per_mtok: float | None
    api_bill_usd: float | None  # the API's price for the hour's tokens
    node_usd_per_hour: float
    node_basis: str
    api_over_node: float | None
    api_over_node_fully_loaded: float | None
    diagnostic_only: bool
    capped: bool
    published: str | None  # the write-up's row as printed, e.g. "147 + 18 M, $117, 27x, 66x"
    note: str | None  # published and computed differ: why
    source: str


def _printed(value: float, printed: float) -> bool:
    """Equal at the precision of the printed figure (whole numbers or the digits it shows)."""
    text = f"{printed:g}"
    places = len(text.split(".")[1]) if "." in text else 0
    return abs(value - printed) <= 0.5 * 10.0**-places + 1e-9


def _match(
    c: _Priced, shape: str, concurrency: int, offer: ApiPrice | None, inputs: EconomicsInputs
) -> PublishedFigure | None:
    if offer is None:
        return None
    for f in inputs.published:
        if f.source_table != PER_HOUR_TABLE or (f.arm, f.box, f.shape, f.concurrency) != (
            c.arm,
            c.box,
            shape,
            concurrency,
        ):
            continue
        if math.isclose(f.figures.get("api_in", -1), offer.in_per_mtok) and math.isclose(
            f.figures.get("api_out", -1), offer.out_per_mtok
        ):
            return f
    return None


def per_hour_table(inputs: EconomicsInputs, pricing: Pricing) -> tuple[list[PerHourRow], list[str]]:
    """Every configuration's hour of output at each shape it is priced on, against each API price of its
    model (or none), and the configurations left out with the reason."""
    prices = _api_prices(inputs.api_prices, pricing.extra_prices)
    rows: list[PerHourRow] = []
    skipped: list[str] = []
    for c in priced_configurations(inputs, pricing):
        if isinstance(c, str):
            skipped.append(c)
            continue
        node = c.node
        factor = (
            round(node.usd_per_active_hour, 2) / round(node.fully_loaded_usd, 2)
            if node.fully_loaded_usd and round(node.fully_loaded_usd, 2) > 0
            else None
        )
        offers: list[ApiPrice | None] = [*prices.get(c.first.model or "", [])]
        for t in c.tps:
            for offer in offers or [None]:
                hour = hour_of_output(t, node.usd_per_active_hour, offer)
                published, note = None, None
                figure = _match(c, t.shape, t.concurrency, offer, inputs)
                if figure is not None:
                    published, note = _compare(
                        figure, hour.in_m, hour.out_m, hour.api_usd, hour.ratio, c, pricing
                    )
                rows.append(
                    PerHourRow(
                        box=c.box,
                        arm=c.arm,
                        model=c.first.model,
                        shape=t.shape,
                        concurrency=t.concurrency,
                        in_m=hour.in_m,
                        out_m=hour.out_m,
                        api_provider=offer.provider if offer else None,
                        api_in_per_mtok=offer.in_per_mtok if offer else None,
                        api_out_per_mtok=offer.out_per_mtok if offer else None,
                        api_bill_usd=hour.api_usd,
                        node_usd_per_hour=node.usd_per_active_hour,
                        node_basis=node.text,
                        api_over_node=hour.ratio,
                        api_over_node_fully_loaded=None
                        if hour.ratio is None or factor is None
                        else hour.ratio * factor,
                        diagnostic_only=c.diagnostic,
                        capped=below_maximum(c.power_limit_w, c.max_power_w),
                        published=published,
                        note=note,
                        source=c.first.source,
                    )
                )
    return rows, skipped


def _compare(
    f: PublishedFigure,
    in_m: float,
    out_m: float,
    bill: float | None,
    ratio: float | None,
    c: _Priced,
    pricing: Pricing,
) -> tuple[str, str | None]:
    """The published row in words and, when a computed figure differs from it as printed, both and why."""
    fig = f.figures
    printed = (
        f"{fig.get('in_m', 0):g} + {fig.get('out_m', 0):g} M, ${fig.get('api_bill', 0):g}, "
        f"{fig.get('ratio_list70', 0):g}x, {fig.get('ratio_fully70', 0):g}x"
    )
    checks = [("in_m", in_m), ("out_m", out_m), ("api_bill", bill)]
    if c.node.basis == "list" and math.isclose(
        pricing.utilisation, fig.get("utilisation", DEFAULT_UTILISATION)
    ):
        checks.append(("ratio_list70", ratio))
    differ = [
        name for name, value in checks if name in fig and (value is None or not _printed(value, fig[name]))
    ]
    if not differ:
        return printed, None
    computed = f"{in_m:,.0f} + {out_m:,.0f} M, ${bill or 0:,.1f}"
    return printed, f"published {printed}; computed {computed}: {f.note or 'the data file gives no reason'}"
