"""The environment a console started in a test's tmux session gets."""

from __future__ import annotations

import os
from pathlib import Path


def terminal_env(keys: Path) -> dict[str, str]:
    """This process's environment with its own key bindings file and a colour terminal, without ``COLUMNS``
    and ``LINES``: a test worker (pytest-xdist) carries them, and Textual sizes its screen by them before the
    tmux pane's own size, so a 120-column session would draw 80 columns and lose what is right and below."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    return env | {"CAMPAIGN_KEYS": str(keys), "TERM": "xterm-256color"}
