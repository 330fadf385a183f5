"""The console tells the truth: what a command prints and returns matches what happened.

A new database is set up by whichever command runs first; ``--json`` is JSON and nothing else on stdout;
an arm that cannot run on a box is refused before anything starts; the console without a terminal says so
and exits instead of spinning.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from console.cli import main
from console.store import Store

ROOT = Path(__file__).resolve().parent.parent


def test_the_first_command_on_a_new_database_sets_it_up_whichever_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "new.db")
    assert main(["--db", db, "box", "list", "--json"]) == 0
    boxes = {b["name"]: b for b in json.loads(capsys.readouterr().out)}
    assert boxes["local"]["kind"] == "local"  # this machine, registered
    assert any(b["status"] == "imported" for b in boxes.values())  # and the demo campaign to browse
    with Store(db) as store:
        imported = store.scalar("SELECT count(*) FROM bench_runs WHERE source = 'imported'")
    assert imported > 50
    assert main(["--db", db, "box", "list", "--json"]) == 0  # an existing database is never seeded again
    assert len(json.loads(capsys.readouterr().out)) == len(boxes)


@pytest.mark.parametrize(
    "argv",
    [
        ["box", "list", "--json"],
        ["timer", "list", "--json"],
        ["recipe", "list", "--json"],
        ["recipe", "show", "tiny-cpu", "--json"],
        ["recipe", "lint", "--json"],
        ["sweep", "status", "--json"],
        ["check", "local", "--stored", "--json"],
        ["export", "summary", "--format", "json"],
    ],
)
def test_json_output_is_json_and_nothing_else(tmp_path: Path, argv: list[str]) -> None:
    """In a separate process, as a script would run it: stdout parses as one JSON document."""
    db = tmp_path / "state.db"
    main(["--db", str(db), "box", "list"])  # a campaign (reading commands never create one)
    if argv[0] == "check":  # a stored probe to judge, without probing this machine's GPUs
        main(["--db", str(db), "check", "local"])
    done = subprocess.run(
        [sys.executable, "-m", "console", "--db", str(db), *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode in (0, 1), done.stderr  # lint and a failed check exit 1; their JSON still stands
    json.loads(done.stdout)


def test_a_gpu_arm_on_a_box_without_gpus_is_refused_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "state.db")
    assert main(["--db", db, "launch", "qwen3.8-27b-bf16", "--box", "local"]) == 2
    err = capsys.readouterr().err
    assert "runs on GPUs and box local has none measured" in err and "campaign check local" in err
    assert "Traceback" not in err
    with Store(db) as store:
        assert store.scalar("SELECT count(*) FROM launches WHERE box = 'local'") == 0
        assert store.scalar("SELECT count(*) FROM commands") == 0


def test_the_console_without_a_terminal_exits_at_once_with_a_clear_message(tmp_path: Path) -> None:
    """It used to spin a core forever: the subprocess timeout fails the test if it does not return."""
    done = subprocess.run(
        [sys.executable, "-m", "console", "--db", str(tmp_path / "state.db")],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 2
    assert "the console needs a terminal, and stdin is not one" in done.stderr
    assert "Traceback" not in done.stderr


def test_browse_without_a_terminal_exits_too(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    main(["--db", str(db), "box", "list"])
    done = subprocess.run(
        [sys.executable, "-m", "console", "browse", str(db)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 2 and "needs a terminal" in done.stderr
