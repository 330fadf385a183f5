"""Box intents: the inventory, host-key trust, and connecting (push the agent, ingest its journal)."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from console.bounds import PRICE_PER_HOUR
from console.economics.costs import FOLLOWS_BASIS, RENTED
from console.errors import InputError
from console.fleet.hostkeys import check_trust, presented_key
from console.fleet.progress import IngestProgress
from console.service.base import ServiceBase, ServiceError, reaching
from console.store import LOCAL_BOX, Box
from console.store.ingest import IngestReport

BOX_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
SETTABLE = ("price_per_hour", "price_basis", "price_provenance", "serving_env", "model_root", "agent_home")
"""What ``box set`` may change; where a box is reached (and its trusted key) is fixed at ``box add``."""
OWN_PRICE = "own"
PRICE_BASES = (OWN_PRICE, FOLLOWS_BASIS, RENTED)
"""What a box's price per hour is (console/economics/costs.py): ``own`` (stored NULL), the operator's price per
hour of the month, divided by utilisation; ``list``, a box bought on the cost model, priced on the basis
economics is asked for; ``vast_on_demand``, rented by the hour, whatever the utilisation."""


@dataclass(frozen=True)
class Connected:
    """What one ``connect`` did."""

    box: str
    action: str  # what was done to the agent: pushed, restarted, already running ...
    ingested: int

    def __str__(self) -> str:
        return f"{self.action}; {self.ingested} new events ingested"


@dataclass(frozen=True)
class HostKey:
    """The key a box presents now, as the operator compares it with the provider's console."""

    line: str
    fingerprint: str

    @property
    def kind(self) -> str:
        return self.line.split()[0]


class BoxIntents(ServiceBase):
    def add_box(self, box: Box) -> Box:
        """Register a box; nothing is contacted until it is connected or checked."""
        if not BOX_NAME.match(box.name):
            raise InputError(f"box name {box.name!r}: use letters, digits, '.', '_' or '-' (max 63)")
        if box.key_path and not Path(box.key_path).is_file():
            raise InputError(f"--key {box.key_path}: no such file")
        if box.provider and not box.instance_id:
            raise InputError(f"--provider {box.provider} needs --instance ID (the provider's instance id)")
        _check_price(box.price_per_hour)
        basis = _price_basis(box.price_basis)
        return self.store.boxes.add(replace(box, price_basis=None if basis == OWN_PRICE else basis))

    def set_box(self, name: str, **values: Any) -> dict[str, Any]:
        """Change where a box keeps things, or its price; returns what was set."""
        unknown = set(values) - set(SETTABLE)
        if unknown:
            raise InputError(
                f"box set: cannot change {', '.join(sorted(unknown))}; settable: {', '.join(SETTABLE)}"
            )
        values = {k: v for k, v in values.items() if v is not None}
        if not values:
            raise InputError(
                "nothing to set: give --price-per-hour, --price-basis, --price-source, --serving-env, "
                "--model-root or --agent-home"
            )
        _check_price(values.get("price_per_hour"))
        if "price_basis" in values and _price_basis(values["price_basis"]) == OWN_PRICE:
            values["price_basis"] = None  # stored NULL: the operator's own price
        if name == LOCAL_BOX:
            self.store.boxes.ensure_local()
        self.store.boxes.update(name, **values)
        return values

    def ensure_local_box(self) -> None:
        """Register this machine as the box ``local`` if it is not yet (the embedded default)."""
        self.store.boxes.ensure_local()

    def ingest_progress(self, name: str) -> IngestProgress:
        """A progress line on stderr for ``connect`` or ``follow`` of the box (pass it as ``on_ingest``): the
        seq committed here against the box's newest. An unknown box is refused here, before anything starts."""
        return IngestProgress(self.fleet.link(name))

    def remove_box(self, name: str) -> Box:
        box = self.store.boxes.get(name)
        self.store.boxes.remove(name)
        return box

    async def presented_key(self, name: str) -> HostKey:
        box = self.store.boxes.get(name)
        if box.is_local:
            raise ServiceError("the local box is reached without SSH: it has no host key to trust")
        with reaching(name):
            line, fingerprint = await presented_key(box, self.fleet.settings.ssh.connect_timeout)
        return HostKey(line, fingerprint)

    def trust(self, name: str, key: HostKey, replace: bool = False) -> None:
        """Pin the key the operator compared and confirmed (TOFU), clearing a host-key status."""
        check_trust(self.store.boxes.get(name), key.line, replace)
        self.store.boxes.update(
            name,
            host_key=key.line,
            host_key_source="tofu",
            status="new",
            status_detail="host key trusted by the operator",
        )

    async def connect(self, name: str, on_ingest: Callable[[IngestReport], None] | None = None) -> Connected:
        """Connect (push or restart the agent as needed) and ingest everything pending."""
        link = self.fleet.link(name)
        link.on_ingest = on_ingest
        with reaching(name):
            action = await link.connect()
            inserted = await link.sync()
        return Connected(name, action, inserted)

    async def detach(self, name: str) -> bool:
        """Ingest what is pending, then stop the box's journal holding events for this campaign; False when
        this campaign was not attached there."""
        with reaching(name):
            result = await self.fleet.link(name).detach()
        return bool(result.get("detached"))

    async def follow(
        self,
        name: str,
        stop: asyncio.Event,
        on_ingest: Callable[[IngestReport], None] | None = None,
        on_notice: Callable[[str], None] | None = None,
        stall_notice_s: float | None = None,
    ) -> None:
        """Keep the box's link up and its journal ingested until ``stop`` (or a problem the operator must fix,
        which is raised: a changed host key, a journal that disagrees with state.db, a detach).

        It never goes quiet: every failure of the link (the box unreachable, the agent refusing, a stream
        ingest cannot commit, a full disk) reaches ``on_notice`` as one line when it happens, with the retry
        the link makes; the link coming back says so; and while the link stays down it repeats where it
        stands every ``stall_notice_s`` (default STALL_NOTICE_S).
        """
        link = self.fleet.start(name)
        watch = _FollowWatch(
            name, on_notice, on_ingest, STALL_NOTICE_S if stall_notice_s is None else stall_notice_s
        )
        link.on_ingest = watch.ingested
        link.on_status = watch.status
        link.on_retry = watch.retrying
        while not stop.is_set() and link.fatal is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)
            if not link.connected:
                watch.still_down(lambda: self.store.boxes.get(name))
        if link.fatal is not None:
            raise link.fatal


STALL_NOTICE_S = 60.0
"""How often a follow whose link stays down says where it stands."""


@dataclass
class _FollowWatch:
    """What a follow tells the operator: each failed attempt of the link (its own line, with the retry),
    the link coming back, and, while it stays down, where it stands every ``every_s``."""

    name: str
    notice: Callable[[str], None] | None
    on_ingest: Callable[[IngestReport], None] | None
    every_s: float
    progressed: float = field(default_factory=time.monotonic)
    told: float = field(default_factory=time.monotonic)
    failing: bool = False

    def status(self, state: str, detail: str | None) -> None:
        if state == "up":
            self.progressed = time.monotonic()
            if self.failing:
                self._say(f"{self.name}: link back up: {detail}")
            self.failing = False

    def retrying(self, state: str, detail: str) -> None:
        """A failed attempt of the link, with why and when it retries."""
        self.failing = True
        self._say(f"{self.name}: {state}: {detail}")

    def ingested(self, report: IngestReport) -> None:
        self.progressed = time.monotonic()
        if self.on_ingest is not None:
            self.on_ingest(report)

    def still_down(self, box: Callable[[], Box]) -> None:
        now = time.monotonic()
        if min(now - self.progressed, now - self.told) >= self.every_s:
            found = box()
            self._say(
                f"{self.name}: no progress for {int(now - self.progressed)} s: {found.status} "
                f"({found.status_detail}); still retrying, Ctrl-C to stop"
            )
            self.told = now

    def _say(self, line: str) -> None:
        if self.notice is not None:
            self.notice(line)


def _price_basis(basis: str | None) -> str | None:
    """A price basis the economics knows, or a one-line refusal naming the ones it does."""
    if basis is not None and basis not in PRICE_BASES:
        raise InputError(f"--price-basis {basis!r}: use one of {', '.join(PRICE_BASES)}")
    return basis


def _check_price(price: float | None) -> None:
    """A price is finite and in range: nan or inf would be stored and priced into every economics figure."""
    if price is not None:
        PRICE_PER_HOUR.check(price, "--price-per-hour")
