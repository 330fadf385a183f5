"""The agent's headless launch (agents/protocol.py ``LaunchArgs.headless``): a multi-box arm's process that
serves no HTTP API (a headless vLLM rank, a Ray node) on a real agent daemon.

It is not refused for its port (a headless rank shares the arm's port number with the head on another box,
and on one machine the head may hold it), counts as serving while it runs with no /health to answer, is
never scraped for /metrics, fails with its exit when it dies, and is killed like any launch.
"""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from testbed.agent_box import AgentBox, bin_with_fake_smi

RUNS = "import signal, sys, time; signal.signal(signal.SIGTERM, lambda *_: sys.exit(0)); time.sleep(600)"
"""A process with no listener that runs until SIGTERM, as a headless rank does."""
DIES = "import time; time.sleep(1.5); raise SystemExit('engine core lost the head')"


@pytest.fixture
def box(tmp_path: Path) -> Iterator[AgentBox]:
    agent = AgentBox(tmp_path / "home", path_prefix=[bin_with_fake_smi(tmp_path, "h200")])
    agent.start()
    try:
        yield agent
    finally:
        agent.stop()


def state_of(launch_id: str, state: str) -> Callable[[dict[str, Any]], bool]:
    return lambda e: e["kind"] == "launch_state" and e["launch_id"] == launch_id and e["state"] == state


def test_a_headless_launch_serves_while_it_runs_on_a_taken_port_and_is_never_scraped(box: AgentBox) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        argv = [sys.executable, "-c", RUNS]
        started = box.ok("launch", {"launch_id": "w1", "argv": argv, "port": port, "headless": True})
        assert started["state"] == "starting"
        box.wait_for(state_of("w1", "serving"), what="serving")
        busy = box.ok(
            "launch", {"launch_id": "h1", "argv": argv, "port": port}
        )  # the same port, not headless
        assert busy["state"] == "failed" and f"port {port} is already in use" in busy["reason"]
    time.sleep(2.5)  # ticks in which a server would have been scraped
    events = box.events()
    assert not [e for e in events if e["kind"] == "server_sample" and e["launch_id"] == "w1"]
    assert not [e for e in events if e["kind"] == "warning" and "w1" in str(e.get("where"))]
    box.ok("kill", {"launch_id": "w1", "grace_s": 5})
    box.wait_for(state_of("w1", "stopped"), what="stopped")


def test_a_headless_launch_that_dies_fails_with_its_reason(box: AgentBox) -> None:
    argv = [sys.executable, "-c", DIES]
    box.ok("launch", {"launch_id": "w2", "argv": argv, "port": 1, "headless": True})
    box.wait_for(state_of("w2", "serving"), what="serving")  # it ran past a tick
    failed = box.wait_for(state_of("w2", "failed"), what="failed")
    assert failed["exit_code"] == 1 and "engine core lost the head" in (failed["reason"] or "")
