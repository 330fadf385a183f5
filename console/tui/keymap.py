"""Every key of the console in one table, and the operator's remapping from a TOML file.

One table feeds the App and screen BINDINGS, the `?` help screen and the command palette, so the
help can never drift from what the keys do. Remapping uses Textual's keymap by binding id (as Posting
does): ``~/.config/campaign-console/keys.toml``::

    [keys]
    "arms.kill" = "ctrl+k"
    "view.fleet" = "f1,1"

An unknown id or an empty key is refused with the file and the id named; a key claimed by two bindings
of the same scope is refused too, since one of them would silently stop working.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from textual.binding import Binding, BindingType

from console.errors import InputError

APP = "app"


@dataclass(frozen=True)
class KeySpec:
    id: str
    keys: str  # Textual key names, comma-separated alternatives
    action: str
    description: str
    scope: str  # "app" or a view name
    show: bool = True


SPECS: tuple[KeySpec, ...] = (
    KeySpec("view.fleet", "1", "app.view('fleet')", "fleet", APP),
    KeySpec("view.live", "2", "app.view('live')", "live", APP),
    KeySpec("view.arms", "3", "app.view('arms')", "arms", APP),
    KeySpec("view.results", "4", "app.view('results')", "results", APP),
    KeySpec("view.economics", "5", "app.view('economics')", "economics", APP),
    KeySpec("view.sweep", "6", "app.view('sweep')", "sweep", APP),
    KeySpec("view.curves", "7", "app.view('curves')", "curves", APP),
    KeySpec("view.divergence", "8", "app.view('divergence')", "divergence (kldiff)", APP),
    KeySpec("app.help", "question_mark", "app.help", "help", APP),
    KeySpec("app.filter", "slash", "app.filter", "filter", APP),
    KeySpec("app.back", "escape", "app.back", "back", APP, show=False),
    KeySpec("app.quit", "q", "app.quit", "quit", APP),
    KeySpec(
        "replay.back",
        "left_square_bracket",
        "app.replay(-1)",
        "replay: step back (the step shown on top)",
        APP,
        show=False,
    ),
    KeySpec(
        "replay.forward", "right_square_bracket", "app.replay(1)", "replay: step forward", APP, show=False
    ),
    KeySpec(
        "replay.start",
        "left_curly_bracket",
        "app.replay_start",
        "replay: jump to the start (live: stop following now)",
        APP,
        show=False,
    ),
    KeySpec(
        "replay.end",
        "right_curly_bracket",
        "app.replay_end",
        "replay: jump to the end (live: follow now)",
        APP,
        show=False,
    ),
    KeySpec(
        "chart.window",
        "w",
        "app.window",
        "chart window: 10m, 1h, 6h, 24h (step 1m, 5m, 30m, 2h)",
        APP,
        show=False,
    ),
    KeySpec("box.next", "full_stop", "app.box(1)", "next box", APP, show=False),
    KeySpec("box.previous", "comma", "app.box(-1)", "previous box", APP, show=False),
    KeySpec("fleet.open", "enter", "open_box", "open box", "fleet"),
    KeySpec("fleet.check", "c", "check", "check", "fleet"),
    KeySpec("fleet.connect", "r", "connect", "connect", "fleet"),
    KeySpec("arms.launch", "l", "launch", "launch", "arms"),
    KeySpec("arms.kill", "k", "kill", "kill", "arms"),
    KeySpec("arms.bench", "b", "bench", "bench", "arms"),
    KeySpec("arms.tripwire", "t", "tripwire", "tripwire", "arms"),
    KeySpec("arms.log", "o", "log_tail", "log", "arms"),
    KeySpec("live.timer", "t", "timer", "timer (hard stop)", "live"),
    KeySpec("results.sort", "s", "sort", "sort", "results"),
    KeySpec("results.chart", "c", "chart", "chart", "results"),
    KeySpec("results.groups", "g", "groups", "groups", "results"),
    KeySpec("results.divergence", "d", "app.view('divergence')", "kldiff", "results"),
    KeySpec("divergence.results", "d", "app.view('results')", "throughput results", "divergence"),
    KeySpec("curves.interactivity", "i", "interactivity", "interactivity: 1000/TPOT or per slot", "curves"),
    KeySpec("economics.utilisation", "u", "utilisation", "utilisation: 70%, 100%, 50%", "economics"),
    KeySpec("economics.basis", "b", "basis", "cost basis: list, committed, fully loaded, Vast", "economics"),
    KeySpec(
        "economics.per_hour", "h", "per_hour", "per-hour table (an hour bought from an API)", "economics"
    ),
)

SCOPES = (APP, "fleet", "live", "arms", "results", "economics", "sweep", "curves", "divergence")


class KeymapError(InputError, ValueError):
    """The operator's keys file cannot be used; the message names the file, the id and the fix."""


def default_path() -> Path:
    """``$CAMPAIGN_KEYS``, else ``$XDG_CONFIG_HOME/campaign-console/keys.toml`` (``~/.config`` default)."""
    if os.environ.get("CAMPAIGN_KEYS"):
        return Path(os.environ["CAMPAIGN_KEYS"])
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "campaign-console" / "keys.toml"


def load(path: Path | None) -> dict[str, str]:
    """The remapping in ``path`` as {binding id: keys}; a missing file means no remapping."""
    if path is None or not path.exists():
        return {}
    try:
        data = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise KeymapError(
            f"{path}: not valid TOML ({exc}); fix the file or delete it to use the default keys"
        ) from exc
    keys = data.get("keys", {})
    if not isinstance(keys, dict) or set(data) - {"keys"}:
        raise KeymapError(
            f"{path}: expected only a [keys] table mapping binding ids to keys, like "
            '[keys] "arms.kill" = "ctrl+k"'
        )
    known = {s.id: s for s in SPECS}
    overrides: dict[str, str] = {}
    for binding_id, value in keys.items():
        if binding_id not in known:
            raise KeymapError(
                f"{path}: unknown binding id {binding_id!r}; known ids: {', '.join(sorted(known))}"
            )
        if not isinstance(value, str) or not value.strip() or any(not k.strip() for k in value.split(",")):
            raise KeymapError(
                f'{path}: {binding_id!r} must be a key name such as "ctrl+k" or "f2,2", got {value!r}'
            )
        overrides[binding_id] = ",".join(k.strip() for k in value.split(","))
    _refuse_clashes(path, overrides)
    return overrides


def _refuse_clashes(path: Path, overrides: dict[str, str]) -> None:
    for scope in SCOPES:
        # A view's keys share the screen with the app-wide keys, so both count as one scope.
        specs = [s for s in SPECS if s.scope in (APP, scope)]
        owner: dict[str, str] = {}
        for s in specs:
            for key in effective(s, overrides).split(","):
                if key in owner and owner[key] != s.id:
                    raise KeymapError(
                        f"{path}: key {key!r} is bound to both {owner[key]!r} and {s.id!r}; "
                        "give one of them another key"
                    )
                owner[key] = s.id


def effective(spec: KeySpec, overrides: dict[str, str]) -> str:
    return overrides.get(spec.id, spec.keys)


VIEWS_GROUP = Binding.Group("views", compact=True)
"""The number keys share one footer entry (``123456 views``) so `? help` still fits in 80 columns."""


def bindings(scope: str) -> list[BindingType]:
    """Textual bindings of one scope, with ids so ``App.set_keymap`` can remap them."""
    return [
        Binding(
            s.keys,
            s.action,
            s.description,
            show=s.show,
            id=s.id,
            group=VIEWS_GROUP if s.id.startswith("view.") else None,
        )
        for s in SPECS
        if s.scope == scope
    ]


def help_rows(overrides: dict[str, str]) -> list[tuple[str, str, str]]:
    """(where, keys, what) for every binding, grouped by where it works (everywhere first, then each view
    in the order of the number keys), as the help screen lists them under one heading each."""
    names = {APP: "everywhere"}
    rows = [(APP, "ctrl+p", "command palette: every action below, by its words")]
    rows += [(s.scope, display(effective(s, overrides)), s.description) for s in SPECS]
    rows.sort(key=lambda row: SCOPES.index(row[0]))  # stable: the table's order within a scope
    return [(names.get(scope, scope), keys, what) for scope, keys, what in rows]


_DISPLAY = {
    "question_mark": "?",
    "slash": "/",
    "escape": "esc",
    "left_square_bracket": "[",
    "right_square_bracket": "]",
    "left_curly_bracket": "{",
    "right_curly_bracket": "}",
    "full_stop": ".",
    "comma": ",",
}


def display(keys: str) -> str:
    return " ".join(_DISPLAY.get(k, k) for k in keys.split(","))
