"""Logit-level divergence rows: one per pair of servers compared, each read against its control pair.

A measured row comes from the box (agents/kldiff, through ingest) with the figures the tool printed and
the identity the console's command gave it (both arms and launches, its role, the run id of its
control). This module fills in what only the store knows: the kernel lines each launch's engine printed,
and the control's figures copied beside the pair's (a row must read alone, as a throughput number does)
with the excess KL over the control. The verdict's words are the read model's (console/readmodel/kldiff.py);
the service writes them here with ``set_verdict`` once it has the row.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol, TypedDict

from console.errors import InputError
from console.store.conditions import HasLaunches, join_kernel_lines, selected_kernel_lines
from console.store.connection import Connection
from console.store.jsonutil import dumps

IDENTITY = (
    "run_id",
    "role",
    "box",
    "model",
    "launch_a",
    "launch_b",
    "arm_a",
    "arm_b",
    "kernel_a",
    "kernel_b",
    "t_ms",
    "note",
    "source",
    "provenance",
    "import_id",
)
FIGURES = (
    "contexts",
    "positions",
    "top_k",
    "top1_agreement",
    "top5_overlap",
    "mean_kl",
    "p50_kl",
    "p99_kl",
    "missing_token_method",
)
CONTROL = {
    "control_arm_a": "arm_a",
    "control_arm_b": "arm_b",
    "control_positions": "positions",
    "control_top1_agreement": "top1_agreement",
    "control_mean_kl": "mean_kl",
}
"""A pair's copy of its control's figures: column -> the control row's column."""
ROLES = ("pair", "control")


class ImportedKldiff(TypedDict):
    """A divergence row of the write-up's tables: ``kldiff_runs`` columns plus its ``label`` and the label of
    the ``control`` row it reads against (an earlier row of the same import)."""

    label: str
    role: str
    control: str | None
    model: str | None
    box: str | None
    arm_a: str
    arm_b: str
    kernel_a: str | None
    kernel_b: str | None
    positions: int | None
    top_k: int
    top1_agreement: float | None
    top5_overlap: float | None
    mean_kl: float
    verdict: str
    note: str | None
    provenance: str


class KldiffError(InputError, ValueError):
    """A divergence row that cannot be stored as given; the message names the field and the fix."""


class KldiffConnection(Connection, HasLaunches, Protocol):
    """What ``Kldiff`` needs of the store: its connection, and the launches whose kernel lines a row names."""


class Kldiff:
    """``store.kldiff``: the writer of ``kldiff_runs``."""

    def __init__(self, store: KldiffConnection):
        self.store = store

    def add_run(self, row: dict[str, Any]) -> int:
        """Store one measured comparison: the console's identity fields, the tool's figures (``raw``).

        ``control_run_id`` names the control pair's run (measured first, by the same command): its
        figures are copied and the excess computed. An unknown control is refused rather than dropped.
        """
        raw: dict[str, Any] = row["raw"] if isinstance(row.get("raw"), dict) else row
        values = {c: row[c] for c in IDENTITY if row.get(c) is not None}
        values.update({c: raw[c] for c in FIGURES if raw.get(c) is not None})
        values["raw"] = dumps(raw)
        with self.store.atomic():
            for side in ("a", "b"):
                launch = values.get(f"launch_{side}")
                if launch and not values.get(f"kernel_{side}"):
                    values[f"kernel_{side}"] = join_kernel_lines(selected_kernel_lines(self.store, launch))
            control_run = row.get("control_run_id")
            control = None
            if control_run is not None:
                found = self.store.rows("SELECT * FROM kldiff_runs WHERE run_id = ?", [str(control_run)])
                if not found:
                    raise KldiffError(
                        f"kldiff {values.get('run_id')}: its control run {control_run} is not in this "
                        "state.db; run the control pair first (campaign kldiff ... --control C D)"
                    )
                control = found[0]
            return self._insert(values, control)

    def add_imported(self, rows: Iterable[ImportedKldiff], import_id: int, t_ms: int) -> int:
        """Imported comparisons in order; a row's ``control`` names the ``label`` of an earlier control row."""
        ids: dict[str, dict[str, Any]] = {}
        count = 0
        for row in rows:
            columns: Mapping[str, object] = row
            values = {c: columns[c] for c in (*IDENTITY, *FIGURES, "verdict") if columns.get(c) is not None}
            values.update(source="imported", import_id=import_id, t_ms=t_ms)
            control = ids.get(row["control"]) if row["control"] else None
            if row["control"] and control is None:
                raise KldiffError(
                    f"imported kldiff row {row['label']!r}: control {row['control']!r} is not an "
                    "earlier row of the import"
                )
            row_id = self._insert(values, control)
            ids[row["label"]] = {**values, "id": row_id}
            count += 1
        return count

    def set_verdict(self, row_id: int, verdict: str) -> None:
        with self.store.atomic() as db:
            db.execute("UPDATE kldiff_runs SET verdict = ? WHERE id = ?", [verdict, row_id])

    def _insert(self, values: dict[str, Any], control: dict[str, Any] | None) -> int:
        """Check and write one row (inside ``atomic()``), with its control's figures beside its own."""
        missing = [c for c in ("arm_a", "arm_b", "mean_kl") if values.get(c) in (None, "")]
        if missing:
            raise KldiffError(
                f"kldiff row without {', '.join(missing)}: the command and the tool's JSON must carry them"
            )
        role = values.setdefault("role", "pair")
        if role not in ROLES:
            raise KldiffError(f"kldiff role {role!r}: one of {', '.join(ROLES)}")
        kl = float(values["mean_kl"])
        if kl < 0:
            raise KldiffError(f"kldiff mean KL {kl} is negative: KL never is; the tool's JSON is corrupt")
        if control is not None:
            values["control_id"] = control["id"]
            values.update({c: control.get(src) for c, src in CONTROL.items()})
            values["excess_kl"] = kl - float(control["mean_kl"])
        values.setdefault("t_ms", self.store.clock())
        with self.store.atomic():
            return self.store.insert("kldiff_runs", values)
