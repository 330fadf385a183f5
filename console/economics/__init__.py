"""What a token costs on the node and from an API, and the quality/cost frontier.

The arithmetic is the campaign write-up's Economics section, so its tables can be re-derived from the
store and checked (tests/test_economics.py and tests/test_economics_published.py cite the rows):

- A node costs an active hour on a named basis (``costs.py``): a box bought on the cost model at Scan list,
  committed or fully loaded (tax relief and the resale of idle GPU-hours subtracted), each divided by the
  owner's utilisation (USD 3.08 an hour of the month at 70% use is USD 4.40 per active hour); a rented box
  at its hourly price; any other box at its own price divided by utilisation. Every figure says its basis.
- An hour of output at one shape is ``in_tok/s x 3600`` and ``out_tok/s x 3600`` tokens; the API bill
  for the same tokens is their list price (``hour.py``: the write-up's per-hour table).
- Blended over shapes, cost is averaged per request: the node's hour divided by the requests it
  serves at each shape; the API prices each request's input, cached prefix and output separately. A row
  missing a shape says so ("router only: promptopt not measured").
- The frontier keeps configurations that nothing beats on both axes (cheaper and at least as good,
  or as cheap and better). Diagnostic-only rows (a failed tripwire) never enter it.
- Accuracy is ``measured`` only when it was measured on the exact (box, arm); otherwise it is ``borrowed``
  under the rules of ``accuracy.py`` (same profile first, never across precision). Rows from a box whose
  power limit is below its board maximum are ``capped`` (the 400 W host). Borrowed, held and capped rows are
  priced and drawn, marked, but never stand on the frontier.
- Where the write-up printed a figure for a row, the row carries it, and the reason whenever the computed
  figure differs.
"""

from console.economics.accuracy import BORROWED, MEASURED
from console.economics.costs import (
    COST_BASES,
    DEFAULT_UTILISATION,
    BreakEven,
    CostBasisRow,
    CostModel,
    EconomicsError,
    NodePrice,
    check_basis,
    check_utilisation,
    cost_basis_rows,
    default_cost_model,
    node_cost_per_active_hour,
    node_price,
)
from console.economics.hour import PerHourRow, per_hour_table
from console.economics.table import (
    CHART_MARKS,
    DEFAULT_SHAPES,
    FRONTIER_LEGEND,
    Blended,
    EconomicsRow,
    HourOfOutput,
    Point,
    Pricing,
    Throughput,
    api_cost_per_request,
    blended,
    economics_table,
    frontier,
    frontier_chart,
    hour_of_output,
    parse_api_price,
)
from console.readmodel.campaign import index_text

__all__ = [
    "BORROWED",
    "CHART_MARKS",
    "COST_BASES",
    "DEFAULT_SHAPES",
    "DEFAULT_UTILISATION",
    "FRONTIER_LEGEND",
    "MEASURED",
    "Blended",
    "BreakEven",
    "CostBasisRow",
    "CostModel",
    "EconomicsError",
    "EconomicsRow",
    "HourOfOutput",
    "NodePrice",
    "PerHourRow",
    "Point",
    "Pricing",
    "Throughput",
    "api_cost_per_request",
    "blended",
    "check_basis",
    "check_utilisation",
    "cost_basis_rows",
    "default_cost_model",
    "economics_table",
    "frontier",
    "frontier_chart",
    "hour_of_output",
    "index_text",
    "node_cost_per_active_hour",
    "node_price",
    "parse_api_price",
    "per_hour_table",
]
