"""The console application: seven views over one read model, keys from one table, actions via an adapter.

``run_console`` (plain ``campaign``) follows the clock; ``run_browse`` (``campaign browse``) opens the
same screens read-only with the cursor parked at the end of the record, to replay the night with
``[`` and ``]``. The App owns the read model and a lock around it: every query runs on a worker thread.
"""

from __future__ import annotations

import gc
import sys
import threading
from collections.abc import Callable, Coroutine, Iterable
from datetime import tzinfo
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from textual.app import App, SystemCommand
from textual.screen import Screen

from console.errors import ConsoleError, InputError
from console.readmodel import ReadModel
from console.store import Store
from console.timeutil import Clock, system_clock, zone
from console.tui import keymap
from console.tui.actions import Actions, Recipes, ServiceActions
from console.tui.modals import HelpScreen
from console.tui.views.arms import ArmsScreen
from console.tui.views.base import ConsoleHost, ViewScreen
from console.tui.views.curves import CurvesScreen
from console.tui.views.divergence import DivergenceScreen
from console.tui.views.economics import EconomicsScreen
from console.tui.views.fleet import FleetScreen
from console.tui.views.live import LiveScreen
from console.tui.views.results import ResultsScreen
from console.tui.views.sweeps import SweepScreen

T = TypeVar("T")

VIEWS = ("fleet", "live", "arms", "results", "economics", "sweep", "curves", "divergence")
"""In number-key order: Curves on 7, Divergence on 8 (also reached from Results with `d`)."""


class ConsoleApp(App[None]):
    TITLE = "campaign"
    CSS_PATH = "console.tcss"
    BINDINGS = keymap.bindings(keymap.APP)
    MODES = {
        "fleet": FleetScreen,
        "live": LiveScreen,
        "arms": ArmsScreen,
        "results": ResultsScreen,
        "economics": EconomicsScreen,
        "sweep": SweepScreen,
        "curves": CurvesScreen,
        "divergence": DivergenceScreen,
    }

    def __init__(
        self,
        db_path: Path,
        *,
        read_only: bool = False,
        clock: Clock = system_clock,
        local_tz: tzinfo | None = None,
        actions: Actions | None = None,
        keys_path: Path | None = None,
        refresh_s: float | None = 1.0,
        box: str | None = None,
        supervise: bool = False,
    ):
        super().__init__()
        self.db_path = Path(db_path)
        self.read_only = read_only
        # The console reads through its own read-only connection even when live: the fleet layer is the
        # writer, and a read-only connection cannot become a second one by accident.
        self.store = Store(self.db_path, read_only=True, clock=clock)
        self.model = ReadModel(self.store, clock, replay=read_only)
        self.local_tz = local_tz or zone(None)
        self.actions: Actions = actions or ServiceActions(self.db_path, read_only=read_only)
        self.keys_path = keys_path if keys_path is not None else keymap.default_path()
        self.key_overrides = keymap.load(self.keys_path)
        self.refresh_s = refresh_s
        self.supervise = supervise and not read_only
        self.selected_box = box
        self.last_target: str | None = None  # the box this console last launched on
        self.box_names: list[str] = []
        self.history: list[str] = []
        self.messages: list[str] = []
        self.redraw_s: dict[str, float] = {}
        self._frozen: set[str] = set()  # views whose widgets the garbage collector no longer walks
        self._lock = threading.Lock()
        self._recipes: Recipes | None = None

    # -- lifecycle ----------------------------------------------------------------------------------------
    def on_mount(self) -> None:
        if self.key_overrides:
            self.set_keymap(self.key_overrides)
        self.switch_mode("fleet")
        if self.refresh_s and not self.read_only:
            self.set_interval(self.refresh_s, self.redraw_visible)
        if self.supervise:
            self.run_action_worker(self._supervise(), "connecting the boxes")

    async def _supervise(self) -> str:
        def told(message: str) -> None:  # called on the service's thread
            self.call_from_thread(self.say, message, "warning")

        await self.actions.supervise(told)
        return "every box is supervised (links, journal ingest, timers)"

    async def on_unmount(self) -> None:
        await self.actions.close()
        self.store.close()
        gc.unfreeze()  # what record_redraw froze may be collected once the App is gone (a test runs many Apps)

    def redraw_visible(self) -> None:
        """Only the screen the operator sees reloads; modals pause it (they cover it anyway)."""
        if isinstance(self.screen, ViewScreen):
            self.screen.reload()

    # -- what views call ------------------------------------------------------------------------------------
    def read(self, query: Callable[[], T]) -> T:
        with self._lock:
            return query()

    def recipes(self) -> Recipes:
        """Loaded once, on the first worker that asks (recipe files are IO)."""
        if self._recipes is None:
            self._recipes = self.actions.recipes()
        return self._recipes

    def record_redraw(self, view: str, seconds: float) -> None:
        self.redraw_s[view] = seconds
        if view not in self._frozen:
            # A view drawn the first time has built its widgets, kept as long as the console: frozen with the
            # modules (after a collection, so no dead cycle is kept for good), the collector's full passes skip
            # them. Unfrozen, a pass walked ~45,000 objects, several a minute while a backlog ingested, 30-90 ms
            # each: the Live redraw's p99 (bench/tui_ingest.py).
            self._frozen.add(view)
            gc.collect()
            gc.freeze()

    def say(self, text: str, severity: str = "information") -> None:
        self.messages.append(text)
        self.notify(text, severity=severity, timeout=8)  # type: ignore[arg-type]

    def refuse_if_read_only(self, verb: str) -> bool:
        if self.read_only:
            self.say(
                f"{verb} is disabled: browse mode is read-only ({self.db_path}); "
                f"open it with `campaign --db {self.db_path}` to act",
                "error",
            )
            return True
        return False

    def run_action_worker(self, coro: Coroutine[Any, Any, str], what: str) -> None:
        """Run a service intent off the UI thread and report its outcome in words."""

        async def run() -> None:
            try:
                result = await coro
            except ConsoleError as exc:  # refused, unreachable, bad input: said, and the console stays up
                self.say(f"{what}: {exc}", "error")
            else:
                self.say(f"{what}: {result}")
            if isinstance(self.screen, ViewScreen):
                self.screen.reload()

        self.run_worker(run(), group="actions")

    # -- key actions ---------------------------------------------------------------------------------------
    def action_view(self, name: str) -> None:
        if name not in VIEWS or name == self.current_mode:
            return
        self.history.append(self.current_mode)
        self.switch_mode(name)

    async def action_back(self) -> None:
        screen = self.screen
        if isinstance(screen, ViewScreen) and screen.close_filter(keep=False):
            return
        if self.history:
            self.switch_mode(self.history.pop())

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.key_overrides, self.keys_path, self.read_only))

    def action_filter(self) -> None:
        if isinstance(self.screen, ViewScreen):
            self.screen.open_filter()

    def action_replay(self, direction: int) -> None:
        delta = direction * self.model.step_ms
        self._move_cursor(lambda: self.model.step(delta))

    def action_replay_start(self) -> None:
        """Live or browsing alike: park the cursor at the first recorded instant (live, it stops following
        now until `}`)."""
        self._move_cursor(self.model.seek_start)

    def action_replay_end(self) -> None:
        self._move_cursor(self.model.seek_end if self.read_only else self.model.follow_live)

    def _move_cursor(self, move: Callable[[], object]) -> None:
        """Cursor moves read the record's span, so they run on a worker like every other query."""

        def run() -> None:
            self.read(move)
            self.call_from_thread(self.redraw_visible)

        self.run_worker(run, thread=True, group="cursor")

    def action_window(self) -> None:
        self.model.cycle_window()
        self.redraw_visible()

    def action_box(self, step: int) -> None:
        if not self.box_names:
            return
        i = self.box_names.index(self.selected_box) if self.selected_box in self.box_names else -1
        self.selected_box = self.box_names[(i + step) % len(self.box_names)]
        self.redraw_visible()

    def action_in_view(self, view: str, action: str) -> None:
        """Another view's action (from the palette): switch to that view, then run it there once its rows
        are drawn."""
        if view == self.current_mode:
            self.call_later(self.screen.run_action, action)
            return
        self.action_view(view)
        screen = self.screen
        if isinstance(screen, ViewScreen) and view == screen.VIEW:
            screen.run_when_loaded(action)

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """The palette (ctrl+p) offers every key's action by its words, wherever it makes sense: the keys
        that work everywhere, this view's, and every other view's (which switch to that view first)."""
        yield from super().get_system_commands(screen)
        here = getattr(screen, "VIEW", None)
        for spec in keymap.SPECS:
            keys = keymap.display(keymap.effective(spec, self.key_overrides))
            if spec.scope == keymap.APP:
                if spec.id not in ("app.back", "app.quit"):
                    yield SystemCommand(
                        spec.description.capitalize(), f"key {keys}", partial(self.run_action, spec.action)
                    )
            elif spec.scope == here:
                yield SystemCommand(
                    f"{spec.scope.capitalize()}: {spec.description}",
                    f"key {keys}",
                    partial(screen.run_action, spec.action),
                )
            else:
                yield SystemCommand(
                    f"{spec.scope.capitalize()}: {spec.description}",
                    f"switches to {spec.scope} (key {keys} there)",
                    partial(self.action_in_view, spec.scope, spec.action),
                )


if TYPE_CHECKING:
    _HOST: type[ConsoleHost] = ConsoleApp  # mypy holds the app to what its views ask of it


def run_console(db_path: Path) -> int:
    return _run(db_path, read_only=False)


def run_browse(db_path: Path) -> int:
    return _run(db_path, read_only=True)


def _run(db_path: Path, read_only: bool) -> int:
    app = ConsoleApp(db_path, read_only=read_only, supervise=not read_only)  # a bad keys file is said first
    for name, stream in (("stdin", sys.stdin), ("stdout", sys.stdout)):
        if not stream.isatty():  # Textual would wait forever for keys that cannot come
            raise InputError(
                f"the console needs a terminal, and {name} is not one",
                "run `campaign` in a terminal, or use a subcommand (`campaign --help`)",
            )
    app.run()
    return 0
