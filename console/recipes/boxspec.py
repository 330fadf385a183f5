"""A BoxSpec from what the store knows: the box row plus its latest probe (docs/contracts.md).

WHY from the probe and not from what the operator typed: the seed's boxes were not what their
listings said (400 W caps, no NVLink). Layout and memory checks use the GPUs the agent measured.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from console.recipes.model import BoxSpec

if TYPE_CHECKING:  # the recipes engine stays stdlib-only: the extractor imports it inside the vLLM venv
    from console.store import Box


def box_spec(box: Box, probe: dict[str, Any] | None) -> BoxSpec:
    """Without a probe the box counts as having no GPUs (``campaign check`` probes it)."""
    gpus = (probe or {}).get("gpus") or []
    mems = [g["mem_total_mib"] for g in gpus if g.get("mem_total_mib") is not None]
    topology = (probe or {}).get("topology") or {}
    return BoxSpec(
        name=box.name,
        gpu_count=len(gpus),
        gpu_name=gpus[0].get("name") if gpus else None,
        gpu_mem_mib=min(mems) if mems else None,
        nvlink=bool(topology.get("nvlink_all")) and len(gpus) > 1,
        serving_env=box.serving_env,
        model_root=box.model_root,
    )
