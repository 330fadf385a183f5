"""Sweeps: walk a sweep list's candidate arms on one box, keep every one that serves, record why the rest died.

    sweep, resumed = open_sweep(service, "tiny-cpu-test", "local", ["tiny"], [1, 4], bench_degenerate=False)
    await SweepRunner(service, sweep.id).run()     # resumable: run it again after any interruption
"""

from console.sweep.plan import PlanError, accepted_candidates, candidates, materialize
from console.sweep.runner import (
    SweepError,
    SweepOptions,
    SweepRunner,
    open_sweep,
    runner_alive,
)

__all__ = [
    "PlanError",
    "SweepError",
    "SweepOptions",
    "SweepRunner",
    "accepted_candidates",
    "candidates",
    "materialize",
    "open_sweep",
    "runner_alive",
]
