"""Topology: NVLink between all GPUs, or PCIe only — and what that means for the arm.

Campaign rules 4 and 10: without NVLink, replicas exchange nothing and beat one tensor-parallel server by
several times whenever the model fits one card; tensor parallelism over PCIe cost gpt-oss-120b 8x
throughput and turned a 0.7 s time-to-first-token into 324 s. So a PCIe-only box is fine for replicas
and a warning for a tensor-parallel arm.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from agents.protocol import ProbeReport
from console.checks.probe_view import gpus, no_gpu_tooling
from console.checks.verdict import OK, WARN, ArmContext, Verdict

CHECK = "topology"

PCIE_KINDS = {
    "PIX": "one PCIe bridge",
    "PXB": "several PCIe bridges",
    "PHB": "a PCIe host bridge",
    "NODE": "PCIe host bridges within a NUMA node",
    "SYS": "the inter-socket link between NUMA nodes",
}

SEED_TP_WARNING = (
    "the write-up measured four replicas beating one tensor-parallel server by several times whenever the "
    "model fits one card, and TP over PCIe costing 8x throughput (gpt-oss-120b, TTFT 0.7 s -> 324 s); "
    "run one replica per card if the weights fit, and decide the memory ceiling before the card count"
)


def _describe(links: dict[str, str]) -> str:
    kinds = Counter(v for v in links.values())
    parts = []
    for kind, n in sorted(kinds.items()):
        what = "NVLink" if kind.startswith("NV") else PCIE_KINDS.get(kind, "an unknown link")
        parts.append(f"{n}x {kind} ({what})")
    return ", ".join(parts)


def check_topology(probe: ProbeReport, arm: ArmContext | None = None) -> list[Verdict]:
    n = len(gpus(probe))
    if no_gpu_tooling(probe) or n <= 1:
        return [
            Verdict(
                CHECK, OK, f"{n} GPU{'s' if n != 1 else ''}: no links between GPUs to check", {"gpu_count": n}
            )
        ]
    topo = probe.get("topology")
    links: dict[str, str] = {str(k): str(v) for k, v in ((topo.get("links") if topo else None) or {}).items()}
    tp = arm.tensor_parallel if arm else 1
    numbers: dict[str, Any] = {
        "gpu_count": n,
        "links": links,
        "nvlink_all": topo.get("nvlink_all") if topo else None,
        "tensor_parallel": tp,
        "arm": arm.name if arm else None,
    }
    expected_pairs = n * (n - 1) // 2
    if len(links) < expected_pairs:
        return [
            Verdict(
                CHECK,
                WARN,
                f"topology incomplete: {len(links)} of {expected_pairs} GPU pairs read "
                "(`nvidia-smi topo -m` failed or was cut short); NVLink unknown",
                numbers,
            )
        ]
    nvlink = [k for k, v in links.items() if v.startswith("NV")]
    if len(nvlink) == len(links):
        return [Verdict(CHECK, OK, f"NVLink between all {n} GPUs ({_describe(links)})", numbers)]
    layout = "PCIe only" if not nvlink else f"NVLink on {len(nvlink)} of {len(links)} pairs, PCIe elsewhere"
    text = f"{layout} between {n} GPUs: {_describe(links)}"
    if "SYS" in links.values():
        text += "; some pairs cross the inter-socket link (dual-socket host: slower all-reduce)"
    if tp > 1:
        return [
            Verdict(
                CHECK,
                WARN,
                f"arm {arm.name if arm else '?'} is tensor-parallel ({tp} GPUs) on {text}; {SEED_TP_WARNING}",
                numbers,
            )
        ]
    return [
        Verdict(
            CHECK,
            OK,
            f"{text}; fine for independent replicas, a tensor-parallel arm here gets a warning",
            numbers,
        )
    ]
