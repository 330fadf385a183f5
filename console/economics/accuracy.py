"""Which task accuracy speaks for a configuration, and when none may.

Accuracy is ``measured`` when it was measured on the exact (box, arm), ``borrowed`` when it comes from the
same arm on another box or from another arm of the model. Borrowing is where a number slides from one
product to another (the campaign write-up's DP2 x TP2 point borrowed TP4's accuracy and had to leave the
chart), so it follows rules:

- A lender serving the same profile (checkpoint) comes first, then one that is not a drafter, then one of
  the same tensor-parallel and expert-parallel layout, then one measured on the same box, then the order
  the evals are listed in (most accurate first). A lender whose every bench row failed its tripwire never lends.
- Accuracy never crosses precision. When the recipes say both arms' precision keys (checkpoint,
  quantization, KV cache dtype, ``--mamba-ssm-cache-dtype``, dtype) and any differ, the arm cannot borrow:
  it gets no accuracy and the reason "precision changed: needs its own paired quality run against
  <control>" (the write-up: the BF16 SSM-state and FP8 KV arms "change precision and require their own
  paired quality gate").
- An arm with its own accuracy that serves its control's profile at another precision stays off the
  frontier, with the same reason, until a paired quality comparison against that control exists.
- An arm the recipes do not define (an imported one) borrows as before, from the best-ranked lender of its
  model: its precision is not known, and the row says "borrowed".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from console.readmodel.records import ArmPrecision, EvalRow

MEASURED, BORROWED = "measured", "borrowed"


def precision_changed(control: str) -> str:
    return f"precision changed: needs its own paired quality run against {control}"


@dataclass(frozen=True)
class Found:
    """The eval row that speaks for a configuration, its basis, and why the row is held back, if it is."""

    ev: EvalRow | None
    basis: str | None  # measured, borrowed, or None: no accuracy
    held: str | None = None  # why it may not stand on the frontier (or has no accuracy)


@dataclass(frozen=True)
class Lenders:
    """The eval rows a configuration's accuracy can come from."""

    evals: tuple[EvalRow, ...]
    precision: dict[str, ArmPrecision]
    refused: frozenset[str]  # arms whose every bench row failed its tripwire: they lend nothing
    pairs: frozenset[tuple[str, str]]  # (arm, control) with a paired quality comparison

    @classmethod
    def of(
        cls,
        evals: Sequence[EvalRow],
        precision: dict[str, ArmPrecision],
        refused: frozenset[str],
        pairs: frozenset[tuple[str, str]],
    ) -> Lenders:
        return cls(tuple(evals), precision, refused, pairs)

    def find(self, box: str | None, arm: str, model: str | None) -> Found:
        mine = self.precision.get(arm)
        exact = next((e for e in self.evals if (e.box, e.arm) == (box, arm)), None)
        if exact is not None:
            return Found(exact, MEASURED, self._unpaired(arm, mine, model))
        same_arm = next((e for e in self.evals if e.arm == arm), None)
        if same_arm is not None:
            return Found(same_arm, BORROWED, self._unpaired(arm, mine, model))
        ranked = self._ranked(arm, mine, model, box)
        if mine is None:
            lender = next(iter(ranked), None)
            return Found(lender, BORROWED if lender else None)
        for e in ranked:
            theirs = self.precision.get(e.arm or "")
            if theirs is not None and theirs.keys == mine.keys:
                return Found(e, BORROWED)
        if ranked:
            return Found(None, None, precision_changed(ranked[0].arm or ranked[0].configuration))
        return Found(None, None)

    def _ranked(
        self, arm: str, mine: ArmPrecision | None, model: str | None, box: str | None = None
    ) -> list[EvalRow]:
        """The model's other evals, best lender first (see the module's rules); the order is stable."""
        candidates = [
            e for e in self.evals if e.model == model and e.arm != arm and (e.arm or "") not in self.refused
        ]

        def rank(e: EvalRow) -> tuple[bool, ...]:
            theirs = self.precision.get(e.arm or "")
            if theirs is None:  # not in the recipes: its profile and layout are unknown, not a drafter's
                return (True, False, True, e.box != box, e.arm is None)
            same_profile = mine is not None and theirs.profile == mine.profile
            same_layout = mine is not None and (theirs.tensor_parallel, theirs.expert_parallel) == (
                mine.tensor_parallel,
                mine.expert_parallel,
            )
            return (not same_profile, theirs.drafter, not same_layout, e.box != box, False)

        return sorted(candidates, key=rank)

    def _unpaired(self, arm: str, mine: ArmPrecision | None, model: str | None) -> str | None:
        """Why an arm with its own accuracy is held off the frontier: it serves its control's profile at
        another precision and no paired comparison against the control exists."""
        if mine is None:
            return None
        for e in self._ranked(arm, mine, model):
            theirs = self.precision.get(e.arm or "")
            if theirs is None or theirs.profile != mine.profile:
                break
            if theirs.keys != mine.keys:
                control = theirs.arm
                return None if (arm, control) in self.pairs else precision_changed(control)
            return None
        return None
