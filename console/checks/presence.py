"""Presence: every GPU the box listed before still answers.

A GPU that fell off the bus (Xid 79) or a driver removed by an upgrade leaves a box that looks healthy:
with no GPU tooling answering, the power, driver and topology checks have nothing to judge and would
pass it as a CPU box. So the GPU checks are read against the box's newest earlier probe that listed
GPUs (``GpusSeen``, chosen by ``console.checks.run``): GPUs it listed that no longer answer are a fail,
and GPU checks that could not look are not called "ok".
"""

from __future__ import annotations

from dataclasses import dataclass

from agents.protocol import ProbeGpu, ProbeReport
from console.checks.probe_view import gpus, no_gpu_tooling
from console.checks.verdict import FAIL, WARN, Verdict
from console.store.checks import gpu_summary
from console.timeutil import fmt_utc

GPU_CHECKS = ("power", "driver", "topology")
"""The checks that look at GPUs; the clock and the disk are judged whatever the GPUs do."""


def gpu_identity(g: ProbeGpu) -> str:
    """What names one card across probes: its UUID, else its PCI bus id (indexes renumber when one drops)."""
    return str(g.get("uuid") or g.get("pci_bus_id") or f"GPU{g.get('index')}")


@dataclass(frozen=True)
class GpusSeen:
    """The GPUs of the box's newest earlier probe that listed any."""

    probe_id: int
    t_ms: int
    summary: str
    identities: tuple[str, ...]

    @classmethod
    def of(cls, probe_id: int, probe: ProbeReport) -> GpusSeen:
        """From a stored probe that listed GPUs (``store.checks.last_probe_with_gpus`` returns no other)."""
        summary = gpu_summary(probe)
        if summary is None:
            raise ValueError(f"probe {probe_id} listed no GPU: there is nothing it saw to compare with")
        return cls(probe_id, int(probe["t_ms"]), summary, tuple(gpu_identity(g) for g in gpus(probe)))

    @property
    def where(self) -> str:
        return f"probe {self.probe_id} ({fmt_utc(self.t_ms)}) listed {self.summary}"


def judge_presence(probe: ProbeReport, seen: GpusSeen | None, verdicts: list[Verdict]) -> list[Verdict]:
    """The GPU checks' ``verdicts`` read against what the box listed before.

    No tooling at all where GPUs were listed: the driver check fails and power and topology say they
    could not look. Some listed GPUs missing: a topology fail naming them. Otherwise ``verdicts`` as given.
    """
    if seen is None:
        return verdicts
    answering = {gpu_identity(g) for g in gpus(probe)}
    missing = [i for i in seen.identities if i not in answering]
    if not missing:
        return verdicts
    if no_gpu_tooling(probe):
        gone = (
            f"no NVIDIA tooling answers on this box (no nvidia-ml-py, no nvidia-smi), yet {seen.where}: the "
            "driver or its tools are gone; run nvidia-smi on the box (a box that really has no GPU now: "
            "remove it and add it again)"
        )
        not_checked = "not checked: no GPU answers on a box that listed GPUs before (see driver)"
        numbers = {"seen_probe_id": seen.probe_id, "missing": missing}
        return [
            Verdict(
                check,
                FAIL if check == "driver" else WARN,
                gone if check == "driver" else not_checked,
                numbers,
            )
            for check in GPU_CHECKS
        ]
    reason = (
        f"{len(missing)} of {len(seen.identities)} GPUs no longer answer ({', '.join(missing)}); "
        f"{seen.where}: a GPU that fell off the bus (dmesg: Xid 79) or lost its driver; reboot the box or "
        "give it back"
    )
    last_topology = max(
        (i for i, v in enumerate(verdicts) if v.check == "topology"), default=len(verdicts) - 1
    )
    missing_verdict = Verdict("topology", FAIL, reason, {"seen_probe_id": seen.probe_id, "missing": missing})
    return [*verdicts[: last_topology + 1], missing_verdict, *verdicts[last_topology + 1 :]]
