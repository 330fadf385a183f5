"""The sweep plan: a sweep list from the recipes becomes an ordered walk of candidate arms.

WHY candidates are stored as (base, linear, moe) and not as resolved argv: a resumed sweep rebuilds the
same derived arm from the catalog (``Catalog.variant``), so the walk survives a console restart, and a
candidate the engine itself named (its accepted backend set) is queued in the same form.
"""

from __future__ import annotations

from console.errors import InputError
from console.recipes import Arm, Catalog, KernelPair
from console.recipes.vllm_flags import flag_value
from console.store.sweeps import Candidate, SweepArm

NO_SET = "the engine printed no accepted set"
"""vLLM 0.32's refusal "... does not support the deployment configuration since ..." names none (agents/loglines.py)."""


class PlanError(InputError, ValueError):
    """The sweep cannot be planned as asked; the message says what and how to fix it."""


def candidates(catalog: Catalog, list_name: str) -> list[Candidate]:
    """The list's arms in their written order, then its kernel pairs applied to its base arm."""
    sweep = catalog.sweeps.get(list_name)
    if sweep is None:
        known = ", ".join(sorted(catalog.sweeps)) or "none"
        raise PlanError(
            f"no sweep list named {list_name!r} in the recipes (known: {known}); "
            "sweep lists are [sweeps.NAME] tables in recipes/*.toml"
        )
    planned: list[Candidate] = [{"arm": name, "origin": "list"} for name in sweep.arms]
    seen = set(sweep.arms)
    for pair in sweep.pairs:
        assert sweep.base is not None  # the loader refuses pairs without a base
        arm = catalog.variant(sweep.base, pair, sweep.name)
        if arm.name not in seen:
            seen.add(arm.name)
            planned.append(
                {
                    "arm": arm.name,
                    "origin": "pair",
                    "base": sweep.base,
                    "linear_backend": pair.linear_backend,
                    "moe_backend": pair.moe_backend,
                }
            )
    return planned


def materialize(catalog: Catalog, candidate: SweepArm, list_name: str) -> Arm:
    """The arm a stored candidate stands for, registered in ``catalog`` so lint/resolve/tripwire find it."""
    if candidate.base is None:
        if candidate.arm not in catalog.arms:
            raise PlanError(
                f"arm {candidate.arm!r} of sweep {list_name!r} is no longer in the recipes; restore "
                "it or start a new sweep"
            )
        return catalog.arms[candidate.arm]
    if candidate.base not in catalog.arms:
        raise PlanError(
            f"base arm {candidate.base!r} of candidate {candidate.arm!r} is no longer in the recipes"
        )
    arm = catalog.variant(
        candidate.base, KernelPair(candidate.linear_backend, candidate.moe_backend), list_name
    )
    catalog.arms.setdefault(arm.name, arm)
    return catalog.arms[arm.name]


def refused_slot(arm: Arm, reason: str) -> str | None:
    """Which pinned backend the engine refused: the one its message names, else the only one pinned."""
    pinned = {slot: getattr(arm, slot) for slot in ("moe_backend", "linear_backend") if getattr(arm, slot)}
    lowered = reason.lower()
    if "moe_backend" in pinned and ("moe" in lowered or "expert" in lowered):
        return "moe_backend"
    if "linear_backend" in pinned and ("linear" in lowered or "gemm" in lowered):
        return "linear_backend"
    return next(iter(pinned)) if len(pinned) == 1 else None


def accepted_candidates(
    catalog: Catalog, candidate: SweepArm, arm: Arm, reason: str, accepted: list[str]
) -> tuple[list[Candidate], list[str]]:
    """Candidates to queue from the set the engine said it accepts, instead of guessing (campaign rule 3).

    Returns (candidates, names that map to no flag value of the pinned vLLM: recorded, never queued).
    """
    slot = refused_slot(arm, reason)
    if slot is None:
        return [], list(accepted)
    base = candidate.base or candidate.arm
    pinned = {"linear_backend": arm.linear_backend, "moe_backend": arm.moe_backend}
    out: list[Candidate] = []
    unmapped: list[str] = []
    for name in accepted:
        value = flag_value(name, slot)
        if value is None:
            unmapped.append(name)
        elif value != pinned[slot]:
            pair = KernelPair(**{**pinned, slot: value})
            out.append(
                {
                    "arm": catalog.variant(base, pair).name,
                    "origin": "accepted",
                    "base": base,
                    "linear_backend": pair.linear_backend,
                    "moe_backend": pair.moe_backend,
                    "queued_by": candidate.arm,
                }
            )
    return out, unmapped
