"""Sweeps: walk a sweep list's candidate arms on one box, or feed them as one queue to several boxes; keep
every one that serves, record why the rest died.

    sweep, resumed = open_sweep(service, "tiny-cpu-test", ["local"], ["tiny"], [1, 4], bench_degenerate=False)
    await SweepRunner(service, sweep.id).run()     # resumable: run it again after any interruption
    sweep, _ = open_sweep(service, "fake-8", ["a", "b"])   # several boxes: arms side by side on their GPUs
    await SweepQueue(service, sweep.id).run()
"""

from console.service.sweep.plan import PlanError, accepted_candidates, candidates, materialize
from console.service.sweep.queue import SweepQueue
from console.service.sweep.runner import SweepRunner, open_sweep, runner_alive
from console.service.sweep.walk import SweepError, SweepOptions

__all__ = [
    "PlanError",
    "SweepError",
    "SweepOptions",
    "SweepQueue",
    "SweepRunner",
    "accepted_candidates",
    "candidates",
    "materialize",
    "open_sweep",
    "runner_alive",
]
