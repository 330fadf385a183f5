"""A BoxSpec from what the store knows: the box row plus its latest probe (docs/contracts.md).

WHY from the probe and not from what the operator typed: the write-up's boxes were not what their
listings said (400 W caps, no NVLink). Layout and memory checks use the GPUs the agent measured. A box
never probed (every box imported from the write-up) still has its inventory's GPU summary ("4x RTX PRO 6000
... 96GB, 600 W"): the count and card memory read from it stand in for a probe, and say so.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING

from console.recipes.model import BoxSpec

if TYPE_CHECKING:  # the recipes engine stays stdlib-only: the extractor imports it inside the vLLM venv
    from agents.protocol import ProbeReport
    from console.store import Box

_COUNT = re.compile(r"^\s*(\d+)\s*x\s*([^,]+)")
_MEMORY = re.compile(r"(\d+(?:\.\d+)?)\s*GB\b", re.IGNORECASE)
LISTED_SHARE = 0.994
"""Cards report a little below the binary size of their listing: 97,887 of 98,304 MiB for a 96 GB RTX PRO 6000,
32,607 of 32,768 for a 32 GB RTX 5090 (tests/fixtures/gpus/). A listing's N GB is read as N GiB times this,
just under what either card reports, so a memory check on an inventory errs on the safe side."""


def inventory_gpus(summary: str | None) -> tuple[int, str, float | None] | None:
    """(count, card name, memory in MiB) from a GPU summary like "8x RTX 5090 32GB, 400 W"; None if unreadable."""
    m = _COUNT.match(summary or "")
    if m is None or int(m.group(1)) == 0:
        return None
    name = m.group(2).strip()
    memory = _MEMORY.search(name)
    return int(m.group(1)), name, float(memory.group(1)) * 1024 * LISTED_SHARE if memory else None


def box_spec(box: Box, probe: ProbeReport | None) -> BoxSpec:
    """The probe's GPUs; else the inventory's; else the box counts as having none (``campaign check`` probes it)."""
    probed: ProbeReport = probe or {}
    gpus = probed.get("gpus") or []
    spec = BoxSpec(name=box.name, gpu_count=0, serving_env=box.serving_env, model_root=box.model_root)
    if gpus:
        mems = [m for g in gpus if (m := g.get("mem_total_mib")) is not None]
        topology = probed.get("topology")
        return replace(
            spec,
            gpu_count=len(gpus),
            gpu_name=gpus[0].get("name"),
            gpu_mem_mib=min(mems) if mems else None,
            nvlink=bool(topology and topology.get("nvlink_all")) and len(gpus) > 1,
            gpus_from="probe",
        )
    listed = inventory_gpus(box.gpu_summary)
    if listed is None:
        return spec
    count, name, mem_mib = listed
    return replace(
        spec,
        gpu_count=count,
        gpu_name=name,
        gpu_mem_mib=mem_mib,
        gpus_from="inventory",
        inventory=box.gpu_summary,
    )
