"""Shared test infrastructure: the CPU vLLM environment and one shared tiny server (per session), and a
``local`` box serving the fake engine (per test)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
from collections.abc import Generator, Iterator
from pathlib import Path

import pluggy
import pytest

from console.store import Store
from ops.demo import build_demo
from testbed import ray_env, vllm_server
from testbed import vllm_env as vllm_env_module
from testbed.fake_engine import install, write_model


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


@pytest.fixture(scope="session")
def ray_python() -> Path:
    """A Python with Ray (testbed/ray_env.py), for reading planned ``ray start`` argv with Ray's own parser."""
    try:
        return ray_env.ensure()
    except Exception as exc:  # the reason is shown in the skip, never swallowed
        pytest.skip(f"Ray environment unavailable: {exc}")


REAL_PARTS = {
    "sshd": ("sshd_farm", "fleet_store"),
    "vllm": ("vllm_env", "tiny_server"),
    "ray": ("ray_python",),
}
"""Each real part a test can need, by marker, and the fixtures that bring it."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that uses a real part's fixture carries its marker, so a skip of it can never pass unseen."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        for marker, needs in REAL_PARTS.items():
            if fixtures & set(needs) and item.get_closest_marker(marker) is None:
                item.add_marker(marker)
    _heaviest_files_first(items)


def _heaviest_files_first(items: list[pytest.Item]) -> None:
    """Files that start a CPU vLLM first, then those on sshd boxes, then the rest, each file's tests kept
    together and in order. tests/run.sh hands whole files to its workers in this order (with
    ``--no-loadscope-reorder``: xdist's own order, most tests first, put the one-test vLLM files last, so both
    workers ran them together at the end and one finished the last alone); the long files start early and the
    many short ones even out the end."""
    weight: dict[Path, int] = {}
    for item in items:
        heavy = 0 if item.get_closest_marker("vllm") else 1 if item.get_closest_marker("sshd") else 2
        weight[item.path] = min(weight.get(item.path, 2), heavy)
    items.sort(key=lambda item: weight[item.path])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pluggy.Result[pytest.TestReport], None]:
    """With CAMPAIGN_REQUIRE_REAL_PARTS set (CI), a skipped test that needs sshd, the CPU vLLM or Ray fails."""
    outcome = yield
    report = outcome.get_result()
    if not report.skipped or not os.environ.get("CAMPAIGN_REQUIRE_REAL_PARTS"):
        return
    needed = [m for m in REAL_PARTS if item.get_closest_marker(m) is not None]
    if needed:
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = (
            f"needs {' and '.join(needed)} but was skipped ({reason}); CI never passes without it"
        )


@pytest.fixture
def local_db(tmp_path: Path) -> Iterator[Path]:
    """A state.db whose ``local`` box has the fake engine as its serving env and a short agent home."""
    home = Path(tempfile.mkdtemp(prefix="sw-"))  # a unix socket path must stay under 108 bytes
    db = tmp_path / "state.db"
    with Store(db) as store:
        store.boxes.ensure_local()
        store.boxes.update(
            "local",
            serving_env=str(install(tmp_path / "env")),
            model_root=str(tmp_path / "models"),
            agent_home=str(home / "agent"),
        )
    write_model(tmp_path / "models" / "fake-moe")
    try:
        yield db
    finally:
        stop_agent(home / "agent")
        shutil.rmtree(home, ignore_errors=True)


def stop_agent(home: Path) -> None:
    """Stop the agent daemon this test started (by its recorded pid), and only it."""
    pid_file = home / "agent.pid"
    if pid_file.exists():
        pid = int(pid_file.read_text().split()[0])
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A state.db holding the demo campaign (ops/demo.py), built once for each test module that reads it."""
    path = tmp_path_factory.mktemp("demo") / "state.db"
    with Store(path) as store:
        build_demo(store)
    return path
