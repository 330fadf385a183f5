"""The hard stop with the real agent: the console arms the box, the console goes away, the arm stops.

The agent is the real daemon (a detached process on this machine, reached over its unix socket, as the
fleet reaches it through SSH); the arm is the agent tests' small real HTTP server. The console side is
the real ``Enforcer`` on a real state.db with the real clock, its box actions sent to that agent.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from console.fleet import FleetManager
from console.service import Service
from console.store import Box, Store
from console.timers import Enforcer, cancel
from testbed.agent_box import AgentBox, bin_with_fake_smi, stop_agent
from testbed.fleet_fixtures import FAST
from testbed.ports import free_port
from tests.test_agent_daemon import FAKE_SERVER, launch_args, state_of
from tests.test_timers import TZS

HOUR_MS = 3_600_000


class AgentActions:
    """The enforcer's box actions sent to a real agent daemon over its socket."""

    def __init__(self, agent: AgentBox):
        self.agent = agent
        self.acked = 0
        self.calls: list[str] = []

    async def _ok(self, op: str, args: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(op)
        return await asyncio.to_thread(self.agent.ok, op, args)

    async def arm_watchdog(
        self, box: str, timer_id: int, deadline_ms: int, action: str, console_now_ms: int
    ) -> dict[str, Any]:
        return await self._ok(
            "set_deadline",
            {
                "timer_id": timer_id,
                "deadline_ms": deadline_ms,
                "action": action,
                "console_now_ms": console_now_ms,
            },
        )

    async def cancel_watchdog(self, box: str, timer_id: int) -> dict[str, Any]:
        return await self._ok("cancel_deadline", {"timer_id": timer_id})

    async def pull(self, box: str) -> dict[str, Any]:
        events = (await self._ok("events", {"after": self.acked, "limit": 10_000}))["events"]
        if events:
            self.acked = (await self._ok("ack", {"seq": events[-1]["seq"]}))["acked_seq"]
        return {"events": len(events), "acked_seq": self.acked}

    async def stop_arms(self, box: str) -> dict[str, Any]:
        launches = (await self._ok("launches", {}))["launches"]
        live = [la["launch_id"] for la in launches if la["state"] in ("starting", "serving")]
        for launch_id in live:
            await self._ok("kill", {"launch_id": launch_id, "grace_s": 5})
        return {"killed": live}

    async def shutdown(self, box: str) -> dict[str, Any]:
        raise RuntimeError("a test box on this machine is never powered off")


@contextmanager
def agent_with_an_arm(tmp_path: Path, tz: str, *extra_args: str) -> Iterator[AgentBox]:
    """A real agent daemon running in ``tz``, serving one arm (``arm-1``)."""
    box = AgentBox(
        tmp_path / "home",
        path_prefix=[bin_with_fake_smi(tmp_path, "h200")],
        env={"TZ": tz},
        extra_args=list(extra_args),
    )
    box.start()
    server = tmp_path / "fake_server.py"
    server.write_text(FAKE_SERVER)
    try:
        box.ok("launch", launch_args(server, "arm-1", free_port()))
        box.wait_for(state_of("arm-1", "serving"))
        yield box
    finally:
        box.stop()


@pytest.fixture
def agent(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[AgentBox]:
    """A real agent daemon running in the parametrized TZ."""
    with agent_with_an_arm(tmp_path, request.param) as box:
        yield box


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "state.db") as s:
        s.boxes.add(Box(name="pro-a", kind="ssh", ssh_user="root", host="127.0.0.1"))
        yield s


def fired(agent: AgentBox) -> dict[str, Any]:
    return agent.wait_for(lambda e: e["kind"] == "deadline" and e["state"] == "fired", timeout=20)


@pytest.mark.parametrize("agent", TZS, indirect=True)
async def test_the_console_arms_the_box_then_goes_away_and_the_arm_stops_on_time(
    agent: AgentBox, store: Store
) -> None:
    now = time.time_ns() // 1_000_000
    deadline = now + 2000
    timer = store.timers.add("pro-a", deadline, "stop-arms", "in 2s", now_ms=now)
    actions = AgentActions(agent)
    await Enforcer(store, actions).tick()  # arms the box's watchdog ...
    assert actions.calls == ["set_deadline", "events", "ack"]  # armed, and the T-10 pull (2 s is within it)
    store.close()  # ... and the console is gone
    event = fired(agent)
    assert deadline <= event["t_ms"] <= deadline + 1500, event["t_ms"] - deadline
    assert event["timer_id"] == str(timer.id) and event["detail"]["stop_arms"] == {"stopping": ["arm-1"]}
    agent.wait_for(state_of("arm-1", "stopped"))


@pytest.mark.parametrize("agent", ["Europe/London", "Asia/Kolkata"], indirect=True)  # all TZs: test_timers.py
async def test_with_the_console_alive_it_pulls_the_journal_then_stops_the_arm(
    agent: AgentBox, store: Store
) -> None:
    now = time.time_ns() // 1_000_000
    deadline = now + 2000
    timer = store.timers.add("pro-a", deadline, "stop-arms", "in 2s", now_ms=now)
    enforcer = Enforcer(store, AgentActions(agent))
    while store.timers.get(timer.id).state != "fired":
        assert time.time_ns() // 1_000_000 < deadline + 10_000, store.timers.log_for(timer.id)
        await enforcer.tick()
        await asyncio.sleep(0.2)
    log = {e["event"]: e for e in store.timers.log_for(timer.id)}
    assert log["fired"]["t_ms"] >= deadline
    assert log["pulled"]["detail"]["events"] > 0 and log["pulled"]["t_ms"] <= log["fired"]["t_ms"]
    agent.wait_for(state_of("arm-1", "stopped"))


@pytest.mark.parametrize("tz", ["America/Los_Angeles", "Asia/Kolkata"])  # all TZs: test_watchdog.py
def test_after_a_faked_reboot_with_the_box_clock_two_hours_ahead_the_arm_stops_at_the_deadline_not_before(
    tmp_path: Path, tz: str
) -> None:
    boot_id = tmp_path / "boot_id"
    boot_id.write_text("boot-1\n")

    def console_now() -> int:  # the console's UTC: this box's clock runs two hours ahead of it
        return time.time_ns() // 1_000_000 - 2 * HOUR_MS

    with agent_with_an_arm(tmp_path, tz, "--boot-id-file", str(boot_id)) as agent:
        sent = console_now()
        deadline = sent + 6000
        agent.ok(
            "set_deadline",
            {"timer_id": 1, "deadline_ms": deadline, "action": "stop-arms", "console_now_ms": sent},
        )
        agent.kill_hard()
        boot_id.write_text("boot-2\n")  # the box comes back from a reboot
        time.sleep(0.5)
        agent.start()
        restored = agent.wait_for(lambda e: e["kind"] == "deadline" and e["detail"].get("restored") is True)
        clocks = restored["detail"]["clocks"]
        assert restored["detail"]["rebooted"] is True and clocks["carried"] is True
        assert clocks["box_clock_ms"] - clocks["trusted_ms"] > 2 * HOUR_MS  # the box clock says "long passed"
        probed_at = console_now()
        agent.ok("probe", {"console_t_ms": probed_at})  # a console check re-confirms UTC
        reconfirmed = agent.wait_for(
            lambda e: e["kind"] == "deadline" and e["detail"].get("reconfirmed") is True
        )
        assert (
            reconfirmed["detail"]["trusted_before_ms"] < probed_at
        )  # the carried count was behind, not ahead
        event = fired(agent)
        fired_at = event["t_ms"] - 2 * HOUR_MS  # on the console's clock
        assert deadline <= fired_at <= max(deadline, probed_at) + 2500, fired_at - deadline
        firing = agent.wait_for(lambda e: e["kind"] == "deadline" and e["state"] == "firing")
        assert "late" not in firing["detail"] and firing["detail"]["clocks"]["carried"] is False
        agent.wait_for(state_of("arm-1", "stopped"))


# -- the production wiring: the service's box actions over the fleet's link to a local box's real agent --
@pytest.fixture
def local_fleet(tmp_path: Path, store: Store) -> Iterator[tuple[FleetManager, Path]]:
    home = tmp_path / "local-agent"
    store.boxes.add(Box(name="local", kind="local", agent_home=str(home)))
    fleet = FleetManager(store, FAST)
    try:
        yield fleet, home
    finally:
        stop_agent(home)


async def test_service_box_actions_arm_pull_and_stop_a_real_local_box(
    local_fleet: tuple[FleetManager, Path], store: Store, tmp_path: Path
) -> None:
    fleet, _ = local_fleet
    link = fleet.link("local")
    await link.connect()
    server = tmp_path / "fake_server.py"
    server.write_text(FAKE_SERVER)
    await link.command("launch", launch_args(server, "arm-1", free_port()))
    for _ in range(100):
        launches = (await link.command("launches", {}))["launches"]
        if launches and launches[0]["state"] == "serving":
            break
        await asyncio.sleep(0.1)
    now = time.time_ns() // 1_000_000
    deadline = now + 2000
    timer = store.timers.add("local", deadline, "stop-arms", "in 2s", now_ms=now)
    enforcer = Service(store, fleet).enforcer()
    try:
        while store.timers.get(timer.id).state != "fired":
            assert time.time_ns() // 1_000_000 < deadline + 15_000, store.timers.log_for(timer.id)
            await enforcer.tick()
            await asyncio.sleep(0.2)
        log = {e["event"]: e for e in store.timers.log_for(timer.id)}
        assert log["armed-on-box"]["detail"]["armed"] is True
        assert log["fired"]["t_ms"] >= deadline
        pulled = log["fired"]["detail"]["pulled"]
        assert any("vLLM API server version" in line for line in pulled["logs"]["arm-1"])
        assert list(log["fired"]["detail"]["done"]["killed"]) == ["arm-1"]
        assert log["fired"]["detail"]["done"]["killed"]["arm-1"]["gpu_released"] is True
        assert store.launches.get("arm-1") is not None  # the pull ingested the launch into state.db
        timer2 = store.timers.add("local", deadline + 3_600_000, "stop-arms", "in 1h", now_ms=now)
        await enforcer.arm_box(timer2)
        cancel(store, timer2.id, now_ms=time.time_ns() // 1_000_000)
        await enforcer.tick()
        assert [
            t["timer_id"]
            for t in (await link.command("hello", {}))["timers"]
            if t["timer_id"] == store.timers.box_id(timer2.id)
        ] == []
        assert store.timers.has_event(timer2.id, "cancelled-on-box")
    finally:
        await fleet.close()
