"""One attempt of one sweep arm on one place (a box, and the GPUs it was given there): lint, claim, launch,
wait for ready or failure, record the engine's reason or measure, stop and confirm the GPUs free.

A failure is recorded with the engine's own reason and the backend set it printed, and a set it says it
accepts is queued as new candidates; a server that serves gets the tripwire, then the node benches for
each shape and concurrency (every replica at once, one run each; not when the tripwire failed, unless
asked), then it is killed and the GPUs confirmed free. Every outcome is committed as it happens
(through the ledger the service gives the walk, console/service/sweep_ledger.py), so an interrupted sweep
resumes at the arm it was on.

The one-box walk (console/service/sweep/runner.py) gives an arm every card of its box (one replica per card);
the queue over several boxes (console/service/sweep/queue.py) gives it the fewest GPUs its layout needs, books
its ports against the arms starting beside it, and checks the GPU memory before and after (``guard``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from agents import loglines
from console.checks.run import serving_python
from console.errors import Refused
from console.quality.suites import house
from console.quality.suites.runner import DEFAULT_TIMEOUT_S, Caps
from console.readmodel import bench_run, tripwire_run
from console.readmodel.quality import sweep_quality_run
from console.recipes import ResolveError
from console.service.launches import DEFAULT_READY_TIMEOUT_S, SETTLE_MARGIN_S, LaunchPlan
from console.service.sweep.gpumem import MemoryGuard, Reading
from console.service.sweep.plan import NO_SET, PlanError, accepted_candidates, materialize, refused_slot
from console.store.launches import Launch
from console.store.sweeps import SweepArm, SweepRow

if TYPE_CHECKING:
    from console.readmodel.records import ResultRow
    from console.service.quality import QualityIntents
    from console.service.runs import RunIntents


EVALUATES = frozenset({"eval", "both"})
BENCHES = frozenset({"bench", "both"})
MODES = ("bench", "eval", "both")
"""``sweep run --mode``: what an arm that passed its tripwire gets."""


ABANDON_WAIT_S = 10.0
"""How long an interrupted walk waits for the kills of its arm's servers to show in the store."""


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
    reconnect_s: float = 120.0
    """How long the box's link may stay down mid-walk before the walk stops, resumable (console/service/sweep/
    ride.py); a shorter drop is ridden out and the arm goes on where it was."""
    mode: str = "bench"
    """After a passed tripwire: ``bench`` the shapes, ``eval`` run the quality suite, or ``both`` (eval first)."""
    suite: str = house.NAME
    """The house suite an eval runs (console/quality/suites/house.py)."""
    caps: Caps = field(default_factory=Caps)
    request_timeout_s: float = DEFAULT_TIMEOUT_S
    """An eval's caps and per-request timeout (seed-gaps F20), as ``campaign quality run`` takes them."""
    tripwire_max_tokens: int | None = None
    """Caps each tripwire answer, as ``campaign tripwire --max-tokens``; None: the tripwire's own room, which
    reasoning models need (a model that never stops fills it: 21 s a tripwire on the tiny CPU model here)."""


@dataclass(frozen=True)
class Place:
    """Where an attempt runs: a box, and its GPUs there (None: every card of the box, one replica each)."""

    box: str
    gpus: list[int] | None = None

    def __str__(self) -> str:
        if not self.gpus:
            return self.box
        return f"{self.box} GPU{'s' if len(self.gpus) > 1 else ''} {','.join(map(str, self.gpus))}"


class PortBook:
    """Ports of launches being started side by side, held until they stop: two arms planned at once must not
    both take the first free port before the store records either. One book serves every box of the sweep:
    ports on separate hosts need not differ, but boxes that share one host's loopback (containers with
    host networking, test boxes) would collide, and distinct ports cost nothing."""

    def __init__(self) -> None:
        self._held: set[int] = set()

    def held(self) -> set[int]:
        return set(self._held)

    def hold(self, ports: list[int]) -> None:
        self._held.update(ports)

    def release(self, ports: list[int]) -> None:
        self._held.difference_update(ports)


class ArmWalk:
    """Walks attempts of a sweep's arms; ``say`` hears what happens, prefixed by the caller with the place."""

    def __init__(
        self,
        service: RunIntents,
        sweep: SweepRow,
        options: SweepOptions,
        say: Callable[[str], None],
        ports: PortBook | None = None,
        guard: MemoryGuard | None = None,
    ):
        self.service = service
        self.store = service.store  # read only: every write of the sweep's record goes through ``ledger``
        self.ledger = service.sweep_ledger(sweep.id)
        self.sweep = sweep
        self.options = options
        self._say = say
        self.ports = ports
        self.guard = guard

    def arm_name(self, candidate: SweepArm) -> str:
        return materialize(self.service.catalog, candidate, self.sweep.list_name).name

    async def walk(self, candidate: SweepArm, place: Place) -> None:
        """One attempt. Raises ``GpuHeld`` (console/service/sweep/gpumem.py) before claiming anything when a GPU
        of the place is not free, ``SweepError`` or another ``ConsoleError`` when the box cannot go on."""
        ledger = self.ledger
        try:
            arm = materialize(self.service.catalog, candidate, self.sweep.list_name)
        except PlanError as exc:
            ledger.start(candidate.id, place.box, place.gpus, None)
            ledger.finish(candidate.id, "refused", str(exc))
            return
        await self.service.settle(place.box)
        await self.stop_live(
            place.box, arm.name, wait=True
        )  # a previous attempt's servers, left by a killed console
        self._say(f"{arm.name}: lint")
        try:
            plan = self.service.plan_launch(
                arm.name,
                place.box,
                gpus=place.gpus,
                base_port=self.options.base_port,
                avoid_ports=self.ports.held() if self.ports else None,
                sweep=self.sweep.list_name,
            )
        except ResolveError as exc:
            ledger.start(candidate.id, place.box, place.gpus, None)
            ledger.finish(candidate.id, "refused", f"does not fit box {place.box}: {exc}")
            return
        if plan.failed_checks and not self.options.force and not plan.blocking:
            raise SweepError(
                f"box {place.box} failed its last check ({'; '.join(plan.failed_checks)}); fix it and "
                f"`campaign check {place.box}`, or resume the sweep with --force (recorded with every launch)"
            )
        self._refuse_without_tripwire(place.box)
        if self.ports:
            self.ports.hold(plan.ports)
        try:
            await self._attempt(candidate, arm, plan, place)
        finally:
            if self.ports:
                self.ports.release(plan.ports)

    def _refuse_without_tripwire(self, box: str) -> None:
        """Refuse, before anything is launched and --force or not, a box whose latest probe found that the
        tripwire's Python cannot run its client (console/checks/tripwire_client.py): every arm would load its
        checkpoint and then end "crashed" at its tripwire."""
        probe = self.store.checks.latest_probe(box)
        client = probe.data.get("tripwire_client") if probe else None
        python = serving_python(self.store.boxes.get(box))  # None: the agent's own runs the tripwire
        asked = isinstance(client, dict) and (python is None or client.get("python") == python)
        if asked and isinstance(client, dict) and client.get("error"):
            raise SweepError(
                f"box {box}: {client.get('python')} cannot run the tripwire's client ({client['error']}); "
                f"every arm would end crashed at its tripwire: fix the serving env, `campaign check {box}`, "
                "and run the sweep again"
            )

    async def _attempt(self, candidate: SweepArm, arm: Any, plan: LaunchPlan, place: Place) -> None:
        ledger = self.ledger
        before = None
        if self.guard is not None and place.gpus and not plan.blocking:
            before = await self.guard.before(place.box, place.gpus)
        ledger.start(candidate.id, place.box, place.gpus, self._gpu_mem(place.box))
        refusal = _refusal(plan)
        if refusal is not None:
            ledger.finish(candidate.id, "refused", refusal)
            return
        if before is not None:
            ledger.record_memory(candidate.id, "before", before)
        ledger.claim_launches(candidate.id, plan.name_launches())  # the store knows them before the box does
        self._say(f"{arm.name}: launching {len(plan.resolved.replicas)} replica(s)")
        ready_s = self.options.ready_timeout_s
        try:
            await self.service.launch(plan, force=self.options.force, ready_timeout_s=ready_s, wait=False)
        except Refused as exc:  # the agent refused a replica: the others must not keep their GPUs
            ledger.finish(candidate.id, "crashed", str(exc), launch_ids=plan.launch_ids)
            await self.stop(place.box, plan.launch_ids)
            return
        tripwire_id = await self._tripwire_while_loading(plan)
        launches = await self.service.until_settled(plan.box, plan.launch_ids, ready_s + SETTLE_MARGIN_S)
        if not all(x.state == "serving" or x.ended for x in launches):
            await self.stop(place.box, plan.launch_ids)
            raise SweepError(
                f"arm {arm.name} start-up: no verdict from box {place.box} after {ready_s:.0f} s"
            )
        failed = [x for x in launches if x.ended]
        unstarted = [x for x in failed if x.pid is None]
        if unstarted:  # the agent could not start it (port taken, no vllm): the box's problem, not the arm's
            await self.stop(place.box, plan.launch_ids)
            raise SweepError(
                f"box {place.box} could not start {unstarted[0].id}: {unstarted[0].failure_reason}"
            )
        if failed:
            await self._record_failure(candidate, arm, failed[0])
            await self.stop(place.box, plan.launch_ids)
            return
        self._record_budget(candidate, launches)
        placed = None
        if self.guard is not None and before is not None:
            served_ms = max(x.ready_ms or 0 for x in launches)
            placed = functools.partial(self._placed, candidate, arm.name, place.box, before, served_ms)
        result, reason = await self._measure(candidate, plan, tripwire_id, placed)
        await self.stop(place.box, plan.launch_ids)
        ledger.finish(candidate.id, result, reason)
        self._say(f"{arm.name}: {result}")

    async def abandon(self, candidate: SweepArm, place: Place, why: str) -> None:
        """Give the attempt back (recorded as interrupted with ``why``) and stop its servers without waiting:
        they would hold the GPUs. Best effort, for an interruption; a resumed sweep stops what is left."""
        current = self.ledger.arm(candidate.id)
        if current.state == "running":
            self.ledger.finish(candidate.id, "interrupted", why)
        elif not current.finished:  # stopped before its attempt began: says why, no attempt to end
            self.ledger.interrupt_unstarted(candidate.id, why)
        with contextlib.suppress(Exception):  # best effort: a resumed sweep kills what is left anyway
            name = self.arm_name(candidate)
            await asyncio.shield(self.stop_live(place.box, name, wait=False))
            await self._until_stopping(place.box, name)

    async def _until_stopping(self, box: str, arm: str) -> None:
        """Until the store shows the kills taking effect (no server of the arm starting or serving), for at most
        ABANDON_WAIT_S: a supervised link (console/service/sweep/ride.py) ingests in the background, and the
        console must not exit before what its kills did is recorded."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + ABANDON_WAIT_S
        while loop.time() < deadline:
            if not any(x.state in ("starting", "serving") for x in self.store.launches.live(box, arm=arm)):
                return
            await asyncio.sleep(0.1)

    # -- outcomes --------------------------------------------------------------------------------
    async def _record_failure(self, candidate: SweepArm, arm: Any, launch: Launch) -> None:
        reason = launch.failure_reason or f"the server stopped (exit code {launch.exit_code}) before serving"
        accepted = None if launch.backends_accepted is None else list(launch.backends_accepted)
        # A refusal is the engine saying why (an exception it raised); anything else died: a crash.
        explained = launch.failure_reason and not reason.startswith(("exited with code", "not ready after"))
        outcome = "refused" if explained else "crashed"
        queued, unmapped = accepted_candidates(self.service.catalog, candidate, arm, reason, accepted or [])
        for extra in queued:
            self.ledger.queue(**extra)
        note = (
            f" (accepted names no --kernel-config value selects: {', '.join(unmapped)})" if unmapped else ""
        )
        if accepted is None and explained and refused_slot(arm, reason) is not None:
            note = f" ({NO_SET})"
        self.ledger.finish_failed(candidate.id, outcome, reason + note, accepted, self._potential(launch.id))
        self._say(
            f"{arm.name}: {outcome}" + (f"; queued {len(queued)} accepted candidate(s)" if queued else "")
        )

    def _record_budget(self, candidate: SweepArm, launches: list[Launch]) -> None:
        kv = [x.kv_cache_tokens for x in launches if x.kv_cache_tokens is not None]
        conc = [x.max_concurrency for x in launches if x.max_concurrency is not None]
        self.ledger.record_budget(
            candidate.id,
            min(kv) if kv else None,
            min(conc) if conc else None,
            self._potential(launches[0].id),
        )

    def _potential(self, launch_id: str) -> list[str]:
        """The backend set the engine chose from ("... out of potential backends: [...]"), from its kernel lines."""
        found: list[str] = []
        for _, line in self.store.launches.kernel_lines(launch_id):
            if "potential backends" in line:
                found += [b for b in loglines.backend_set(line) or [] if b not in found]
        return found

    async def _placed(
        self, candidate: SweepArm, arm: str, box: str, before: Reading, served_ms: int
    ) -> str | None:
        """The GPU memory once the arm served, recorded; why the arm is not on its GPUs, else None."""
        assert self.guard is not None
        after, problem = await self.guard.after(box, before, served_ms)
        self.ledger.record_memory(candidate.id, "after", after)
        return None if problem is None else f"{arm} served, but {problem}"

    async def _tripwire_while_loading(self, plan: LaunchPlan) -> str | None:
        """The tripwire of the first replica, sent as its launch loads (None: the box would not take it yet).

        Its client starts now and waits for the server (agents/tripwire/ready.py): when the arms of a queue
        all become ready at once, their clients' starts (a Python, ``openai`` imported) no longer share the
        box's cores at that moment, each after its arm's load. A launch that fails first ends its client."""
        self._say(f"{plan.resolved.arm}: tripwire (waiting for the server)")
        try:
            return await self.service.tripwire(
                plan.launch_ids[0],
                self.options.tripwire_max_tokens,
                ready_within_s=self.options.ready_timeout_s,
            )
        except Refused:  # the launch already ended: the settle that follows records why
            return None

    async def _measure(
        self,
        candidate: SweepArm,
        plan: LaunchPlan,
        tripwire_id: str | None,
        placed: Callable[[], Awaitable[str | None]] | None = None,
    ) -> tuple[str, str | None]:
        """The tripwire on the first replica (``tripwire_id``: sent while it loaded; None: sent now), then the
        node benches (every replica at once); (outcome, reason).

        ``placed`` (the queue's GPU memory check once the arm served) runs while the tripwire runs on the
        box: the reading waits for a sampler tick, the tripwire for its client, and neither for the other. An
        arm that is not on its GPUs is ``crashed`` before its tripwire is recorded or anything is benched."""
        if tripwire_id is None:
            self._say(f"{plan.resolved.arm}: tripwire")
            tripwire_id = await self.service.tripwire(plan.launch_ids[0], self.options.tripwire_max_tokens)
        if placed is not None and (problem := await placed()) is not None:
            return "crashed", problem
        error = await self.service.until_job_ends(plan.box, tripwire_id, self.options.job_timeout_s)
        died = self._died(plan.launch_ids)
        if died is not None:
            return "crashed", died
        if error is not None:
            return "crashed", f"the tripwire did not complete: {error}"
        verdict = tripwire_run(self.store, tripwire_id)
        if verdict is None:
            return "crashed", f"the tripwire {tripwire_id} finished without a verdict in the store"
        self.ledger.record_tripwire(candidate.id, verdict.id)
        passed = verdict.verdict.passed
        if passed and self.options.mode in EVALUATES:  # a failed tripwire gets no eval, whatever is asked
            died = await self._eval(candidate, plan)
            if died is not None:
                return "crashed", died
        if self.options.mode in BENCHES and (passed or self.sweep.bench_degenerate):
            died = await self._benches(candidate, plan)
            if died is not None:
                return "crashed", died
        return ("served", None) if passed else ("degenerate", f"tripwire {verdict.verdict.text}")

    async def _eval(self, candidate: SweepArm, plan: LaunchPlan) -> str | None:
        """The quality suite against the first replica, bound to its launch, under the sweep's caps and
        timeout; not again when an earlier attempt of the arm finished it (the sweep resumes). Returns why a
        replica died, else None; an eval with no item scored is said and leaves the benches to run."""
        arm = plan.resolved.arm
        launch_ids = [x for a in self.store.sweeps.attempts_of(candidate.id) for x in a.launch_ids]
        done = sweep_quality_run(self.store, launch_ids, house.suite_label())
        if done is not None:
            self._say(f"{arm}: {self.options.suite} already run (quality run {done.id}), not again")
            return None
        self._say(f"{arm}: eval {self.options.suite}")
        # The sweep's service is every intent (console.service.Service), its quality intents too.
        quality = cast("QualityIntents", self.service)
        try:
            ran = await quality.run_suite(
                plan.launch_ids[0],
                self.options.suite,
                caps=self.options.caps,
                request_timeout_s=self.options.request_timeout_s,
            )
        except Refused as exc:
            self._say(f"{arm}: eval {self.options.suite} scored nothing: {exc}")
        else:
            r = ran.run
            short = f", {r.short}" if r.short else ""
            self._say(f"{arm}: {self.options.suite} quality run {r.id}, accuracy {r.accuracy_text}{short}")
        return self._died(plan.launch_ids)

    async def _benches(self, candidate: SweepArm, plan: LaunchPlan) -> str | None:
        """Every shape x concurrency not benched in an earlier attempt: one node run each, every replica at once."""
        done = self.ledger.benched(candidate.id)
        node = self.service.bench_node(plan.launch_ids[0], plan.box)
        levels = list(self.sweep.concurrency)
        for shape in self.sweep.shapes:
            # The arm's points at this shape are one curve (console/store/curves.py, source sweep): created
            # pending the first time, the same one on a resumed sweep, each point linked to its bench row.
            curve = self.ledger.curve(plan.resolved.arm, plan.box, shape, levels, self.options.prompts)
            for position, conc in enumerate(levels):
                if (shape, conc) in done:
                    continue
                if conc < len(node.replicas):  # a node row with idle replicas would not be the node's
                    why = f"concurrency {conc} is below the {len(node.replicas)} replicas"
                    self.ledger.add_bench(candidate.id, node.launch_ids[0], shape, conc, None, why, None)
                    self.ledger.curve_point(curve, position, None, why)
                    continue
                self._say(f"{plan.resolved.arm}: bench {shape} x{conc} on {len(node.replicas)} replica(s)")
                bench_id = await self.service.start_bench(node, shape, conc, self.options.prompts)
                error = await self.service.until_job_ends(plan.box, bench_id, self.options.job_timeout_s)
                run, error = self._record_bench(candidate, node.launch_ids[0], bench_id, shape, conc, error)
                self.ledger.curve_point(curve, position, run, error)
                died = self._died(plan.launch_ids)
                if died is not None:
                    return died
        return None

    def _record_bench(
        self, candidate: SweepArm, launch_id: str, bench_id: str, shape: str, conc: int, error: str | None
    ) -> tuple[ResultRow | None, str | None]:
        """Record the bench with its row, or why it has none; (its row, the error)."""
        run = bench_run(self.store, bench_id)
        if run is None and error is None:
            error = "the bench finished without a throughput row in the store"
        self.ledger.add_bench(
            candidate.id,
            launch_id,
            shape,
            conc,
            run.id if run else None,
            error,
            run.admitted if run else None,
        )
        return run, error

    def _died(self, launch_ids: list[str]) -> str | None:
        for launch_id in launch_ids:
            launch = self.store.launches.get(launch_id)
            if launch is not None and launch.ended:
                return f"replica {launch_id} died while measured: {launch.failure_reason or launch.state}"
        return None

    # -- stopping --------------------------------------------------------------------------------
    async def stop_live(self, box: str, arm: str, wait: bool) -> None:
        live = [x.id for x in self.store.launches.live(box, arm=arm)]
        if live:
            self._say(f"{arm}: stopping {len(live)} server(s) left by an earlier attempt")
            await self.stop(box, live, wait=wait)

    async def stop(self, box: str, launch_ids: list[str], wait: bool = True) -> None:
        """Kill the servers and confirm the driver freed their GPUs before anything else starts there."""
        if self.guard is not None:  # a GPU read before this kill no longer says what holds it
            self.guard.changed()
        launches = await self.service.stop_launches(box, launch_ids, self.options.kill_grace_s, wait=wait)
        if not wait:
            return
        running = [x.id for x in launches if not x.ended]
        held = [x.id for x in launches if x.gpu_mem_released is False]
        if running or held:
            what = (
                f"{', '.join(running)} still running"
                if running
                else f"the GPUs of {', '.join(held)} not freed"
            )
            raise SweepError(
                f"after the kill, {what}; check the box (`campaign check {box}`) before resuming the sweep"
            )

    # -- helpers ---------------------------------------------------------------------------------
    def _gpu_mem(self, box: str) -> float | None:
        probe = self.store.checks.latest_probe(box)
        gpus = (probe.data.get("gpus") or []) if probe else []
        mems = [m for g in gpus if (m := g.get("mem_total_mib")) is not None]
        return min(mems) if mems else None


def _refusal(plan: LaunchPlan) -> str | None:
    """Why a candidate is refused before anything is sent: a blocking lint finding, else a serving env that lacks
    an engine patch or a version the arm needs (``LaunchPlan.env_refusals``, which a launch refuses too)."""
    if plan.blocking:
        return "lint: " + "; ".join(f"[{f.rule_id}] {f.reason}" for f in plan.blocking)
    if plan.env_refusals:
        return "serving env: " + "; ".join(plan.env_refusals)
    return None
