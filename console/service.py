"""The intents layer: what the TUI's keys and the CLI's subcommands mean, as async functions over the fleet.

Policy lives here and nowhere else: a launch is refused on any blocking lint finding, and on a box whose
last check failed unless the operator forces it (the force is recorded with the launch and in its
command). Every action is a stored command (``store.commands``) delivered by the box's one link.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from console.errors import Refused
from console.fleet import BoxLink, FleetManager, LinkSettings
from console.fleet.hostkeys import check_trust, presented_key
from console.fleet.wire import AgentError
from console.recipes import Catalog, Finding, ResolvedArm, box_spec, lint, load_catalog, resolve
from console.store import Store
from console.timers import bench_refusal

DEFAULT_BASE_PORT = 8100
DEFAULT_READY_TIMEOUT_S = 900.0
"""Large checkpoints take minutes to load and compile; the agent fails the launch after this."""


class ServiceError(Refused):
    """An intent refused before anything was sent; the message says why and what to do."""


@dataclass
class LaunchPlan:
    """What a launch would do: shown for confirmation before anything is sent."""

    box: str
    resolved: ResolvedArm
    findings: list[Finding]
    failed_checks: list[str]
    launch_ids: list[str] = field(default_factory=list)

    @property
    def blocking(self) -> list[Finding]:
        return [f for f in self.findings if f.blocking]


def _launch_id(arm: str, replica: int) -> str:
    """A launch id the agent accepts: sweep candidates are named like ``arm@auto+marlin``."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "-", arm[:96])
    return f"{safe}.{secrets.token_hex(4)}.r{replica}"


class Service:
    def __init__(self, store: Store, fleet: FleetManager | None = None, *, catalog: Catalog | None = None,
                 settings: LinkSettings | None = None):  # fmt: skip
        self.store = store
        self.fleet = fleet or FleetManager(store, settings)
        self._catalog = catalog

    @property
    def catalog(self) -> Catalog:
        if self._catalog is None:
            self._catalog = load_catalog()
        return self._catalog

    async def _link(self, box: str) -> BoxLink:
        """The box's link, connected: the supervised one when running, else one attempt now."""
        link = self.fleet.link(box)
        if not self.fleet.supervised(box) and link.fatal is None and not link.connected:
            await link.connect()
        return link

    async def _settle(self, link: BoxLink) -> None:
        """Without a supervised loop (one-shot CLI), pull the journal now so the store shows the effect."""
        if not self.fleet.supervised(link.name):
            await link.sync()

    # -- boxes -----------------------------------------------------------------------------------
    async def connect(self, box: str) -> str:
        """Connect (push or restart the agent as needed), ingest everything pending; returns what was done."""
        link = self.fleet.link(box)
        action = await link.connect()
        inserted = await link.sync()
        return f"{action}; {inserted} new events ingested"

    async def detach(self, box: str) -> dict[str, Any]:
        """Ingest what is pending, then stop the box's journal holding events for this campaign."""
        return await self.fleet.link(box).detach()

    async def presented_key(self, box: str) -> tuple[str, str]:
        b = self.store.boxes.get(box)
        if b.is_local:
            raise ServiceError("the local box is reached without SSH: it has no host key to trust")
        return await presented_key(b, self.fleet.settings.ssh.connect_timeout)

    def trust(self, box: str, line: str, replace: bool = False) -> None:
        """Pin the key the operator compared and confirmed (TOFU), clearing a host-key status."""
        check_trust(self.store.boxes.get(box), line, replace)
        self.store.boxes.update(box, host_key=line, host_key_source="tofu", status="new",
                                status_detail="host key trusted by the operator")  # fmt: skip

    # -- launches --------------------------------------------------------------------------------
    def plan_launch(self, arm: str, box: str, gpus: list[int] | None = None,
                    base_port: int | None = None) -> LaunchPlan:  # fmt: skip
        """Lint and lay out ``arm`` on ``box`` as measured by its latest probe; nothing is sent.

        Without ``base_port`` the replicas take the first ports from 8100 that no live launch on the box
        holds, so arms side by side on one box never collide on a port.
        """
        self.fleet.link(box)  # the box exists (the local one is created on first use)
        b = self.store.boxes.get(box)
        probe = self.store.checks.latest_probe(box)
        spec = box_spec(b, probe.data if probe else None)
        findings = lint(self.catalog, arm, spec)
        resolved = resolve(self.catalog, arm, spec, gpus, base_port or DEFAULT_BASE_PORT)
        if base_port is None:
            held = {row["port"] for row in self.store.launches.live(box)}
            start = DEFAULT_BASE_PORT
            while held & set(range(start, start + len(resolved.replicas))):
                start += 1
            if start != DEFAULT_BASE_PORT:
                resolved = resolve(self.catalog, arm, spec, gpus, start)
        failed = [f"{v.check}: {v.reason}" for v in self.store.checks.last_failed(box)]
        return LaunchPlan(box, resolved, findings, failed)

    async def launch(self, plan: LaunchPlan, *, force: bool = False,
                     ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S) -> LaunchPlan:  # fmt: skip
        """Send every replica of a plan; returns it with its launch ids. Refusals send nothing."""
        if plan.blocking:
            lines = "; ".join(f"[{f.rule_id}] {f.reason}" for f in plan.blocking)
            raise ServiceError(f"arm {plan.resolved.arm} is refused by lint: {lines}")
        if plan.failed_checks and not force:
            raise ServiceError(
                f"box {plan.box} failed its last check ({'; '.join(plan.failed_checks)}); fix the box and "
                f"`campaign check {plan.box}` again, or launch with --force (recorded with the launch)"
            )
        r = plan.resolved
        arm_id = self.store.launches.add_arm(
            r.arm, r.model, plan.box, r.recipe_hash, r.replicas[0].argv, r.replicas[0].env,
            [rep.gpus for rep in r.replicas], r.tensor_parallel, [f.to_dict() for f in plan.findings],
        )  # fmt: skip
        link = await self._link(plan.box)
        forced = bool(force and plan.failed_checks)
        for rep in r.replicas:
            launch_id = _launch_id(r.arm, rep.index)
            self.store.launches.add(launch_id, plan.box, r.arm, arm_id=arm_id, replica=rep.index,
                                        gpus=rep.gpus, port=rep.port, forced=forced)  # fmt: skip
            plan.launch_ids.append(launch_id)
            args: dict[str, Any] = {"launch_id": launch_id, "argv": rep.argv, "env": rep.env, "gpus": rep.gpus,
                                    "port": rep.port, "ready_timeout_s": ready_timeout_s, "arm": r.arm}  # fmt: skip
            if forced:
                args["forced_past"] = plan.failed_checks
            try:
                await link.command("launch", args, command_id=f"launch-{launch_id}")
            except AgentError as exc:
                self.store.launches.fail(launch_id, exc.reason)
                raise ServiceError(f"box {plan.box} refused launch {launch_id}: {exc.reason}") from exc
        await self._settle(link)
        return plan

    def kill_targets(self, target: str, box: str) -> list[str]:
        """A launch id, or every live launch of an arm on the box."""
        launch = self.store.launches.get(target)
        if launch is not None:
            if launch["box"] != box:
                raise ServiceError(f"launch {target} runs on box {launch['box']}, not {box}")
            return [target]
        ids = [row["id"] for row in self.store.launches.live(box, arm=target)]
        if not ids:
            raise ServiceError(f"nothing to kill: no launch {target!r} and no live launch of arm {target!r} on {box}")
        return ids

    async def kill(self, launch_ids: list[str], box: str, grace_s: float = 30.0) -> dict[str, Any]:
        link = await self._link(box)
        results = {}
        for launch_id in launch_ids:
            results[launch_id] = await link.command(
                "kill", {"launch_id": launch_id, "grace_s": grace_s}, command_id=f"kill-{launch_id}"
            )
        await self._settle(link)
        return results

    # -- measurements ----------------------------------------------------------------------------
    async def probe(self, box: str, serving_python: str | None = None) -> dict[str, Any]:
        """A fresh probe of the box; it also lands in the store through the journal (a ``probe`` event)."""
        link = await self._link(box)
        args: dict[str, Any] = {"console_t_ms": self.store.clock()}
        if serving_python:
            args["serving_python"] = serving_python
        result = await link.command("probe", args, timeout=120.0)
        await self._settle(link)
        return dict(result["probe"])

    def _serving(self, launch_id: str) -> dict[str, Any]:
        launch = self.store.launches.get(launch_id)
        if launch is None:
            raise ServiceError(f"no launch {launch_id!r} in this state.db; `campaign launch` first")
        if launch["state"] != "serving":
            raise ServiceError(f"launch {launch_id} is {launch['state']}, not serving")
        return launch

    def _served_name(self, launch: dict[str, Any]) -> str:
        argv = self.store.rows("SELECT argv FROM arms WHERE id = ?", [launch["arm_id"]])
        if argv:
            words = json.loads(argv[0]["argv"])
            if "--served-model-name" in words:
                return str(words[words.index("--served-model-name") + 1])
        raise ServiceError(f"launch {launch['id']}: its arm row does not name a served model")

    async def bench(self, launch_id: str, shape: str, concurrency: int, prompts: int | None = None,
                    seed: int = 0) -> str:  # fmt: skip
        """Start the load generator on the box against a serving launch; the result arrives via the journal."""
        launch = self._serving(launch_id)
        refusal = bench_refusal(self.store, launch["box"], self.store.clock())
        if refusal:
            raise ServiceError(refusal)
        s = self.catalog.shapes.get(shape)
        if s is None:
            raise ServiceError(f"unknown shape {shape!r}; known: {', '.join(sorted(self.catalog.shapes))}")
        bench_id = f"bench-{secrets.token_hex(6)}"
        args = {
            "bench_id": bench_id, "launch_id": launch_id, "arm": launch["arm"],
            "base_url": f"http://127.0.0.1:{launch['port']}", "model": self._served_name(launch),
            "workload": s.name, "input_len": s.input_len, "output_len": s.output_len, "prefix_len": s.prefix_len,
            "concurrency": concurrency, "prompts": prompts or max(32, concurrency * 4), "seed": seed,
        }  # fmt: skip
        link = await self._link(launch["box"])
        await link.command("bench", args, command_id=bench_id)
        return bench_id

    async def tripwire(self, launch_id: str, max_tokens: int | None = None) -> str:
        """Start the corruption tripwire against a serving launch with the arm's vendor serving profile.

        ``max_tokens`` caps each answer (None: the tripwire's own default, which reasoning models need).
        """
        launch = self._serving(launch_id)
        box = self.store.boxes.get(launch["box"])
        probe = self.store.checks.latest_probe(box.name)
        resolved = resolve(self.catalog, launch["arm"], box_spec(box, probe.data if probe else None))
        tripwire_id = f"tripwire-{secrets.token_hex(6)}"
        args = {
            "tripwire_id": tripwire_id, "launch_id": launch_id, "arm": launch["arm"],
            "base_url": f"http://127.0.0.1:{launch['port']}", "model": self._served_name(launch),
            "profile": resolved.profile.to_dict(),
        }  # fmt: skip
        if max_tokens is not None:
            args["max_tokens"] = max_tokens
        link = await self._link(box.name)
        await link.command("tripwire", args, command_id=tripwire_id)
        return tripwire_id

    async def wait_for_run(self, box: str, run_id: str, kind: str, timeout_s: float,
                           tick: Callable[[float], None] | None = None) -> dict[str, Any]:  # fmt: skip
        """Pull the box's journal until the result row of a bench or tripwire lands, or its command fails.

        The agent runs the tool detached from the link: if the link drops, this wait ends with the link's
        error, but the run goes on and its row lands at the next pull of the journal.
        """
        link = await self._link(box)
        started = time.monotonic()
        while True:
            await self._settle(link)  # a supervised loop (the TUI) is already pulling
            row = self.store.results.run(kind, run_id)
            if row is not None:
                return row
            command = self.store.commands.get(run_id)
            if command.state == "failed":
                raise ServiceError(f"{kind} {run_id} on box {box} failed: {command.error}")
            elapsed = time.monotonic() - started
            if elapsed > timeout_s:
                raise ServiceError(
                    f"{kind} {run_id} on box {box} has no result after {elapsed:.0f} s; it keeps running on "
                    f"the box and its row lands at the next `campaign box connect {box}`"
                )
            if tick:
                tick(elapsed)
            await asyncio.sleep(1.0)

    async def set_deadline(self, box: str, timer_id: int | str, deadline_ms: int, action: str) -> dict[str, Any]:
        """Arm the box-side watchdog (it holds the deadline with the console gone)."""
        link = await self._link(box)
        return await link.command(
            "set_deadline",
            {"timer_id": timer_id, "deadline_ms": deadline_ms, "action": action, "console_now_ms": self.store.clock()},
        )

    async def log_tail(self, launch_id: str, lines: int = 40, timeout: float = 15.0) -> list[str]:
        """The last ``lines`` of a launch's server log, read on its box (the log never leaves the box)."""
        launch = self.store.launches.get(launch_id)
        if launch is None:
            raise ServiceError(f"no launch {launch_id!r} in this state.db")
        link = await self._link(launch["box"])
        result = await link.command("log_tail", {"launch_id": launch_id, "lines": lines}, timeout=timeout)
        return [str(line) for line in result["lines"]]

    async def close(self) -> None:
        await self.fleet.close()
