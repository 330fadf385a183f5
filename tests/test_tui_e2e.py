"""End to end: the real console in tmux, driving a real sshd test box that serves the tiny CPU vLLM.

One vLLM start (it costs 40-90 s of two cores): `campaign launch tiny-cpu` through the real CLI, then the
console (`campaign --db ...`, supervising the box over SSH) is read through `tmux capture-pane`: Fleet
shows the box up, Arms the launch serving with its kernel line and log tail, Live the throughput while
`campaign bench` runs beside it, and `k` asks for a confirmation naming launch and box before the
launch ends stopped. Every process the test starts is ended in a ``finally``.

The box runs as its own unix user (testbed/sshd.py). It reads the model from a copy in its home
(the cached checkpoint is root's, mode 0600) and runs the cached vLLM venv in place, which needs the
directories above the venv to be traversable: any that are not get ``o+x`` for the test and are restored.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.service import Service
from console.store import Store
from console.store.launches import Launch
from testbed.agent_box import stop_agent
from testbed.fleet_fixtures import FAST, box_started, register, sshd_farm
from testbed.sshd import SshBox, SshdFarm
from testbed.vllm_env import VllmEnv
from tests.support.terminal import terminal_env

__all__ = ["sshd_farm"]
ROOT = Path(__file__).resolve().parent.parent
BOX = "tuie2e"
pytestmark = [
    pytest.mark.vllm,
    pytest.mark.sshd,
    pytest.mark.timeout(1200),
    pytest.mark.skipif(
        shutil.which("tmux") is None, reason="tmux is not installed (tests/run.sh installs it)"
    ),
]


class Terminal:
    """A tmux session running one command; its screen is read as the operator would see it."""

    def __init__(self, name: str, command: list[str], env: dict[str, str], size: tuple[int, int]):
        self.name = name
        subprocess.run(
            [
                "tmux",
                "-L",
                name,
                "new-session",
                "-d",
                "-s",
                name,
                "-x",
                str(size[0]),
                "-y",
                str(size[1]),
                *command,
            ],
            check=True,
            env=env,
            cwd=ROOT,
        )

    def tmux(self, *args: str) -> str:
        return subprocess.run(
            ["tmux", "-L", self.name, *args], capture_output=True, text=True, timeout=10
        ).stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", self.name)

    def keys(self, *keys: str) -> None:
        for key in keys:
            self.tmux("send-keys", "-t", self.name, key)
            time.sleep(0.3)

    def wait_for(self, what: str, test: object, timeout: float = 60.0) -> str:
        """Until ``test`` (a string on screen, or a predicate of the screen) holds; the screen is returned."""
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if (test in screen) if isinstance(test, str) else test(screen):  # type: ignore[operator]
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{what}: never on screen after {timeout:.0f} s; the screen was:\n{screen}"
                )
            time.sleep(0.5)

    def alive(self) -> bool:
        return self._rc("has-session", "-t", self.name) == 0

    def close(self) -> None:
        self._rc("kill-server")

    def _rc(self, *args: str) -> int:
        return subprocess.run(["tmux", "-L", self.name, *args], capture_output=True).returncode


@contextlib.contextmanager
def traversable(path: Path) -> Iterator[None]:
    """Let other users pass through ``path``'s parents (execute only, never list); restore them after."""
    changed: list[tuple[Path, int]] = []
    try:
        for parent in reversed(path.parents):
            mode = parent.stat().st_mode
            if not mode & stat.S_IXOTH:
                parent.chmod(stat.S_IMODE(mode) | stat.S_IXOTH)
                changed.append((parent, stat.S_IMODE(mode)))
        yield
    finally:
        for parent, mode in reversed(changed):
            parent.chmod(mode)


def campaign(db: Path, *args: str, timeout: float = 900) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "console", "--db", str(db), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )
    assert out.returncode == 0, f"campaign {' '.join(args)} failed:\n{out.stdout}\n{out.stderr}"
    return out.stdout


def launch_row(db: Path, launch_id: str) -> Launch:
    with Store(db, read_only=True) as store:
        row = store.launches.get(launch_id)
    assert row is not None
    return row


def until(what: str, predicate: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f} s waiting for {what}"
        time.sleep(1.0)


def charted(screen: str) -> bool:
    """The output chart's peak label (the row under ``out X tok/s in Y tok/s``) is above zero."""
    lines = screen.splitlines()
    head = next((n for n, line in enumerate(lines) if re.search(r"out \S+ tok/s\s+in \S+ tok/s", line)), None)
    if head is None or head + 1 >= len(lines):
        return False
    peak = lines[head + 1].strip("│ ").split(" ")[0]
    return peak not in ("-", "0", "")


def box_with_model(vllm_env: VllmEnv) -> SshBox:
    box = box_started(BOX, gpu_fixture=None)
    models = box.home / "models"
    shutil.copytree(vllm_env.model_dir, models / vllm_env.model_dir.name, dirs_exist_ok=True)
    for path in [models, *models.rglob("*")]:
        os.chown(path, box.uid, box.gid)
    return box


async def kill_leftovers(db: Path) -> None:
    """Arms outlive their console by design: never leave a vLLM behind a failed test."""
    with Store(db) as store:
        live = [row.id for row in store.launches.live(BOX)]
        if live:
            service = Service(store, settings=FAST)
            try:
                await service.stop_launches(BOX, live, grace_s=5)
            finally:
                await service.close()


def test_console_in_tmux_launch_watch_bench_and_kill(
    sshd_farm: SshdFarm, vllm_env: VllmEnv, tmp_path: Path
) -> None:
    box = box_with_model(vllm_env)
    db = tmp_path / "state.db"
    with Store(db) as store:
        register(store, box)
        store.boxes.update(
            BOX, serving_env=str(vllm_env.prefix), model_root=str(box.home / "models"), price_per_hour=0.5
        )
        # The console supervises the local box too: keep its agent in this test's folder, not ~/.campaign-agent.
        store.boxes.ensure_local()
        store.boxes.update("local", agent_home=str(tmp_path / "local-agent"))
    env = terminal_env(tmp_path / "keys.toml")
    term: Terminal | None = None
    bench: subprocess.Popen[str] | None = None
    with traversable(vllm_env.prefix):
        try:
            shown = campaign(db, "launch", "tiny-cpu", "--box", BOX, "--json")
            launched = json.loads(shown)  # with --json, stdout is the JSON and nothing else
            [launch_id] = launched["launch_ids"]
            assert launched["serving"], launched  # launch waits until the server serves
            term = Terminal(
                f"campaign-e2e-{uuid.uuid4().hex[:8]}",
                [sys.executable, "-m", "console", "--db", str(db)],
                env,
                (120, 36),
            )

            term.wait_for("Fleet up", lambda s: re.search(rf"{BOX}\s+up\b", s) is not None)
            until(
                "the launch to serve (the console ingests the box's journal)",
                lambda: launch_row(db, launch_id).state in ("serving", "failed"),
                600,
            )
            assert launch_row(db, launch_id).state == "serving", launch_row(db, launch_id)
            term.wait_for("Fleet lists the arm serving", "tiny-cpu")

            with Store(db, read_only=True) as store:
                kernel = store.rows(
                    "SELECT line FROM kernel_lines WHERE launch_id = ? ORDER BY t_ms, id", [launch_id]
                )
            assert kernel, "the engine printed no kernel line"
            term.keys("3", "/", *"tiny-cpu", "Enter")
            term.wait_for(
                "Arms shows the launch serving",
                lambda s: re.search(rf"tiny-cpu\s+serving\s+{BOX}\s+{re.escape(launch_id)}", s) is not None,
            )
            term.wait_for("its kernel line", kernel[0]["line"][:40])
            term.wait_for("its log tail, read on the box", "log tail (")

            bench = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "console",
                    "--db",
                    str(db),
                    "bench",
                    launch_id,
                    "--shape",
                    "tiny",
                    "-c",
                    "4",
                    "--prompts",
                    "200",
                    "--json",
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=ROOT,
            )
            term.keys("2")
            term.wait_for("Live names the running bench", "loadgen tiny C4 running", 120)
            term.wait_for("Live charts the throughput the server reports", charted, 120)
            out, err = bench.communicate(timeout=600)
            assert bench.returncode == 0, err
            assert json.loads(out)["out_tok_per_s"] > 0
            term.wait_for("Live shows the load generator's numbers", "loadgen tiny C4 TTFT", 60)

            term.keys("3")
            term.wait_for("back in Arms", "Arms | LIVE")
            term.keys("k")
            term.wait_for("the kill asks, naming launch and box", f"Kill {launch_id} on {BOX}?")
            term.keys("y")
            until("the launch to stop", lambda: launch_row(db, launch_id).state in ("stopped", "failed"), 120)
            assert launch_row(db, launch_id).state == "stopped"
            term.wait_for(
                "Arms shows it stopped",
                lambda s: re.search(rf"tiny-cpu\s+stopped\s+{BOX}\s+{re.escape(launch_id)}", s) is not None,
            )
            term.keys("q")
            until("the console to quit", lambda: not term.alive(), 30)
        finally:
            if bench is not None and bench.poll() is None:
                bench.kill()
                bench.wait()
            if term is not None:
                term.close()
            asyncio.run(kill_leftovers(db))
            box.kill_agent()
            stop_agent(tmp_path / "local-agent")
