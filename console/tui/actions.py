"""The console's only way to change anything: a small adapter over the recipes and console.service.

The TUI never opens SSH and never writes SQL. Keys call this adapter; the adapter calls the service
layer (the same intents the CLI uses). Pilot tests hand the App another object with the same methods,
and a real service object slots in here without touching the screens. Browsing is read-only: every
action is refused up front with a message that says why and what to run instead.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol


class ActionRefused(Exception):
    """An action the console will not take; the message is shown to the operator as is."""


@dataclass(frozen=True)
class LintLine:
    severity: str  # error blocks a launch, warn is shown
    rule_id: str
    reason: str
    where: str = ""

    @property
    def blocking(self) -> bool:
        return self.severity == "error"


@dataclass(frozen=True)
class Recipes:
    """The arms the recipes define (name -> model), or the reason they could not be read."""

    arms: dict[str, str | None]
    problem: str | None = None


class Actions(Protocol):
    read_only: bool

    def recipes(self) -> Recipes: ...

    def lint(self, arm: str, box: str) -> list[LintLine]: ...

    async def launch(self, box: str, arm: str) -> str: ...

    async def kill(self, box: str, launch_id: str) -> str: ...

    async def set_deadline(self, box: str, deadline_ms: int, action: str, input_text: str) -> str: ...


def refusal(verb: str, db_path: Path) -> ActionRefused:
    return ActionRefused(
        f"{verb} is disabled: this is `campaign browse`, a read-only view of {db_path}; "
        f"open it with `campaign --db {db_path}` to act on the fleet"
    )


class ServiceActions:
    """Recipes from ``console.recipes``; launch, kill and timers through ``console.service``."""

    def __init__(self, db_path: Path, *, read_only: bool = False, recipe_paths: list[Path] | None = None):
        self.db_path = db_path
        self.read_only = read_only
        self.recipe_paths = recipe_paths
        self._catalog: Any = None

    def _load_catalog(self) -> Any:
        if self._catalog is None:
            recipes = importlib.import_module("console.recipes")
            self._catalog = (
                recipes.load_catalog(self.recipe_paths) if self.recipe_paths else recipes.load_catalog()
            )
        return self._catalog

    def recipes(self) -> Recipes:
        try:
            catalog = self._load_catalog()
        except Exception as exc:  # a broken recipe must not take the console down; it is shown instead
            return Recipes({}, f"recipes not loaded: {exc}")
        return Recipes({name: arm.profile for name, arm in sorted(catalog.arms.items())})

    def lint(self, arm: str, box: str) -> list[LintLine]:
        """The recipe rules for ``arm``; the service re-checks against the box's probe when launching."""
        recipes = importlib.import_module("console.recipes")
        catalog = self._load_catalog()
        if arm not in catalog.arms:
            return [
                LintLine("error", "no-recipe", f"arm {arm!r} is not in the recipes; only recipe arms launch")
            ]
        return [
            LintLine(f.severity, f.rule_id, f.reason, f.where() if hasattr(f, "where") else "")
            for f in recipes.lint(catalog, arm)
        ]

    def _service(self, verb: str) -> Any:
        if self.read_only:
            raise refusal(verb, self.db_path)
        try:
            return importlib.import_module("console.service")
        except ImportError as exc:
            raise ActionRefused(
                f"{verb} needs console.service, which this build does not have ({exc}); "
                "nothing was sent to the box"
            ) from exc

    async def launch(self, box: str, arm: str) -> str:
        service = self._service("launching")
        return str(await service.launch(self.db_path, box=box, arm=arm))

    async def kill(self, box: str, launch_id: str) -> str:
        service = self._service("killing")
        return str(await service.kill(self.db_path, box=box, launch_id=launch_id))

    async def set_deadline(self, box: str, deadline_ms: int, action: str, input_text: str) -> str:
        service = self._service("setting a timer")
        return str(
            await service.set_deadline(
                self.db_path, box=box, deadline_ms=deadline_ms, action=action, input_text=input_text
            )
        )
