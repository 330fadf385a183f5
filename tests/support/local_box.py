"""The ``local`` box of a test that serves a real CPU vLLM: one definition for every test that launches it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path

from console.recipes import load_catalog
from console.recipes.load import shipped_recipe_dir
from console.service import Service
from console.store import Box, Store
from testbed.agent_box import stop_agent
from testbed.fleet_fixtures import FAST
from testbed.ports import free_port, free_ports
from testbed.vllm_env import CPU_ARM_ENV_TOML, VllmEnv


def add_vllm_box(store: Store, vllm_env: VllmEnv, agent_home: Path) -> Box:
    """Register this machine as box ``local``, serving from the CPU vLLM environment with its models, its agent
    at ``agent_home`` (a test's own, so two tests never share an agent)."""
    return store.boxes.add(
        Box(
            name="local",
            kind="local",
            agent_home=str(agent_home),
            serving_env=str(vllm_env.prefix),
            model_root=str(vllm_env.model_root),
        )
    )


def served_model_recipe(arm: str, model: str, description: str) -> str:
    """Recipes (TOML) serving one of the CPU vLLM environment's models as a profile and an arm, like the shipped
    tiny-cpu arm, for a test's own recipes directory; servers side by side on a shared machine ask for a small
    share of its memory (on CPU, --gpu-memory-utilization is the share of the
    machine's memory that must be free at start-up)."""
    return f"""
[profiles."{model}"]
checkpoint = "{model}"
local = true
served_model_name = "{model}"
architecture = "llama"
quantization = "bf16"
quantizer = "vendor"
weights_gb = 0.0034
description = "{description}"
env = {{ HF_HUB_OFFLINE = "1", TRANSFORMERS_OFFLINE = "1" }}

[profiles."{model}".serving]
sampling = {{ temperature = 0.0 }}
source = "test model: greedy, no reasoning"

[arms."{arm}"]
profile = "{model}"
device = "cpu"
{CPU_ARM_ENV_TOML}
dtype = "bfloat16"
max_model_len = 2048
max_num_seqs = 16
enforce_eager = true
gpu_memory_utilization = 0.15
"""


@asynccontextmanager
async def console_of(db: Path) -> AsyncIterator[tuple[Path, Store, Service]]:
    """A console over ``db``: (state.db, its store, the service), the ``local`` box's link supervised; closed on
    the way out. Its launches stay: a module's tests each open their own console over one served state.db."""
    store = Store(db)
    service = Service(store, settings=FAST)
    try:
        service.fleet.start("local")
        yield db, store, service
    finally:
        await service.close()
        store.close()


@asynccontextmanager
async def serving_tiny_cpu(vllm_env: VllmEnv, tmp_path: Path) -> AsyncIterator[tuple[Path, Store, Service]]:
    """A fresh state.db at ``tmp_path`` whose ``local`` box serves the ``tiny-cpu`` arm on the CPU vLLM, launched
    through the console: (state.db, its store, the service). On the way out, whatever the test did, every live
    launch is stopped (never a vLLM left behind a failed test) and the test's agent with it."""
    home, db = tmp_path / "agent-home", tmp_path / "state.db"
    with Store(db) as store:
        add_vllm_box(store, vllm_env, home)
    try:
        async with console_of(db) as (_, store, service):
            try:
                launched = await service.launch(
                    service.plan_launch("tiny-cpu", "local", base_port=free_ports(1)), ready_timeout_s=600
                )
                assert launched.serving, launched.replicas
                yield db, store, service
            finally:
                live = [row.id for row in store.launches.live("local")]
                if live:
                    await service.stop_launches("local", live, grace_s=5)
    finally:
        stop_agent(home)


@dataclass(frozen=True)
class LaunchedArms:
    """Servers a module's tests share: its state.db, its recipes directory, the launches in the order asked and
    the port each listens on."""

    db: Path
    recipes: Path
    launch_ids: tuple[str, ...]
    ports: dict[str, int]


@contextmanager
def launched_arms(
    vllm_env: VllmEnv, tmp: Path, arms: Sequence[str], recipes: str = ""
) -> Iterator[LaunchedArms]:
    """The ``local`` box of a fresh state.db at ``tmp`` serving ``arms`` (the shipped recipes plus ``recipes``,
    TOML), all started at once through the console so the module waits for the slowest only; on the way out
    every live launch is stopped (arms outlive their agent by design: never a vLLM left behind) and the agent
    with it."""
    (tmp / "recipes").mkdir()
    (tmp / "recipes" / "test.toml").write_text(recipes)
    catalog = load_catalog([shipped_recipe_dir(), tmp / "recipes"])
    db, home = tmp / "state.db", tmp / "agent-home"
    with Store(db) as store:
        add_vllm_box(store, vllm_env, home)

    async def launch() -> list[str]:
        with Store(db) as store:
            service = Service(store, catalog=catalog, settings=FAST)
            try:
                ids: list[str] = []
                for arm in arms:
                    outcome = await service.launch(
                        service.plan_launch(arm, "local", base_port=free_port()), wait=False
                    )
                    ids += outcome.launch_ids
                settled = await service.until_settled("local", ids, 900)
                assert all(launch.state == "serving" for launch in settled), settled
                return ids
            finally:
                await service.close()

    async def stop() -> None:
        with Store(db) as store:
            service = Service(store, catalog=catalog, settings=FAST)
            try:
                live = [row.id for row in store.launches.live("local")]
                if live:
                    await service.stop_launches("local", live, grace_s=5)
            finally:
                await service.close()

    try:
        ids = asyncio.run(launch())
        ports: dict[str, int] = {}
        with Store(db, read_only=True) as store:
            for launch_id in ids:
                row = store.launches.get(launch_id)
                assert row is not None and row.port is not None, launch_id
                ports[launch_id] = row.port
        yield LaunchedArms(db, tmp / "recipes", tuple(ids), ports)
    finally:
        asyncio.run(stop())
        stop_agent(home)
