"""Greedy sequence comparisons (specdiff) as records, and the one rule that reads a pair against its control.

What ``campaign specdiff`` prints after a run, and what ``--list`` and ``--show`` read offline, come from
here: the verdict's words exist once (``SpecdiffVerdict.of``). The rule (docs/specdiff.md): no conclusion
unless the control reproduced at least ``min_control`` of the prompts (by default all of them), as the
write-up's box/specdiff.py came to refuse; then the pair is identical, within the control, or differs.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from console.store import Store
from console.store.jsonutil import json_list

QUALITY_POINTER = (
    "a greedy comparison cannot settle it on this stack: compare task accuracy on common items instead "
    "(`campaign quality compare`)"
)
"""Where the question goes when the control does not reproduce (the write-up sent it to the paired task
comparison)."""

VerdictKind = Literal["identical", "within-control", "differs", "no-conclusion"]


@dataclass(frozen=True)
class SpecdiffVerdict:
    kind: VerdictKind
    text: str

    @property
    def conclusive(self) -> bool:
        return self.kind != "no-conclusion"

    @classmethod
    def of(cls, run: SpecdiffRun) -> SpecdiffVerdict:
        """The rule, from the counts: the control's reproductions against its threshold, then the pair's."""
        n, pair, control = run.prompt_count, run.pair_matched, run.control_matched
        if control < run.min_control:
            needed = "all" if run.min_control == n else f"at least {run.min_control}"
            return cls(
                "no-conclusion",
                f"no conclusion: control reproduced {control} of {n} (a verdict needs {needed})",
            )
        floor = f"control reproduced {control} of {n}"
        if pair == n:
            return cls(
                "identical",
                f"identical: speculation generated the base's tokens on all {n} prompts ({floor})",
            )
        if pair >= control:
            return cls(
                "within-control",
                f"within the control: spec and base identical on {pair} of {n}, no fewer than the {floor}",
            )
        first = min((i.pair_diverge_at for i in run.items if i.pair_diverge_at is not None), default=None)
        at = "" if first is None else f", earliest divergence at generated token {first}"
        return cls(
            "differs",
            f"differs: spec and base identical on {pair} of {n} prompts, fewer than the {floor}{at}",
        )


@dataclass(frozen=True)
class SpecdiffItem:
    """One prompt: the four captures' token ids and where each pair first diverged (None: identical)."""

    idx: int
    prompt: str
    spec_tokens: tuple[int, ...]
    base_tokens: tuple[int, ...]
    control_a_tokens: tuple[int, ...]
    control_b_tokens: tuple[int, ...]
    spec_text: str | None
    base_text: str | None
    pair_diverge_at: int | None
    control_diverge_at: int | None

    @property
    def pair_match(self) -> bool:
        return self.pair_diverge_at is None

    @property
    def control_match(self) -> bool:
        return self.control_diverge_at is None


@dataclass(frozen=True)
class SpecdiffRun:
    """One ``campaign specdiff``: who was compared, the counts, every prompt, the verdict."""

    id: int
    run_id: str
    box: str | None
    model: str | None
    spec_launch: str | None
    base_launch: str | None
    control_launch_a: str | None
    control_launch_b: str | None
    spec_arm: str
    base_arm: str
    control_arm: str
    speculative_config: str | None
    t_ms: int
    prompt_count: int
    max_tokens: int | None
    seed: int | None
    pair_matched: int
    control_matched: int
    min_control: int
    duration_s: float | None
    recorded_verdict: str | None
    """The words the service stored once the run was ingested (None until then)."""
    items: tuple[SpecdiffItem, ...] = ()

    @property
    def verdict(self) -> SpecdiffVerdict:
        return SpecdiffVerdict.of(self)

    @property
    def control_kind(self) -> str:
        """What the control was: the write-up's "same server captured twice", or two launches of one arm."""
        if self.control_launch_a == self.control_launch_b:
            return f"launch {self.control_launch_a} captured twice"
        return f"launches {self.control_launch_a} and {self.control_launch_b} of {self.control_arm}"

    def summary(self) -> dict[str, Any]:
        """The run as JSON-ready values (``--json``), its verdict and items included."""
        verdict = self.verdict
        return {
            **asdict(self),
            "control": self.control_kind,
            "verdict": {"kind": verdict.kind, "text": verdict.text, "conclusive": verdict.conclusive},
        }


_RUN_COLUMNS = tuple(f for f in SpecdiffRun.__dataclass_fields__ if f not in ("recorded_verdict", "items"))


def _item(r: dict[str, Any]) -> SpecdiffItem:
    def ids(side: str) -> tuple[int, ...]:
        return tuple(int(t) for t in json_list(r[f"{side}_tokens"]))

    return SpecdiffItem(
        idx=r["idx"],
        prompt=r["prompt"],
        spec_tokens=ids("spec"),
        base_tokens=ids("base"),
        control_a_tokens=ids("control_a"),
        control_b_tokens=ids("control_b"),
        spec_text=r["spec_text"],
        base_text=r["base_text"],
        pair_diverge_at=r["pair_diverge_at"],
        control_diverge_at=r["control_diverge_at"],
    )


def _run(store: Store, r: dict[str, Any]) -> SpecdiffRun:
    rows = store.rows("SELECT * FROM specdiff_items WHERE run = ? ORDER BY idx", [r["id"]])
    items = tuple(_item(i) for i in rows)
    return SpecdiffRun(**{c: r[c] for c in _RUN_COLUMNS}, recorded_verdict=r["verdict"], items=items)


def specdiff_runs(store: Store, at: int | None = None) -> list[SpecdiffRun]:
    """Every specdiff run (finished by ``at``), newest first, each with its prompts."""
    where, params = ("WHERE t_ms <= ?", [at]) if at is not None else ("", [])
    rows = store.rows(f"SELECT * FROM specdiff_runs {where} ORDER BY t_ms DESC, id DESC", params)
    return [_run(store, r) for r in rows]


def specdiff_run(store: Store, run: str) -> SpecdiffRun | None:
    """The run ``run`` names: its command id (specdiff-...) or its row id; None when it is not stored."""
    rows = store.rows("SELECT * FROM specdiff_runs WHERE run_id = ?", [run])
    if not rows and run.isdigit():
        rows = store.rows("SELECT * FROM specdiff_runs WHERE id = ?", [int(run)])
    return _run(store, rows[0]) if rows else None
