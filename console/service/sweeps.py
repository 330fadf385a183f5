"""Sweep intents: walk a sweep list of candidate arms on a box, or feed it as one queue to several boxes,
resumably (the walk is ``console.service.sweep``)."""

from __future__ import annotations

from console.bounds import CONCURRENCY, GRACE_S, MAX_TOKENS, PORT, PROMPTS, ROW_ID, WAIT_S
from console.errors import InputError
from console.quality.suites import SUITES
from console.service.base import reaching
from console.service.sweep.queue import QueueIntents, SweepQueue
from console.service.sweep.runner import Progress, SweepRunner, open_sweep
from console.service.sweep.walk import MODES, SweepOptions
from console.store.sweeps import SweepRow


class SweepIntents(QueueIntents):
    """Sweeps launch, measure and kill (runs), and read the GPUs afresh around each side-by-side launch (checks)."""

    def open_sweep(
        self,
        list_name: str,
        boxes: str | list[str],
        shapes: list[str] | None = None,
        concurrency: list[int] | None = None,
        *,
        bench_degenerate: bool = False,
        new: bool = False,
    ) -> tuple[SweepRow, bool]:
        """The unfinished sweep of this list on these boxes (resumed: True), else a new one: one box walks each
        arm on every card of it, several share one queue (arms side by side, each on its own GPUs)."""
        for value in concurrency or ():
            CONCURRENCY.check(value, "--concurrency")
        return open_sweep(
            self,
            list_name,
            [boxes] if isinstance(boxes, str) else boxes,
            shapes,
            concurrency,
            bench_degenerate,
            new,
        )

    async def run_sweep(
        self, sweep_id: int, options: SweepOptions | None = None, progress: Progress | None = None
    ) -> SweepRow:
        """Walk every unfinished arm of the sweep; an interruption leaves it resumable. Options out of range
        are refused before the walk starts, not at the first arm that uses them."""
        ROW_ID.check(sweep_id, "sweep id")
        if options is not None:
            _check_options(options)
        if self.store.sweeps.get(sweep_id).layout == "packed":
            return await SweepQueue(self, sweep_id, options, progress).run()
        runner = SweepRunner(self, sweep_id, options, progress)
        with reaching(runner.sweep.box):
            return await runner.run()


def _check_options(options: SweepOptions) -> None:
    WAIT_S.check(options.ready_timeout_s, "--ready-timeout")
    WAIT_S.check(options.job_timeout_s, "job timeout")
    GRACE_S.check(options.kill_grace_s, "--kill-grace")
    if options.prompts is not None:
        PROMPTS.check(options.prompts, "--prompts")
    if options.tripwire_max_tokens is not None:
        MAX_TOKENS.check(options.tripwire_max_tokens, "--tripwire-max-tokens")
    if options.base_port is not None:
        PORT.check(options.base_port, "--base-port")
    if options.mode not in MODES:
        raise InputError(f"--mode {options.mode}: not a sweep mode", f"give one of {', '.join(MODES)}")
    if options.mode != "bench" and options.suite not in SUITES:
        raise InputError(f"--suite {options.suite}: no such suite", f"the suites are: {', '.join(SUITES)}")
    WAIT_S.check(options.request_timeout_s, "--request-timeout")
