"""Greedy sequence comparisons (specdiff): one row per run, one per prompt, each pair read against its control.

A row comes from the box (agents/specdiff, through ingest) with the tool's captures and comparisons, and
the identity the console's command gave it: the four launches (the speculative one, its base, the
control's two captures: the same launch twice when the control is one server captured twice), their arms,
the speculative config, and how many control reproductions a verdict needs. The verdict's words are the
read model's (console/readmodel/specdiff.py); the service writes them here with ``set_verdict``.
"""

from __future__ import annotations

from typing import Any

from console.errors import InputError
from console.store.connection import Connection
from console.store.jsonutil import dumps

IDENTITY = (
    "run_id",
    "box",
    "model",
    "spec_launch",
    "base_launch",
    "control_launch_a",
    "control_launch_b",
    "spec_arm",
    "base_arm",
    "control_arm",
    "speculative_config",
    "min_control",
)
"""Columns the console's command names (its arguments, which ingest lays over the tool's JSON)."""
FIGURES = ("prompt_count", "max_tokens", "seed", "pair_matched", "control_matched", "duration_s")
"""Columns the tool's JSON gives."""
SIDES = ("spec", "base", "control_a", "control_b")


class SpecdiffError(InputError, ValueError):
    """A specdiff result that cannot be stored as given; the message names the field and the fix."""


def _tokens(item: dict[str, Any], side: str, where: str) -> list[int]:
    ids = item.get(side)
    if not isinstance(ids, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in ids):
        raise SpecdiffError(f"{where}: '{side}' is not a list of token ids; the tool's JSON is corrupt")
    return ids


def _position(item: dict[str, Any], key: str, where: str) -> int | None:
    value = item.get(key)
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
        raise SpecdiffError(
            f"{where}: '{key}' is {value!r}, not a token position; the tool's JSON is corrupt"
        )
    return value


def _item_row(run: int, idx: int, item: Any, run_id: str) -> dict[str, Any]:
    where = f"specdiff {run_id} prompt {idx}"
    if not isinstance(item, dict) or not isinstance(item.get("prompt"), str):
        raise SpecdiffError(f"{where}: not an object with a prompt; the tool's JSON is corrupt")
    row: dict[str, Any] = {"run": run, "idx": idx, "prompt": item["prompt"]}
    for side in SIDES:
        row[f"{side}_tokens"] = dumps(_tokens(item, side, where))
    for key in ("pair_diverge_at", "control_diverge_at"):
        row[key] = _position(item, key, where)
    for key in ("spec_text", "base_text"):
        row[key] = item.get(key) if isinstance(item.get(key), str) else None
    return row


class Specdiff:
    """``store.specdiff``: the writer of ``specdiff_runs`` and ``specdiff_items``."""

    def __init__(self, store: Connection):
        self.store = store

    def add_run(self, row: dict[str, Any]) -> int:
        """Store one run: the console's identity fields (``row``), the tool's figures and items (``raw``).

        The counts must agree with the items (a prompt matched when it has no divergence), and a verdict's
        threshold cannot exceed the prompts: either is a corrupt result, refused rather than stored wrong.
        """
        raw: dict[str, Any] = row["raw"] if isinstance(row.get("raw"), dict) else row
        values = {c: row[c] for c in IDENTITY if row.get(c) is not None}
        values.update({c: raw[c] for c in FIGURES if raw.get(c) is not None})
        run_id = str(values.get("run_id"))
        missing = [
            c for c in ("spec_arm", "base_arm", "control_arm", "prompt_count") if values.get(c) is None
        ]
        if missing:
            raise SpecdiffError(
                f"specdiff {run_id} without {', '.join(missing)}: the command and the tool's JSON must carry them"
            )
        items = raw.get("items")
        if not isinstance(items, list) or len(items) != values["prompt_count"]:
            raise SpecdiffError(
                f"specdiff {run_id}: its items do not list its {values['prompt_count']} prompts"
            )
        values.setdefault("min_control", values["prompt_count"])
        if not 1 <= int(values["min_control"]) <= int(values["prompt_count"]):
            raise SpecdiffError(
                f"specdiff {run_id}: a verdict needing {values['min_control']} control reproductions out of "
                f"{values['prompt_count']} prompts; give at most the prompts"
            )
        values["t_ms"] = raw.get("t_ms") if isinstance(raw.get("t_ms"), int) else self.store.clock()
        values["raw"] = dumps({k: v for k, v in raw.items() if k != "items"})  # the items have their table
        with self.store.atomic() as db:
            run = self.store.insert("specdiff_runs", values)
            rows = [_item_row(run, i, item, run_id) for i, item in enumerate(items)]
            for key, prefix in (("pair_matched", "pair"), ("control_matched", "control")):
                counted = sum(r[f"{prefix}_diverge_at"] is None for r in rows)
                if values.get(key) != counted:
                    raise SpecdiffError(
                        f"specdiff {run_id}: {key} {values.get(key)} but {counted} items without a divergence; "
                        "the tool's JSON is corrupt"
                    )
            db.table("specdiff_items").insert_all(rows)
        return run

    def set_verdict(self, row_id: int, verdict: str) -> None:
        with self.store.atomic() as db:
            db.execute("UPDATE specdiff_runs SET verdict = ? WHERE id = ?", [verdict, row_id])
