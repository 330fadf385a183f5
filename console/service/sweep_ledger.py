"""The sweep walker's narrow writer: what one sweep's walk may record, and nothing else of the store.

``console.service.sweep.walk.ArmWalk`` records every step of an attempt as it happens (claimed, launched, the GPU
memory around it, its benches, how it ended) so an interrupted sweep resumes where it was. It gets this
ledger from the service (``RunIntents.sweep_ledger``) instead of the store: the writes a walk makes are
named here, once, bound to its sweep.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from console.store.curves import CurveRow
from console.store.sweeps import SweepArm, Sweeps

if TYPE_CHECKING:
    from console.readmodel.records import ResultRow
    from console.store import Store


class SweepLedger:
    """The record of one sweep's attempts, as its walker writes it."""

    def __init__(self, store: Store, sweep_id: int):
        self._store = store
        self.sweep_id = sweep_id

    @property
    def _sweeps(self) -> Sweeps:
        return self._store.sweeps

    # -- what the walk reads back of its own record ----------------------------------------------
    def arm(self, sweep_arm_id: int) -> SweepArm:
        """The arm as recorded now (its state may have moved since it was handed to the walker)."""
        return self._sweeps.get_arm(sweep_arm_id)

    def benched(self, sweep_arm_id: int) -> set[tuple[str, int]]:
        """(shape, concurrency) pairs that already have a throughput row: a retried arm does not redo them."""
        return self._sweeps.benched(sweep_arm_id)

    # -- an attempt --------------------------------------------------------------------------------
    def start(self, sweep_arm_id: int, box: str, gpus: list[int] | None, gpu_mem_mib: float | None) -> None:
        """A new attempt of the arm, claimed on ``box`` (``gpus`` there; None: every card)."""
        self._sweeps.start_arm(sweep_arm_id, box, gpus, gpu_mem_mib)

    def claim_launches(self, sweep_arm_id: int, launch_ids: list[str]) -> None:
        """The attempt's launch ids, recorded before they are sent: a resumed sweep stops them."""
        self._sweeps.claim_launches(sweep_arm_id, launch_ids)

    def record_memory(self, sweep_arm_id: int, when: str, memory: dict[int, float | None]) -> None:
        """The GPU memory used on the attempt's GPUs, ``before`` the launch or ``after`` it served."""
        self._sweeps.record_memory(sweep_arm_id, when, memory)

    def record_budget(
        self,
        sweep_arm_id: int,
        kv_cache_tokens: int | None,
        max_concurrency: float | None,
        backends_potential: list[str],
    ) -> None:
        """What the served engine reported: its KV cache, the concurrency it admits, the backends it chose from."""
        self._sweeps.update_arm(
            sweep_arm_id,
            kv_cache_tokens=kv_cache_tokens,
            max_concurrency=max_concurrency,
            backends_potential=backends_potential,
        )

    def record_tripwire(self, sweep_arm_id: int, tripwire_run_id: int) -> None:
        self._sweeps.update_arm(sweep_arm_id, tripwire_run_id=tripwire_run_id)

    def add_bench(
        self,
        sweep_arm_id: int,
        launch_id: str,
        shape: str,
        concurrency: int,
        bench_run_id: int | None,
        error: str | None,
        admitted: int | None,
    ) -> None:
        """One node bench of the attempt (``launch_id``: its first replica), or why it has no row."""
        self._sweeps.add_bench(sweep_arm_id, launch_id, shape, concurrency, bench_run_id, error, admitted)

    def curve(self, arm: str, box: str, shape: str, concurrency: list[int], prompts: int | None) -> CurveRow:
        """The arm's curve at ``shape`` on ``box`` (its points: the sweep's concurrency list), created pending
        the first time the arm benches there, the same one when a resumed sweep benches it again."""
        curves = self._store.curves
        found = curves.of_sweep(self.sweep_id, arm, box, shape)
        if found is not None:
            return found
        return curves.create(arm, box, shape, concurrency, 1, prompts, sweep_id=self.sweep_id)

    def curve_point(self, curve: CurveRow, position: int, run: ResultRow | None, error: str | None) -> None:
        """Point ``position`` of ``curve`` ends with its bench row ``run`` linked, or failed with ``error``;
        the curve is done once no point of it is left pending."""
        curves = self._store.curves
        if run is not None and error is None:
            curves.finish_point(curve.id, position, run.repeat_group, [run.id])
        else:
            curves.fail_point(curve.id, position, error or "the bench stored no row")
        if all(p.state in ("done", "failed") for p in curves.points(curve.id)):
            curves.set_state(curve.id, "done")

    def finish(
        self,
        sweep_arm_id: int,
        outcome: str,
        reason: str | None = None,
        *,
        launch_ids: list[str] | None = None,
    ) -> None:
        """End the current attempt: one of the outcomes that end an arm, or ``interrupted`` (tried again);
        ``launch_ids`` when the attempt's launches are known only now."""
        if launch_ids is None:
            self._sweeps.finish_arm(sweep_arm_id, outcome, reason)
        else:
            self._sweeps.finish_arm(sweep_arm_id, outcome, reason, launch_ids=launch_ids)

    def finish_failed(
        self,
        sweep_arm_id: int,
        outcome: str,
        reason: str,
        backends_accepted: list[str] | None,
        backends_potential: list[str],
    ) -> None:
        """End the attempt of an arm whose server failed, with the engine's reason, the backend set it said
        it accepts (None: it printed none) and the set it chose from."""
        self._sweeps.finish_arm(
            sweep_arm_id,
            outcome,
            reason,
            backends_accepted=backends_accepted,
            backends_potential=backends_potential,
        )

    def interrupt_unstarted(self, sweep_arm_id: int, why: str) -> None:
        """An arm stopped before its attempt began: it says why, with no attempt to end."""
        self._sweeps.update_arm(sweep_arm_id, state="interrupted", reason=why)

    # -- the walk ----------------------------------------------------------------------------------
    def queue(
        self,
        arm: str,
        origin: str,
        base: str | None = None,
        linear_backend: str | None = None,
        moe_backend: str | None = None,
        queued_by: str | None = None,
    ) -> bool:
        """Append a candidate at the end of the walk; False when the sweep already has it."""
        return self._sweeps.queue(self.sweep_id, arm, origin, base, linear_backend, moe_backend, queued_by)
