"""Measurement intents: a benchmark or the tripwire, run on the box next to the server; their rows come back
through the journal, so waiting for a result means pulling the journal until its row lands."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable
from typing import Any

from console.checks.run import serving_python
from console.errors import InputError, Refused
from console.readmodel import ResultRow, TripwireRun, bench_run, tripwire_run
from console.recipes import box_spec, resolve
from console.service.base import ServiceError, reaching
from console.service.launches import LaunchIntents
from console.store.launches import Launch
from console.timers import bench_refusal

POLL_S = 1.0


class RunIntents(LaunchIntents):
    def serving_launch(self, launch_id: str) -> Launch:
        launch = self.store.launches.get(launch_id)
        if launch is None:
            raise InputError(f"no launch {launch_id!r} in this state.db", "`campaign launch ARM --box NAME` first")
        if launch.state != "serving":
            raise ServiceError(f"launch {launch_id} is {launch.state}, not serving")
        return launch

    def _served_name(self, launch: Launch) -> str:
        arm = self.store.launches.arm_record(launch.arm_id)
        name = arm.served_model_name if arm else None
        if name is None:
            raise ServiceError(f"launch {launch.id}: its arm row does not name a served model")
        return name

    async def bench(self, launch_id: str, shape: str, concurrency: int, prompts: int | None = None,
                    seed: int = 0) -> str:  # fmt: skip
        """Start the load generator on the box against a serving launch; returns the run id."""
        if concurrency < 1:
            raise InputError("--concurrency must be 1 or more")
        launch = self.serving_launch(launch_id)
        refusal = bench_refusal(self.store, launch.box, self.store.clock())
        if refusal:
            raise ServiceError(refusal)
        s = self.catalog.shapes.get(shape)
        if s is None:
            raise InputError(f"unknown shape {shape!r}; known: {', '.join(sorted(self.catalog.shapes))}")
        bench_id = f"bench-{secrets.token_hex(6)}"
        args = {
            "bench_id": bench_id, "launch_id": launch_id, "arm": launch.arm,
            "base_url": f"http://127.0.0.1:{launch.port}", "model": self._served_name(launch),
            "workload": s.name, "input_len": s.input_len, "output_len": s.output_len, "prefix_len": s.prefix_len,
            "concurrency": concurrency, "prompts": prompts or max(32, concurrency * 4), "seed": seed,
        }  # fmt: skip
        link = await self.link(launch.box)
        with reaching(launch.box):
            await link.command("bench", args, command_id=bench_id)
        return bench_id

    async def tripwire(self, launch_id: str, max_tokens: int | None = None) -> str:
        """Start the corruption tripwire against a serving launch with the arm's vendor serving profile.

        ``max_tokens`` caps each answer (None: the tripwire's own default, which reasoning models need).
        """
        launch = self.serving_launch(launch_id)
        box = self.store.boxes.get(launch.box)
        probe = self.store.checks.latest_probe(box.name)
        resolved = resolve(self.catalog, launch.arm, box_spec(box, probe.data if probe else None))
        tripwire_id = f"tripwire-{secrets.token_hex(6)}"
        args: dict[str, Any] = {
            "tripwire_id": tripwire_id, "launch_id": launch_id, "arm": launch.arm,
            "base_url": f"http://127.0.0.1:{launch.port}", "model": self._served_name(launch),
            "profile": resolved.profile.to_dict(),
        }  # fmt: skip
        if max_tokens is not None:
            args["max_tokens"] = max_tokens
        python = serving_python(box)
        if python:  # the tripwire's client (openai) is installed where the server's vLLM is
            args["python"] = python
        link = await self.link(box.name)
        with reaching(box.name):
            await link.command("tripwire", args, command_id=tripwire_id)
        return tripwire_id

    async def until_job_ends(self, box: str, command_id: str, timeout_s: float,
                             tick: Callable[[float], None] | None = None) -> str | None:  # fmt: skip
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
            await asyncio.sleep(POLL_S)

    async def bench_result(self, box: str, run_id: str, timeout_s: float,
                           tick: Callable[[float], None] | None = None) -> ResultRow:  # fmt: skip
        """Wait for the bench ``run_id`` and return its stored row."""
        error = await self.until_job_ends(box, run_id, timeout_s, tick)
        row = bench_run(self.store, run_id)
        if row is None:
            raise Refused(f"bench {run_id} on box {box} failed: {error or 'it ended without a row in the store'}")
        return row

    async def tripwire_result(self, box: str, run_id: str, timeout_s: float,
                              tick: Callable[[float], None] | None = None) -> TripwireRun:  # fmt: skip
        """Wait for the tripwire ``run_id`` and return its stored verdict."""
        error = await self.until_job_ends(box, run_id, timeout_s, tick)
        row = tripwire_run(self.store, run_id)
        if row is None:
            raise Refused(f"tripwire {run_id} on box {box} failed: {error or 'it ended without a verdict in the store'}")
        return row
