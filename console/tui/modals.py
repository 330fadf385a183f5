"""Modal screens: help listing every key, a confirmation that names its target, the timer and bench prompts."""

from __future__ import annotations

from datetime import tzinfo
from pathlib import Path
from typing import TypeVar

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from console.bounds import CONCURRENCY, OutOfBounds
from console.timers import TimerInputError, parse_deadline
from console.timeutil import deadline_words, fmt_remaining, fmt_utc, fmt_zone, zone
from console.tui import keymap

T = TypeVar("T")


class HelpScreen(ModalScreen[None]):
    """Every binding from the one key table, with the operator's remapping applied."""

    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "close")]

    def __init__(self, overrides: dict[str, str], keys_path: Path, read_only: bool):
        super().__init__()
        self.overrides = overrides
        self.keys_path = keys_path
        self.read_only = read_only

    def compose(self) -> ComposeResult:
        rows = keymap.help_rows(self.overrides)
        width = max(len(k) for _, k, _ in rows)
        lines = [f"Keys (remap them in {self.keys_path})", ""]
        scope = None
        for where, keys, what in rows:
            if where != scope:
                lines.append(f"[{where}]")
                scope = where
            lines.append(f"  {keys.ljust(width)}  {what}")
        if self.read_only:
            lines += ["", "browse mode: launch, kill and timers are disabled (read-only)"]
        with VerticalScroll(id="help"):
            yield Static("\n".join(lines), markup=False)


class ConfirmScreen(ModalScreen[bool]):
    """A yes/no question; No is the default and escape answers No (nothing destructive by accident)."""

    BINDINGS = [
        Binding("y", "answer(True)", "yes"),
        Binding("n,escape", "answer(False)", "no"),
    ]

    def __init__(self, title: str, body: list[str], allow_yes: bool = True):
        super().__init__()
        self.title_text = title
        self.body = body
        self.allow_yes = allow_yes

    def compose(self) -> ComposeResult:
        prompt = "y: yes   n/esc: no" if self.allow_yes else "esc: close (blocked: fix the findings first)"
        with Vertical(id="confirm"):
            yield Static(self.title_text, id="confirm-title", markup=False)
            yield Static("\n".join(self.body), markup=False)
            yield Static(prompt, id="confirm-keys")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes and self.allow_yes)


class PromptScreen(ModalScreen[T | None]):
    """A one-line question checked as it is typed: what the answer means (or why it is refused) shows under
    the line, enter accepts only an answer that reads, escape cancels (None)."""

    BINDINGS = [Binding("escape", "dismiss_none", "cancel")]
    NAME = ""  # the ids: NAME, NAME-input, NAME-check

    def question(self) -> str:
        raise NotImplementedError

    def placeholder(self) -> str:
        raise NotImplementedError

    def read(self, text: str) -> tuple[T | None, str]:
        """The answer in ``text`` (None: refused or empty) and the words shown under the line."""
        raise NotImplementedError

    def compose(self) -> ComposeResult:
        with Vertical(id=self.NAME):
            yield Static(self.question(), markup=False)
            yield Input(placeholder=self.placeholder(), id=f"{self.NAME}-input")
            yield Static("", id=f"{self.NAME}-check", markup=False)

    def on_input_changed(self, event: Input.Changed) -> None:
        self.query_one(f"#{self.NAME}-check", Static).update(self.read(event.value)[1])

    def on_input_submitted(self, event: Input.Submitted) -> None:
        answer, _ = self.read(event.value)
        if answer is not None:
            self.dismiss(answer)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)


class TimerScreen(PromptScreen[str]):
    """Ask for a hard-stop instant that names its zone; a bare time is refused, never guessed."""

    NAME = "timer"

    def __init__(self, box: str, box_tz: str | None, local: tzinfo, now_ms: int):
        super().__init__()
        self.box = box
        self.box_tz = box_tz
        self.local = local
        self.now_ms = now_ms

    def question(self) -> str:
        return (
            f"Hard stop for {self.box}: stop its arms at an instant that names its zone "
            "(2026-09-06 01:27 UTC, 2026-09-06T02:27+01:00) or in a duration (4h30m)"
        )

    def placeholder(self) -> str:
        return "instant with Z, an offset or a zone name"

    def read(self, text: str) -> tuple[str | None, str]:
        if not text.strip():
            return None, ""
        text = text.strip()
        at, within = deadline_words(text)
        try:
            # The timers' own reader: a naive or ambiguous time is refused with every reading it could have.
            ms = parse_deadline(at, within, now_ms=self.now_ms, box_tz=self.box_tz)
        except TimerInputError as exc:
            return None, f"refused: {exc}"
        lines = [f"utc   {fmt_utc(ms)}", f"local {fmt_zone(ms, self.local)}"]
        if self.box_tz:
            lines.append(f"box   {fmt_zone(ms, zone(self.box_tz))}")
        lines.append(f"in {fmt_remaining(ms - self.now_ms)}; enter arms it")
        return text, "\n".join(lines)


class BenchScreen(PromptScreen[tuple[str, int]]):
    """Ask for a bench's workload shape and concurrency as two words (``router 64``); a shape the recipes do
    not define or a concurrency outside ``console.bounds.CONCURRENCY`` (what ``campaign bench -c`` takes) is
    refused here, before anything runs."""

    NAME = "bench"

    def __init__(self, target: str, shapes: tuple[str, ...]):
        super().__init__()
        self.target = target
        self.shapes = shapes

    def question(self) -> str:
        return f"Bench {self.target}: a shape and a concurrency, like `router 64`" + (
            f"\nshapes: {', '.join(self.shapes)}" if self.shapes else ""
        )

    def placeholder(self) -> str:
        return "shape concurrency"

    def read(self, text: str) -> tuple[tuple[str, int] | None, str]:
        words = text.split()
        if not words:
            return None, ""
        if len(words) != 2:
            return None, "refused: two words, the shape then the concurrency (router 64)"
        shape, concurrency = words
        if self.shapes and shape not in self.shapes:
            return None, f"refused: no shape {shape!r} in the recipes; known: {', '.join(self.shapes)}"
        try:
            streams = CONCURRENCY.parse(concurrency)
        except OutOfBounds as exc:
            return None, f"refused: {exc}"
        return (shape, streams), f"{shape} at C{streams}; enter starts it"
