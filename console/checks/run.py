"""Running the checks on a box: get a probe, judge it, store both.

The pure checks need a probe; where it comes from is the service's business (``console.service``):
the local box runs the agent's probe as a process, an SSH box asks its agent, and ``--stored`` re-judges the
newest stored probe (offline, or with another arm). The console's clock is read just before asking and
travels with the request, which is what the clock check compares the box's clock with.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from agents.environ import allowed_env
from agents.protocol import PatchProbe, ProbeReport
from console.checks import ArmContext, GpusSeen, Verdict, VerdictName, evaluate, worst
from console.checks.serving_env import packages
from console.errors import InputError
from console.store import Box, Store
from console.store.checks import is_probe

ArmResolver = Callable[[Box, ProbeReport], ArmContext]
"""(box, probe) -> what the arm would ask of this box; the probe says how many GPUs of which kind."""

PROBE_TIMEOUT_S = 180.0
"""A probe runs nvidia-smi a few times and cuInit in the serving Python: seconds, not minutes."""


class CheckError(InputError):
    """The check could not run (no probe to judge, the probe failed); the message says how to fix it."""


@dataclass(frozen=True)
class CheckRun:
    box: str
    probe_id: int
    t_ms: int
    probe: ProbeReport
    arm: ArmContext | None
    verdicts: list[Verdict]

    @property
    def verdict(self) -> VerdictName:
        return worst(self.verdicts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "box": self.box,
            "probe_id": self.probe_id,
            "t_ms": self.t_ms,
            "verdict": self.verdict,
            "probe_t_ms": self.probe.get("t_ms"),
            "tz": self.probe.get("tz"),
            "arm": asdict(self.arm) if self.arm else None,
            "verdicts": [asdict(v) for v in self.verdicts],
            "probe_warnings": list(self.probe.get("warnings") or []),
        }


def judge(store: Store, box_name: str, probe: ProbeReport | None, arm: ArmResolver | None = None) -> CheckRun:
    """Judge ``probe`` (None: the newest stored probe) and store the probe and the verdicts."""
    box = store.boxes.get(box_name)
    if probe is None:
        stored = store.checks.latest_probe(box.name)
        if stored is None:
            raise CheckError(
                f"box {box.name} has no stored probe",
                f"run `campaign check {box.name}` without --stored to probe it",
            )
        probe, probe_id = stored.data, stored.id
    else:
        if not is_probe(probe):  # an untyped caller's answer
            raise CheckError(f"box {box.name}: the probe answered {type(probe).__name__}, not a probe object")
        probe_id = store.checks.add_probe(box.name, probe)  # the journal's copy of it may be stored already
    before = store.checks.last_probe_with_gpus(box.name, before_id=probe_id)
    seen = GpusSeen.of(before.id, before.data) if before else None
    context = arm(box, probe) if arm else None
    verdicts = evaluate(probe, context, seen, box.name)
    versions = packages(probe)
    if versions is not None:  # the engine stack is kept with the box (``campaign box list --json`` shows it)
        store.boxes.update(box.name, serving_versions=json.dumps(versions, sort_keys=True))
    t_ms = store.clock()
    store.checks.add_verdicts(box.name, probe_id, verdicts, t_ms)
    return CheckRun(box.name, probe_id, t_ms, probe, context, verdicts)


def local_probe(box: Box, console_now_ms: int, patches: list[PatchProbe] | None = None) -> ProbeReport:
    """The agent's probe run as a process on this machine (the ``local`` box), exactly as on a box;
    ``patches``: the engine patches to look for in its serving env."""
    argv = [sys.executable, "-m", "agents", "probe", "--json", "--console-t-ms", str(console_now_ms)]
    argv += ["--patches", json.dumps(patches or [])]
    python = serving_python(box)
    if python:
        argv += ["--serving-python", python]
    # The box allowlist (agents/environ.py: the console's API keys stay here), plus the loader path the
    # probe inspects for compatibility libraries.
    env = allowed_env() | {k: v for k, v in os.environ.items() if k == "LD_LIBRARY_PATH"}
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, check=False, env=env
        )
    except subprocess.TimeoutExpired as exc:
        raise CheckError(f"box {box.name}: the agent probe took longer than {PROBE_TIMEOUT_S:.0f} s") from exc
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip()[-600:]
        raise CheckError(f"box {box.name}: `{' '.join(argv[1:5])}` exited {proc.returncode}: {tail}")
    try:
        probe = json.loads(proc.stdout)
    except json.JSONDecodeError as exc:
        raise CheckError(
            f"box {box.name}: the agent probe printed something that is not JSON ({proc.stdout[:200]!r})"
        ) from exc
    if not is_probe(probe):
        raise CheckError(
            f"box {box.name}: the agent probe answered {type(probe).__name__}, not a probe object"
        )
    return probe


def serving_python(box: Box) -> str | None:
    """The Python whose cuInit(0) matters: the serving env's, where the box has one."""
    return f"{box.serving_env.rstrip('/')}/bin/python" if box.serving_env else None


def recipe_arm(arm_name: str, catalog: Any = None) -> ArmResolver:
    """An ArmResolver over the recipes catalogue: the arm's layout on this box and its weights' size."""
    from console.recipes import ResolveError, box_spec, load_catalog, resolve
    from console.recipes.multinode import node_gpus, weight_shards
    from console.recipes.resolve import effective_arm, get_arm

    cat = catalog if catalog is not None else load_catalog()
    get_arm(cat, arm_name)  # an unknown arm is refused now, before a probe that can take minutes

    def resolver(box: Box, probe: ProbeReport) -> ArmContext:
        a, profile = effective_arm(cat, arm_name)
        spec = box_spec(box, probe)
        if a.nodes > 1:  # one node of a multi-box arm: its share of the cards (console/recipes/multinode.py)
            used = list(range(min(node_gpus(a), spec.gpu_count)))
        else:
            try:
                resolved = resolve(cat, a, spec)
            except ResolveError as exc:
                raise CheckError(f"arm {arm_name} on box {box.name}: {exc}") from exc
            used = sorted(g for r in resolved.replicas for g in r.gpus)
        patches, requires_env = cat.serving_needs(a)
        return ArmContext(
            name=a.name,
            tensor_parallel=a.tensor_parallel,
            weights_gb=profile.weights_gb,
            gpus=tuple(used) if used else None,
            weight_shards=weight_shards(a),
            patches=patches,
            requires_env=requires_env,
            attention_backend=cat.attention_backend(a),
        )

    return resolver
