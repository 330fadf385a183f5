"""Multi-box arms as one arm: plan on every box, check every box, launch head and workers, kill them all.

WHY here and not in LaunchIntents.launch: a multi-box arm is one server whose processes live on several
boxes (console/recipes/multinode.py), so a launch is only good when all of them are: the console launches
them in plan order through each box's agent, waits until the head's API serves and every other process
runs, and stops every process it started the moment one fails (a headless rank or Ray node that died
leaves the head waiting on a rank that will never join). A kill stops them in reverse launch order.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from console.bounds import GRACE_S, PORT, WAIT_S
from console.checks.run import CheckRun
from console.errors import ConsoleError, InputError
from console.fleet.wire import AgentError
from console.readmodel import moe_evidence, plan_box
from console.recipes import Finding, lint
from console.recipes.multinode import MultiNodePlan, Process, plan
from console.recipes.resolve import get_arm
from console.service.base import ServiceError, reaching
from console.service.checks import CheckIntents
from console.service.launches import (
    DEFAULT_BASE_PORT,
    DEFAULT_READY_TIMEOUT_S,
    POLL_S,
    RELEASE_TIMEOUT_S,
    SETTLE_MARGIN_S,
    LaunchIntents,
    released,
)
from console.store.launches import Launch

PROCESS_ID = re.compile(r"^(.+\.[0-9a-f]{8}\.n)[0-9]+$")
"""A multi-box arm's process id (``MultiNodeLaunchPlan.name_launches``): the group is the prefix they share."""
RANK_WATCH_S = 2.0
"""How often a console following its boxes looks for a multi-box arm that lost a process."""

MultiNodeProgress = Callable[[list[Launch]], None]
"""Called with every process's launch as last stored, each time the console looked."""


@dataclass
class MultiNodeLaunchPlan:
    """What a multi-box launch would do, for confirmation: the plan, its lint over every box, failed checks."""

    plan: MultiNodePlan
    findings: list[Finding]
    failed_checks: dict[str, list[str]]
    """Per box, its last check's failures (empty lists dropped)."""
    launch_ids: list[str] = field(default_factory=list)
    env_refusals: dict[str, list[str]] = field(default_factory=dict)
    """Per box, why its serving env cannot serve the arm (an engine patch or version it lacks, judged on its
    newest probe as a one-box launch judges it); a launch is refused on any, --force or not."""
    patch_digests: dict[str, dict[str, str | None]] = field(default_factory=dict)
    """Per box, each engine patch the arm needs and the sha256 its newest probe found: stored with its process."""
    port_pinned: bool = False
    """The operator named the head's port; otherwise the console chose it and the head's agent may move a taken
    one to a free port above it, as for a one-box launch (``LaunchArgs.port_pinned``)."""

    @property
    def blocking(self) -> list[Finding]:
        return [f for f in self.findings if f.blocking]

    def name_launches(self) -> list[str]:
        """One launch id per process, in plan order, made once; one token names them as one arm's."""
        if not self.launch_ids:
            token = secrets.token_hex(4)
            safe = re.sub(r"[^A-Za-z0-9._-]", "-", self.plan.arm[:96])
            self.launch_ids.extend(f"{safe}.{token}.n{i}" for i in range(len(self.plan.processes)))
        return self.launch_ids


@dataclass(frozen=True)
class MultiNodeOutcome:
    """Every process of a multi-box launch as its box last reported it, in plan order."""

    arm: str
    forced: bool
    processes: tuple[Process, ...]
    launches: tuple[Launch, ...]
    waited: bool
    stopped: str | None = None
    """Why the console stopped the processes it had started (one failed, or a box refused one); None if not."""

    @property
    def serving(self) -> bool:
        return self.stopped is None and all(x.state == "serving" for x in self.launches)

    @property
    def failed(self) -> list[Launch]:
        return [x for x in self.launches if x.state == "failed"]


class MultiNodeIntents(LaunchIntents, CheckIntents):
    def plan_multinode(
        self,
        arm: str,
        boxes: Sequence[str],
        base_port: int | None = None,
        inter_node_port: int | None = None,
    ) -> MultiNodeLaunchPlan:
        """Lint ``arm`` over ``boxes`` (the head first) and plan its processes; nothing is sent.

        Without ``base_port`` the head's API takes the first port from 8100 that no live launch on any of the
        arm's boxes holds (each process's launch row records the arm's port). ``inter_node_port``: the
        head's data-parallel RPC or Ray port (default: multinode.DP_RPC_PORT or RAY_PORT)."""
        for port_given, what in ((base_port, "--base-port"), (inter_node_port, "--inter-node-port")):
            if port_given is not None:
                PORT.check(port_given, what)
        for b in boxes:
            self.fleet.link(b)  # the box exists and can be driven
        placed = [plan_box(self.store, b) for b in boxes]
        specs = [p.spec for p in placed]
        findings = lint(self.catalog, arm, evidence=moe_evidence(self.store, self.catalog), boxes=specs)
        port = base_port or DEFAULT_BASE_PORT
        if base_port is None:
            held = {x.port for b in boxes for x in self.store.launches.live(b)}
            while port in held:
                port += 1
        failed = {b: [f"{v.check}: {v.reason}" for v in self.store.checks.last_failed(b)] for b in boxes}
        needs = {}
        for b in boxes:
            probe = self.store.checks.latest_probe(b)
            needs[b] = self._serving_needs(arm, b, probe.data if probe else None)
        return MultiNodeLaunchPlan(
            plan(self.catalog, arm, placed, port, inter_node_port),
            findings,
            {b: f for b, f in failed.items() if f},
            port_pinned=base_port is not None,
            env_refusals={b: refused for b, (refused, _) in needs.items() if refused},
            patch_digests={b: digests for b, (_, digests) in needs.items() if digests},
        )

    async def check_multinode(
        self,
        arm: str,
        boxes: Sequence[str],
        *,
        stored: bool = False,
        progress: Callable[[str], None] | None = None,
    ) -> list[CheckRun]:
        """``campaign check`` of every box of a multi-box arm, each judged for its node's cards and the
        weights' share per card (console/checks/run.py ``recipe_arm``)."""
        a = get_arm(self.catalog, arm)
        if a.nodes != len(boxes) or len(set(boxes)) != len(boxes):
            raise InputError(
                f"arm {arm} spans {a.nodes} boxes; {len(boxes)} given ({', '.join(boxes)})",
                f"name its {a.nodes} boxes: campaign check B1 B2 ... --arm {arm}",
            )
        return [await self.check(b, arm, stored=stored, progress=progress) for b in boxes]

    async def launch_multinode(
        self,
        mplan: MultiNodeLaunchPlan,
        *,
        force: bool = False,
        ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S,
        wait: bool = True,
        progress: MultiNodeProgress | None = None,
    ) -> MultiNodeOutcome:
        """Send every process in plan order; with ``wait``, return once the head serves and every other
        process runs, or once one failed, after stopping every process already started.

        Ray nodes must run before the head's ``vllm serve`` asks Ray for its stages, so a Ray plan waits for
        them first; a data-parallel head waits for its headless ranks by itself."""
        WAIT_S.check(ready_timeout_s, "--ready-timeout")
        self._refusals(mplan, force)
        p = mplan.plan
        ids = mplan.name_launches()
        started: list[tuple[str, str]] = []
        group = f"multinode-{secrets.token_hex(6)}"
        deadline = asyncio.get_running_loop().time() + ready_timeout_s + SETTLE_MARGIN_S
        for i, (process, launch_id) in enumerate(zip(p.processes, ids, strict=True)):
            if process.role == "head" and p.mode == "ray":
                why = await self._until(started, deadline, progress, head=None)
                if why is not None:
                    return await self._abort(mplan, started, why, force)
            why = await self._send(mplan, i, process, launch_id, group, ready_timeout_s, force)
            if why is not None:
                return await self._abort(mplan, started, why, force)
            started.append((process.box, launch_id))
        if not wait:
            for box in dict.fromkeys(b for b, _ in started):
                await self.settle(box)
            return self._outcome(mplan, force, False)
        why = await self._until(started, deadline, progress, head=ids[p.processes.index(p.head)])
        if why is not None:
            return await self._abort(mplan, started, why, force)
        return self._outcome(mplan, force, True)

    def _refusals(self, mplan: MultiNodeLaunchPlan, force: bool) -> None:
        """Refuse before anything is sent: lint over every box, a serving env without what the arm needs,
        a box whose last check failed (unless forced, as a one-box launch)."""
        p = mplan.plan
        if mplan.blocking:
            lines = "; ".join(f"[{f.rule_id}] {f.reason}" for f in mplan.blocking)
            raise ServiceError(f"arm {p.arm} is refused by lint: {lines}")
        if mplan.env_refusals:
            said = "; ".join(f"{b}: {'; '.join(r)}" for b, r in mplan.env_refusals.items())
            raise ServiceError(
                f"arm {p.arm} is refused: {said}",
                "fix each box's serving env, then `campaign check` it again (--force does not pass this)",
            )
        if mplan.failed_checks and not force:
            said = "; ".join(f"{b}: {', '.join(f)}" for b, f in mplan.failed_checks.items())
            raise ServiceError(
                f"boxes of arm {p.arm} failed their last check ({said})",
                "fix them and `campaign check` again, or launch with --force (recorded with the launch)",
            )

    async def _send(
        self,
        mplan: MultiNodeLaunchPlan,
        index: int,
        process: Process,
        launch_id: str,
        group: str,
        ready_timeout_s: float,
        force: bool,
    ) -> str | None:
        """Record and send one process; why the box refused it, or None."""
        p = mplan.plan
        forced = bool(force and mplan.failed_checks.get(process.box))
        arm_id = self.store.launches.add_arm(
            p.arm,
            p.model,
            process.box,
            p.recipe_hash,
            process.argv,
            process.env,
            [process.gpus],
            p.tensor_parallel,
            [f.to_dict() for f in mplan.findings],
        )
        self.store.launches.add(
            launch_id,
            process.box,
            p.arm,
            arm_id=arm_id,
            replica=index,
            gpus=process.gpus,
            port=process.port,
            forced=forced,
            group=f"{group}.n{index}",
            patch_digests=mplan.patch_digests.get(process.box) or None,
        )
        args: dict[str, Any] = {
            "launch_id": launch_id,
            "argv": process.argv,
            "env": process.env,
            "gpus": process.gpus,
            "port": process.port,
            "ready_timeout_s": ready_timeout_s,
            "arm": p.arm,
            "headless": process.headless,
        }
        if not process.headless:  # the API's port; a headless process listens on none of its own
            args["port_pinned"] = mplan.port_pinned
        if forced:
            args["forced_past"] = mplan.failed_checks[process.box]
        link = await self.link(process.box)
        try:
            with reaching(process.box):
                await link.command("launch", args, command_id=f"launch-{launch_id}")
        except AgentError as exc:
            self.store.launches.fail(launch_id, exc.reason)
            return f"box {process.box} refused {process.role} {launch_id}: {exc.reason}"
        return None

    async def _until(
        self,
        started: list[tuple[str, str]],
        deadline: float,
        progress: MultiNodeProgress | None,
        head: str | None,
    ) -> str | None:
        """Pull every box's journal until each started process serves (runs, for a headless one); why not,
        or None. ``head``: the API launch, the one whose /health proves the ranks joined."""
        loop = asyncio.get_running_loop()
        while True:
            for box in dict.fromkeys(b for b, _ in started):
                await self.settle(box)
            launches = self._launches([i for _, i in started])
            if progress is not None:
                progress(launches)
            ended = [x for x in launches if x.ended]
            if ended:
                x = ended[0]
                return f"{x.id} on box {x.box} {x.state}: {x.failure_reason or 'no reason given'}"
            if all(x.state == "serving" for x in launches):
                return None
            if loop.time() > deadline:
                waiting = [x.id for x in launches if x.state != "serving"]
                what = "the head's API" if head in waiting else ", ".join(waiting)
                return f"{what} not serving by the ready timeout"
            await asyncio.sleep(POLL_S)

    async def _abort(
        self, mplan: MultiNodeLaunchPlan, started: list[tuple[str, str]], why: str, force: bool
    ) -> MultiNodeOutcome:
        """Stop every process started, in reverse order: one failed, so the arm cannot serve."""
        await self._stop(list(reversed(started)), 10.0)
        return self._outcome(mplan, force, True, f"{why}; stopped every process of arm {mplan.plan.arm}")

    async def _stop(self, launches: list[tuple[str, str]], grace_s: float) -> list[Launch]:
        """Kill ``launches`` (box, id) in the order given, then pull every box's journal until each box
        confirmed its processes ended and their GPU memory freed, or the release timeout."""
        for box, launch_id in launches:
            await self.stop_launches(box, [launch_id], grace_s, wait=False)
        ids = [i for _, i in launches]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace_s + RELEASE_TIMEOUT_S
        while True:
            for box in dict.fromkeys(b for b, _ in launches):
                await self.settle(box)
            found = self._launches(ids)
            if all(released(x) for x in found) or loop.time() > deadline:
                return found
            await asyncio.sleep(POLL_S)

    def _outcome(
        self, mplan: MultiNodeLaunchPlan, force: bool, waited: bool, stopped: str | None = None
    ) -> MultiNodeOutcome:
        launches = self._launches(mplan.name_launches())
        forced = bool(force and mplan.failed_checks)
        return MultiNodeOutcome(
            mplan.plan.arm, forced, tuple(mplan.plan.processes), tuple(launches), waited, stopped
        )

    async def stop_broken_arms(self) -> list[str]:
        """Every multi-box arm that served and then lost a process (its box reported it failed) while others
        still run: those stopped, workers before the head, each with one line naming the rank that ended as
        the reason. A data-parallel head whose rank died keeps its API open and waits on that rank for ever, so the
        arm must not look healthy. Before the head serves, ``launch_multinode`` stops a failed arm itself.
        Returns the lines, one an arm."""
        runs: dict[str, str] = {}  # the shared id prefix of an arm's processes -> the arm
        for box in self.store.boxes.every(include_destroyed=False):
            for x in self.store.launches.live(box.name):
                found = PROCESS_ID.match(x.id)
                if found is not None and self.spans_boxes(x.arm):
                    runs[found.group(1)] = x.arm
        said: list[str] = []
        for prefix, arm in runs.items():
            for box_name in dict.fromkeys(x.box for x in self.store.launches.with_id_prefix(prefix)):
                await self.settle(box_name)  # each box's journal in: a rank's end is on its own box's
            every = self.store.launches.with_id_prefix(prefix)
            failed = [x for x in every if x.state == "failed"]
            live = [x for x in every if not x.ended]
            served = any(x.ready_ms is not None for x in every if x.replica == 0)
            if not failed or not live or not served:
                continue
            dead = failed[0]
            why = (
                f"rank {dead.id} on box {dead.box} ended ({dead.failure_reason or 'failed'}) after the arm "
                f"served; stopped every process of arm {arm}"
            )
            await self._stop(
                [(x.box, x.id) for x in sorted(live, key=lambda x: x.replica, reverse=True)], 10.0
            )
            for x in live:
                self.store.launches.stopped_because(x.id, why)
            said.append(why)
        return said

    async def watch_ranks(
        self,
        stop: asyncio.Event,
        on_notice: Callable[[str], None] | None = None,
        every_s: float = RANK_WATCH_S,
    ) -> None:
        """Until ``stop``: every ``every_s``, ``stop_broken_arms``, each line to ``on_notice``; a box that does
        not answer is said and asked again at the next round."""
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), every_s)
            if stop.is_set():
                return
            try:
                lines = await self.stop_broken_arms()
            except ConsoleError as exc:
                lines = [f"watching multi-box arms: {exc}; trying again in {every_s:g} s"]
            for line in lines:
                if on_notice is not None:
                    on_notice(line)

    def spans_boxes(self, target: str) -> bool:
        """Whether ``target`` names a multi-box arm (a kill of it stops its processes on every box)."""
        found = self.catalog.arms.get(target)
        return found is not None and found.nodes > 1

    def multinode_live(self, arm: str, box: str) -> list[Launch]:
        """The live processes of a multi-box arm on every box, in reverse launch order (how a kill stops
        them); ``box`` must hold one of them (the operator names where they saw it)."""
        if not self.spans_boxes(arm):
            raise InputError(f"arm {arm} runs on one box", f"`campaign kill {arm} --box BOX` stops it there")
        self.store.boxes.get(box)
        boxes = [b.name for b in self.store.boxes.every(include_destroyed=False)]
        live = [x for b in boxes for x in self.store.launches.live(b, arm=arm)]
        if not any(x.box == box for x in live):
            raise InputError(
                f"nothing to kill: no live process of arm {arm} on {box}"
                + (f" (it runs on {', '.join(sorted({x.box for x in live}))})" if live else "")
            )
        return sorted(live, key=lambda x: x.replica, reverse=True)

    async def kill_multinode(self, arm: str, box: str, grace_s: float = 30.0) -> list[Launch]:
        """Stop every live process of a multi-box arm on every box, workers before the head that waits on
        them; returns them as they stand (``released`` tells whether each box confirmed the memory freed)."""
        GRACE_S.check(grace_s, "--grace")
        live = self.multinode_live(arm, box)
        return await self._stop([(x.box, x.id) for x in live], grace_s)
