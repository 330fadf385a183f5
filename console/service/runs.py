"""Measurement intents: a benchmark or the tripwire, run on the box next to the server; their rows come back
through the journal, so waiting for a result means pulling the journal until its row lands.

A benchmark measures the node, not one replica: one load-generator run drives every serving replica of
the launch at once, the concurrency dealt round-robin over their ports, and stores one node row (the
seed's tables are per node; benching replicas one by one at the full concurrency put N x C streams on
the node and priced it by one replica's throughput)."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from agents.loadgen import memory as loadgen_memory
from console import bounds
from console.checks.run import serving_python
from console.errors import InputError, Refused
from console.readmodel import RepeatGroup, ResultRow, TripwireRun, bench_run, repeat_groups, tripwire_run
from console.recipes import box_spec, resolve
from console.service.base import ServiceError, reaching
from console.service.launches import LaunchIntents
from console.service.sweep_ledger import SweepLedger
from console.store import Box
from console.store.launches import Launch
from console.timers import bench_refusal

POLL_S = 1.0


PROMPTS_PER_STREAM = loadgen_memory.PROMPTS_PER_STREAM
"""Measured requests per stream by default: the write-up's 6-8 x concurrency, so the steady window is long."""
DEFAULT_BENCH_TIMEOUT_S = 3600.0


@dataclass(frozen=True)
class BenchNode:
    """What one node bench measures: every serving replica of one launch of an arm on a box."""

    box: str
    arm: str
    replicas: tuple[Launch, ...]

    @property
    def launch_ids(self) -> list[str]:
        return [r.id for r in self.replicas]


@dataclass(frozen=True)
class BenchOutcome:
    """What ``bench`` did: the runs it started and, when it waited, their stored node rows."""

    box: str
    run_ids: tuple[str, ...]
    rows: tuple[ResultRow, ...]
    group: RepeatGroup | None
    """The repeats as one group, with their spread (``repeat`` above 1 only)."""


def check_pacing(rate: float | None, burstiness: float | None) -> None:
    """Refuse, before anything is stored or sent, a rate or burstiness outside console/bounds.py, or a
    burstiness without a rate (it shapes paced arrivals only)."""
    if rate is None:
        if burstiness is not None:
            raise InputError(
                f"--burstiness {burstiness} without --rate: it shapes paced arrivals only",
                "give --rate R too",
            )
        return
    bounds.REQUEST_RATE.check(rate, "--rate")
    if burstiness is not None:
        bounds.BURSTINESS.check(burstiness, "--burstiness")


class RunIntents(LaunchIntents):
    def sweep_ledger(self, sweep_id: int) -> SweepLedger:
        """What a sweep's walker (console/service/sweep/walk.py) may write of that sweep's record, and nothing else."""
        return SweepLedger(self.store, sweep_id)

    def serving_launch(self, launch_id: str, *, loading: bool = False) -> Launch:
        """The launch ``launch_id``, which must serve (or, with ``loading``, may still be requested or starting:
        the box has it and has not said it ended)."""
        launch = self.store.launches.get(launch_id)
        if launch is None:
            raise InputError(
                f"no launch {launch_id!r} in this state.db", "`campaign launch ARM --box NAME` first"
            )
        if launch.state != "serving" and not (loading and launch.state in ("requested", "starting")):
            raise ServiceError(f"launch {launch_id} is {launch.state}, not serving")
        return launch

    def _served_name(self, launch: Launch) -> str:
        arm = self.store.launches.arm_record(launch.arm_id)
        name = arm.served_model_name if arm else None
        if name is None:
            raise ServiceError(f"launch {launch.id}: its arm row does not name a served model")
        return name

    def bench_node(self, arm_or_launch: str, box: str | None) -> BenchNode:
        """The replicas a bench of ``arm_or_launch`` measures: a launch id stands for every replica its launch
        started; an arm for every replica of its one live launch on ``box``. Each must be serving."""
        launch = self.store.launches.get(arm_or_launch)
        if launch is not None:
            if box is not None and launch.box != box:
                raise InputError(f"launch {arm_or_launch} runs on box {launch.box}, not {box}")
            siblings = self.store.launches.replicas_of(launch)
        else:
            if box is None:
                raise InputError(
                    f"no launch {arm_or_launch!r} in this state.db",
                    "to bench an arm, name its box: --box NAME",
                )
            self.store.boxes.get(box)
            siblings = self.store.launches.live(box, arm=arm_or_launch)
            if not siblings:
                raise InputError(
                    f"no launch {arm_or_launch!r} and no live launch of arm {arm_or_launch!r} on {box}",
                    f"`campaign launch {arm_or_launch} --box {box}` first",
                )
            launches = {x.launch_group or f"arm row {x.arm_id}" for x in siblings}
            if len(launches) > 1:
                raise InputError(
                    f"arm {arm_or_launch} has {len(launches)} live launches on {box} "
                    f"({', '.join(x.id for x in siblings)})",
                    "name one launch id to bench its replicas",
                )
        waiting = [x for x in siblings if not x.ended and x.state != "serving"]
        if waiting:
            raise ServiceError(
                f"replica {waiting[0].id} is {waiting[0].state}, not serving",
                "bench the node once every replica serves",
            )
        serving = tuple(x for x in siblings if x.state == "serving")
        if not serving:
            first = siblings[0]
            raise ServiceError(f"launch {first.id} is {first.state}, not serving")
        return BenchNode(serving[0].box, serving[0].arm, serving)

    def check_bench_size(self, box: str, shape: str, concurrency: int, prompts: int | None = None) -> None:
        """Refuse, with ``InputError``, a bench the box's load generator could not hold, before anything is
        stored or sent: concurrency and prompts below 1, or a run whose memory (agents/loadgen/memory.py:
        the same figures and share the load generator checks on the box) exceeds the budget of the box's
        MemAvailable at its latest probe; with no memory figures in a probe, the fallback ceiling.

        Why here: an unbounded ``-c`` grew the load generator to 22.5 GB and the OOM killer took the
        agent and sshd with it. The load generator refuses such a run itself too; this says so at once."""
        if concurrency < 1:
            raise InputError(f"-c {concurrency}: a bench needs at least 1 stream", "give -c 1 or more")
        if prompts is not None and prompts < 1:
            raise InputError(f"--prompts {prompts}: must be 1 or more")
        s = self.catalog.shapes.get(shape)
        if s is None:
            raise InputError(f"unknown shape {shape!r}; known: {', '.join(sorted(self.catalog.shapes))}")
        probe = self.store.checks.latest_probe(box)
        figures = probe.data.get("memory") if probe else None
        available = figures.get("available_bytes") if isinstance(figures, dict) else None
        cpus = probe.data.get("cpu_count") if probe else None
        cores = cpus if isinstance(cpus, int) and not isinstance(cpus, bool) and cpus > 0 else 1
        if isinstance(available, int) and not isinstance(available, bool) and available > 0 and probe:
            budget = loadgen_memory.budget_of(available)
            source = (
                f"{loadgen_memory.MEMORY_SHARE:.0%} of box {box}'s MemAvailable of "
                f"{loadgen_memory.size(available)} at its latest probe"
            )
        else:
            budget = loadgen_memory.FALLBACK_BUDGET_BYTES
            source = (
                f"no probe of box {box} with memory figures, so the fallback ceiling; "
                f"`campaign check {box}` sizes it by the box's memory"
            )
        load = loadgen_memory.Load(
            concurrency,
            prompts or PROMPTS_PER_STREAM * concurrency,
            s.prefix_len + s.input_len,
            s.output_len,
            loadgen_memory.processes_for(concurrency, cores),
        )
        reason = loadgen_memory.refusal(
            load, budget, source, None if prompts else PROMPTS_PER_STREAM, cores, "-c"
        )
        if reason:
            raise InputError(f"bench of shape {s.name} on box {box}: {reason}")

    async def start_bench(
        self,
        node: BenchNode,
        shape: str,
        concurrency: int,
        prompts: int | None = None,
        seed: int | None = None,
        repeat_group: str | None = None,
        rate: float | None = None,
        burstiness: float | None = None,
    ) -> str:
        """Start one load-generator run on the box against every replica of ``node`` at once, the
        ``concurrency`` streams dealt round-robin to them; returns the run id. Its node row lands through
        the journal. ``seed`` None: a new seed for this run (recorded with the row). ``rate``: the requests
        are released at that many a second (``burstiness`` the gamma shape, 1 Poisson), ``concurrency`` the
        most in flight; None: the closed loop."""
        self.check_bench_size(node.box, shape, concurrency, prompts)
        if concurrency < len(node.replicas):
            raise InputError(
                f"concurrency {concurrency} is below the {len(node.replicas)} replicas of {node.arm} on "
                f"{node.box}",
                f"give every replica a stream: -c {len(node.replicas)} or more",
            )
        refusal = bench_refusal(self.store, node.box, self.store.clock())
        if refusal:
            raise ServiceError(refusal)
        s = self.catalog.shapes.get(shape)
        if s is None:
            raise InputError(f"unknown shape {shape!r}; known: {', '.join(sorted(self.catalog.shapes))}")
        first = node.replicas[0]
        bench_id = f"bench-{secrets.token_hex(6)}"
        args = {
            "bench_id": bench_id,
            "launch_id": first.id,
            "launch_ids": node.launch_ids,
            "replicas": len(node.replicas),
            "arm": node.arm,
            "base_url": [f"http://127.0.0.1:{x.port}" for x in node.replicas],
            "model": self._served_name(first),
            "workload": s.name,
            "input_len": s.input_len,
            "output_len": s.output_len,
            "prefix_len": s.prefix_len,
            "concurrency": concurrency,
            "prompts": prompts or PROMPTS_PER_STREAM * concurrency,
            "seed": secrets.randbelow(2**31) if seed is None else seed,
            "repeat_group": repeat_group,
        }
        if rate is not None:  # a closed-loop command stays as it was: no pacing keys
            args.update(request_rate=rate, burstiness=1.0 if burstiness is None else burstiness)
        link = await self.link(node.box)
        with reaching(node.box):
            await link.command("bench", args, command_id=bench_id)
        return bench_id

    async def bench(
        self,
        arm_or_launch: str,
        box: str | None,
        shape: str,
        concurrency: int,
        prompts: int | None = None,
        seed: int | None = None,
        repeat: int = 1,
        *,
        wait: bool = True,
        timeout_s: float = DEFAULT_BENCH_TIMEOUT_S,
        tick: Callable[[float], None] | None = None,
        rate: float | None = None,
        burstiness: float | None = None,
    ) -> BenchOutcome:
        """Benchmark the node: every serving replica of the arm on the box (or of the launch id's launch) at once.

        ``repeat`` runs one after another, each with its own seed unless ``seed`` is given, stored as one
        repeat group; ``wait`` False starts one run and returns (its row lands at the next sync). ``rate``
        (requests/s, console/bounds.py) paces the requests open-loop with ``concurrency`` as the cap,
        ``burstiness`` (default 1, Poisson) the gamma shape of their intervals; None: the closed loop.
        """
        check_pacing(rate, burstiness)
        if repeat < 1:
            raise InputError(f"--repeat {repeat}: must be 1 or more")
        if repeat > 1 and not wait:
            raise InputError(
                "--no-wait starts one run", "--repeat N waits for each run before the next: drop one"
            )
        node = self.bench_node(arm_or_launch, box)
        group = f"group-{secrets.token_hex(6)}" if repeat > 1 else None
        run_ids: list[str] = []
        rows: list[ResultRow] = []
        for _ in range(repeat):
            run_ids.append(
                await self.start_bench(node, shape, concurrency, prompts, seed, group, rate, burstiness)
            )
            if wait:
                rows.append(await self.bench_result(node.box, run_ids[-1], timeout_s, tick))
        groups = repeat_groups(rows)
        return BenchOutcome(node.box, tuple(run_ids), tuple(rows), groups[0] if groups else None)

    async def tripwire(
        self, launch_id: str, max_tokens: int | None = None, *, ready_within_s: float | None = None
    ) -> str:
        """Start the corruption tripwire against a serving launch with the arm's vendor serving profile.

        ``max_tokens`` caps each answer (None: the tripwire's own default, which reasoning models need).
        ``ready_within_s``: the launch may still be loading; the box starts the client now and it waits up to
        that long for the launch to serve, so the client's start overlaps the load (agents/tripwire/ready.py).
        """
        if ready_within_s is not None:
            bounds.WAIT_S.check(ready_within_s, "ready_within_s")
        launch = self.serving_launch(launch_id, loading=ready_within_s is not None)
        box = self.store.boxes.get(launch.box)
        probe = self.store.checks.latest_probe(box.name)
        resolved = resolve(self.catalog, launch.arm, box_spec(box, probe.data if probe else None))
        tripwire_id = f"tripwire-{secrets.token_hex(6)}"
        args: dict[str, Any] = {
            "tripwire_id": tripwire_id,
            "launch_id": launch_id,
            "arm": launch.arm,
            "base_url": f"http://127.0.0.1:{launch.port}",
            "model": self._served_name(launch),
            "profile": resolved.profile.to_dict(),
        }
        if max_tokens is not None:
            args["max_tokens"] = max_tokens
        if ready_within_s is not None:
            args["wait_ready_s"] = ready_within_s
        await self.send_job(box, "tripwire", args, tripwire_id)
        return tripwire_id

    async def send_job(self, box: Box, command: str, args: Mapping[str, Any], command_id: str) -> None:
        """Send a box-side job (tripwire, kldiff, specdiff) to the box's agent, its unset arguments left out,
        run by the serving env's Python where the box has one: the job's client (openai) is installed where
        the server's vLLM is."""
        sent = {k: v for k, v in args.items() if v is not None}
        python = serving_python(box)
        if python:
            sent["python"] = python
        link = await self.link(box.name)
        with reaching(box.name):
            await link.command(command, sent, command_id=command_id)

    async def until_job_ends(
        self, box: str, command_id: str, timeout_s: float, tick: Callable[[float], None] | None = None
    ) -> str | None:
        """Pull the journal until a bench or tripwire job on the box ended; None when it produced its result,
        else the error. The agent runs the job detached from the link: a dropped link ends this wait with an
        ``Unreachable``, but the run goes on and its row lands at the next pull."""
        started = time.monotonic()
        while True:
            await self.settle(box)
            command = self.store.commands.get(command_id)
            if command.state == "failed":
                return command.error or "failed"
            if isinstance(command.result, dict) and "exit_code" in command.result:
                return None
            elapsed = time.monotonic() - started
            if elapsed > timeout_s:
                raise Refused(
                    f"{command.op} {command_id} on box {box} has not ended after {elapsed:.0f} s",
                    f"it keeps running on the box and its row lands at the next `campaign box connect {box}`",
                )
            if tick:
                tick(elapsed)
            await self.until_ingested(box, POLL_S)

    async def bench_result(
        self, box: str, run_id: str, timeout_s: float, tick: Callable[[float], None] | None = None
    ) -> ResultRow:
        """Wait for the bench ``run_id`` and return its stored row."""
        error = await self.until_job_ends(box, run_id, timeout_s, tick)
        row = bench_run(self.store, run_id)
        if row is None:
            raise Refused(
                f"bench {run_id} on box {box} failed: {error or 'it ended without a row in the store'}"
            )
        return row

    async def tripwire_result(
        self, box: str, run_id: str, timeout_s: float, tick: Callable[[float], None] | None = None
    ) -> TripwireRun:
        """Wait for the tripwire ``run_id`` and return its stored verdict."""
        error = await self.until_job_ends(box, run_id, timeout_s, tick)
        row = tripwire_run(self.store, run_id)
        if row is None:
            raise Refused(
                f"tripwire {run_id} on box {box} failed: {error or 'it ended without a verdict in the store'}"
            )
        return row
