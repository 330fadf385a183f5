"""Probes and check verdicts: what each box looked like, and what the checks concluded from it.

A *check run* is the set of verdicts computed from one probe at one instant; it is stored with that
probe's id and the instant (``check_verdicts.t_ms``, console clock), and ``last_verdicts`` returns the
newest run. ``campaign launch`` refuses a box whose last run holds a ``fail`` unless forced, so a run is
written in one transaction: a half-written run could hide a failure.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeGuard

from agents.protocol import ProbeReport
from console.store.jsonutil import dumps

if TYPE_CHECKING:
    from console.store.connection import Connection


VerdictName = Literal["ok", "warn", "fail"]
"""What a check concluded (the CHECK on ``check_verdicts.verdict`` holds the same words): a ``fail`` in a
box's newest run holds its launches back unless forced (``last_failed``)."""


class CheckVerdict(Protocol):
    """A check's verdict as the store writes it (``console.checks.Verdict`` is one): the store knows no check."""

    @property
    def check(self) -> str: ...

    @property
    def verdict(self) -> VerdictName: ...

    @property
    def reason(self) -> str: ...

    @property
    def numbers(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class StoredProbe:
    id: int
    box: str
    t_ms: int
    console_t_ms: int | None
    data: ProbeReport


@dataclass(frozen=True)
class VerdictRow:
    id: int
    box: str
    probe_id: int | None
    t_ms: int
    check: str
    verdict: VerdictName
    reason: str
    numbers: dict[str, Any]

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> VerdictRow:
        return cls(
            id=row["id"],
            box=row["box"],
            probe_id=row["probe_id"],
            t_ms=row["t_ms"],
            check=row["check_name"],
            verdict=row["verdict"],
            reason=row["reason"],
            numbers=json.loads(row["numbers"]) if row["numbers"] else {},
        )


def is_probe(value: object) -> TypeGuard[ProbeReport]:
    """Whether ``value`` can be read as a probe: a JSON object. Its fields are not checked here: every one may be
    absent (``ProbeReport`` is total=False) and each reader tolerates another type, so a probe of an older or
    newer agent is judged field by field (console/checks/probe_view.py) instead of refused whole."""
    return isinstance(value, dict)


def as_probe(value: object) -> ProbeReport:
    """``value`` (read back from the database or a JSON answer) as a probe; TypeError for anything that is not
    a JSON object (``is_probe``)."""
    if not is_probe(value):
        raise TypeError(f"a probe is a dict (the agent's probe JSON), not {type(value).__name__}")
    return value


def gpu_summary(probe: ProbeReport) -> str | None:
    """``4x NVIDIA RTX PRO 6000 ... 400 W`` for the box list; None when the probe saw no GPU."""
    gpus = [g for g in probe.get("gpus") or [] if isinstance(g, dict)]
    if not gpus:
        return None
    names = sorted({g.get("name") or "?" for g in gpus})
    limits = sorted({float(w) for g in gpus if isinstance(w := g.get("enforced_limit_w"), int | float)})
    power = f", {'/'.join(f'{w:.0f}' for w in limits)} W" if limits else ""
    return f"{len(gpus)}x {' + '.join(names)}{power}"


def _stored(rows: list[dict[str, Any]]) -> StoredProbe | None:
    if not rows:
        return None
    r = rows[0]
    return StoredProbe(r["id"], r["box"], r["t_ms"], r["console_t_ms"], as_probe(json.loads(r["data"])))


class Checks:
    def __init__(self, store: Connection):
        self.store = store

    # -- writers ---------------------------------------------------------------------------------
    def add_probe(self, box: str, probe: ProbeReport) -> int:
        """Keep a probe as it came; also note the box's time zone and GPUs on its row when it exists.

        Called by ``campaign check`` and by the fleet's ingest of ``probe`` journal events, inside the
        ingest transaction (``atomic`` nests as a savepoint).
        """
        t_ms = probe.get("t_ms")
        if not isinstance(t_ms, int) or isinstance(t_ms, bool):
            raise ValueError(f"probe for box {box!r} has no integer t_ms (UTC epoch ms); got {t_ms!r}")
        console_t_ms = probe.get("console_t_ms")
        if console_t_ms is not None and (not isinstance(console_t_ms, int) or isinstance(console_t_ms, bool)):
            raise ValueError(
                f"probe for box {box!r}: console_t_ms must be integer UTC epoch ms or null, "
                f"got {console_t_ms!r}"
            )
        data = dumps(probe)
        with self.store.atomic() as db:
            # The same probe arrives twice when `campaign check` asks the agent (the op's result) and the
            # ingest then commits the agent's `probe` journal event: keep one row.
            same = db.execute(
                "SELECT id FROM probes WHERE box = ? AND t_ms = ? AND data = ?", [box, t_ms, data]
            ).fetchone()
            if same:
                return int(same[0])
            probe_id = self.store.insert(
                "probes", {"box": box, "t_ms": t_ms, "console_t_ms": console_t_ms, "data": data}
            )
            db.execute(
                "UPDATE boxes SET tz = ?, gpu_summary = ?, updated_ms = ? WHERE name = ?",
                [probe.get("tz"), gpu_summary(probe), self.store.clock(), box],
            )
        return probe_id

    def add_verdicts(
        self,
        box: str,
        probe_id: int | None,
        verdicts: Sequence[CheckVerdict],
        t_ms: int,
        *,
        import_id: int | None = None,
    ) -> None:
        """Store one check run. Re-running the same probe at the same instant replaces that run. ``import_id``:
        verdicts judged from an import's published figures (console/store/history.py), not from a probe."""
        if not verdicts:
            raise ValueError(f"no verdicts for box {box!r}: a check run that checked nothing is not stored")
        with self.store.atomic() as db:
            db.execute(
                "DELETE FROM check_verdicts WHERE box = ? AND probe_id IS ? AND t_ms = ?",
                [box, probe_id, t_ms],
            )
            db.table("check_verdicts").insert_all(
                {
                    "box": box,
                    "probe_id": probe_id,
                    "t_ms": t_ms,
                    "check_name": v.check,
                    "verdict": v.verdict,
                    "reason": v.reason,
                    "numbers": dumps(v.numbers),
                    "import_id": import_id,
                }
                for v in verdicts
            )

    # -- readers ---------------------------------------------------------------------------------
    def latest_probe(self, box: str) -> StoredProbe | None:
        return _stored(
            self.store.rows("SELECT * FROM probes WHERE box = ? ORDER BY t_ms DESC, id DESC LIMIT 1", [box])
        )

    def last_probe_with_gpus(self, box: str, before_id: int) -> StoredProbe | None:
        """The newest probe of ``box`` stored before probe ``before_id`` (the order they were stored in: a
        box clock can jump) that listed a GPU, taken since the box was added (a box removed and added
        again starts afresh)."""
        rows = self.store.rows(
            "SELECT p.* FROM probes p JOIN boxes b ON b.name = p.box WHERE p.box = ? AND p.id < ? "
            "AND COALESCE(p.console_t_ms, p.t_ms) >= b.created_ms AND json_array_length(p.data, '$.gpus') > 0 "
            "ORDER BY p.id DESC LIMIT 1",
            [box, before_id],
        )
        return _stored(rows)

    def last_verdicts(self, box: str) -> list[VerdictRow]:
        """The newest check run of a box (empty when it was never checked), in the order it was written."""
        head = self.store.rows(
            "SELECT probe_id, t_ms FROM check_verdicts WHERE box = ? ORDER BY t_ms DESC, id DESC LIMIT 1",
            [box],
        )
        if not head:
            return []
        rows = self.store.rows(
            "SELECT * FROM check_verdicts WHERE box = ? AND probe_id IS ? AND t_ms = ? ORDER BY id",
            [box, head[0]["probe_id"], head[0]["t_ms"]],
        )
        return [VerdictRow.from_row(r) for r in rows]

    def last_failed(self, box: str) -> list[VerdictRow]:
        """The failing verdicts of the newest run: non-empty means launches on this box need --force."""
        return [v for v in self.last_verdicts(box) if v.verdict == "fail"]
