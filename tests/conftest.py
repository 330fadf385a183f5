"""Session-wide test infrastructure: the CPU vLLM environment and one shared tiny server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support import vllm_env as vllm_env_module
from tests.support import vllm_server


@pytest.fixture(scope="session")
def vllm_env() -> vllm_env_module.VllmEnv:
    try:
        return vllm_env_module.ensure()
    except Exception as exc:  # the reason is shown in the skip, never swallowed
        pytest.skip(f"CPU vLLM environment unavailable: {exc}")


@pytest.fixture(scope="session")
def tiny_server(
    vllm_env: vllm_env_module.VllmEnv, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[vllm_server.TinyServer]:
    """One real vLLM serving the tiny model, shared by every end-to-end test of the session."""
    log = tmp_path_factory.mktemp("tiny-server") / "vllm.log"
    server = vllm_server.start(vllm_env, log)
    try:
        yield server
    finally:
        vllm_server.stop(server.process)
