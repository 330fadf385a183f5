"""`campaign browse` in a real terminal (tmux): the installed entry point, real keys, real screen text."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from testbed import tui_fixture as F
from tests.support.terminal import terminal_env

pytestmark = pytest.mark.skipif(
    shutil.which("tmux") is None, reason="tmux is not installed (tests/run.sh installs it)"
)


class Terminal:
    def __init__(self, name: str):
        self.name = name

    def tmux(self, *args: str) -> str:
        out = subprocess.run(["tmux", "-L", self.name, *args], capture_output=True, text=True, timeout=10)
        return out.stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", self.name)

    def keys(self, *keys: str) -> None:
        for key in keys:
            self.tmux("send-keys", "-t", self.name, key)
            time.sleep(0.15)

    def wait_for(self, text: str, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen()
            if text in screen:
                return screen
            time.sleep(0.2)
        raise AssertionError(f"{text!r} never appeared; the screen was:\n{self.screen()}")

    def alive(self) -> bool:
        return self.tmux_rc("has-session", "-t", self.name) == 0

    def tmux_rc(self, *args: str) -> int:
        return subprocess.run(["tmux", "-L", self.name, *args], capture_output=True).returncode


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[tuple[Terminal, F.Fixture]]:
    fx = F.build(tmp_path / "state.db")
    name = f"campaign-test-{uuid.uuid4().hex[:8]}"
    env = terminal_env(tmp_path / "keys.toml")
    command = f"{sys.executable} -m console browse {fx.path}"
    subprocess.run(
        ["tmux", "-L", name, "new-session", "-d", "-s", name, "-x", "100", "-y", "30", command],
        check=True,
        env=env,
        cwd=Path(__file__).resolve().parent.parent,
    )
    term = Terminal(name)
    try:
        yield term, fx
    finally:
        term.tmux_rc("kill-server")


def test_browse_in_a_real_terminal(terminal: tuple[Terminal, F.Fixture]) -> None:
    term, _ = terminal
    screen = term.wait_for("Fleet | BROWSE read-only 2026-09-06 00:15:00 UTC (end)")
    assert "FAIL power, WARN topology" in screen
    term.keys("4")
    term.wait_for("Results | BROWSE")
    term.keys("/")
    term.wait_for("filter (enter keeps it")  # the filter line is open: what is typed now goes into it
    term.keys("d", "i", "a", "g")
    term.wait_for("diag")
    term.keys("Enter")
    screen = term.wait_for("filter: diag")
    assert "glm-4.7-dp2tp2" in screen and "DIAGNOSTIC-ONLY" in screen and "qwen3-0.6b-bf16" not in screen
    term.keys("3")
    term.wait_for("Arms | BROWSE")  # a key sent before the view is up would go to the one before it
    term.keys("l")
    term.wait_for("launching is disabled")
    term.keys("2")
    screen = term.wait_for("CAPPED")
    assert "20/20 ok" in screen
    term.keys("q")
    deadline = time.monotonic() + 15
    while term.alive() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not term.alive()
