"""specdiff: does speculation change the greedy output? A speculative launch against its base, read against
a control that must reproduce itself first.

Policy lives here, before anything is sent: SPEC must speculate (its argv carries ``--speculative-config``),
BASE must be SPEC without it (every other argv element equal, the port aside), and a control is required:
one server configuration captured twice, either the same launch given twice (the write-up's "the same
server captured twice") or two launches of one configuration, that configuration being SPEC's or BASE's.
The four generate on the box (agents/specdiff, next to the servers on its loopback); the row lands through
the journal and the read model's verdict (console/readmodel/specdiff.py) is written beside it.
"""

from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from agents.specdiff.prompts import DEFAULT_PROMPTS
from console.bounds import MAX_TOKENS, PROMPTS, SEED, WAIT_S
from console.errors import InputError, Refused
from console.readmodel.specdiff import SpecdiffRun, specdiff_run
from console.recipes.model import SPECULATIVE_FLAG
from console.service.base import ServiceError
from console.service.runs import RunIntents
from console.store.launches import Launch, argv_flag

DEFAULT_TIMEOUT_S = 900.0
PER_LAUNCH = ("--port",)
"""Flags whose value differs between launches of one configuration by construction (console/recipes
resolves each replica's port), left out of every argv comparison."""


@dataclass(frozen=True)
class SpecdiffOptions:
    """What the servers generate (None: the tool's default) and what a verdict needs of the control."""

    prompts: list[str] | None = None
    max_tokens: int | None = None
    seed: int | None = None
    min_control: int | None = None
    """Control reproductions a verdict needs; None: every prompt."""


def argv_elements(argv: Sequence[str], leave_out: Sequence[str] = PER_LAUNCH) -> list[str]:
    """A server's argv as the elements an operator reads: ``--flag value`` as one, a bare word or a flag
    without a value alone, ``--flag=value`` as ``--flag value``; the flags in ``leave_out`` dropped."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        word = argv[i]
        if word.startswith("--") and "=" in word:
            flag, value = word.split("=", 1)
            element, i = f"{flag} {value}", i + 1
        elif word.startswith("--") and i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            flag, element, i = word, f"{word} {argv[i + 1]}", i + 2
        else:
            flag, element, i = word, word, i + 1
        if flag not in leave_out:
            out.append(element)
    return out


def _unmatched(ours: list[str], theirs: list[str]) -> list[str]:
    """The elements of ``ours`` that ``theirs`` does not have as often, in ``ours``' order."""
    left = Counter(theirs)
    out = []
    for element in ours:
        if left[element]:
            left[element] -= 1
        else:
            out.append(element)
    return out


def argv_difference(a: Sequence[str], b: Sequence[str], leave_out: Sequence[str] = PER_LAUNCH) -> list[str]:
    """The elements one argv has and the other has not (``+x``: a's, ``-y``: b's), in argv order; empty when
    the two run the same configuration (order of the elements aside: vLLM reads flags by name)."""
    ea, eb = argv_elements(a, leave_out), argv_elements(b, leave_out)
    return [f"+{e}" for e in _unmatched(ea, eb)] + [f"-{e}" for e in _unmatched(eb, ea)]


class SpecdiffIntents(RunIntents):
    def _argv(self, launch: Launch) -> tuple[str, ...]:
        arm = self.store.launches.arm_record(launch.arm_id)
        if arm is None:
            raise ServiceError(f"launch {launch.id}: its arm row is not in this state.db; relaunch it")
        return arm.argv

    def _checked(
        self, spec_id: str, base_id: str, control: tuple[str, str] | None
    ) -> tuple[Launch, Launch, Launch, Launch, str]:
        """The four launches, each serving on one box, with SPEC's speculative config; every refusal first."""
        spec, base = self.serving_launch(spec_id), self.serving_launch(base_id)
        spec_argv, base_argv = self._argv(spec), self._argv(base)
        config = argv_flag(spec_argv, SPECULATIVE_FLAG)
        if config is None:
            raise Refused(
                f"SPEC launch {spec.id} ({spec.arm}) has no {SPECULATIVE_FLAG} in its argv: nothing speculates",
                "give a drafter arm's launch as SPEC and its baseline's as BASE",
            )
        if spec.id == base.id:
            raise Refused(
                f"launch {spec.id} as both SPEC and BASE", "give BASE: the same arm without speculation"
            )
        differ = argv_difference(spec_argv, base_argv, (*PER_LAUNCH, SPECULATIVE_FLAG))
        if argv_flag(base_argv, SPECULATIVE_FLAG) is not None:
            differ.append(f"-{SPECULATIVE_FLAG} (BASE speculates too)")
        if differ:
            raise Refused(
                f"BASE launch {base.id} ({base.arm}) differs from SPEC {spec.id} ({spec.arm}) in more than "
                f"{SPECULATIVE_FLAG}: {', '.join(differ)} (+ SPEC's, - BASE's)",
                "launch BASE as SPEC's arm without the speculative config (its baseline arm)",
            )
        if control is None:
            raise Refused(
                "specdiff without --control: greedy output is not reproducible on every stack, so no verdict "
                "is drawn unless a control reproduces itself",
                "add --control C1 C2: one server captured twice (the same launch twice) or two launches of "
                "SPEC's or BASE's arm",
            )
        c1, c2 = self.serving_launch(control[0]), self.serving_launch(control[1])
        boxes = {x.box for x in (spec, base, c1, c2)}
        if len(boxes) > 1:
            raise ServiceError(
                f"the launches serve on boxes {', '.join(sorted(boxes))}: specdiff runs on the box next to all "
                "of them (they listen on its loopback); serve the four on one box"
            )
        self._check_control(spec, base, c1, c2)
        return spec, base, c1, c2, config

    def _check_control(self, spec: Launch, base: Launch, c1: Launch, c2: Launch) -> None:
        """The control is one configuration captured twice, and that configuration is SPEC's or BASE's."""
        a, b = self._argv(c1), self._argv(c2)
        differ = argv_difference(a, b)
        if differ:
            raise Refused(
                f"control launches {c1.id} and {c2.id} run different configurations: {', '.join(differ)} "
                f"(+ {c1.id}'s, - {c2.id}'s)",
                "a control is one configuration twice: give one launch twice, or two launches of one arm",
            )
        if argv_difference(a, self._argv(spec)) and argv_difference(a, self._argv(base)):
            raise Refused(
                f"control {c1.id} ({c1.arm}) is neither SPEC's configuration nor BASE's: "
                f"{', '.join(argv_difference(a, self._argv(base)))} against BASE",
                "capture SPEC or BASE twice: --control BASE BASE, or two launches of one of their arms",
            )

    async def specdiff(
        self,
        spec: str,
        base: str,
        control: tuple[str, str] | None,
        options: SpecdiffOptions | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        tick: Callable[[float], None] | None = None,
    ) -> SpecdiffRun:
        """Refuse what cannot be concluded from, else generate on all four servers and return the stored run
        with its verdict written."""
        options = options or SpecdiffOptions()
        prompts = _check(options, timeout_s)
        s, b, c1, c2, config = self._checked(spec, base, control)
        run_id = f"specdiff-{secrets.token_hex(6)}"
        args: dict[str, Any] = {
            "specdiff_id": run_id,
            "launch_id": s.id,
            "spec_launch": s.id,
            "base_launch": b.id,
            "control_launch_a": c1.id,
            "control_launch_b": c2.id,
            "spec_arm": s.arm,
            "base_arm": b.arm,
            "control_arm": c1.arm,
            "speculative_config": config,
            "min_control": options.min_control or prompts,
            **{side: f"http://127.0.0.1:{x.port}" for side, x in zip(_SIDES, (s, b, c1, c2), strict=True)},
            "model": self._served_name(s),
            "prompts": options.prompts,
            "max_tokens": options.max_tokens,
            "seed": options.seed,
        }
        await self.send_job(self.store.boxes.get(s.box), "specdiff", args, run_id)
        error = await self.until_job_ends(s.box, run_id, timeout_s, tick)
        row = specdiff_run(self.store, run_id)
        if row is None:
            raise Refused(
                f"specdiff {run_id} on box {s.box} failed: {error or 'it ended without a row in the store'}"
            )
        self.store.specdiff.set_verdict(row.id, row.verdict.text)
        return replace(row, recorded_verdict=row.verdict.text)


_SIDES = ("spec", "base", "control_a", "control_b")
"""The tool's flags for the four servers (agents/specdiff/cli.py), in the order it captures them."""


def _check(options: SpecdiffOptions, timeout_s: float) -> int:
    """The numbers the CLI's parsers bound, refused the same way here (the TUI and scripts call the service
    directly), before a command is stored or sent; returns the prompt count."""
    for bound, value, name in (
        (MAX_TOKENS, options.max_tokens, "--max-tokens"),
        (SEED, options.seed, "--seed"),
        (PROMPTS, options.min_control, "--min-control"),
    ):
        if value is not None:
            bound.check(value, name)
    WAIT_S.check(timeout_s, "--timeout")
    count = len(options.prompts) if options.prompts is not None else len(DEFAULT_PROMPTS)
    if options.min_control is not None and options.min_control > count:
        raise InputError(
            f"--min-control {options.min_control} is more than the {count} prompts",
            f"give at most {count} (the default, every prompt, is the write-up's rule)",
        )
    return count
