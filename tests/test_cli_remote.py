"""Commands that reach a box fail with one line and a status scripts can tell apart, never a traceback."""

from __future__ import annotations

from argparse import Namespace
from pathlib import Path

import asyncssh
import pytest

from console.cli import main
from console.cli.open_console import prepare
from console.errors import ConsoleError, exit_code
from console.fleet import AgentError, HostKeyUnknown, JournalMismatch
from console.service import ServiceError
from console.service.base import reaching
from console.store import BoxNotReachable, NoSuchBox, Store

REFUSED, NOT_DRIVABLE, UNREACHABLE = 1, 2, 3


@pytest.mark.parametrize(
    ("exc", "status", "text"),
    [
        (ServiceError("arm x is refused: lint error"), REFUSED, "arm x is refused"),
        (AgentError("launch", "GPU 3 is busy"), REFUSED, "GPU 3 is busy"),
        (NoSuchBox("pro-z"), NOT_DRIVABLE, "no box named 'pro-z'"),
        (BoxNotReachable("seed", "imported figures"), NOT_DRIVABLE, "cannot be reached: imported figures"),
        (HostKeyUnknown("pro-a", "SHA256:abc"), UNREACHABLE, "box pro-a: "),
        (JournalMismatch("box pro-a: journal ends at seq 3"), UNREACHABLE, "box pro-a: journal ends at seq 3"),
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
    prepare(Namespace(db=str(db)))  # a first start imports the seed campaign's boxes
    with Store(db) as store:
        imported = next(b.name for b in store.boxes.every() if b.status == "imported")
    return str(db), imported


@pytest.mark.parametrize(
    ("argv", "hint"),
    [
        (["check", "{box}"], "--stored"),
        (["box", "trust", "{box}", "--yes"], "`campaign box add NAME --ssh USER@HOST` adds a box you can reach"),
        (["box", "connect", "{box}"], "`campaign box add NAME --ssh USER@HOST` adds a box you can reach"),
        (["launch", "tiny-cpu", "--box", "{box}"], "`campaign box add NAME --ssh USER@HOST` adds a box you can reach"),
    ],
)
def test_an_imported_box_is_refused_in_one_line(demo_db: tuple[str, str], argv: list[str], hint: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    db, box = demo_db
    assert main(["--db", db, *[a.format(box=box) for a in argv]]) == 2
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]  # progress lines may come first
    assert last.startswith(f"campaign: box {box!r} cannot be reached: it holds imported figures") and hint in last
    assert "Traceback" not in err
    with Store(db) as store:
        assert store.boxes.get(box).status == "imported"  # trying did not relabel it
