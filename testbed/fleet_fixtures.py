"""Fleet test fixtures: one sshd farm per test session, boxes registered in a fresh state.db per test.

Import into a test module (``from testbed.fleet_fixtures import sshd_farm, fleet_store``) or into
tests/conftest.py. The farm is a process-wide singleton so every module shares the same sshd processes
(started once per session) however many modules import the fixtures.
"""

from __future__ import annotations

import atexit
import functools
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.fleet.link import LinkSettings
from console.fleet.transport import SshSettings
from console.store import Box, Store
from testbed.sshd import SshBox, SshdFarm, SshdUnavailable

FAST = LinkSettings(
    ssh=SshSettings(connect_timeout=5.0, keepalive_interval=1.0, keepalive_count_max=2, command_timeout=30.0),
    known_hosts=None,
    backoff_base_s=0.05,
    backoff_cap_s=0.5,
    poll_interval_s=0.05,
    agent_tick_s=0.25,
)
"""Link settings for tests: the operator's ~/.ssh/known_hosts is never consulted, reconnects are quick."""


@functools.cache
def farm() -> SshdFarm:
    """The process's one farm of sshd boxes, made on first use and stopped at exit."""
    made = SshdFarm(Path(tempfile.mkdtemp(prefix="campaign-sshd-")))
    atexit.register(made.stop)
    return made


def box_started(name: str, gpu_fixture: str | None = "h200") -> SshBox:
    """The running box ``name`` (started on first use)."""
    f = farm()
    box = f.boxes.get(name)
    if box is None or box.process is None or box.process.poll() is not None:
        box = f.start(name, gpu_fixture)
    return box


def register(
    store: Store, box: SshBox, *, name: str | None = None, port: int | None = None, pin: bool = True
) -> Box:
    """Add the box to ``store``; ``pin`` stores its host key as operator-trusted (TOFU already confirmed)."""
    return store.boxes.add(
        Box(
            name=name or box.name,
            ssh_user=box.user,
            host="127.0.0.1",
            port=port or box.port,
            key_path=str(box.client_key),
            host_key=box.host_key_line if pin else None,
            host_key_source="tofu" if pin else None,
        )
    )


@pytest.fixture(scope="session")
def sshd_farm() -> SshdFarm:
    try:
        return farm()
    except SshdUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture
def fleet_store(tmp_path: Path) -> Iterator[Store]:
    store = Store(tmp_path / "state.db")
    try:
        yield store
    finally:
        store.close()


async def stop_live_launches(db: Path, box: str, settings: LinkSettings | None = None) -> None:
    """Stop every launch ``db`` holds live on ``box``. A server runs in its own session on the box and outlives
    the console that launched it and the agent: a test that kills either must stop its launches itself."""
    from console.service import Service  # the fixtures above stay importable without the service layer

    with Store(db) as store:
        service = Service(store, settings=settings)
        try:
            live = [launch.id for launch in store.launches.live(box)]
            if live:
                await service.stop_launches(box, live, grace_s=5)
        finally:
            await service.close()


async def agent_ticking_fast(db: Path, box: str) -> None:
    """Start ``box``'s agent at the tests' tick (``FAST.agent_tick_s``) before a console command of a test
    reaches it: a command finds an agent running and keeps it (console/fleet/push.py ``ensure_agent``), where it
    would start one at the operator's 1 s, and every launch, job and kill would wait on that tick."""
    from console.service import Service  # the fixtures above stay importable without the service layer

    with Store(db) as store:
        service = Service(store, settings=FAST)
        try:
            await service.connect(box)
        finally:
            await service.close()
