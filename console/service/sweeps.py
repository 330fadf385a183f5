"""Sweep intents: walk a sweep list of candidate arms on a box, resumably (the walk is ``console.sweep``)."""

from __future__ import annotations

from console.service.base import reaching
from console.service.runs import RunIntents
from console.store.sweeps import SweepRow
from console.sweep.runner import Progress, SweepOptions, SweepRunner, open_sweep


class SweepIntents(RunIntents):
    def open_sweep(self, list_name: str, box: str, shapes: list[str] | None = None,
                   concurrency: list[int] | None = None, *, bench_degenerate: bool = False,
                   new: bool = False) -> tuple[SweepRow, bool]:  # fmt: skip
        """The unfinished sweep of this list on this box (resumed: True), else a new one."""
        return open_sweep(self, list_name, box, shapes, concurrency, bench_degenerate, new)

    async def run_sweep(self, sweep_id: int, options: SweepOptions | None = None,
                        progress: Progress | None = None) -> SweepRow:  # fmt: skip
        """Walk every unfinished arm of the sweep; an interruption leaves it resumable."""
        runner = SweepRunner(self, sweep_id, options, progress)
        with reaching(runner.sweep.box):
            return await runner.run()
