"""Launch and kill intents: lint-gated launches that report whether they served, kills that free the GPUs.

Policy lives here and nowhere else: a launch is refused on any blocking lint finding, and on a box whose
last check failed unless the operator forces it (the force is recorded with the launch and in its
command). A launch is not "ok" because the agent accepted it: by default it waits until every replica
serves or fails, and a failure carries the engine's own reason.
"""

from __future__ import annotations

import asyncio
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agents.protocol import ProbeReport
from console.bounds import GPU_INDEX, GRACE_S, LOG_LINES, PORT, WAIT_S
from console.checks.serving_env import check_arm_needs, patch_digests
from console.checks.verdict import FAIL, ArmContext
from console.errors import InputError
from console.fleet.wire import AgentError, new_id
from console.readmodel import moe_evidence
from console.recipes import Finding, ResolvedArm, box_spec, lint, resolve
from console.recipes.resolve import get_arm
from console.service.base import ServiceBase, ServiceError, reaching
from console.store.launches import Launch

DEFAULT_BASE_PORT = 8100
DEFAULT_READY_TIMEOUT_S = 900.0
"""Large checkpoints take minutes to load and compile; the agent fails the launch after this."""
SETTLE_MARGIN_S = 60.0
"""How much longer than the agent's own ready timeout the console waits for the verdict to arrive."""
RELEASE_TIMEOUT_S = 120.0
"""After a kill's grace, how long the console waits for the box to confirm the GPU memory freed."""
POLL_S = 0.5

LaunchProgress = Callable[[list[Launch]], None]
"""Called with the replicas as last stored, each time the console looked (a progress line, a view)."""


@dataclass
class LaunchPlan:
    """What a launch would do: shown for confirmation before anything is sent."""

    box: str
    resolved: ResolvedArm
    findings: list[Finding]
    failed_checks: list[str]
    launch_ids: list[str] = field(default_factory=list)
    env_refusals: list[str] = field(default_factory=list)
    """Why the box's serving env cannot serve the arm (a missing engine patch, a FlashInfer too old), from its
    newest probe (console/checks/serving_env.py); a launch is refused on any, --force or not."""
    patch_digests: dict[str, str | None] = field(default_factory=dict)
    """Each engine patch the arm needs and the sha256 the newest probe found: stored with every replica."""
    port_pinned: bool = False
    """The operator named the ports (``--base-port``): a taken one fails the launch. Otherwise the console
    chose them and the agent moves a taken one to a free port above it (agents/supervisor.py)."""

    @property
    def blocking(self) -> list[Finding]:
        return [f for f in self.findings if f.blocking]

    @property
    def ports(self) -> list[int]:
        return [rep.port for rep in self.resolved.replicas]

    def name_launches(self) -> list[str]:
        """Each replica's launch id, made once: a sweep records them before anything is sent."""
        if not self.launch_ids:
            self.launch_ids.extend(_launch_id(self.resolved.arm, rep.index) for rep in self.resolved.replicas)
        return self.launch_ids


@dataclass(frozen=True)
class LaunchOutcome:
    """What a launch did: every replica as the box last reported it."""

    arm: str
    box: str
    forced: bool
    replicas: tuple[Launch, ...]
    waited: bool

    @property
    def launch_ids(self) -> list[str]:
        return [r.id for r in self.replicas]

    @property
    def failed(self) -> list[Launch]:
        return [r for r in self.replicas if r.ended]

    @property
    def serving(self) -> bool:
        return all(r.state == "serving" for r in self.replicas)


@dataclass(frozen=True)
class KillPlan:
    """What a kill would stop, named for the operator's confirmation."""

    box: str
    launches: tuple[Launch, ...]


def _launch_id(arm: str, replica: int) -> str:
    """A launch id the agent accepts: sweep candidates are named like ``arm@auto+marlin``."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "-", arm[:96])
    return f"{safe}.{secrets.token_hex(4)}.r{replica}"


def released(launch: Launch) -> bool:
    """The launch holds nothing: it ended and the box confirmed its GPU memory (one never started held none)."""
    return launch.ended and (launch.gpu_mem_released is not None or launch.pid is None)


class LaunchIntents(ServiceBase):
    def plan_launch(
        self,
        arm: str,
        box: str,
        gpus: list[int] | None = None,
        base_port: int | None = None,
        avoid_ports: set[int] | None = None,
        sweep: str | None = None,
    ) -> LaunchPlan:
        """Lint and lay out ``arm`` on ``box`` as measured by its latest probe; nothing is sent.

        Without ``base_port`` the replicas take the first ports from 8100 that no live launch on the box
        holds, so arms side by side on one box never collide on a port. ``avoid_ports`` (ports of launches
        about to be sent, not recorded yet) are skipped as well, counting from ``base_port`` when given. Lint
        sees what this campaign's sweeps measured of MoE backends; ``sweep`` names the sweep launching the arm
        to measure it (campaign rule 3).
        """
        if base_port is not None:
            PORT.check(base_port, "--base-port")
        for gpu in gpus or ():
            GPU_INDEX.check(gpu, "--gpus")
        self.fleet.link(box)  # the box exists and can be driven (the local one is created on first use)
        b = self.store.boxes.get(box)
        probe = self.store.checks.latest_probe(box)
        spec = box_spec(b, probe.data if probe else None)
        findings = lint(self.catalog, arm, spec, moe_evidence(self.store, self.catalog), sweep)
        first = base_port or DEFAULT_BASE_PORT
        resolved = resolve(self.catalog, arm, spec, gpus, first)
        if base_port is None or avoid_ports is not None:
            held = {launch.port for launch in self.store.launches.live(box)} | (avoid_ports or set())
            start = first
            while held & set(range(start, start + len(resolved.replicas))):
                start += 1
            if start != first:
                resolved = resolve(self.catalog, arm, spec, gpus, start)
        failed = [f"{v.check}: {v.reason}" for v in self.store.checks.last_failed(box)]
        refusals, digests = self._serving_needs(arm, box, probe.data if probe else None)
        return LaunchPlan(
            box,
            resolved,
            findings,
            failed,
            port_pinned=base_port is not None,
            env_refusals=refusals,
            patch_digests=digests,
        )

    def _serving_needs(
        self, arm: str, box: str, probe: ProbeReport | None
    ) -> tuple[list[str], dict[str, str | None]]:
        """The arm's engine patches and version requirements judged on the box's newest probe: the refusals,
        and the digests of the patches found (empty for an arm that needs nothing)."""
        found = get_arm(self.catalog, arm)
        patches, requires_env = self.catalog.serving_needs(found)
        backend = self.catalog.attention_backend(found)
        if not (patches or requires_env or backend):
            return [], {}
        context = ArmContext(arm, patches=patches, requires_env=requires_env, attention_backend=backend)
        if probe is None and not (patches or requires_env):
            return [], {}  # only a backend to look for, and no probe: unknown, which never refuses
        if probe is None:
            return [
                f"box {box} has no probe to show its serving env carries what arm {arm} needs; "
                f"run `campaign check {box} --arm {arm}`"
            ], {}
        verdicts = check_arm_needs(probe, context, box)
        return [v.reason for v in verdicts if v.verdict == FAIL], patch_digests(probe, context)

    async def launch(
        self,
        plan: LaunchPlan,
        *,
        force: bool = False,
        ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S,
        wait: bool = True,
        progress: LaunchProgress | None = None,
    ) -> LaunchOutcome:
        """Send every replica of a plan; with ``wait``, return once each serves or failed. Refusals send nothing:
        a ready timeout out of range is refused before the arm or any launch is stored (a nan one used to be
        stored and sent, and re-sent on every reconnect)."""
        WAIT_S.check(ready_timeout_s, "--ready-timeout")
        if plan.blocking:
            lines = "; ".join(f"[{f.rule_id}] {f.reason}" for f in plan.blocking)
            raise ServiceError(f"arm {plan.resolved.arm} is refused by lint: {lines}")
        if plan.env_refusals:
            raise ServiceError(
                f"arm {plan.resolved.arm} is refused: {'; '.join(plan.env_refusals)}",
                "--force does not pass a serving env that lacks what the arm needs",
            )
        if plan.failed_checks and not force:
            raise ServiceError(
                f"box {plan.box} failed its last check ({'; '.join(plan.failed_checks)})",
                f"fix the box and `campaign check {plan.box}` again, or launch with --force (recorded with the launch)",
            )
        r = plan.resolved
        arm_id = self.store.launches.add_arm(
            r.arm,
            r.model,
            plan.box,
            r.recipe_hash,
            r.replicas[0].argv,
            r.replicas[0].env,
            [rep.gpus for rep in r.replicas],
            r.tensor_parallel,
            [f.to_dict() for f in plan.findings],
        )
        link = await self.link(plan.box)
        forced = bool(force and plan.failed_checks)
        group = f"launch-{secrets.token_hex(6)}"  # a bench measures the replicas of one launch together
        with reaching(plan.box):
            for rep, launch_id in zip(r.replicas, plan.name_launches(), strict=True):
                self.store.launches.add(
                    launch_id,
                    plan.box,
                    r.arm,
                    arm_id=arm_id,
                    replica=rep.index,
                    gpus=rep.gpus,
                    port=rep.port,
                    forced=forced,
                    group=group,
                    patch_digests=plan.patch_digests or None,
                )
                args: dict[str, Any] = {
                    "launch_id": launch_id,
                    "argv": rep.argv,
                    "env": rep.env,
                    "gpus": rep.gpus,
                    "port": rep.port,
                    "ready_timeout_s": ready_timeout_s,
                    "arm": r.arm,
                    "port_pinned": plan.port_pinned,
                }
                if forced:
                    args["forced_past"] = plan.failed_checks
                try:  # the launch id is new for every launch (``_launch_id``), so this command id is too
                    await link.command("launch", args, command_id=f"launch-{launch_id}")
                except AgentError as exc:
                    self.store.launches.fail(launch_id, exc.reason)
                    raise ServiceError(f"box {plan.box} refused launch {launch_id}: {exc.reason}") from exc
        if wait:
            replicas = await self.until_settled(
                plan.box, plan.launch_ids, ready_timeout_s + SETTLE_MARGIN_S, progress
            )
        else:
            await self.settle(plan.box)
            replicas = self._launches(plan.launch_ids)
        return LaunchOutcome(r.arm, plan.box, forced, tuple(replicas), wait)

    def _launches(self, launch_ids: list[str]) -> list[Launch]:
        found = [self.store.launches.get(i) for i in launch_ids]
        return [launch for launch in found if launch is not None]

    async def until_settled(
        self, box: str, launch_ids: list[str], timeout_s: float, progress: LaunchProgress | None = None
    ) -> list[Launch]:
        """Pull the journal until every launch serves or has ended; the agent fails one at its ready timeout.

        A launch that does neither within ``timeout_s`` is reported as it stands (still starting): the
        caller sees it was not confirmed, never a false "serving".
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            await self.settle(box)
            launches = self._launches(launch_ids)
            if progress is not None:
                progress(launches)
            if all(x.state == "serving" or x.ended for x in launches) or loop.time() > deadline:
                return launches
            await self.until_ingested(box, POLL_S)

    def plan_kill(self, target: str, box: str) -> KillPlan:
        """A launch id, or every live launch of an arm on the box."""
        self.store.boxes.get(box)
        launch = self.store.launches.get(target)
        if launch is not None:
            if launch.box != box:
                raise InputError(f"launch {target} runs on box {launch.box}, not {box}")
            return KillPlan(box, (launch,))
        live = self.store.launches.live(box, arm=target)
        if not live:
            raise InputError(
                f"nothing to kill: no launch {target!r} and no live launch of arm {target!r} on {box}"
            )
        return KillPlan(box, tuple(live))

    async def kill(self, plan: KillPlan, grace_s: float = 30.0, *, wait: bool = True) -> list[Launch]:
        """SIGTERM, then SIGKILL after ``grace_s``; with ``wait``, until the box confirms the GPU memory freed.

        Returns the launches as they stand: ``released(launch)`` tells whether the memory was confirmed free.
        """
        return await self.stop_launches(plan.box, [launch.id for launch in plan.launches], grace_s, wait=wait)

    async def stop_launches(
        self, box: str, launch_ids: list[str], grace_s: float, *, wait: bool = True
    ) -> list[Launch]:
        """Kill ``launch_ids`` on ``box`` (those the agent no longer knows are skipped) and, with ``wait``,
        pull the journal until each ended and its GPU release was confirmed, or the release timeout.

        Each kill is a new attempt with its own command id: the operator may kill a launch twice, and a sweep
        stops launches an operator already killed. (A re-send of one attempt after a reconnect keeps its id,
        which is how the agent answers it from its ledger; the agent answers a second kill of a stopped
        launch with its state.)"""
        GRACE_S.check(grace_s, "--grace")
        link = await self.link(box)
        known = []
        with reaching(box):
            for launch_id in launch_ids:
                try:
                    await link.command(
                        "kill",
                        {"launch_id": launch_id, "grace_s": grace_s},
                        command_id=new_id(f"kill-{launch_id}"),
                    )
                    known.append(launch_id)
                except AgentError as exc:
                    if "no launch" not in exc.reason:
                        raise
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace_s + RELEASE_TIMEOUT_S
        while True:
            await self.settle(box)
            if not wait or all(released(x) for x in self._launches(known)) or loop.time() > deadline:
                return self._launches(launch_ids)
            await self.until_ingested(box, POLL_S)

    async def log_tail(self, launch_id: str, lines: int = 40, timeout: float = 15.0) -> list[str]:
        """The last ``lines`` of a launch's server log, read on its box (the log never leaves the box)."""
        LOG_LINES.check(lines, "lines")
        launch = self.store.launches.get(launch_id)
        if launch is None:
            raise InputError(f"no launch {launch_id!r} in this state.db")
        link = await self.link(launch.box)
        with reaching(launch.box):
            result = await link.command("log_tail", {"launch_id": launch_id, "lines": lines}, timeout=timeout)
        return [str(line) for line in result["lines"]]
