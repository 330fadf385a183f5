"""Preflight checks of a box: power limit, driver and CUDA, topology, clock, capacity.

Each check is a pure function of the agent's probe (docs/contracts.md) and, where the arm matters, an
``ArmContext``: no I/O, so every verdict path is tested from probe dicts and the same code judges a
fresh probe, a stored one, or one replayed offline. ``console.checks.run`` adds the I/O around them.
"""

from __future__ import annotations

from agents.protocol import ProbeReport
from console.checks.capacity import check_capacity
from console.checks.clock import check_clock
from console.checks.driver_cuda import check_driver_cuda
from console.checks.power import check_power
from console.checks.presence import GpusSeen, judge_presence
from console.checks.serving_env import check_arm_needs, check_kernel_binaries
from console.checks.topology import check_topology
from console.checks.tripwire_client import check_tripwire_client
from console.checks.verdict import FAIL, OK, WARN, ArmContext, Verdict, VerdictName, worst
from console.store.checks import as_probe

CHECKS = ("power", "driver", "topology", "clock", "capacity", "serving_env", "tripwire_client")


def evaluate(
    probe: ProbeReport, arm: ArmContext | None = None, seen: GpusSeen | None = None, box: str | None = None
) -> list[Verdict]:
    """Every check, in a fixed order, on one probe; ``seen``: the GPUs the box listed before, which must
    still answer (console/checks/presence.py); ``box``: its name, for the fix a one-line reason names."""
    probe = as_probe(probe)  # an untyped caller's list or text is refused here, not deep in a check
    gpu_checks = [*check_power(probe), *check_driver_cuda(probe), *check_topology(probe, arm)]
    return [
        *judge_presence(probe, seen, gpu_checks),
        *check_clock(probe),
        *check_capacity(probe, arm),
        *check_kernel_binaries(probe, box),
        *check_arm_needs(probe, arm, box),
        *check_tripwire_client(probe, box),
    ]


__all__ = [
    "CHECKS",
    "FAIL",
    "OK",
    "WARN",
    "ArmContext",
    "GpusSeen",
    "Verdict",
    "VerdictName",
    "evaluate",
    "worst",
]
