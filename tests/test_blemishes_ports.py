"""A launch whose port is taken on the box: the console's own choice moves to a free port (the agent knows
which are free, the servers stay on loopback, and the port really used is stored); a port the operator
pinned fails with one line.

The box is a real sshd test box running the agent; the server is the fake engine (testbed/fake_engine.py),
and the port is taken by a socket listening on the box's loopback."""

from __future__ import annotations

import asyncio
import errno
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from console.recipes import load_catalog
from console.service import Service
from console.store import Store
from testbed import box_python
from testbed.fake_engine import install, write_model
from testbed.ports import free_ports
from testbed.sweep_recipes import PROFILE

pytestmark = pytest.mark.timeout(240)

ARM = '[arms."fake-card"]\nprofile = "fake-moe"\nmax_model_len = 2048\nmax_num_seqs = 2\n'


def _hold(port: int) -> socket.socket | None:
    """A socket listening on 127.0.0.1:port (None when something else already does: taken all the same)."""
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError as exc:
        s.close()
        if exc.errno == errno.EADDRINUSE:
            return None
        raise
    s.listen()
    return s


def test_free_port_skips_held_and_listening_ports_and_with_port_moves_only_the_consoles_flag() -> None:
    from agents.supervisor import free_port, with_port

    base = free_ports(4)
    blocker = _hold(base + 1)
    try:
        assert (
            free_port(base - 1, held={base}) == base + 2
        )  # base held by a starting launch, base+1 listening
        assert free_port(base - 1, held=set(), search=1) == base
        assert free_port(base, held={base + 1, base + 2, base + 3}, search=3) is None
    finally:
        if blocker is not None:
            blocker.close()
    argv = ["vllm", "serve", "m", "--port", "8100", "--max-model-len", "8100"]
    assert with_port(argv, 8100, 8101) == ["vllm", "serve", "m", "--port", "8101", "--max-model-len", "8100"]
    assert with_port(["vllm", "serve", "m", "--port", "9000"], 8100, 8101) is None


@pytest.fixture
def box_db(tmp_path: Path) -> Iterator[tuple[Path, Path, str]]:
    """A state.db with the sshd box ``blem-ports`` (one fake H200), the fake engine as its serving env, and
    recipes with a one-card arm; (db, recipes, box)."""
    from testbed.fleet_fixtures import box_started, farm, register
    from testbed.sshd import SshdUnavailable

    try:
        farm()
    except SshdUnavailable as exc:
        pytest.skip(str(exc))
    box = box_started("blem-ports", "h200")
    env_dir = install(box.root / "fake-env", str(box_python.ensure()))
    write_model(box.root / "models" / "fake-moe")
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "fake.toml").write_text(PROFILE + ARM)
    db = tmp_path / "state.db"
    with Store(db) as store:
        register(store, box)
        store.boxes.update(box.name, serving_env=str(env_dir), model_root=str(box.root / "models"))
    try:
        yield db, recipes, box.name
    finally:
        box.kill_agent()


def test_a_taken_default_port_moves_to_a_free_one_and_the_port_used_is_stored(
    box_db: tuple[Path, Path, str],
) -> None:
    from testbed.fleet_fixtures import FAST

    db, recipes, box = box_db

    async def go() -> dict[str, Any]:
        with Store(db) as store:
            service = Service(store, catalog=load_catalog([recipes]), settings=FAST)
            try:
                await service.probe(box)
                plan = service.plan_launch("fake-card", box, gpus=[0])
                assert not plan.port_pinned
                [planned] = plan.ports
                blocker = _hold(planned)
                try:
                    outcome = await service.launch(plan, ready_timeout_s=60)
                    [launch] = outcome.replicas
                    # Measured where it really listens: the tripwire's row comes back through the journal.
                    tripwire = await service.tripwire(launch.id)
                    tripwire_error = await service.until_job_ends(box, tripwire, 120)
                    warned = store.rows(
                        "SELECT payload FROM journal WHERE box = ? AND kind = 'warning'", [box]
                    )
                    await service.stop_launches(box, [launch.id], 2)
                finally:
                    if blocker is not None:
                        blocker.close()
            finally:
                await service.close()
            return {
                "planned": planned,
                "launch": launch,
                "tripwire_error": tripwire_error,
                "warnings": [json.loads(w["payload"])["message"] for w in warned],
            }

    got = asyncio.run(go())
    planned, launch = got["planned"], got["launch"]
    assert launch.state == "serving", launch.failure_reason
    assert launch.port > planned  # the first free port above the console's choice
    assert got["tripwire_error"] is None
    assert (
        f"port {planned} is taken on 127.0.0.1; {launch.id} listens on {launch.port} instead"
        in got["warnings"]
    )
    with Store(db) as store:
        [row] = store.rows("SELECT port, state FROM launches")
        assert row == {"port": launch.port, "state": "stopped"}


def test_a_pinned_port_that_is_taken_fails_the_launch_in_one_line(box_db: tuple[Path, Path, str]) -> None:
    from testbed.fleet_fixtures import FAST

    db, recipes, box = box_db
    pinned = free_ports(1)
    blocker = _hold(pinned)

    async def go() -> tuple[str, str | None, int | None]:
        with Store(db) as store:
            service = Service(store, catalog=load_catalog([recipes]), settings=FAST)
            try:
                await service.probe(box)
                plan = service.plan_launch("fake-card", box, gpus=[0], base_port=pinned)
                assert plan.port_pinned
                outcome = await service.launch(plan, ready_timeout_s=60)
                [launch] = outcome.replicas
                return launch.state, launch.failure_reason, launch.port
            finally:
                await service.close()

    try:
        state, reason, port = asyncio.run(go())
    finally:
        if blocker is not None:
            blocker.close()
    assert (state, port) == ("failed", pinned)
    assert reason is not None and "\n" not in reason
    assert reason.startswith(f"port {pinned} is already in use on 127.0.0.1")
