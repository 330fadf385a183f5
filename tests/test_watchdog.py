"""The box-side watchdog: a monotonic countdown that survives restarts and reboots and never fires early.

Unit tests drive it with injected clocks (UTC ms, monotonic s, boot id); the process tests host it in
a real Python process with the real clocks, kill that process mid-countdown and restart it, and check
that a real arm process is stopped on time. Every test runs under each TZ of the timer suite.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agents.watchdog import GUARD_MS, STATE_FILE, Watchdog, too_early
from tests.test_timers import CUTOFF_MS, FakeClock, process_tz  # noqa: F401 - every TZ

ROOT = Path(__file__).resolve().parent.parent
ARMED_AT = CUTOFF_MS - 3 * 3_600_000


class Box:
    """The watchdog's surroundings: a journal, arms and a power switch that record what happened."""

    def __init__(self, home: Path, clock: FakeClock, mono: list[float], boot: list[str], **kw: Any):
        self.clock, self.mono, self.boot = clock, mono, boot
        self.journal: list[dict[str, Any]] = []
        self.stopped: list[int] = []
        self.powered_off: list[int] = []
        self.fail_stop = 0
        self.home = home
        self.kw = kw
        self.wd = self.new_watchdog()

    def new_watchdog(self) -> Watchdog:
        """A fresh Watchdog on the same home: what a restarted agent builds."""
        return Watchdog(self.home, self.journal.append, self._stop, self._off, now_ms=self.clock,
                        monotonic=lambda: self.mono[0], boot_id=lambda: self.boot[0], **self.kw)

    def _stop(self) -> dict[str, Any]:
        if self.fail_stop:
            self.fail_stop -= 1
            raise OSError("kill failed")
        self.stopped.append(self.clock())
        return {"stopped": 2}

    def _off(self) -> dict[str, Any]:
        self.powered_off.append(self.clock())
        return {"rc": 0}

    def advance(self, seconds: float, *, wall: bool = True) -> None:
        self.mono[0] += seconds
        if wall:
            self.clock.advance(int(seconds * 1000))

    def run(self, seconds: float, step: float = 1.0) -> None:
        for _ in range(int(seconds / step)):
            self.advance(step)
            self.wd.tick()

    def states(self) -> list[str]:
        return [e["state"] for e in self.journal]


@pytest.fixture
def box(tmp_path: Path) -> Box:
    return Box(tmp_path, FakeClock(ARMED_AT), [5000.0], ["boot-1"])


def test_it_stops_the_arms_at_the_deadline_not_before(box: Box) -> None:
    assert box.wd.arm(7, CUTOFF_MS, "stop-arms", ARMED_AT) == {"armed": True, "remaining_s": 10800.0}
    box.run(3 * 3600 - 1)
    assert box.stopped == []
    box.run(1)
    assert box.stopped == [CUTOFF_MS]
    assert box.states() == ["armed", "warning", "warning", "warning", "firing", "fired"]
    assert [e["detail"].get("minutes_before") for e in box.journal if e["state"] == "warning"] == [30, 10, 1]
    assert box.journal[-1]["detail"] == {"stop_arms": {"stopped": 2}}
    box.run(60)
    assert len(box.stopped) == 1, "fires once"


def test_the_console_clock_sets_the_countdown_whatever_the_box_clock_says(box: Box) -> None:
    # The box's wall clock is an hour behind (a misconfigured host); the countdown is what the console sent.
    box.clock.now_ms = ARMED_AT - 3_600_000
    box.wd.arm(1, CUTOFF_MS, "stop-arms", ARMED_AT)
    box.run(3 * 3600)
    assert len(box.stopped) == 1 and box.stopped[0] == CUTOFF_MS - 3_600_000  # on the box's wrong clock


def test_a_restarted_agent_rearms_from_its_state_file(box: Box) -> None:
    box.wd.arm(3, CUTOFF_MS, "stop-arms", ARMED_AT)
    box.run(3600)
    box.wd = box.new_watchdog()  # the agent was killed and started again in the same boot
    assert box.wd.timers() == []
    box.wd.restore()
    assert box.wd.timers()[0]["remaining_s"] == pytest.approx(7200)
    assert box.journal[-1]["state"] == "armed" and box.journal[-1]["detail"] == {"restored": True, "rebooted": False}
    box.run(7200)
    assert box.stopped == [CUTOFF_MS]


def test_after_a_reboot_it_rearms_from_the_utc_deadline(box: Box) -> None:
    box.clock.now_ms = ARMED_AT + 120_000  # box clock 2 min ahead of the console's: skew -120 s
    box.wd.arm(3, CUTOFF_MS, "shutdown", ARMED_AT)
    box.run(3600)
    box.boot[0], box.mono[0] = "boot-2", 12.0  # monotonic restarts at boot
    box.advance(300)  # the reboot took five minutes
    box.wd = box.new_watchdog()
    box.wd.restore()
    assert box.journal[-1]["detail"] == {"restored": True, "rebooted": True}
    assert box.wd.timers()[0]["remaining_s"] == pytest.approx(3 * 3600 - 3600 - 300)
    box.run(3 * 3600 - 3600 - 300)
    assert box.stopped == [CUTOFF_MS + 120_000]  # the console's 01:27, read on the box's skewed clock


def test_shutdown_waits_a_grace_for_the_console_to_pull(tmp_path: Path) -> None:
    box = Box(tmp_path, FakeClock(ARMED_AT), [0.0], ["b"], shutdown_grace_s=120)
    box.wd.arm(1, CUTOFF_MS, "destroy", ARMED_AT)
    box.run(3 * 3600)
    assert box.stopped == [CUTOFF_MS] and box.powered_off == []
    box.run(119)
    assert box.powered_off == []
    box.run(1)
    assert box.powered_off == [CUTOFF_MS + 120_000]
    assert box.journal[-1]["state"] == "fired" and box.journal[-1]["detail"]["shutdown"] == {"rc": 0}
    box.wd = box.new_watchdog()
    box.wd.restore()
    box.run(10)
    assert len(box.powered_off) == 1, "a fired timer never fires again after a restart"


def test_a_reboot_during_the_grace_counts_as_powered_off(tmp_path: Path) -> None:
    box = Box(tmp_path, FakeClock(ARMED_AT), [0.0], ["b"], shutdown_grace_s=120)
    box.wd.arm(1, CUTOFF_MS, "shutdown", ARMED_AT)
    box.run(3 * 3600 + 10)
    box.boot[0] = "b2"
    box.wd = box.new_watchdog()
    box.wd.restore()
    box.run(300)
    assert box.powered_off == []


def test_early_fire_guard_refuses_and_logs_now_deadline_remaining_tz(box: Box) -> None:
    box.wd.arm(9, CUTOFF_MS, "stop-arms", ARMED_AT)
    box.run(3 * 3600 - 3600)
    # The wall clock is stepped back an hour (say, a zone misread by whatever sets it) while the
    # countdown runs out: the persisted UTC deadline says an hour remains, so nothing is stopped.
    box.advance(3600, wall=False)
    box.wd.tick()
    assert box.stopped == []
    refused = box.journal[-1]
    assert refused["state"] == "refused-early"
    d = refused["detail"]
    assert d["now_ms"] == CUTOFF_MS - 3_600_000 and d["deadline_ms"] == CUTOFF_MS and d["remaining_s"] == 3600
    assert d["tz"].startswith(f"TZ={os.environ['TZ']} ")
    box.run(59)
    assert box.states().count("refused-early") == 1, "a standing refusal is journaled once a minute"
    box.run(3600)
    assert box.stopped and CUTOFF_MS - GUARD_MS <= box.stopped[0] <= CUTOFF_MS + 60_000


def test_a_failed_stop_is_retried(box: Box) -> None:
    box.fail_stop = 1
    box.wd.arm(2, CUTOFF_MS, "stop-arms", ARMED_AT)
    box.run(3 * 3600)
    assert box.stopped == [] and "kill failed" in box.journal[-1]["detail"]["stop_arms_error"]
    box.run(10)
    assert box.stopped == [CUTOFF_MS + 10_000]


def test_cancel_and_bad_input(box: Box) -> None:
    box.wd.arm(4, CUTOFF_MS, "stop-arms", ARMED_AT)
    assert box.wd.cancel(4) == {"cancelled": True} and box.wd.cancel(4) == {"cancelled": False}
    box.run(3 * 3600 + 60)
    assert box.stopped == []
    assert json.loads((box.home / STATE_FILE).read_text())["timers"] == {}
    with pytest.raises(ValueError, match="action 'reboot'"):
        box.wd.arm(5, CUTOFF_MS, "reboot", ARMED_AT)
    with pytest.raises(ValueError, match="timer_id must be"):
        box.wd.arm(None, CUTOFF_MS, "stop-arms", ARMED_AT)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="integer UTC epoch milliseconds"):
        box.wd.arm(5, "2026-09-06 01:27", "stop-arms", ARMED_AT)  # type: ignore[arg-type]


def test_a_damaged_state_file_fails_loudly(box: Box) -> None:
    (box.home / STATE_FILE).write_text("{not json")
    with pytest.raises(RuntimeError, match="cannot read watchdog state"):
        box.wd.restore()


def test_too_early_is_the_shared_30s_rule() -> None:
    assert too_early(CUTOFF_MS - 3_600_000, CUTOFF_MS)
    assert too_early(CUTOFF_MS - 30_001, CUTOFF_MS)
    assert not too_early(CUTOFF_MS - 30_000, CUTOFF_MS)
    assert not too_early(CUTOFF_MS + 1, CUTOFF_MS)


# -- a real process, real clocks, killed and restarted -------------------------------------------
HOST = r"""
import json, os, signal, sys, time
from pathlib import Path
from agents.watchdog import Watchdog
home, arm_pid = Path(sys.argv[1]), int(sys.argv[2])
log = open(home / "journal.jsonl", "a", buffering=1)
def journal(e): log.write(json.dumps(e | {"t_ms": time.time_ns() // 1_000_000}) + "\n")
def stop_arms():
    os.kill(arm_pid, signal.SIGTERM)
    return {"killed": arm_pid, "t_ms": time.time_ns() // 1_000_000}
wd = Watchdog(home, journal, stop_arms, lambda: {})
if sys.argv[3] == "arm":
    wd.arm(1, int(sys.argv[4]), "stop-arms", time.time_ns() // 1_000_000)
else:
    wd.restore()
print("ready", flush=True)
while True:
    wd.tick()
    time.sleep(0.02)
"""


def _host(home: Path, arm_pid: int, *args: str) -> subprocess.Popen[str]:
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    p = subprocess.Popen([sys.executable, "-c", HOST, str(home), str(arm_pid), *args], env=env,
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    return p


def test_a_killed_and_restarted_watchdog_process_stops_the_arm_on_time(tmp_path: Path) -> None:
    arm = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    hosts: list[subprocess.Popen[str]] = []
    try:
        deadline = time.time_ns() // 1_000_000 + 2500
        hosts.append(_host(tmp_path, arm.pid, "arm", str(deadline)))
        time.sleep(0.8)
        hosts[0].send_signal(signal.SIGKILL)  # the agent dies mid-countdown
        hosts[0].wait(5)
        assert arm.poll() is None
        hosts.append(_host(tmp_path, arm.pid, "restore"))  # and is started again
        assert arm.wait(10) == -signal.SIGTERM
        for _ in range(100):  # the host journals "fired" just after the kill
            lines = [json.loads(x) for x in (tmp_path / "journal.jsonl").read_text().splitlines()]
            lines = [e for e in lines if e["state"] != "warning"]  # T-1 min is already past at arming
            if lines[-1]["state"] == "fired":
                break
            time.sleep(0.05)
        assert [e["state"] for e in lines] == ["armed", "armed", "firing", "fired"]
        assert lines[1]["detail"] == {"restored": True, "rebooted": False}
        killed_at = lines[-1]["detail"]["stop_arms"]["t_ms"]
        assert deadline <= killed_at <= deadline + 1000, killed_at - deadline
    finally:
        for p in [*hosts, arm]:
            if p.poll() is None:
                p.kill()
                p.wait(5)
