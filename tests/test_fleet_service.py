"""console.service over a real sshd box: lint gate, failed-check gate with a recorded force, launch, kill."""

from __future__ import annotations

import asyncio
import time

import pytest

from console.checks.verdict import Verdict
from console.service import Service, ServiceError
from console.store import Store
from tests.support.fleet_fixtures import FAST, box_started, fleet_store, register, sshd_farm
from tests.support.sshd import SshBox, SshdFarm

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


async def test_failed_check_refuses_unless_forced_and_the_force_is_recorded(sshd_farm: SshdFarm,
                                                                           fleet_store: Store) -> None:  # fmt: skip
    box = box_started("alpha")
    service = await _service(fleet_store, box, serving_env=_serving_env(box))
    try:
        probe = fleet_store.checks.latest_probe("alpha")
        assert probe is not None
        fleet_store.checks.add_verdicts("alpha", probe.id, [Verdict("power", "fail", "power.limit 400 W of 600 W")],
                                        probe.t_ms)  # fmt: skip
        plan = service.plan_launch("tiny-cpu", "alpha")
        with pytest.raises(ServiceError, match="failed its last check \\(power: power.limit 400 W"):
            await service.launch(plan)
        assert fleet_store.scalar("SELECT count(*) FROM launches WHERE arm = 'tiny-cpu'") == 0
        plan = await service.launch(plan, force=True, ready_timeout_s=600)
        [launch_id] = plan.launch_ids
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

        assert service.kill_targets("tiny-cpu", "alpha") == [launch_id]
        with pytest.raises(ServiceError, match="nothing to kill"):
            service.kill_targets("no-such-arm", "alpha")
        await service.kill([launch_id], "alpha", grace_s=1)
        link = service.fleet.link("alpha")

        async def stopped() -> bool:
            await link.sync()
            return fleet_store.launches.get(launch_id).state == "stopped"  # type: ignore[union-attr]

        deadline = time.monotonic() + 20
        while not await stopped():
            assert time.monotonic() < deadline, "the launch never reached stopped"
            await asyncio.sleep(0.2)
    finally:
        await service.close()


async def test_launch_of_a_missing_binary_is_a_failed_row_with_its_reason(sshd_farm: SshdFarm,
                                                                         fleet_store: Store) -> None:  # fmt: skip
    service = await _service(fleet_store, box_started("alpha"), serving_env="/nonexistent-env")
    try:
        plan = await service.launch(service.plan_launch("tiny-cpu", "alpha"))
        launch = fleet_store.launches.get(plan.launch_ids[0])
        assert launch is not None and launch.state == "failed"
        assert "not found" in launch.failure_reason and "/nonexistent-env/bin/vllm" in launch.failure_reason
        assert launch.gpus == (0,)  # the H200 fixture box has one GPU
    finally:
        await service.close()


async def test_set_deadline_arms_the_box_watchdog(sshd_farm: SshdFarm, fleet_store: Store) -> None:
    register(fleet_store, box_started("alpha"))
    service = Service(fleet_store, settings=FAST)
    try:
        timer_id = f"t{int(time.time() * 1000)}"
        deadline = fleet_store.clock() + 3_600_000
        armed = await service.set_deadline("alpha", timer_id, deadline, "stop-arms")
        assert armed["armed"] is True and 3590 < armed["remaining_s"] <= 3600
        link = service.fleet.link("alpha")
        assert (await link.command("cancel_deadline", {"timer_id": timer_id}))["cancelled"] is True
        assert [c.op for c in fleet_store.commands.unfinished("alpha")] == []
    finally:
        await service.close()
