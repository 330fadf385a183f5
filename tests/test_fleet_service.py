"""console.service over a real sshd box: lint gate, failed-check gate with a recorded force, launch, kill."""

from __future__ import annotations

import asyncio
import time

import pytest

from console.checks.verdict import Verdict
from console.errors import InputError
from console.service import Service, ServiceError, released
from console.store import Store
from testbed.fleet_fixtures import FAST, box_started, fleet_store, register, sshd_farm
from testbed.sshd import SshBox, SshdFarm

pytestmark = [pytest.mark.sshd, pytest.mark.timeout(120)]
__all__ = ["fleet_store", "sshd_farm"]


def _serving_env(box: SshBox) -> str:
    """A serving environment whose ``bin/vllm`` only sleeps: it never becomes ready, so it can be killed."""
    env = box.root / "sleepy-env"
    (env / "bin").mkdir(parents=True, exist_ok=True)
    vllm = env / "bin" / "vllm"
    vllm.write_text("#!/bin/sh\nexec sleep 300\n")
    vllm.chmod(0o755)
    return str(env)


async def _service(store: Store, box: SshBox, **box_values: object) -> Service:
    register(store, box)
    store.boxes.update(box.name, model_root="/models", **box_values)
    service = Service(store, settings=FAST)
    await service.probe(box.name)  # the box's GPUs, as the agent measured them, drive lint and layout
    return service


async def _until(predicate, timeout: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.1)


async def test_lint_error_refuses_and_sends_nothing(sshd_farm: SshdFarm, fleet_store: Store) -> None:
    service = await _service(fleet_store, box_started("alpha"))
    try:
        plan = service.plan_launch("qwen3.8-27b-nvfp4-auto", "alpha")
        assert [f.rule_id for f in plan.blocking] == ["R1-nvfp4-linear-backend"]
        with pytest.raises(ServiceError, match="refused by lint: \\[R1-nvfp4-linear-backend\\]"):
            await service.launch(plan, force=True)  # --force never overrides lint
        assert fleet_store.scalar("SELECT count(*) FROM launches WHERE arm = 'qwen3.8-27b-nvfp4-auto'") == 0
        assert fleet_store.scalar("SELECT count(*) FROM commands WHERE op = 'launch'") == 0
    finally:
        await service.close()


async def test_failed_check_refuses_unless_forced_and_the_force_is_recorded(
    sshd_farm: SshdFarm, fleet_store: Store
) -> None:
    box = box_started("alpha")
    service = await _service(fleet_store, box, serving_env=_serving_env(box))
    try:
        probe = fleet_store.checks.latest_probe("alpha")
        assert probe is not None
        fleet_store.checks.add_verdicts(
            "alpha", probe.id, [Verdict("power", "fail", "power.limit 400 W of 600 W")], probe.t_ms
        )
        plan = service.plan_launch("tiny-cpu", "alpha")
        with pytest.raises(ServiceError, match="failed its last check \\(power: power.limit 400 W"):
            await service.launch(plan)
        assert fleet_store.scalar("SELECT count(*) FROM launches WHERE arm = 'tiny-cpu'") == 0
        outcome = await service.launch(plan, force=True, ready_timeout_s=600, wait=False)
        [launch_id] = outcome.launch_ids
        launch = fleet_store.launches.get(launch_id)
        assert launch is not None and launch.forced and launch.arm == "tiny-cpu"
        args = fleet_store.commands.get(f"launch-{launch_id}").args
        assert args["forced_past"] == ["power: power.limit 400 W of 600 W"]
        assert args["argv"][0].endswith("sleepy-env/bin/vllm") and "--host" in args["argv"]
        assert fleet_store.scalar("SELECT recipe_hash FROM arms WHERE id = ?", [launch.arm_id])
        await _until(lambda: fleet_store.launches.get(launch_id).state == "starting")  # type: ignore[union-attr]
        held = {row.port for row in fleet_store.launches.live("alpha")}
        assert launch.port in held
        assert service.plan_launch("tiny-cpu", "alpha").resolved.replicas[0].port not in held

        kill = service.plan_kill("tiny-cpu", "alpha")
        assert [x.id for x in kill.launches] == [launch_id]
        with pytest.raises(InputError, match="nothing to kill"):
            service.plan_kill("no-such-arm", "alpha")
        [stopped] = await service.kill(kill, grace_s=1)
        assert stopped.id == launch_id and stopped.state == "stopped" and released(stopped)
    finally:
        await service.close()


async def test_launch_of_a_missing_binary_is_a_failed_row_with_its_reason(
    sshd_farm: SshdFarm, fleet_store: Store
) -> None:
    service = await _service(fleet_store, box_started("alpha"), serving_env="/nonexistent-env")
    try:
        outcome = await service.launch(service.plan_launch("tiny-cpu", "alpha"))
        assert not outcome.serving  # a launch whose server never started is never reported as served
        [launch] = outcome.failed
        assert launch.state == "failed" and launch == fleet_store.launches.get(launch.id)
        assert (
            launch.failure_reason is not None
            and "not found" in launch.failure_reason
            and "/nonexistent-env/bin/vllm" in launch.failure_reason
        )
        assert launch.gpus == (0,)  # the H200 fixture box has one GPU
    finally:
        await service.close()


async def test_a_timer_is_armed_and_cancelled_on_the_box_watchdog(
    sshd_farm: SshdFarm, fleet_store: Store
) -> None:
    register(fleet_store, box_started("alpha"))
    service = Service(fleet_store, settings=FAST)
    try:
        plan = service.plan_timer("alpha", at=None, within="1h", action="stop-arms")
        armed = await service.arm_timer(plan)
        assert armed.on_box is not None and armed.on_box.done
        assert armed.on_box.remaining_s is not None and 3590 < armed.on_box.remaining_s <= 3600
        armed_log = fleet_store.timers.log_for(armed.timer.id)[0]
        assert armed_log["event"] == "armed" and armed_log["detail"]["readings"]["UTC"]  # as confirmed
        link = service.fleet.link("alpha")
        on_box = {t["timer_id"] for t in (await link.command("hello", {}))["timers"]}
        named = fleet_store.timers.box_id(armed.timer.id)  # campaign id first: boxes serve many campaigns
        assert named in on_box and named.endswith(f":{armed.timer.id}")
        cancelled = await service.cancel_timer(armed.timer.id)
        assert cancelled.timer.state == "cancelled" and cancelled.on_box is not None and cancelled.on_box.done
        assert named not in {t["timer_id"] for t in (await link.command("hello", {}))["timers"]}
        assert [c.op for c in fleet_store.commands.unfinished("alpha")] == []
    finally:
        await service.close()


async def test_a_wait_for_the_box_wakes_when_its_next_events_are_committed(
    sshd_farm: SshdFarm, fleet_store: Store
) -> None:
    """With the box's link supervised, a wait for what the box does (a launch serving, a kill's release, a run's
    end) wakes when the link commits the box's next events, not after its fallback interval; without one it
    waits that interval (``settle`` pulls then)."""
    service = await _service(fleet_store, box_started("alpha"))
    try:
        service.fleet.start("alpha")
        before = fleet_store.scalar("SELECT count(*) FROM journal WHERE box = 'alpha'")
        await asyncio.wait_for(service.until_ingested("alpha", 600), 60)  # the link's commits wake it
        assert fleet_store.scalar("SELECT count(*) FROM journal WHERE box = 'alpha'") > before
        await service.fleet.close()
        with pytest.raises(TimeoutError):  # unsupervised: only the interval ends it
            await asyncio.wait_for(service.until_ingested("alpha", 600), 0.5)
    finally:
        await service.close()
