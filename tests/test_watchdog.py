"""The box-side watchdog: a countdown that survives restarts and reboots and never fires early.

Unit tests drive it with injected clocks: the true UTC (what the console reads), the box's wall clock
(which the tests step and skew), the boot clock and the boot id; the process tests host it in a real
Python process with the real clocks, kill that process mid-countdown and restart it, and check that a
real arm process is stopped on time. Every test runs under each TZ of the timer suite, and one runs the
same reboot under all of them in turn and finds every journal identical.
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

from agents.watchdog import CHECKPOINT_S, GUARD_MS, STATE_FILE, Watchdog, too_early
from tests.test_timers import CUTOFF_MS, TZS, FakeClock, process_tz  # noqa: F401 - every TZ

ROOT = Path(__file__).resolve().parent.parent
ARMED_AT = CUTOFF_MS - 3 * 3_600_000
HOUR_MS = 3_600_000


class Box:
    """The watchdog's surroundings: a journal, arms and a power switch that record when (in true UTC)."""

    def __init__(self, home: Path, mono: float = 5000.0, boot: str | None = "boot-1", **kw: Any):
        self.truth = FakeClock(ARMED_AT)  # true UTC: the console's clock
        self.clock = FakeClock(ARMED_AT)  # the box's wall clock, which tests skew and step
        self.mono, self.boot = [mono], [boot]
        self.journal: list[dict[str, Any]] = []
        self.stopped: list[int] = []
        self.powered_off: list[int] = []
        self.fail_stop = 0
        self.home = home
        self.kw = kw
        self.wd = self.new_watchdog()

    def new_watchdog(self) -> Watchdog:
        """A fresh Watchdog on the same home: what a restarted agent builds."""
        return Watchdog(
            self.home,
            self.journal.append,
            self._stop,
            self._off,
            now_ms=self.clock,
            monotonic=lambda: self.mono[0],
            boot_id=lambda: self.boot[0],
            **self.kw,
        )

    def _stop(self) -> dict[str, Any]:
        if self.fail_stop:
            self.fail_stop -= 1
            raise OSError("kill failed")
        self.stopped.append(self.truth())
        return {"stopped": 2}

    def _off(self) -> dict[str, Any]:
        self.powered_off.append(self.truth())
        return {"rc": 0}

    def advance(self, seconds: float, *, wall: bool = True) -> None:
        """Time passes; ``wall=False``: the box's wall clock stands still (it was stepped back as much)."""
        self.truth.advance(int(seconds * 1000))
        self.mono[0] += seconds
        if wall:
            self.clock.advance(int(seconds * 1000))

    def run(self, seconds: float, step: float = 1.0) -> None:
        """Tick every ``step`` s; a coarse step keeps simulated hours cheap (a tick may write a checkpoint)."""
        for _ in range(int(seconds / step)):
            self.advance(step)
            self.wd.tick()

    def reboot(self, downtime_s: float, box_clock_jump_ms: int = 0, boot: str | None = "boot-2") -> None:
        """Power cycle: ``downtime_s`` pass until the agent runs again on a new boot clock, and the box's
        wall clock comes back ``box_clock_jump_ms`` off where it was (an RTC set in the wrong zone...)."""
        self.truth.advance(int(downtime_s * 1000))
        self.clock.advance(int(downtime_s * 1000) + box_clock_jump_ms)
        self.boot[0], self.mono[0] = boot, 7.0
        self.wd = self.new_watchdog()
        self.wd.restore()

    def states(self) -> list[str]:
        return [e["state"] for e in self.journal]

    def last(self, state: str) -> dict[str, Any]:
        return [e for e in self.journal if e["state"] == state][-1]


@pytest.fixture
def box(tmp_path: Path) -> Box:
    return Box(tmp_path)


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
    box.clock.now_ms = ARMED_AT - HOUR_MS
    box.wd.arm(1, CUTOFF_MS, "stop-arms", ARMED_AT)
    box.run(3 * 3600, step=60)
    assert box.stopped == [CUTOFF_MS]
    assert box.last("firing")["detail"]["clocks"] == {
        "trusted_ms": CUTOFF_MS,
        "box_clock_ms": CUTOFF_MS - HOUR_MS,
        "box_clock_corrected_ms": CUTOFF_MS,
        "carried": False,
    }


def test_a_restarted_agent_keeps_its_anchor_whatever_the_box_clock_did_meanwhile(box: Box) -> None:
    box.wd.arm(3, CUTOFF_MS, "stop-arms", ARMED_AT)
    box.run(3600, step=60)
    box.wd = box.new_watchdog()  # the agent was killed and started again in the same boot ...
    box.clock.advance(2 * HOUR_MS)  # ... and meanwhile the box's wall clock jumped two hours ahead
    assert box.wd.timers() == []
    box.wd.restore()
    assert box.wd.timers()[0]["remaining_s"] == 7200
    restored = box.journal[-1]
    assert restored["state"] == "armed" and restored["detail"]["restored"] is True
    assert restored["detail"]["rebooted"] is False and restored["detail"]["clocks"]["carried"] is False
    box.run(7200 - 60, step=60)
    box.run(59)
    assert box.stopped == [] and "refused-early" in box.states()  # the box clock said "passed" for 2 h
    box.run(1)
    assert box.stopped == [CUTOFF_MS]


def test_after_a_reboot_it_counts_on_from_the_last_known_good_utc(box: Box) -> None:
    box.clock.now_ms = ARMED_AT + 120_000  # box clock 2 min ahead of the console's
    box.wd.arm(3, CUTOFF_MS, "shutdown", ARMED_AT)
    box.run(3600, step=60)
    box.reboot(300)  # down five minutes, which no clock on the box can vouch for
    restored = box.journal[-1]["detail"]
    assert (
        restored["restored"] is True
        and restored["rebooted"] is True
        and restored["clocks"]["carried"] is True
    )
    assert restored["clocks"]["box_clock_corrected_ms"] is None  # no offset measured in this boot: no vote
    assert box.wd.timers()[0]["remaining_s"] == 7200  # the downtime is not counted
    box.run(7200, step=60)
    assert box.stopped == [CUTOFF_MS + 300_000]  # late by the downtime, never early
    assert "downtime" in box.last("firing")["detail"]["late"]


@pytest.mark.parametrize("jump_ms", [2 * HOUR_MS, -2 * HOUR_MS], ids=["ahead", "behind"])
@pytest.mark.parametrize("ntp_fixes_it", [False, True], ids=["stays-wrong", "corrected"])
def test_a_box_clock_two_hours_off_after_a_reboot_never_fires_early(
    box: Box, jump_ms: int, ntp_fixes_it: bool
) -> None:
    box.wd.arm(1, CUTOFF_MS, "stop-arms", ARMED_AT)
    box.run(3600, step=60)
    box.run(5)  # 5 s after the last checkpoint
    box.reboot(60, jump_ms)
    box.run(1800, step=60)
    if ntp_fixes_it:
        box.clock.now_ms = box.truth()
    box.run(2 * 3600 - 1800 - 60, step=60)
    box.run(59)
    assert box.stopped == []
    box.run(1)  # trusted now = the last checkpoint + the time since the agent came back
    assert box.stopped == [CUTOFF_MS + 65_000]
    assert CUTOFF_MS <= box.stopped[0] <= CUTOFF_MS + (60 + CHECKPOINT_S) * 1000  # the documented bound
    firing = box.last("firing")
    assert firing["detail"]["clocks"]["carried"] is True and "never early" in firing["detail"]["late"]
    refusals = [e["detail"] for e in box.journal if e["state"] == "refused-early"]
    if ntp_fixes_it:  # the right box clock says "passed" while the count is still 65 s short: it waits
        last = refusals[-1]
        assert last["clocks"]["box_clock_ms"] - last["clocks"]["trusted_ms"] == 65_000
    if jump_ms < 0:
        assert ntp_fixes_it or refusals == []  # a box clock behind has no say after a reboot
        return
    # Ahead: from the moment the box clock said "passed", each refusal says why, with both clocks.
    first = refusals[0]
    assert first["clocks"]["box_clock_ms"] - first["clocks"]["trusted_ms"] == 2 * HOUR_MS + 65_000
    assert first["now_ms"] == first["clocks"]["trusted_ms"] and first["remaining_s"] > 2 * 3600 - 65 - 60
    assert first["deadline_ms"] == CUTOFF_MS and "box clock says the deadline has passed" in first["why"]
    assert 1 < len(refusals) <= (1800 if ntp_fixes_it else 2 * 3600) / 60 + 1, "once a minute at most"


def test_a_console_confirmation_after_a_reboot_removes_the_lateness(box: Box) -> None:
    box.wd.arm(1, CUTOFF_MS, "stop-arms", ARMED_AT)
    box.run(3600, step=60)
    box.reboot(600, 2 * HOUR_MS)
    box.run(60)
    box.wd.confirm_utc(box.truth())  # a probe from the console, with its UTC
    reconfirmed = box.journal[-1]
    assert reconfirmed["state"] == "armed" and reconfirmed["detail"]["reconfirmed"] is True
    assert reconfirmed["detail"]["console_now_ms"] - reconfirmed["detail"]["trusted_before_ms"] == 600_000
    assert reconfirmed["detail"]["clocks"]["carried"] is False
    assert reconfirmed["remaining_s"] == 2 * 3600 - 660
    box.run(2 * 3600 - 660, step=60)
    assert box.stopped == [CUTOFF_MS]


def test_an_unreadable_boot_id_still_sees_a_reboot_by_its_boot_clock(tmp_path: Path) -> None:
    box = Box(tmp_path, boot=None)
    box.wd.arm(1, CUTOFF_MS, "stop-arms", ARMED_AT)
    box.run(3 * 3600 - 600, step=60)
    box.reboot(120, boot=None)  # the boot clock went back from ~15k s to 7 s
    assert box.journal[-1]["detail"]["rebooted"] is True
    box.run(720, step=60)
    assert box.stopped == [CUTOFF_MS + 120_000]


def test_the_rule_involves_no_zone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same reboot with the box clock two hours ahead, under each zone in turn: identical journals
    and state files (the zone appears only where a refusal names the zone in force)."""
    seen: dict[str, tuple[list[dict[str, Any]], str]] = {}
    zones = set()
    for tz in TZS:
        monkeypatch.setenv("TZ", tz)
        time.tzset()
        box = Box(tmp_path / tz.replace("/", "-"))
        box.wd.arm(1, CUTOFF_MS, "destroy", ARMED_AT)
        box.run(3600, step=60)
        box.reboot(300, 2 * HOUR_MS)
        box.run(2 * 3600 + 300 + 120, step=60)
        for event in box.journal:
            zones.add(event["detail"].pop("tz", None))
        seen[tz] = box.journal, (box.home / STATE_FILE).read_text()
    assert len(zones - {None}) == len(TZS)
    first = seen[TZS[0]]
    assert box.stopped == [CUTOFF_MS + 300_000] and box.powered_off == [CUTOFF_MS + 420_000]
    assert all(other == first for other in seen.values())


def test_an_older_agents_state_file_is_rearmed_late_never_early(box: Box) -> None:
    """An agent replaced while a timer was armed: the old countdown ran on another clock, so the count
    restarts from the console's UTC at arming."""
    v1 = {
        "timer_id": "3",
        "deadline_ms": CUTOFF_MS,
        "action": "stop-arms",
        "skew_ms": -120_000,
        "armed_ms": ARMED_AT + 120_000,
        "boot_id": "boot-1",
        "mono_deadline": 15800.0,
        "warned": [],
        "state": "armed",
    }
    (box.home / STATE_FILE).write_text(json.dumps({"version": 1, "timers": {"3": v1}}))
    box.advance(600)
    box.wd.restore()
    assert box.wd.timers()[0]["remaining_s"] == 3 * 3600 and box.journal[-1]["detail"]["clocks"]["carried"]
    box.run(3 * 3600, step=60)
    assert box.stopped == [CUTOFF_MS + 600_000]


def test_the_state_file_is_private_and_checkpointed_while_armed(box: Box) -> None:
    box.wd.arm(1, CUTOFF_MS, "stop-arms", ARMED_AT)
    path = box.home / STATE_FILE
    assert path.stat().st_mode & 0o777 == 0o600
    box.run(25)
    anchor = json.loads(path.read_text())["anchor"]
    assert ARMED_AT + 25_000 - CHECKPOINT_S * 1000 <= anchor["utc_ms"] <= ARMED_AT + 25_000
    assert anchor["boot_id"] == "boot-1" and anchor["skew_ms"] == 0


def test_shutdown_waits_a_grace_for_the_console_to_pull(tmp_path: Path) -> None:
    box = Box(tmp_path, mono=0.0, boot="b", shutdown_grace_s=120)
    box.wd.arm(1, CUTOFF_MS, "destroy", ARMED_AT)
    box.run(3 * 3600, step=60)
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
    box = Box(tmp_path, mono=0.0, boot="b", shutdown_grace_s=120)
    box.wd.arm(1, CUTOFF_MS, "shutdown", ARMED_AT)
    box.run(3 * 3600, step=60)
    box.run(10)
    box.reboot(30)
    box.run(300)
    assert box.powered_off == []


def test_early_fire_guard_refuses_and_logs_now_deadline_remaining_tz(box: Box) -> None:
    box.wd.arm(9, CUTOFF_MS, "stop-arms", ARMED_AT)
    box.run(3 * 3600 - 3600, step=60)
    # The wall clock is stepped back an hour (say, a zone misread by whatever sets it) while the
    # countdown runs out: the second opinion, the box clock corrected by the offset measured at arming,
    # says an hour remains, so nothing is stopped until the two agree.
    box.advance(3600, wall=False)
    box.wd.tick()
    assert box.stopped == []
    refused = box.journal[-1]
    assert refused["state"] == "refused-early"
    d = refused["detail"]
    assert d["now_ms"] == CUTOFF_MS - HOUR_MS and d["deadline_ms"] == CUTOFF_MS and d["remaining_s"] == 3600
    assert d["tz"].startswith(f"TZ={os.environ['TZ']} ")
    assert d["clocks"] == {
        "trusted_ms": CUTOFF_MS,
        "box_clock_ms": CUTOFF_MS - HOUR_MS,
        "box_clock_corrected_ms": CUTOFF_MS - HOUR_MS,
        "carried": False,
    }
    box.run(59)
    assert box.states().count("refused-early") == 1, "a standing refusal is journaled once a minute"
    box.run(3600)
    box_clock_at_stop = box.stopped[0] - HOUR_MS
    assert CUTOFF_MS - GUARD_MS <= box_clock_at_stop <= CUTOFF_MS + 60_000


def test_a_console_confirmation_ends_a_hold_by_the_box_clock(box: Box) -> None:
    box.wd.arm(9, CUTOFF_MS, "stop-arms", ARMED_AT)
    box.run(3 * 3600 - 60, step=60)
    box.run(50)
    box.clock.advance(-HOUR_MS)  # stepped back an hour just before the deadline
    box.run(20)
    assert box.stopped == [] and box.journal[-1]["state"] == "refused-early"
    box.wd.confirm_utc(box.truth())  # the console's UTC: the box clock's offset is measured anew
    box.run(1)
    assert box.stopped == [CUTOFF_MS + 11_000]


def test_a_failed_stop_is_retried(box: Box) -> None:
    box.fail_stop = 1
    box.wd.arm(2, CUTOFF_MS, "stop-arms", ARMED_AT)
    box.run(3 * 3600, step=60)
    assert box.stopped == [] and "kill failed" in box.journal[-1]["detail"]["stop_arms_error"]
    box.run(10)
    assert box.stopped == [CUTOFF_MS + 10_000]


def test_cancel_and_bad_input(box: Box) -> None:
    box.wd.arm(4, CUTOFF_MS, "stop-arms", ARMED_AT)
    assert box.wd.cancel(4) == {"cancelled": True} and box.wd.cancel(4) == {"cancelled": False}
    box.run(3 * 3600 + 60)
    assert box.stopped == []
    assert json.loads((box.home / STATE_FILE).read_text())["timers"] == {}
    unknown: Any = "reboot"  # what a console of another version could send: refused at run time
    with pytest.raises(ValueError, match="action 'reboot'"):
        box.wd.arm(5, CUTOFF_MS, unknown, ARMED_AT)
    with pytest.raises(ValueError, match="timer_id must be"):
        box.wd.arm(None, CUTOFF_MS, "stop-arms", ARMED_AT)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="deadline_ms must be integer UTC epoch milliseconds"):
        box.wd.arm(5, "2026-09-06 01:27", "stop-arms", ARMED_AT)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="console_t_ms must be integer UTC epoch milliseconds"):
        box.wd.confirm_utc("01:27")  # type: ignore[arg-type]
    box.wd.confirm_utc(ARMED_AT)  # nothing is armed: nothing to anchor
    assert json.loads((box.home / STATE_FILE).read_text())["timers"] == {}


def test_a_failing_checkpoint_does_not_hold_up_the_stop(box: Box) -> None:
    """A full disk: every state write fails (here the temporary file cannot be created); the daemon's
    tick journals each failure and goes on, and the arms are still stopped at the deadline."""
    box.wd.arm(1, CUTOFF_MS, "stop-arms", ARMED_AT)
    (box.home / (STATE_FILE + ".tmp")).mkdir()
    failures = 0
    for _ in range(3 * 3600 // 60):
        box.advance(60)
        try:
            box.wd.tick()
        except OSError:
            failures += 1
    assert box.stopped == [CUTOFF_MS] and failures > 100


def test_a_damaged_state_file_fails_loudly(box: Box) -> None:
    (box.home / STATE_FILE).write_text("{not json")
    with pytest.raises(RuntimeError, match="cannot read watchdog state"):
        box.wd.restore()
    timer = {"timer_id": "1", "deadline_ms": CUTOFF_MS, "action": "stop-arms"}
    anchor = {"boot_id": "b", "mono_ms": 0, "utc_ms": ARMED_AT, "skew_ms": None}
    for damaged in (
        {"anchor": {"boot_id": "b"}},
        {"anchor": anchor | {"utc_ms": "01:27"}},
        {"anchor": None, "timers": {"1": timer}},
        {"anchor": anchor, "timers": {"1": timer | {"state": "?"}}},
    ):
        (box.home / STATE_FILE).write_text(json.dumps({"version": 2, "timers": {}} | damaged))
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
    p = subprocess.Popen(
        [sys.executable, "-c", HOST, str(home), str(arm_pid), *args],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
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
        assert lines[1]["detail"]["restored"] is True and lines[1]["detail"]["rebooted"] is False
        killed_at = lines[-1]["detail"]["stop_arms"]["t_ms"]
        # Never early; and on time once a watchdog runs again: at its first ticks after the later of the
        # deadline and its restart (a loaded machine can start the new process after the deadline itself).
        running_again = max(deadline, lines[1]["t_ms"])
        assert deadline <= killed_at <= running_again + 5000, (
            killed_at - deadline,
            lines[1]["t_ms"] - deadline,
        )
    finally:
        procs: list[subprocess.Popen[Any]] = [*hosts, arm]
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(5)


def test_a_journal_that_cannot_be_written_never_stops_the_stop(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a full disk the journal write fails; the watchdog's record of firing goes to the agent's log and the
    action it records still happens (the daemon's journal callback never raises into the watchdog)."""
    import sqlite3

    from agents.daemon import Agent

    (tmp_path / "home").mkdir()
    agent = Agent(tmp_path / "home")
    stopped: list[str] = []
    watchdog = agent._make_watchdog()
    watchdog._stop_arms = lambda: stopped.append("stop") or {"stopping": []}  # type: ignore[func-returns-value]

    def full(kind: str, **fields: Any) -> int:
        raise sqlite3.OperationalError("database or disk is full")

    agent.journal.append = full  # type: ignore[method-assign]
    now = int(time.time() * 1000)
    watchdog.arm("t1", now + 31_000, "stop-arms", now)
    watchdog._now_ms = lambda: now + 40_000  # the deadline has passed, on every clock the watchdog reads
    watchdog._mono = lambda: time.monotonic() + 40.0
    for _ in range(3):
        watchdog.tick()
    assert stopped, "the stop did not happen when its journal record could not be written"
    assert "could not journal" in capsys.readouterr().err
