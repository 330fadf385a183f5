"""Logit-level divergence: two serving launches compared on identical contexts, against a control pair.

The comparison runs on the box (agents/kldiff, next to both servers: they bind the box's loopback), so
both launches of a pair must serve on one box. With a control (the same configuration served twice)
the control pair is measured first and the pair's row carries its figures; the verdict is the read
model's (``KldiffVerdict``), written beside the figures. Without a control there are figures and no
verdict: a divergence means nothing until the stack's own noise is known (the write-up's two identical
servers disagreed on 3.8% of top-1 tokens).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from console.bounds import POSITIONS, SEED, TOP_K, WAIT_S
from console.errors import InputError, Refused
from console.readmodel import KldiffRun, kldiff_run
from console.service.base import ServiceError
from console.service.runs import RunIntents
from console.store.launches import Launch

DEFAULT_TIMEOUT_S = 900.0


@dataclass(frozen=True)
class KldiffOptions:
    """What the tool is asked besides the servers (None: its own default)."""

    contexts: list[Any] | None = None
    positions: int | None = None
    top_k: int | None = None
    seed: int | None = None


@dataclass(frozen=True)
class KldiffOutcome:
    """The pair's stored row and, when one was measured, its control's."""

    pair: KldiffRun
    control: KldiffRun | None


class KldiffIntents(RunIntents):
    def _pair(self, launch_a: str, launch_b: str) -> tuple[Launch, Launch]:
        a, b = self.serving_launch(launch_a), self.serving_launch(launch_b)
        if a.box != b.box:
            raise ServiceError(
                f"launch {a.id} serves on box {a.box} and {b.id} on box {b.box}: kldiff runs on the box next to "
                "both servers (they listen on its loopback); serve the two on one box"
            )
        if a.id == b.id:
            raise InputError(
                f"launch {a.id} twice: a pair is two servers (a control pair is one arm launched twice)"
            )
        return a, b

    async def _start(
        self, a: Launch, b: Launch, role: str, options: KldiffOptions, control_run: str | None
    ) -> str:
        kldiff_id = f"kldiff-{secrets.token_hex(6)}"
        model_a, model_b = self._served_name(a), self._served_name(b)
        args: dict[str, Any] = {
            "kldiff_id": kldiff_id,
            "launch_id": a.id,
            "launch_a": a.id,
            "launch_b": b.id,
            "arm_a": a.arm,
            "arm_b": b.arm,
            "role": role,
            "control_run_id": control_run,
            "a": f"http://127.0.0.1:{a.port}",
            "b": f"http://127.0.0.1:{b.port}",
            "model": model_a,
            "model_b": model_b if model_b != model_a else None,
            "contexts": options.contexts,
            "positions": options.positions,
            "top_k": options.top_k,
            "seed": options.seed,
        }
        await self.send_job(self.store.boxes.get(a.box), "kldiff", args, kldiff_id)
        return kldiff_id

    async def _measured(
        self, box: str, run_id: str, timeout_s: float, tick: Callable[[float], None] | None
    ) -> KldiffRun:
        error = await self.until_job_ends(box, run_id, timeout_s, tick)
        row = kldiff_run(self.store, run_id)
        if row is None:
            raise Refused(
                f"kldiff {run_id} on box {box} failed: {error or 'it ended without a row in the store'}"
            )
        self.store.kldiff.set_verdict(row.id, row.verdict.text)
        return replace(row, recorded_verdict=row.verdict.text)

    async def kldiff(
        self,
        launch_a: str,
        launch_b: str,
        control: tuple[str, str] | None = None,
        options: KldiffOptions | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        tick: Callable[[float], None] | None = None,
    ) -> KldiffOutcome:
        """Measure the control pair (when given), then the pair read against it; both rows are stored."""
        options = options or KldiffOptions()
        _check(options, timeout_s)
        a, b = self._pair(launch_a, launch_b)
        control_row = None
        if control is not None:
            c, d = self._pair(*control)
            run = await self._start(c, d, "control", options, None)
            control_row = await self._measured(c.box, run, timeout_s, tick)
        run = await self._start(a, b, "pair", options, control_row.run_id if control_row else None)
        return KldiffOutcome(await self._measured(a.box, run, timeout_s, tick), control_row)


def _check(options: KldiffOptions, timeout_s: float) -> None:
    """The numbers the CLI's parsers bound, refused the same way here (the TUI and scripts call the service
    directly), before a command is stored or sent."""
    for bound, value, name in (
        (POSITIONS, options.positions, "--positions"),
        (TOP_K, options.top_k, "--top-k"),
        (SEED, options.seed, "--seed"),
    ):
        if value is not None:
            bound.check(value, name)
    WAIT_S.check(timeout_s, "--timeout")
