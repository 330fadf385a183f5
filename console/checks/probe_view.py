"""Small readers over the agent's probe dict (docs/contracts.md) shared by the checks.

The probe crosses the wire as JSON from agents that may be older or newer than this console, so every
reader tolerates a missing key (None) instead of raising: a check then says what it could not see.
"""

from __future__ import annotations

from typing import Any

from agents.protocol import ProbeGpu, ProbeReport


def gpus(probe: ProbeReport) -> list[ProbeGpu]:
    return [g for g in probe.get("gpus") or [] if isinstance(g, dict)]


def num(value: Any) -> float | None:
    """A number from the probe, or None for anything missing or not numeric."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def gpu_label(indexes: list[int]) -> str:
    """``GPU0-3`` for a run, ``GPU0,2`` otherwise: short enough for one-line reasons."""
    idx = sorted(set(indexes))
    if not idx:
        return "no GPU"
    if len(idx) > 2 and idx == list(range(idx[0], idx[-1] + 1)):
        return f"GPU{idx[0]}-{idx[-1]}"
    return "GPU" + ",".join(str(i) for i in idx)


def watts(value: float) -> str:
    return f"{value:.0f} W"


def version_tuple(text: str) -> tuple[int, ...]:
    """``"580.65.06"`` -> (580, 65, 6). Dotted versions compare field by field, never as strings."""
    parts = text.strip().split(".")
    if not parts or not all(p.isdigit() for p in parts):
        raise ValueError(f"{text!r} is not a dotted numeric version")
    return tuple(int(p) for p in parts)


def no_gpu_tooling(probe: ProbeReport) -> bool:
    """The box has no NVIDIA tooling at all (e.g. the local CPU box): GPU checks have nothing to check."""
    return probe.get("source") is None and not gpus(probe)
