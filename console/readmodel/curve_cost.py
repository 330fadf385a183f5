"""What a million tokens cost at a measured throughput, at the box's rental price, and at goodput.

``$/M tokens = price_per_hour / (tok/s x 3600) x 1e6``: the box's hourly price (``boxes.price_per_hour``,
the one ``campaign economics`` reads) over the tokens one hour at that throughput makes. The whole box's
price is charged to the node that was measured on it, as ``console/economics.py`` charges a node's hour;
no utilisation is applied (``campaign economics`` does that, per basis). Output and total (input + output)
tokens each get a figure, since an API prices them apart.

At goodput only the tokens of requests inside the SLO count (vLLM's ``--goodput``, DistServe): the box is
paid for the whole run, failed requests and requests over a limit included, but their tokens buy nothing.
So the goodput throughput is the good requests' tokens over the run's whole duration, pooled over the
repeats of a point (their good tokens over their summed durations), and its $/M is never below the plain
one. Which requests are inside the SLO is ``request_figures``' rule (a failed request never is; a request
of one output token has no TPOT and passes a TPOT limit), not re-derived here.

A box without a price gives no figure and says why; a price of 0 (an owned box) gives 0. Only reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from console.readmodel.campaign import box_prices
from console.readmodel.request_figures import SloFigures, meets_slo, slo_figures
from console.readmodel.requests import RequestTiming, bench_requests
from console.readmodel.results import bench_row
from console.store import Store

NO_PRICE = "box {box} has no price: `campaign box add {box} ... --price-per-hour USD` sets one"
COST_DEFINITIONS: dict[str, str] = {
    "$/M out": "box price per hour / (output tok/s x 3600) x 1e6, USD per million output tokens",
    "$/M total": "box price per hour / ((input + output) tok/s x 3600) x 1e6, USD per million tokens",
    "$/M good out": "the same at goodput: only output tokens of requests inside the SLO count, over the "
    "run's whole duration (failed and over-limit requests are paid for and count for nothing)",
}


def usd_per_m(price_per_hour: float | None, tok_per_s: float | None) -> float | None:
    """USD per million tokens at ``tok_per_s`` on a box costing ``price_per_hour``; None when either is
    unknown or nothing was made (no tokens: no finite price)."""
    if price_per_hour is None or tok_per_s is None or tok_per_s <= 0:
        return None
    return price_per_hour / (tok_per_s * 3600) * 1e6


@dataclass(frozen=True)
class BoxPrice:
    """A box's hourly price, or why there is none."""

    box: str
    per_hour: float | None
    why_not: str | None


def box_price(store: Store, box: str | None) -> BoxPrice:
    """The price ``box`` is rented at (``boxes.price_per_hour``), or the reason it has none."""
    name = box or "(none)"
    price = box_prices(store).get(box) if box else None
    return BoxPrice(name, price, None if price is not None else NO_PRICE.format(box=name))


@dataclass(frozen=True)
class Goodput:
    """A point's runs pooled against one SLO: the pooled figures and verdict (``request_figures``' rule over
    every request of the runs), and the throughput of the requests inside it."""

    slo: SloFigures
    duration_s: float
    good_out_tokens: int
    good_total_tokens: int

    @property
    def out_tok_per_s(self) -> float | None:
        return self.good_out_tokens / self.duration_s if self.duration_s > 0 else None

    @property
    def total_tok_per_s(self) -> float | None:
        return self.good_total_tokens / self.duration_s if self.duration_s > 0 else None


def _tokens(rows: Sequence[RequestTiming], limits: dict[str, float]) -> tuple[int, int]:
    meets = meets_slo(limits)
    good = [r for r in rows if meets(r)]
    out = sum(r.out_tokens or 0 for r in good)
    return out, out + sum(r.in_tokens or 0 for r in good)


def goodput(store: Store, row_ids: Sequence[int], limits: dict[str, float]) -> Goodput | None:
    """The runs ``row_ids`` (a point's repeats) pooled against ``limits``; None when a run has no request
    timings or no duration (an imported row without them): its good tokens cannot be counted."""
    rows: list[RequestTiming] = []
    duration = 0.0
    for row_id in row_ids:
        timings = bench_requests(store, row_id)
        seconds = bench_row(store, str(row_id)).duration_s
        if not timings or not seconds:
            return None
        rows += timings
        duration += seconds
    if not rows:
        return None
    out, total = _tokens(rows, limits)
    return Goodput(slo_figures(rows, limits, duration), duration, out, total)
