"""The sweep runner: walk the candidates of a sweep on one box, one arm at a time, resumably.

Per arm: lint, launch (one replica per card where the arm fits one card, all in parallel), wait for
ready or failure; a failure is recorded with the engine's own reason and the backend set it printed,
and a set it says it accepts is queued as new candidates; a server that serves gets the tripwire, then
the node benches for each shape and concurrency (every replica at once, one run each; not when the
tripwire failed, unless asked), then it is
killed and the GPUs confirmed free before the next arm. Every outcome is committed as it happens
(``store.sweeps``), so an interrupted walk resumes at the arm it was on.

WHY everything goes through ``console.service``: the sweep is an operator's sequence of intents, and the
same policy (lint gate, failed-check gate, recorded commands) must hold as for a launch by hand; the
service's ``run_sweep`` drives this runner, which only decides what to do next.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agents import loglines
from console.errors import ConsoleError, Refused
from console.readmodel import bench_run, tripwire_run
from console.recipes import ResolveError
from console.service.launches import DEFAULT_READY_TIMEOUT_S, LaunchPlan
from console.store import LOCAL_BOX
from console.store.launches import Launch
from console.store.sweeps import SweepArm, SweepBusy, SweepRow
from console.sweep.plan import NO_SET, PlanError, accepted_candidates, candidates, materialize, refused_slot

if TYPE_CHECKING:
    from console.service.runs import RunIntents

class SweepError(Refused):
    """The sweep cannot go on (box unreachable, a failed check, GPUs not freed); it stays resumable."""


@dataclass(frozen=True)
class SweepOptions:
    ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S
    kill_grace_s: float = 30.0
    job_timeout_s: float = 3600.0
    prompts: int | None = None
    force: bool = False
    """Launch past a failed box check (recorded with every launch, as ``campaign launch --force``)."""
    base_port: int | None = None
    """First replica's port; None: the service picks the first free ports from 8100."""


Progress = Callable[[SweepRow, list[SweepArm], str], None]
"""Called with the sweep, its arms and what is happening now, whenever something changes."""


def this_runner() -> tuple[int, str]:
    return os.getpid(), socket.gethostname()


def runner_alive(sweep: SweepRow) -> bool:
    """The process recorded as walking the sweep still exists (on this host: a pid elsewhere is unknown)."""
    if sweep.runner_pid is None or sweep.runner_host != socket.gethostname():
        return False
    try:
        os.kill(sweep.runner_pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return sweep.runner_pid != os.getpid()


DEFAULT_SHAPES = ["router"]
DEFAULT_CONCURRENCY = [1]


def open_sweep(service: RunIntents, list_name: str, box: str, shapes: list[str] | None = None,
               concurrency: list[int] | None = None, bench_degenerate: bool = False,
               new: bool = False) -> tuple[SweepRow, bool]:  # fmt: skip
    """The unfinished sweep of this list on this box, taken over (resumed), else a new one. (sweep, resumed).

    A resumed sweep keeps the shapes and concurrencies it started with, so its rows stay comparable;
    asking for others is refused (``new`` abandons the unfinished sweep and starts again).
    """
    store = service.store
    store.boxes.ensure_local() if box == LOCAL_BOX else store.boxes.get(box)
    if concurrency is not None and (not concurrency or any(c < 1 for c in concurrency)):
        raise SweepError(f"concurrency {concurrency}: give one or more positive integers")
    existing = store.sweeps.unfinished(list_name, box)
    if existing is None or new:
        _check_shapes(service, shapes or DEFAULT_SHAPES)
        planned = candidates(service.catalog, list_name)
    if existing is not None and new:
        if runner_alive(existing):
            raise SweepError(f"sweep #{existing.id} is being walked by pid {existing.runner_pid}; stop it first")
        store.sweeps.stop(existing.id, "abandoned", "replaced by a new sweep of the same list")
        existing = None
    if existing is None:
        sweep = store.sweeps.create(list_name, box, shapes or DEFAULT_SHAPES, concurrency or DEFAULT_CONCURRENCY,
                                    bench_degenerate, planned, this_runner())  # fmt: skip
        return sweep, False
    for what, asked, kept in (("shapes", shapes, existing.shapes), ("concurrency", concurrency, existing.concurrency)):
        if asked is not None and list(asked) != kept:
            raise SweepError(f"sweep #{existing.id} of {list_name} on {box} was started with {what} {kept}; resume it "
                             f"without --{what} (its rows stay comparable) or start again with --new")  # fmt: skip
    try:
        store.sweeps.claim(existing.id, this_runner(), runner_alive(existing))
    except SweepBusy as exc:
        raise SweepError(str(exc)) from exc
    store.sweeps.mark_interrupted(
        existing.id, f"the console walking the sweep (pid {existing.runner_pid}) stopped while this arm was running"
    )
    return store.sweeps.get(existing.id), True


def _check_shapes(service: RunIntents, shapes: list[str]) -> None:
    unknown = [s for s in shapes if s not in service.catalog.shapes]
    if unknown:
        raise SweepError(f"unknown shape(s) {', '.join(unknown)}; known: {', '.join(sorted(service.catalog.shapes))}")


class SweepRunner:
    def __init__(self, service: RunIntents, sweep_id: int, options: SweepOptions | None = None,
                 progress: Progress | None = None):  # fmt: skip
        self.service = service
        self.store = service.store
        self.options = options or SweepOptions()
        self.sweep = self.store.sweeps.get(sweep_id)
        service.fleet.link(self.sweep.box)  # the box can be driven, before anything is recorded
        self._progress = progress
        self._current: SweepArm | None = None

    # -- the walk --------------------------------------------------------------------------------
    async def run(self) -> SweepRow:
        """Walk every unfinished arm; returns the sweep. Interruption leaves it resumable."""
        sid = self.sweep.id
        try:
            while (candidate := self.store.sweeps.next_arm(sid)) is not None:
                self._current = candidate
                await self._walk(candidate)
                self._current = None
            self.store.sweeps.stop(sid, "done", None)
        except (asyncio.CancelledError, KeyboardInterrupt):
            await self._interrupted("the operator interrupted the sweep")
            raise
        except SweepError as exc:
            await self._interrupted(str(exc))
            raise
        except ConsoleError as exc:  # the box refused or could not be reached: the sweep stays resumable
            await self._interrupted(f"box {self.sweep.box}: {exc}")
            raise SweepError(f"box {self.sweep.box}: {exc}") from exc
        self._say("done")
        return self.store.sweeps.get(sid)

    async def _interrupted(self, why: str) -> None:
        """Record the arm in progress as interrupted and stop its servers (they would hold the GPUs)."""
        current = self._current
        self.store.sweeps.stop(self.sweep.id, "interrupted", why)
        if current is None:
            return
        self.store.sweeps.finish_arm(current.id, "interrupted", why)
        with contextlib.suppress(Exception):  # best effort: a resumed sweep kills what is left anyway
            await asyncio.shield(self._stop_live(self._arm_name(current), wait=False))

    def _arm_name(self, candidate: SweepArm) -> str:
        return materialize(self.service.catalog, candidate, self.sweep.list_name).name

    async def _walk(self, candidate: SweepArm) -> None:
        sweeps = self.store.sweeps
        try:
            arm = materialize(self.service.catalog, candidate, self.sweep.list_name)
        except PlanError as exc:
            sweeps.start_arm(candidate.id, None)
            sweeps.finish_arm(candidate.id, "refused", str(exc))
            return
        await self.service.settle(self.sweep.box)
        await self._stop_live(arm.name, wait=True)  # a previous attempt's servers, left by a killed console
        self._say(f"{arm.name}: lint")
        try:
            plan = self.service.plan_launch(arm.name, self.sweep.box, base_port=self.options.base_port,
                                            sweep=self.sweep.list_name)  # fmt: skip
        except ResolveError as exc:
            sweeps.start_arm(candidate.id, None)
            sweeps.finish_arm(candidate.id, "refused", f"does not fit box {self.sweep.box}: {exc}")
            return
        if plan.failed_checks and not self.options.force and not plan.blocking:
            raise SweepError(
                f"box {self.sweep.box} failed its last check ({'; '.join(plan.failed_checks)}); fix it and "
                f"`campaign check {self.sweep.box}`, or resume the sweep with --force (recorded with every launch)"
            )
        sweeps.start_arm(candidate.id, self._gpu_mem())
        if plan.blocking:
            lines = "; ".join(f"[{f.rule_id}] {f.reason}" for f in plan.blocking)
            sweeps.finish_arm(candidate.id, "refused", f"lint: {lines}")
            return
        self._say(f"{arm.name}: launching {len(plan.resolved.replicas)} replica(s)")
        try:
            outcome = await self.service.launch(plan, force=self.options.force,
                                                ready_timeout_s=self.options.ready_timeout_s)  # fmt: skip
        except Refused as exc:  # the agent refused a replica: the others must not keep their GPUs
            sweeps.finish_arm(candidate.id, "crashed", str(exc), launch_ids=plan.launch_ids)
            await self._stop(plan.launch_ids)
            return
        sweeps.update_arm(candidate.id, launch_ids=plan.launch_ids)
        launches = list(outcome.replicas)
        if not all(x.state == "serving" or x.ended for x in launches):
            await self._stop(plan.launch_ids)
            raise SweepError(f"arm {arm.name} start-up: no verdict from the box after "
                             f"{self.options.ready_timeout_s:.0f} s")  # fmt: skip
        failed = outcome.failed
        unstarted = [x for x in failed if x.pid is None]
        if unstarted:  # the agent could not start it (port taken, no vllm): the box's problem, not the arm's
            await self._stop(plan.launch_ids)
            raise SweepError(f"box {self.sweep.box} could not start {unstarted[0].id}: {unstarted[0].failure_reason}")
        if failed:
            await self._record_failure(candidate, arm, failed[0])
            await self._stop(plan.launch_ids)
            return
        self._record_budget(candidate, launches)
        result, reason = await self._measure(candidate, plan)
        await self._stop(plan.launch_ids)
        sweeps.finish_arm(candidate.id, result, reason)
        self._say(f"{arm.name}: {result}")

    # -- outcomes --------------------------------------------------------------------------------
    async def _record_failure(self, candidate: SweepArm, arm: Any, launch: Launch) -> None:
        reason = launch.failure_reason or f"the server stopped (exit code {launch.exit_code}) before serving"
        accepted = None if launch.backends_accepted is None else list(launch.backends_accepted)
        # A refusal is the engine saying why (an exception it raised); anything else died: a crash.
        explained = launch.failure_reason and not reason.startswith(("exited with code", "not ready after"))
        outcome = "refused" if explained else "crashed"
        queued, unmapped = accepted_candidates(self.service.catalog, candidate, arm, reason, accepted or [])
        for extra in queued:
            self.store.sweeps.queue(self.sweep.id, **extra)
        note = f" (accepted names no --kernel-config value selects: {', '.join(unmapped)})" if unmapped else ""
        if accepted is None and explained and refused_slot(arm, reason) is not None:
            note = f" ({NO_SET})"
        self.store.sweeps.finish_arm(candidate.id, outcome, reason + note, backends_accepted=accepted,
                                     backends_potential=self._potential(launch.id))  # fmt: skip
        self._say(f"{arm.name}: {outcome}" + (f"; queued {len(queued)} accepted candidate(s)" if queued else ""))

    def _record_budget(self, candidate: SweepArm, launches: list[Launch]) -> None:
        kv = [x.kv_cache_tokens for x in launches if x.kv_cache_tokens is not None]
        conc = [x.max_concurrency for x in launches if x.max_concurrency is not None]
        self.store.sweeps.update_arm(
            candidate.id, kv_cache_tokens=min(kv) if kv else None, max_concurrency=min(conc) if conc else None,
            backends_potential=self._potential(launches[0].id),
        )

    def _potential(self, launch_id: str) -> list[str]:
        """The backend set the engine chose from ("... out of potential backends: [...]"), from its kernel lines."""
        found: list[str] = []
        for _, line in self.store.launches.kernel_lines(launch_id):
            if "potential backends" in line:
                found += [b for b in loglines.backend_set(line) or [] if b not in found]
        return found

    async def _measure(self, candidate: SweepArm, plan: LaunchPlan) -> tuple[str, str | None]:
        """Tripwire on the first replica, then the node benches (every replica at once); (outcome, reason)."""
        first = plan.launch_ids[0]
        self._say(f"{plan.resolved.arm}: tripwire")
        tripwire_id = await self.service.tripwire(first)
        error = await self.service.until_job_ends(self.sweep.box, tripwire_id, self.options.job_timeout_s)
        died = self._died(plan.launch_ids)
        if died is not None:
            return "crashed", died
        if error is not None:
            return "crashed", f"the tripwire did not complete: {error}"
        verdict = tripwire_run(self.store, tripwire_id)
        if verdict is None:
            return "crashed", f"the tripwire {tripwire_id} finished without a verdict in the store"
        self.store.sweeps.update_arm(candidate.id, tripwire_run_id=verdict.id)
        passed = verdict.verdict.passed
        if passed or self.sweep.bench_degenerate:
            died = await self._benches(candidate, plan)
            if died is not None:
                return "crashed", died
        return ("served", None) if passed else ("degenerate", f"tripwire {verdict.verdict.text}")

    async def _benches(self, candidate: SweepArm, plan: LaunchPlan) -> str | None:
        """Every shape x concurrency not benched in an earlier attempt: one node run each, every replica at once."""
        done = self.store.sweeps.benched(candidate.id)
        node = self.service.bench_node(plan.launch_ids[0], self.sweep.box)
        for shape in self.sweep.shapes:
            for conc in self.sweep.concurrency:
                if (shape, conc) in done:
                    continue
                if conc < len(node.replicas):  # a node row with idle replicas would not be the node's
                    self.store.sweeps.add_bench(candidate.id, node.launch_ids[0], shape, conc, None,
                                                f"concurrency {conc} is below the {len(node.replicas)} replicas", None)
                    continue
                self._say(f"{plan.resolved.arm}: bench {shape} x{conc} on {len(node.replicas)} replica(s)")
                bench_id = await self.service.start_bench(node, shape, conc, self.options.prompts)
                error = await self.service.until_job_ends(self.sweep.box, bench_id, self.options.job_timeout_s)
                self._record_bench(candidate, node.launch_ids[0], bench_id, shape, conc, error)
                died = self._died(plan.launch_ids)
                if died is not None:
                    return died
        return None

    def _record_bench(self, candidate: SweepArm, launch_id: str, bench_id: str, shape: str, conc: int,
                      error: str | None) -> None:  # fmt: skip
        run = bench_run(self.store, bench_id)
        if run is None and error is None:
            error = "the bench finished without a throughput row in the store"
        self.store.sweeps.add_bench(candidate.id, launch_id, shape, conc, run.id if run else None, error,
                                    run.admitted if run else None)  # fmt: skip

    def _died(self, launch_ids: list[str]) -> str | None:
        for launch_id in launch_ids:
            launch = self.store.launches.get(launch_id)
            if launch is not None and launch.ended:
                return f"replica {launch_id} died while measured: {launch.failure_reason or launch.state}"
        return None

    # -- stopping --------------------------------------------------------------------------------
    async def _stop_live(self, arm: str, wait: bool) -> None:
        live = [x.id for x in self.store.launches.live(self.sweep.box, arm=arm)]
        if live:
            self._say(f"{arm}: stopping {len(live)} server(s) left by an earlier attempt")
            await self._stop(live, wait=wait)

    async def _stop(self, launch_ids: list[str], wait: bool = True) -> None:
        """Kill the servers and confirm the driver freed their GPUs before anything else starts."""
        launches = await self.service.stop_launches(self.sweep.box, launch_ids, self.options.kill_grace_s, wait=wait)
        if not wait:
            return
        running = [x.id for x in launches if not x.ended]
        held = [x.id for x in launches if x.gpu_mem_released is False]
        if running or held:
            what = f"{', '.join(running)} still running" if running else f"the GPUs of {', '.join(held)} not freed"
            raise SweepError(f"after the kill, {what}; check the box (`campaign check {self.sweep.box}`) "
                             "before resuming the sweep")  # fmt: skip

    # -- helpers ---------------------------------------------------------------------------------
    def _gpu_mem(self) -> float | None:
        probe = self.store.checks.latest_probe(self.sweep.box)
        mems = [g.get("mem_total_mib") for g in (probe.data.get("gpus") or [])] if probe else []
        mems = [m for m in mems if m is not None]
        return min(mems) if mems else None

    def _say(self, what: str) -> None:
        if self._progress is not None:
            self._progress(self.store.sweeps.get(self.sweep.id), self.store.sweeps.arms(self.sweep.id), what)

