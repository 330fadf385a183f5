"""Commands that reach a box fail with one line and a status scripts can tell apart, never a traceback."""

from __future__ import annotations

import asyncio
from argparse import Namespace
from pathlib import Path

import asyncssh
import pytest

from console.cli import main
from console.cli.open_console import prepare
from console.errors import ConsoleError, exit_code
from console.fleet import AgentError, HostKeyUnknown, JournalMismatch
from console.recipes import load_catalog
from console.service import Service, ServiceError
from console.service.base import reaching
from console.store import BoxNotReachable, NoSuchBox, Store
from testbed.fleet_fixtures import FAST
from testbed.ports import free_ports
from tests.support.fake_recipes import FAKE_NVFP4_PROFILE

REFUSED, NOT_DRIVABLE, UNREACHABLE = 1, 2, 3


@pytest.mark.parametrize(
    ("exc", "status", "text"),
    [
        (ServiceError("arm x is refused: lint error"), REFUSED, "arm x is refused"),
        (AgentError("launch", "GPU 3 is busy"), REFUSED, "GPU 3 is busy"),
        (NoSuchBox("pro-z"), NOT_DRIVABLE, "no box named 'pro-z'"),
        (BoxNotReachable("seed", "imported figures"), NOT_DRIVABLE, "cannot be reached: imported figures"),
        (HostKeyUnknown("pro-a", "SHA256:abc"), UNREACHABLE, "box pro-a: "),
        (
            JournalMismatch("box pro-a: journal ends at seq 3"),
            UNREACHABLE,
            "box pro-a: journal ends at seq 3",
        ),
        (ConnectionRefusedError(111, "Connection refused"), UNREACHABLE, "box pro-a: [Errno 111]"),
        (TimeoutError(), UNREACHABLE, "box pro-a: TimeoutError"),
        (asyncssh.PermissionDenied("Permission denied"), UNREACHABLE, "box pro-a: Permission denied"),
    ],
)
def test_fleet_failures_map_to_one_line_and_a_status(exc: Exception, status: int, text: str) -> None:
    """Console errors keep their own category; link failures become ``Unreachable`` at the service boundary."""
    with pytest.raises(ConsoleError) as caught, reaching("pro-a"):
        raise exc
    assert exit_code(caught.value) == status
    assert text in str(caught.value)
    assert caught.value is exc or caught.value.__cause__ is exc


def test_other_errors_are_not_disguised() -> None:
    """A bug is not a network failure: it propagates as itself."""
    with pytest.raises(ZeroDivisionError), reaching("pro-a"):
        1 / 0  # noqa: B018


@pytest.fixture
def demo_db(tmp_path: Path) -> tuple[str, str]:
    db = tmp_path / "state.db"
    prepare(Namespace(db=str(db)))  # a first start imports the demo campaign's boxes
    with Store(db) as store:
        imported = next(b.name for b in store.boxes.every() if b.status == "imported")
    return str(db), imported


@pytest.mark.parametrize(
    ("argv", "hint"),
    [
        (["check", "{box}"], "--stored"),
        (
            ["box", "trust", "{box}", "--yes"],
            "`campaign box add NAME --ssh USER@HOST` adds a box you can reach",
        ),
        (["box", "connect", "{box}"], "`campaign box add NAME --ssh USER@HOST` adds a box you can reach"),
        (
            ["launch", "tiny-cpu", "--box", "{box}"],
            "`campaign box add NAME --ssh USER@HOST` adds a box you can reach",
        ),
    ],
)
def test_an_imported_box_is_refused_in_one_line(
    demo_db: tuple[str, str], argv: list[str], hint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    db, box = demo_db
    assert main(["--db", db, *[a.format(box=box) for a in argv]]) == 2
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]  # progress lines may come first
    assert (
        last.startswith(f"campaign: box {box!r} cannot be reached: it holds imported figures")
        and hint in last
    )
    assert "Traceback" not in err
    with Store(db) as store:
        assert store.boxes.get(box).status == "imported"  # trying did not relabel it


KILL_RECIPES = (
    FAKE_NVFP4_PROFILE
    + """
[arms."fake-one"]
profile = "fake-nvfp4"
device = "cpu"  # the fake engine on the local box, which has no GPU
linear_backend = "b12x"  # what lint asks of an NVFP4 checkpoint (campaign rule 1)
replicas = 1
max_model_len = 2048
"""
)


@pytest.mark.timeout(120)
def test_a_launch_killed_twice_then_stopped_by_a_sweep_is_three_kills_not_a_crash(
    local_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each kill is its own attempt with its own command id: a second ``campaign kill`` of the same launch, and a
    sweep stopping a launch an operator killed (console/service/sweep/walk.py), once failed on ``commands.id``."""
    recipes = tmp_path / "kill-recipes"
    recipes.mkdir()
    (recipes / "fake.toml").write_text(KILL_RECIPES)

    async def with_service(act: str, launch_id: str = "") -> str:
        with Store(local_db) as store:
            service = Service(store, catalog=load_catalog([recipes]), settings=FAST)
            try:
                if act == "launch":
                    plan = service.plan_launch("fake-one", "local", base_port=free_ports(1))
                    outcome = await service.launch(plan, ready_timeout_s=60)
                    assert outcome.serving, outcome.replicas
                    return outcome.launch_ids[0]
                await service.stop_launches("local", [launch_id], 2)  # what a sweep's stop() calls
                return launch_id
            finally:
                await service.close()

    launch_id = asyncio.run(with_service("launch"))
    for _ in range(2):
        assert (
            main(["--db", str(local_db), "kill", launch_id, "--box", "local", "--yes", "--grace", "2"]) == 0
        )
        assert "freed" in capsys.readouterr().out
    asyncio.run(with_service("sweep-stop", launch_id))
    with Store(local_db) as store:
        kills = store.rows("SELECT id, state, error FROM commands WHERE op = 'kill' ORDER BY created_ms")
        assert store.launches.get(launch_id).state == "stopped"  # type: ignore[union-attr]
    assert len({k["id"] for k in kills}) == 3 and all(k["id"].startswith(f"kill-{launch_id}-") for k in kills)
    assert [(k["state"], k["error"]) for k in kills] == [("acked", None)] * 3
