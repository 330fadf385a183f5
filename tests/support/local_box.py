"""The ``local`` box of a test that serves a real CPU vLLM: one definition for every test that launches it."""

from __future__ import annotations

from pathlib import Path

from console.store import Box, Store
from testbed.vllm_env import VllmEnv


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
