"""Lint rules: the campaign write-up's ten rules (docs/campaign.md) as checks with stable ids. Errors block a
launch; warnings show.

Each rule is a small function over the effective arm (profile defaults applied), its profile, the
server flags resolve would pass, and optionally the box. The one-line reasons cite the write-up's rule
(as ``campaign rule N``) so an operator knows what the rule saves them from, not just that it fired.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from math import ceil
from typing import Any

from console.recipes.model import SPECULATIVE_FLAG, Arm, BoxSpec, Catalog, Finding, MoeEvidence, Profile
from console.recipes.multinode import node_gpus, weight_shards
from console.recipes.resolve import ResolveError, effective_arm, gpu_groups, server_args
from console.recipes.vllm_flags import known_flags

W4A4_LINEAR = ("b12x", "flashinfer_b12x")
FIT_FRACTION = 0.9
"""vLLM's default gpu_memory_utilization: the share of a card weights and KV cache may use."""


def node_overflow(weights_gb: float, box: BoxSpec, utilisation: float | None = None) -> str | None:
    """Why ``weights_gb`` fits no layout on ``box`` (more than every card of it can hold), in words; None when
    some layout might. The cards read as their listed size ('4 x 96 GB': a card reports a little below it)."""
    if box.gpu_count == 0 or box.gpu_mem_gb is None:
        return None
    usable = box.gpu_count * box.gpu_mem_gb * (utilisation or FIT_FRACTION)
    if weights_gb <= usable:
        return None
    return (
        f"{weights_gb:g} GB of weights does not fit {box.gpu_count} x {ceil(box.gpu_mem_gb)} GB "
        f"({usable:.0f} GB usable on all of {box.name}): it overflows the node, whatever the layout"
    )


RULES = {
    "R1-nvfp4-linear-backend": "error",
    "R2-compressed-tensors-nvfp4": "warn",
    "R3-moe-backend-unswept": "error",  # a warning on MoE models whose experts are not NVFP4
    "R4-tp-without-nvlink": "warn",
    "R5-tp-flashinfer-autotune": "error",
    "R6-arch-flags": "error",
    "R7-reasoning-parser": "error",
    "R8-vllm-flag": "error",
    "R9-vendor-profile": "warn",
    "R10-fits-memory": "error",
    "R11-drafter-baseline": "error",
}


@dataclass(frozen=True)
class _Ctx:
    catalog: Catalog
    arm: Arm
    profile: Profile
    args: dict[str, tuple[str, ...]]
    box: BoxSpec | None
    evidence: MoeEvidence | None
    """What the store's sweeps measured; None: linted without a state.db (``campaign recipe lint``)."""
    sweep: str | None
    """The sweep this lint is for (it launches the arm to measure it); None: a launch by hand or a lint."""
    boxes: tuple[BoxSpec, ...] = ()
    """Every box a multi-box arm is linted on, the head first (``box`` is the head); () for one box."""

    def _at(
        self,
        rule: str,
        record: Arm | Profile,
        section: str,
        key: str | tuple[str, ...],
        reason: str,
        severity: str | None,
    ) -> Finding:
        path = (key,) if isinstance(key, str) else key
        return Finding(
            rule_id=rule,
            severity=severity or RULES[rule],
            arm=self.arm.name,
            reason=reason,
            file=record.origin.file,
            key=".".join((section, record.name, *path)),
            line=record.line_of(*path),
            expected=rule in self.arm.expected_findings,
        )

    def at_arm(
        self, rule: str, key: str | tuple[str, ...], reason: str, severity: str | None = None
    ) -> Finding:
        return self._at(rule, self.arm, "arms", key, reason, severity)

    def at_profile(
        self, rule: str, key: str | tuple[str, ...], reason: str, severity: str | None = None
    ) -> Finding:
        return self._at(rule, self.profile, "profiles", key, reason, severity)


Rule = Callable[[_Ctx], Iterator[Finding]]


def r1_nvfp4_linear_backend(c: _Ctx) -> Iterator[Finding]:
    p = c.profile
    if (
        p.quantization == "nvfp4"
        and p.quant_scope == "all"
        and p.quantizer != "compressed-tensors"
        and c.arm.linear_backend not in W4A4_LINEAR
    ):
        got = c.arm.linear_backend or "auto (unset)"
        yield c.at_arm(
            "R1-nvfp4-linear-backend",
            "linear_backend",
            f"NVFP4 checkpoint with linear_backend {got}: auto picks a W4A16 dequant kernel 47% below FP8; "
            "force b12x or flashinfer_b12x (campaign rule 1)",
        )


def r2_compressed_tensors(c: _Ctx) -> Iterator[Finding]:
    p = c.profile
    if p.quantization == "nvfp4" and p.quantizer == "compressed-tensors":
        yield c.at_profile(
            "R2-compressed-tensors-nvfp4",
            "quantizer",
            f"{p.publisher or 'this'} compressed-tensors NVFP4 build has FP8 attention the b12x kernel refuses: "
            "2,048 out tok/s vs 5,161 for ModelOpt; prefer a ModelOpt checkpoint (campaign rule 2)",
        )


def r3_moe_unswept(c: _Ctx) -> Iterator[Finding]:
    """A pinned MoE backend needs a sweep that measured it: one whose engine served with it or named it as
    accepted. A sweep listing the arm is not enough until it ran; the sweep's own launch is the measurement."""
    backend, profile = c.arm.moe_backend, c.profile
    if not profile.moe or not backend or backend == "auto":
        return
    covering = [s.name for s in c.catalog.sweeps_covering(c.arm)]
    if c.sweep in covering:
        return
    if c.evidence is not None and c.evidence.measured(profile.name, backend):
        return
    nvfp4 = profile.quantization == "nvfp4"
    if c.evidence is None:
        why = "and lint had no state.db to look for a sweep that measured it (a launch looks)"
    elif backend in c.evidence.refused.get(profile.name, ()):
        why = "and a sweep in this state.db saw the engine refuse it"
    else:
        why = "and no sweep in this state.db served it or heard the engine accept it"
    todo = (
        f"run the sweep that lists it (`campaign sweep run {covering[0]} --box BOX`)"
        if covering
        else "add the arm to a sweep and run it"
    )
    what = "NVFP4 experts, which refuse the wrong backend outright" if nvfp4 else "a MoE model"
    yield c.at_arm(
        "R3-moe-backend-unswept",
        "moe_backend",
        f"MoE backend {backend!r} pinned on {profile.name} ({what}) {why}: a rejected backend killed eleven "
        f"arms in one night; {todo} (campaign rule 3)",
        severity=None if nvfp4 else "warn",
    )


def _basis(box: BoxSpec) -> str:
    """The end of a box rule's reason: where the box's GPU figures came from."""
    return f"; GPUs from {box.gpus_basis}" if box.gpus_basis else ""


def _fits_one_card(c: _Ctx) -> bool | None:
    box, weights = c.box, c.profile.weights_gb
    if box is None or box.gpu_mem_gb is None or weights is None:
        return None
    return weights <= box.gpu_mem_gb * (c.arm.gpu_memory_utilization or FIT_FRACTION)


def r4_tp_without_nvlink(c: _Ctx) -> Iterator[Finding]:
    if c.box and c.arm.tensor_parallel > 1 and not c.box.nvlink and _fits_one_card(c):
        yield c.at_arm(
            "R4-tp-without-nvlink",
            "tensor_parallel",
            f"TP{c.arm.tensor_parallel} on {c.box.name} ({c.box.nvlink_words}) for {c.profile.weights_gb:g} GB that "
            f"fits one {c.box.gpu_mem_gb:.0f} GB card: replicas win by several times, TP over PCIe cost 8x (campaign "
            f"rules 4, 10){_basis(c.box)}",
        )


def r5_tp_autotune(c: _Ctx) -> Iterator[Finding]:
    if c.arm.tensor_parallel > 1 and "--no-enable-flashinfer-autotune" not in c.args:
        yield c.at_arm(
            "R5-tp-flashinfer-autotune",
            "flags",
            f"TP{c.arm.tensor_parallel} launch without --no-enable-flashinfer-autotune: ranks with and without a "
            "cached autotune result desynchronise and the server hangs forever (campaign rule 5)",
        )


@dataclass(frozen=True)
class ArchRequirement:
    key: tuple[str, ...]
    ok: Callable[[Arm], bool]
    reason: str


# Campaign rule 6: per-architecture settings that are not optional.
ARCH_REQUIREMENTS: dict[str, tuple[ArchRequirement, ...]] = {
    "qwen4exp": (
        ArchRequirement(
            ("kv_cache_dtype",),
            lambda a: not (a.kv_cache_dtype or "").startswith("fp8"),
            "Qwen3.8-Flash-Next rejects an fp8 KV cache: Qwen4Exp QSA needs a BF16 main KV cache (campaign rule 6)",
        ),
    ),
    "minimax_m3": (
        ArchRequirement(
            ("enforce_eager",),
            lambda a: bool(a.enforce_eager),
            "MiniMax-M3 needs enforce_eager on sm_120: KeyError '/psm_...' is a worker segfault (campaign rule 6)",
        ),
        ArchRequirement(
            ("block_size",),
            lambda a: a.block_size == 128,
            "MiniMax-M3 needs block_size 128 (campaign rule 6)",
        ),
    ),
    "inkling": (
        ArchRequirement(
            ("enforce_eager",),
            lambda a: bool(a.enforce_eager),
            "Inkling needs enforce_eager on sm_120: KeyError '/psm_...' is a worker segfault (campaign rule 6)",
        ),
    ),
    "glm5_next": (
        ArchRequirement(
            ("block_size",),
            lambda a: a.block_size == 1024,
            "GLM-5.3-Flash needs block_size 1024 for the DeepGEMM paged-MQA indexer on sm_120 (campaign rule 6)",
        ),
    ),
    "deepseek_v4": (
        ArchRequirement(
            ("env", "VLLM_DSV4_OPROJ_SM120_FALLBACK"),
            lambda a: a.env.get("VLLM_DSV4_OPROJ_SM120_FALLBACK") == "1",
            "DeepSeek-V4-Flash needs VLLM_DSV4_OPROJ_SM120_FALLBACK=1: fp8_einsum has no sm_120 path and asserts "
            "during memory profiling for every MoE backend (campaign rule 6)",
        ),
    ),
}


def r6_arch_flags(c: _Ctx) -> Iterator[Finding]:
    merged = replace(c.arm, env={**c.profile.env, **c.arm.env})
    for req in ARCH_REQUIREMENTS.get(c.profile.architecture, ()):
        if not req.ok(merged):
            yield c.at_arm("R6-arch-flags", req.key, req.reason)


def r7_reasoning_parser(c: _Ctx) -> Iterator[Finding]:
    if c.profile.reasoning and not c.profile.serving.reasoning_parser:
        yield c.at_profile(
            "R7-reasoning-parser",
            "serving",
            "reasoning model served without a reasoning parser: the chain-of-thought is graded as the answer "
            "(0.558 vs 0.732 on Qwen3.8-27B; campaign rule 9)",
        )


def r8_vllm_flags(c: _Ctx) -> Iterator[Finding]:
    vf = known_flags()
    for flag, values in c.args.items():
        problem = vf.problem(flag, values[0] if values else None)
        if problem is None:
            continue
        reason = f"{problem}; vLLM would refuse to start"
        if flag in c.arm.flags:
            yield c.at_arm("R8-vllm-flag", ("flags", flag), reason)
        elif flag in c.profile.flags:
            yield c.at_profile("R8-vllm-flag", ("flags", flag), reason)
        else:  # parser names never get here: the loader refuses a parser the pinned vLLM does not register
            yield c.at_arm("R8-vllm-flag", "flags", reason)


def r9_vendor_profile(c: _Ctx) -> Iterator[Finding]:
    serving = c.profile.serving
    if not serving.sampling:
        yield c.at_profile(
            "R9-vendor-profile",
            "serving",
            "no vendor sampling recipe: the wrong sampling costs more than any kernel (campaign rule 9)",
        )
    if c.profile.reasoning and serving.thinking_default is None:
        yield c.at_profile(
            "R9-vendor-profile",
            "serving",
            "thinking_default not stated: enable_thinking defaults differ per model, so tables compare "
            "thinking with not thinking (campaign rule 9)",
        )


def _weights_unknown(c: _Ctx) -> Finding:
    return c.at_profile(
        "R10-fits-memory",
        "weights_gb",
        "weight size unknown: cannot check the layout fits the box; state weights_gb (campaign rule 10)",
        severity="warn",
    )


def _r10_nodes(c: _Ctx) -> Iterator[Finding]:
    """R10 for an arm spanning ``nodes`` boxes: every box holds its node's cards, and the weights' share per
    card (over every card of every box, console/recipes/multinode.py) fits the smallest card of them."""
    a, weights = c.arm, c.profile.weights_gb
    boxes = c.boxes or ((c.box,) if c.box else ())
    if not boxes or all(b.gpu_count == 0 for b in boxes):
        return
    if len(boxes) != a.nodes:  # linted on fewer boxes: refused where they could not hold it anyway
        b = boxes[0]
        if weights is None or b.gpu_mem_gb is None:
            return
        budget = b.gpu_mem_gb * (a.gpu_memory_utilization or FIT_FRACTION)
        cards = sum(x.gpu_count for x in boxes)
        if weights / cards > budget:
            yield c.at_arm(
                "R10-fits-memory",
                "nodes",
                f"arm {a.name} spans {a.nodes} boxes and was linted on {len(boxes)} ({', '.join(x.name for x in boxes)}): "
                f"{weights:g} GB over their {cards} cards is {weights / cards:.1f} GB per card, over the "
                f"{budget:.1f} GB usable on {b.name}'s {b.gpu_mem_gb:.0f} GB cards; lint it on its {a.nodes} boxes "
                f"(--box B1 --box B2 ...) (campaign rule 10){_basis(b)}",
            )
        return
    need = node_gpus(a)
    for b in boxes:
        if b.gpu_count < need:
            yield c.at_arm(
                "R10-fits-memory",
                "nodes",
                f"arm {a.name} needs {need} GPUs on each of its {a.nodes} boxes; {b.name} has {b.gpu_count} "
                f"(campaign rule 10){_basis(b)}",
            )
            return
    if weights is None:
        yield _weights_unknown(c)
        return
    mems = [(b.gpu_mem_gb, b) for b in boxes if b.gpu_mem_gb is not None]
    if len(mems) != len(boxes):
        return
    smallest_gb, smallest = min(mems, key=lambda m: m[0])
    shards = weight_shards(a)
    per_card = weights / shards
    budget = smallest_gb * (a.gpu_memory_utilization or FIT_FRACTION)
    if per_card > budget:
        yield c.at_arm(
            "R10-fits-memory",
            "nodes",
            f"{weights:g} GB of weights over {shards} cards on {a.nodes} boxes is {per_card:.1f} GB per card, "
            f"over the {budget:.1f} GB usable on {smallest.name}'s {smallest_gb:.0f} GB cards; decide the memory "
            f"ceiling before the card count (campaign rule 10){_basis(smallest)}",
        )


def r10_fits_memory(c: _Ctx) -> Iterator[Finding]:
    if c.arm.nodes > 1:
        yield from _r10_nodes(c)
        return
    box = c.box
    if box is None or box.gpu_count == 0:
        return
    try:
        gpu_groups(c.arm, box, None)
    except ResolveError as exc:
        yield c.at_arm("R10-fits-memory", "tensor_parallel", f"{exc} (campaign rule 10){_basis(box)}")
        return
    weights = c.profile.weights_gb
    if weights is None:
        yield _weights_unknown(c)
        return
    if box.gpu_mem_gb is None:
        return
    overflow = node_overflow(weights, box, c.arm.gpu_memory_utilization)
    if overflow:
        yield c.at_arm(
            "R10-fits-memory",
            "tensor_parallel",
            f"{overflow}; serve it across several boxes (campaign rule 10){_basis(box)}",
        )
        return
    shards = c.arm.tensor_parallel * (c.arm.data_parallel if c.arm.expert_parallel else 1)
    per_card = weights / shards
    budget = box.gpu_mem_gb * (c.arm.gpu_memory_utilization or FIT_FRACTION)
    if per_card > budget:
        yield c.at_arm(
            "R10-fits-memory",
            "tensor_parallel",
            f"{weights:g} GB of weights over {shards} card(s) is {per_card:.1f} GB per card, over the "
            f"{budget:.1f} GB usable on {box.name}'s {box.gpu_mem_gb:.0f} GB cards; decide the memory ceiling "
            f"before the card count (campaign rule 10){_basis(box)}",
        )


def r11_drafter_baseline(c: _Ctx) -> Iterator[Finding]:
    """A drafter arm names its baseline: the same arm, same model, without the speculative config. The
    write-up's drafters lost 35-50% output tok/s at saturation while cutting TTFT 2-5x; neither half is
    readable without the control beside it, and a control differing in anything else measures that too."""
    spec, base = c.arm.speculative_config, c.arm.baseline
    fix = "name its non-speculative control arm as `baseline`: the same arm without the speculative config"
    if spec is None:
        if base is not None:
            yield c.at_arm(
                "R11-drafter-baseline",
                "baseline",
                f"arm {c.arm.name} sets a baseline but no {SPECULATIVE_FLAG}: only a drafter arm has one; "
                "remove the key",
            )
        return
    if base is None:
        yield c.at_arm(
            "R11-drafter-baseline",
            ("flags", SPECULATIVE_FLAG),
            f"drafter arm {c.arm.name} has no baseline: {fix}",
        )
        return
    b, b_profile = effective_arm(c.catalog, base)
    if b.speculative_config is not None:
        yield c.at_arm("R11-drafter-baseline", "baseline", f"baseline {base} is itself a drafter arm: {fix}")
        return
    if b_profile.checkpoint != c.profile.checkpoint:
        yield c.at_arm(
            "R11-drafter-baseline",
            "baseline",
            f"baseline {base} serves {b_profile.checkpoint}, not {c.profile.checkpoint}: {fix}",
        )
        return
    own = {k: v for k, v in c.args.items() if k != SPECULATIVE_FLAG}
    theirs = dict(server_args(b, b_profile))
    differ = sorted(k for k in own.keys() | theirs.keys() if own.get(k) != theirs.get(k))
    if b.env != c.arm.env:
        differ.append("env")
    if b.device != c.arm.device:
        differ.append("device")
    if differ:
        yield c.at_arm(
            "R11-drafter-baseline",
            "baseline",
            f"baseline {base} differs from {c.arm.name} in {', '.join(differ)}, not only {SPECULATIVE_FLAG}: "
            "the comparison would measure that too; make the arms differ only in the speculative config "
            "(campaign rule 11)",
        )


RULE_FUNCS: tuple[Rule, ...] = (
    r1_nvfp4_linear_backend,
    r2_compressed_tensors,
    r3_moe_unswept,
    r4_tp_without_nvlink,
    r5_tp_autotune,
    r6_arch_flags,
    r7_reasoning_parser,
    r8_vllm_flags,
    r9_vendor_profile,
    r10_fits_memory,
    r11_drafter_baseline,
)


def lint(
    catalog: Catalog,
    arm: str | Arm,
    box: BoxSpec | None = None,
    evidence: MoeEvidence | None = None,
    sweep: str | None = None,
    boxes: Sequence[BoxSpec] = (),
) -> list[Finding]:
    """Every finding for one arm (on ``box`` if given: memory fit and NVLink need a box).

    ``boxes``: the boxes a multi-box arm spans, the head first (``box`` defaults to it); R10 judges its
    memory over all of them.

    ``evidence`` is what the store's sweeps measured of MoE backends (rule 3); ``sweep`` names the sweep
    launching the arm to measure it. Both come from the caller: lint never reads the store.
    """
    a, profile = effective_arm(catalog, arm)
    args: dict[str, Any] = dict(server_args(a, profile))
    ctx = _Ctx(
        catalog=catalog,
        arm=a,
        profile=profile,
        args=args,
        box=box or (boxes[0] if boxes else None),
        evidence=evidence,
        sweep=sweep,
        boxes=tuple(boxes),
    )
    return [f for rule in RULE_FUNCS for f in rule(ctx)]


def lint_catalog(
    catalog: Catalog,
    box: BoxSpec | None = None,
    evidence: MoeEvidence | None = None,
    boxes: Sequence[BoxSpec] = (),
) -> list[Finding]:
    """Every arm on ``box``; a multi-box arm over ``boxes`` where given (the head first), else on ``box``."""
    return [
        f
        for name in sorted(catalog.arms)
        for f in lint(catalog, name, box, evidence, boxes=boxes if catalog.arms[name].nodes > 1 else ())
    ]
