"""What an hour of the node costs, on each of the campaign write-up's cost bases, and what a box's price is.

The write-up (Economics, "Cost bases, GBP ex-VAT") prices the four-card box four ways: Scan's list price,
committed (a 25% discount for a term), fully loaded (committed, minus tax relief, minus the idle GPU-hours
resold on Vast, plus storage) and, for reference, renting the same cards on Vast on demand. Its parameters
are data (ops/data/seed/cost_model.toml); ``CostModel`` turns them into USD per active node-hour and
tests/test_economics.py checks all ten rows of the printed table against it.

A box says what its price is (``boxes.price_basis``): bought on the cost model (``list``: economics prices it
on the basis the operator chooses, Scan list by default), the Vast on-demand reference (rented by the
hour, so utilisation does not divide it), or nothing (the operator's own price per hour of the month,
divided by utilisation).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from importlib import resources
from importlib.resources.abc import Traversable

from console.errors import InputError

DEFAULT_UTILISATION = 0.70
COST_BASES = ("list", "committed", "fully_loaded", "vast_on_demand")
FOLLOWS_BASIS = "list"
"""A box bought on the cost model: priced on whichever basis the operator chooses (default Scan list)."""
RENTED = "vast_on_demand"
"""A box rented by the hour: its price is what an hour of use costs, whatever the owner's utilisation."""
COST_MODEL = (
    resources.files("ops") / "data" / "seed" / "cost_model.toml"
)  # package data, read from a wheel too


class EconomicsError(InputError, ValueError):
    """Input the arithmetic cannot use; the message says which value and what is allowed."""


def check_utilisation(utilisation: float) -> float:
    if not 0.0 < utilisation <= 1.0:
        raise EconomicsError(f"utilisation {utilisation} must be above 0 and at most 1 (0.7 means 70%)")
    return utilisation


def check_basis(basis: str) -> str:
    if basis not in COST_BASES:
        raise EconomicsError(f"unknown cost basis {basis!r}; choose one of {', '.join(COST_BASES)}")
    return basis


def node_cost_per_active_hour(price_per_hour: float, utilisation: float) -> float:
    """A box paid by the hour of the month costs more per hour the owner actually uses it."""
    return price_per_hour / check_utilisation(utilisation)


def percent(share: float, places: int = 0) -> str:
    """A share as the write-up prints it beside a cost: ``70 %``."""
    return f"{share * 100:.{places}f} %"


@dataclass(frozen=True)
class BreakEven:
    """The resale fill of the idle GPU-hours at which the fully-loaded node costs nothing, at one utilisation,
    beside the figure the write-up published (which its own parameters do not give: its definition is not
    printed)."""

    utilisation: float
    fill: float
    fill_without_storage: float
    published: float | None
    definition: str
    formula: str

    @property
    def text(self) -> str:
        computed = f"computed {percent(self.fill, 1)} by {self.definition}: {self.formula}"
        if self.published is None:
            return computed
        return f"{percent(self.published, 1)} (published; {computed})"


@dataclass(frozen=True)
class CostModel:
    """The campaign write-up's cost bases: Scan list, committed, fully loaded (relief and resale) and Vast on
    demand, with the labels, rows and published figures of its table."""

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
    labels: dict[str, str] = field(default_factory=dict)  # basis -> the table's words
    names: dict[str, str] = field(default_factory=dict)  # basis -> the short name a header uses
    table: tuple[tuple[str, float | None], ...] = ()  # the printed rows: (basis, utilisation or None)
    published_break_even_fill: float | None = None
    break_even_utilisation: float = 0.20
    published_fully_loaded_multiplier: float | None = None

    @classmethod
    def from_toml(cls, path: Traversable) -> CostModel:
        try:
            data = tomllib.loads(path.read_text())
            scan, full, vast = data["scan"], data["fully_loaded"], data["vast_on_demand"]
            table, published = data.get("table", {}), data.get("published", {})
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
                labels={b: str(data.get("labels", {}).get(b, b)) for b in COST_BASES},
                names={b: str(data.get("names", {}).get(b, b)) for b in COST_BASES},
                table=tuple(
                    (check_basis(basis), float(u) if u is not None else None)
                    for basis, shares in table.items()
                    for u in (shares or [None])
                ),
                published_break_even_fill=published.get("break_even_fill"),
                break_even_utilisation=published.get("break_even_utilisation", 0.20),
                published_fully_loaded_multiplier=published.get("fully_loaded_multiplier"),
            )
        except (OSError, tomllib.TOMLDecodeError, KeyError, TypeError, ValueError) as exc:
            raise EconomicsError(
                f"{path}: cannot read the cost model ({exc!r}); see ops/data/seed/cost_model.toml for the keys"
            ) from exc

    def _committed(self) -> float:
        return self.monthly_gbp * (1 - self.commitment_discount)

    def _relief(self) -> float:
        return self._committed() * self.eris_qualifying * self.eris_per_gbp

    def _idle_gpu_hours(self, utilisation: float) -> float:
        return self.gpus * self.hours_per_month * (1 - utilisation)

    def _resale_usd_per_idle_hour_at_full_fill(self) -> float:
        return self.resale_usd_per_gpu_hour * (1 - self.resale_platform_take)

    def gbp_per_active_hour(self, basis: str, utilisation: float = 1.0) -> float:
        check_utilisation(utilisation)
        active_hours = self.hours_per_month * utilisation
        if basis == "list":
            return self.monthly_gbp / active_hours
        if basis == "committed":
            return self._committed() / active_hours
        if basis == "fully_loaded":
            resale_usd = (
                self._idle_gpu_hours(utilisation)
                * self.resale_fill
                * self._resale_usd_per_idle_hour_at_full_fill()
            )
            monthly = (
                self._committed()
                - self._relief()
                - resale_usd / self.usd_per_gbp
                + self.storage_gbp_per_month
            )
            return monthly / active_hours
        if basis == "vast_on_demand":
            return self.vast_usd_per_gpu_hour * self.vast_gpus / self.usd_per_gbp
        raise EconomicsError(f"unknown cost basis {basis!r}; choose one of {', '.join(COST_BASES)}")

    def usd_per_active_hour(self, basis: str, utilisation: float = 1.0) -> float:
        return self.gbp_per_active_hour(basis, utilisation) * self.usd_per_gbp

    def quoted_usd(self, basis: str, utilisation: float = 1.0) -> float:
        """USD per active hour to the cent, as the write-up quotes a node's cost ($4.40, $1.77) and divides by it."""
        return round(self.usd_per_active_hour(basis, utilisation), 2)

    def fully_loaded_factor(self, utilisation: float = DEFAULT_UTILISATION) -> float:
        """What turns an "API / node" ratio at Scan list into one at the fully-loaded basis, at one
        utilisation: list / fully loaded, each quoted to the cent, as the write-up divides its $4.40 by its $1.77
        (its footnote's rounded multiplier is data: cost_model.toml [published])."""
        return self.quoted_usd("list", utilisation) / self.quoted_usd("fully_loaded", utilisation)

    def break_even(self, utilisation: float | None = None) -> BreakEven:
        """The resale fill f at which the fully-loaded monthly cost is zero at ``utilisation`` (default the
        model's own 20%): committed - relief - f x idle GPU-hours x resale x (1 - take) / FX + storage = 0."""
        u = check_utilisation(self.break_even_utilisation if utilisation is None else utilisation)
        per_fill_usd = self._idle_gpu_hours(u) * self._resale_usd_per_idle_hour_at_full_fill()
        net = self._committed() - self._relief()
        fill = (net + self.storage_gbp_per_month) * self.usd_per_gbp / per_fill_usd
        return BreakEven(
            utilisation=u,
            fill=fill,
            fill_without_storage=net * self.usd_per_gbp / per_fill_usd,
            published=self.published_break_even_fill,
            definition=f"the resale fill at which the fully-loaded monthly cost reaches zero at {percent(u)} use",
            formula=(
                f"(committed GBP {self._committed():,.2f} - ERIS GBP {self._relief():,.2f} + storage GBP "
                f"{self.storage_gbp_per_month:,.2f}) x {self.usd_per_gbp} USD/GBP / ({self._idle_gpu_hours(u):,.0f} "
                f"idle GPU-hours x USD {self.resale_usd_per_gpu_hour} x (1 - {self.resale_platform_take})) "
                f"= {percent(fill, 1)} ({percent(net * self.usd_per_gbp / per_fill_usd, 1)} without storage)"
            ),
        )

    def basis_text(self, basis: str, utilisation: float) -> str:
        """The basis named with its cost, as headers print it: ``Scan list, 70 %: $4.40/h``."""
        name = self.names.get(basis, basis)
        if basis == RENTED:
            return f"{name}: ${self.quoted_usd(basis):.2f}/h"
        return f"{name}, {percent(utilisation)}: ${self.quoted_usd(basis, utilisation):.2f}/h"


def default_cost_model() -> CostModel:
    """The shipped cost model (the write-up's Economics parameters)."""
    return CostModel.from_toml(COST_MODEL)


@dataclass(frozen=True)
class CostBasisRow:
    """One row of the cost-basis table: GBP and USD per active node-hour, at the printed precision."""

    basis: str
    label: str
    utilisation: float | None
    gbp_per_node_hour: float
    usd_per_node_hour: float


def cost_basis_rows(cost: CostModel) -> list[CostBasisRow]:
    """The write-up's ten-row table, from the cost model's parameters, rounded as it prints them (pence and
    cents)."""
    return [
        CostBasisRow(
            basis,
            cost.labels.get(basis, basis),
            u,
            round(cost.gbp_per_active_hour(basis, u or 1.0), 2),
            round(cost.usd_per_active_hour(basis, u or 1.0), 2),
        )
        for basis, u in cost.table
    ]


@dataclass(frozen=True)
class NodePrice:
    """What an active hour of a box costs in one reading, and on what basis, in words."""

    usd_per_active_hour: float
    basis: str | None  # the cost-model basis it was priced on; None: the box's own price
    text: str  # e.g. "Scan list, 70 %: $4.40/h"
    provenance: str | None  # where the box's price comes from
    fully_loaded_usd: float | None  # the same box fully loaded at the same use (cost-model boxes only)


def node_price(
    cost: CostModel,
    price_per_hour: float,
    price_basis: str | None,
    provenance: str | None,
    basis: str,
    utilisation: float,
) -> NodePrice:
    """A box's active hour: a box bought on the cost model (``list``: its price is its list price per hour of
    the month) on the chosen ``basis``, scaled by its price against the model's list; a rented one
    (``vast_on_demand``) at its hourly price whatever the use; else its own price divided by ``utilisation``."""
    check_utilisation(utilisation)
    if price_basis == FOLLOWS_BASIS:
        # The box's own list price per hour of the month, carried through the cost model's basis.
        scale = price_per_hour / cost.usd_per_active_hour("list", 1.0) if price_per_hour else 1.0
        usd = cost.usd_per_active_hour(check_basis(basis), utilisation) * scale
        fully = cost.usd_per_active_hour("fully_loaded", utilisation) * scale
        name = cost.names.get(basis, basis)
        text = f"{name}: ${usd:.2f}/h" if basis == RENTED else f"{name}, {percent(utilisation)}: ${usd:.2f}/h"
        return NodePrice(usd, basis, text, provenance, fully)
    if price_basis == RENTED:
        return NodePrice(
            price_per_hour,
            RENTED,
            f"{cost.names.get(RENTED, RENTED)}: ${price_per_hour:.2f}/h",
            provenance,
            None,
        )
    usd = node_cost_per_active_hour(price_per_hour, utilisation)
    return NodePrice(
        usd,
        None,
        f"own price ${price_per_hour:.2f}/h, {percent(utilisation)}: ${usd:.2f}/h",
        provenance,
        None,
    )
