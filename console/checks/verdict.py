"""What every check returns: a verdict with its one-line reason and the figures behind it.

A verdict is stored per box and per probe (``check_verdicts``) and shown beside the box everywhere, so
the reason must stand alone: what was measured, against what, and what it costs or how to fix it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from console.recipes.model import PatchNeed
from console.store.checks import VerdictName as VerdictName  # the store keeps the words; checks name them

OK: Final = "ok"
WARN: Final = "warn"
FAIL: Final = "fail"
SEVERITY: dict[VerdictName, int] = {OK: 0, WARN: 1, FAIL: 2}


@dataclass(frozen=True)
class Verdict:
    check: str  # power, driver, topology, clock, capacity
    verdict: VerdictName
    reason: str
    numbers: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.verdict not in SEVERITY:
            raise ValueError(f"verdict {self.verdict!r} for check {self.check!r}: expected ok, warn or fail")


@dataclass(frozen=True)
class ArmContext:
    """What an arm would ask of the box; checks that depend on the arm read it from here.

    ``weights_gb`` comes from the recipes catalogue (decimal GB, as the write-up quotes sizes);
    ``gpus`` are the GPU indexes the arm's replicas occupy (None: all of them); ``weight_shards`` is how
    many GPUs one server splits its weights over (tensor parallel, times data parallel when experts are
    sharded), None meaning the tensor-parallel size. Dense layers are replicated under expert
    parallelism, so weights / shards is a lower bound of what a GPU holds: a ``fail`` on it is certain.
    """

    name: str
    tensor_parallel: int = 1
    weights_gb: float | None = None
    gpus: tuple[int, ...] | None = None
    weight_shards: int | None = None
    patches: tuple[PatchNeed, ...] = ()
    """Engine patches the serving env must carry (console/checks/serving_env.py refuses an env without them)."""
    requires_env: tuple[tuple[str, str], ...] = ()
    """(package, version requirement) pairs the serving env must meet, e.g. ("flashinfer-python", ">0.6.18")."""
    attention_backend: str | None = None
    """The backend the arm's ``--attention-backend`` names; the env's vLLM must offer it."""

    @property
    def shards(self) -> int:
        return max(self.weight_shards or self.tensor_parallel, 1)


def worst(verdicts: list[Verdict]) -> VerdictName:
    """The most severe verdict of a set; an empty set checked nothing and is not a pass."""
    if not verdicts:
        raise ValueError("no verdicts: nothing was checked")
    return max((v.verdict for v in verdicts), key=SEVERITY.__getitem__)
