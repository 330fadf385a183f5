"""Capacity: room on the GPUs and on the disk for the arm, and nobody else on the GPUs.

vLLM takes ``--gpu-memory-utilization`` (0.9 by default) of a card's total memory and refuses to start
when less than that is free, so memory held by another process — often invisible from inside a rented
container — turns into a failed launch minutes later. Disk is judged against the arm's weights (decimal
GB, as the recipes catalogue and the write-up quote them), which may still have to be downloaded.
"""

from __future__ import annotations

from typing import Any

from agents.protocol import GpuHolder, ProbeReport
from console.checks.probe_view import gpu_label, gpus, num
from console.checks.verdict import FAIL, OK, WARN, ArmContext, Verdict

CHECK = "capacity"
GB = 1_000_000_000
MIB = 1024 * 1024
VLLM_DEFAULT_UTILIZATION = 0.9
FOREIGN_USE_MIB = 1024.0
"""Memory in use with no process listed above this is someone else's (display stacks hold ~10-300 MiB)."""
DISK_HEADROOM_GB = 20.0
"""Room beyond the weights for compile caches, logs and the journal."""
DISK_LOW_GB = 20.0


def _gpu_rows(probe: ProbeReport) -> list[dict[str, Any]]:
    procs: dict[int, list[GpuHolder]] = {}
    for p in probe.get("processes") or []:
        if isinstance(p, dict) and isinstance(p.get("gpu"), int):
            procs.setdefault(p["gpu"], []).append(p)
    rows = []
    for g in gpus(probe):
        total, used = num(g.get("mem_total_mib")), num(g.get("mem_used_mib"))
        rows.append(
            {
                "gpu": g.get("index"),
                "total_mib": total,
                "used_mib": used,
                "free_mib": None if total is None or used is None else total - used,
                "processes": procs.get(g["index"], []) if isinstance(g.get("index"), int) else [],
            }
        )
    return rows


def _proc_text(p: GpuHolder) -> str:
    used = num(p.get("used_mib"))
    return f"pid {p.get('pid')} {p.get('name') or '?'}" + (f" {used:,.0f} MiB" if used is not None else "")


def check_capacity(probe: ProbeReport, arm: ArmContext | None = None) -> list[Verdict]:
    return _gpu_verdicts(probe, arm) + _disk_verdicts(probe, arm)


def _gpu_verdicts(probe: ProbeReport, arm: ArmContext | None) -> list[Verdict]:
    rows = _gpu_rows(probe)
    if not rows:
        return []
    wanted = set(arm.gpus) if arm and arm.gpus is not None else {r["gpu"] for r in rows}
    missing = sorted(wanted - {r["gpu"] for r in rows})
    if missing:
        return [_missing_gpus_verdict(rows, wanted, missing, arm)]
    out = _unreadable_verdicts(rows, wanted) + _occupancy_verdicts(rows, wanted)
    if arm and arm.weights_gb is not None:
        out += _weights_fit_verdicts(arm, arm.weights_gb, rows, wanted, warned=bool(out))
    if not out:
        out.append(_all_free_verdict(rows, wanted))
    return out


def _missing_gpus_verdict(
    rows: list[dict[str, Any]], wanted: set[int], missing: list[int], arm: ArmContext | None
) -> Verdict:
    return Verdict(
        CHECK,
        FAIL,
        f"arm {arm.name if arm else '?'} wants {gpu_label(missing)}, which this box "
        f"does not have ({len(rows)} GPUs)",
        {"gpus": rows, "wanted": sorted(wanted)},
    )


def _unreadable_verdicts(rows: list[dict[str, Any]], wanted: set[int]) -> list[Verdict]:
    unreadable = [r["gpu"] for r in rows if r["free_mib"] is None and r["gpu"] in wanted]
    if not unreadable:
        return []
    return [
        Verdict(
            CHECK,
            WARN,
            f"{gpu_label(unreadable)}: memory use not readable ([N/A]); free GPU memory unknown",
            {"gpus": rows},
        )
    ]


def _occupancy_verdicts(rows: list[dict[str, Any]], wanted: set[int]) -> list[Verdict]:
    """A warning per wanted GPU that someone else holds memory on, listed processes or not."""
    out = []
    for r in rows:
        if r["gpu"] not in wanted or r["free_mib"] is None:
            continue
        verdict = _occupancy_verdict(r)
        if verdict is not None:
            out.append(verdict)
    return out


def _occupancy_verdict(r: dict[str, Any]) -> Verdict | None:
    label = gpu_label([r["gpu"]])
    need_free = VLLM_DEFAULT_UTILIZATION * r["total_mib"]
    if r["processes"]:
        listed = "; ".join(_proc_text(p) for p in r["processes"])
        return Verdict(
            CHECK,
            WARN,
            f"{label}: {len(r['processes'])} other process(es) on the GPU ({listed}), "
            f"{r['free_mib']:,.0f} of {r['total_mib']:,.0f} MiB free; vLLM's default "
            f"--gpu-memory-utilization {VLLM_DEFAULT_UTILIZATION} needs {need_free:,.0f} MiB free "
            "at start-up: kill them or lower the utilization",
            {"gpu": r},
        )
    if r["used_mib"] > FOREIGN_USE_MIB:
        return Verdict(
            CHECK,
            WARN,
            f"{label}: {r['used_mib']:,.0f} MiB in use by processes not visible "
            "from here (another container or user?); "
            f"{r['free_mib']:,.0f} of {r['total_mib']:,.0f} MiB free",
            {"gpu": r},
        )
    return None


def _weights_fit_verdicts(
    arm: ArmContext, weights_gb: float, rows: list[dict[str, Any]], wanted: set[int], warned: bool
) -> list[Verdict]:
    """Fail when a wanted GPU has less free memory than its share of the arm's weights.

    When they fit and nothing was warned about (``warned``), this pass stands in for the all-free one.
    """
    shards = arm.shards
    per_gpu_mib = weights_gb * GB / shards / MIB
    short = [
        r for r in rows if r["gpu"] in wanted and r["free_mib"] is not None and r["free_mib"] < per_gpu_mib
    ]
    numbers = {
        "weights_gb": weights_gb,
        "shards": shards,
        "per_gpu_mib": round(per_gpu_mib),
        "gpus": [r for r in rows if r["gpu"] in wanted],
    }
    if short:
        worst_free = min(r["free_mib"] for r in short)
        return [
            Verdict(
                CHECK,
                FAIL,
                f"arm {arm.name}: {weights_gb:g} GB of weights split over {shards} GPU(s) need "
                f"{per_gpu_mib:,.0f} MiB per GPU before any KV cache; "
                f"{gpu_label([r['gpu'] for r in short])} ha{'s' if len(short) == 1 else 've'} "
                f"{worst_free:,.0f} MiB free; a model that does not fit one card is a different "
                "product (campaign rule 10)",
                numbers,
            )
        ]
    if warned:
        return []
    least = min(r["free_mib"] for r in rows if r["gpu"] in wanted)
    return [
        Verdict(
            CHECK,
            OK,
            f"arm {arm.name}: {per_gpu_mib:,.0f} MiB of weights per GPU (split over {shards}) "
            f"fit in {least:,.0f} MiB free on {gpu_label(sorted(wanted))}",
            numbers,
        )
    ]


def _all_free_verdict(rows: list[dict[str, Any]], wanted: set[int]) -> Verdict:
    least = min(r["free_mib"] for r in rows if r["gpu"] in wanted)
    return Verdict(
        CHECK,
        OK,
        f"{gpu_label(sorted(wanted))}: no other processes, at least {least:,.0f} MiB free per GPU",
        {"gpus": [r for r in rows if r["gpu"] in wanted]},
    )


def _disk_verdicts(probe: ProbeReport, arm: ArmContext | None) -> list[Verdict]:
    disk = probe.get("disk")
    free_bytes, total_bytes = (disk.get("free_bytes"), disk.get("total_bytes")) if disk else (None, None)
    free, total = num(free_bytes), num(total_bytes)
    path = (disk.get("path") if disk else None) or "?"
    numbers = {
        "path": path,
        "free_bytes": free_bytes,
        "total_bytes": total_bytes,
        "weights_gb": arm.weights_gb if arm else None,
        "headroom_gb": DISK_HEADROOM_GB,
    }
    if free is None:
        return [Verdict(CHECK, WARN, f"free disk on {path} not readable from the probe", numbers)]
    free_gb = free / GB
    of_total = f" of {total / GB:,.0f} GB" if total else ""
    if arm and arm.weights_gb is not None:
        need = arm.weights_gb
        if free_gb < need:
            return [
                Verdict(
                    CHECK,
                    FAIL,
                    f"disk {path}: {free_gb:,.1f} GB free{of_total}, but arm {arm.name}'s "
                    f"weights take {need:g} GB if they must be downloaded; free space or mount a "
                    "larger volume",
                    numbers,
                )
            ]
        if free_gb < need + DISK_HEADROOM_GB:
            return [
                Verdict(
                    CHECK,
                    WARN,
                    f"disk {path}: {free_gb:,.1f} GB free{of_total}; arm {arm.name}'s "
                    f"{need:g} GB of weights fit with less than {DISK_HEADROOM_GB:g} GB to spare for "
                    "compile caches and logs",
                    numbers,
                )
            ]
        return [
            Verdict(
                CHECK,
                OK,
                f"disk {path}: {free_gb:,.1f} GB free{of_total}, room for arm {arm.name}'s "
                f"{need:g} GB of weights",
                numbers,
            )
        ]
    if free_gb < DISK_LOW_GB:
        return [
            Verdict(
                CHECK,
                WARN,
                f"disk {path}: only {free_gb:,.1f} GB free{of_total}; most checkpoints will not fit",
                numbers,
            )
        ]
    return [Verdict(CHECK, OK, f"disk {path}: {free_gb:,.1f} GB free{of_total}", numbers)]
