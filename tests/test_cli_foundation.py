"""The CLI skeleton: every subcommand is listed, --db and CAMPAIGN_DB pick the database."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from console.cli import COMMANDS, main

EXPECTED = {
    "box",
    "check",
    "recipe",
    "launch",
    "kill",
    "bench",
    "tripwire",
    "timer",
    "browse",
    "export",
    "demo",
}


def test_help_lists_every_subcommand() -> None:
    out = subprocess.run([sys.executable, "-m", "console", "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    for name in EXPECTED:
        assert f"    {name} " in out.stdout
    assert {name for name, _ in COMMANDS} >= EXPECTED


def test_box_inventory_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "s.db")
    assert (
        main(
            ["--db", db, "box", "add", "pro-a", "--ssh", "root@203.0.113.7:22022", "--price-per-hour", "2.74"]
        )
        == 0
    )
    assert "added box pro-a" in capsys.readouterr().out
    assert main(["box", "list", "--json", "--db", db]) == 0
    listed = {
        b["name"]: b for b in json.loads(capsys.readouterr().out)
    }  # stdout is the JSON and nothing else
    assert listed["pro-a"]["port"] == 22022 and listed["pro-a"]["price_per_hour"] == 2.74
    # The first command on a new database set it up as every new one: this machine and the demo campaign.
    assert listed["local"]["kind"] == "local" and any(b["status"] == "imported" for b in listed.values())
    assert main(["--db", db, "box", "add", "pro-a", "--ssh", "root@h"]) == 2
    assert "already exists" in capsys.readouterr().err
    assert main(["--db", db, "box", "rm", "pro-a", "--yes"]) == 0


@pytest.mark.parametrize("target", ["root@", "host-only", "u@h:99999", "u@h;rm -rf /"])
def test_box_add_refuses_bad_targets(tmp_path: Path, target: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--db", str(tmp_path / "s.db"), "box", "add", "x", "--ssh", target]) == 2
    assert "--ssh" in capsys.readouterr().err


def test_campaign_db_env_is_the_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAMPAIGN_DB", str(tmp_path / "env.db"))
    monkeypatch.chdir(tmp_path)
    assert main(["box", "list"]) == 0
    assert (tmp_path / "env.db").exists() and not (tmp_path / "state.db").exists()
    monkeypatch.delenv("CAMPAIGN_DB")
    assert main(["box", "list"]) == 0
    assert (tmp_path / "state.db").exists()


def test_first_start_registers_local_box_and_imports_the_demo_once(tmp_path: Path) -> None:
    from argparse import Namespace

    from console.cli.open_console import prepare
    from console.store import Store

    db = tmp_path / "state.db"
    assert prepare(Namespace(db=str(db))) == db
    with Store(db) as store:
        assert store.boxes.get("local").kind == "local"
        imported = store.scalar("SELECT count(*) FROM bench_runs WHERE source = 'imported'")
        assert imported > 50
        store.db.execute("DELETE FROM sweep_benches")  # the demo's sweeps cite its bench rows
        store.db.execute("DELETE FROM bench_runs")
        store.db.conn.commit()
    prepare(Namespace(db=str(db)))  # a later start never re-imports into an existing database
    with Store(db) as store:
        assert store.scalar("SELECT count(*) FROM bench_runs") == 0


def test_box_set_places_the_local_box_serving_env(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "s.db")
    assert (
        main(["--db", db, "box", "set", "local", "--serving-env", "/opt/vllm", "--model-root", "/models"])
        == 0
    )
    capsys.readouterr()
    assert main(["--db", db, "box", "list", "--json"]) == 0
    local = {b["name"]: b for b in json.loads(capsys.readouterr().out)}["local"]
    assert (local["serving_env"], local["model_root"]) == ("/opt/vllm", "/models")
    assert main(["--db", db, "box", "set", "local"]) == 2
    assert "nothing to set" in capsys.readouterr().err
    assert main(["--db", db, "box", "set", "nope", "--price-per-hour", "1"]) == 2


def test_imported_demo_boxes_are_never_connected(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The demo's boxes hold someone else's figures: the fleet skips them and says why when asked."""
    from argparse import Namespace

    from console.cli.open_console import prepare
    from console.fleet import FleetManager
    from console.store import BoxNotReachable, Store

    db = tmp_path / "state.db"
    prepare(Namespace(db=str(db)))
    with Store(db) as store:
        imported = [b for b in store.boxes.every() if b.status == "imported"]
        assert imported and not any(b.reachable for b in imported)
        assert store.boxes.get("local").reachable
        fleet = FleetManager(store)
        with pytest.raises(BoxNotReachable, match="cannot be reached: it holds imported figures"):
            fleet.link(imported[0].name)
    assert main(["--db", str(db), "box", "connect", imported[0].name]) != 0
    assert "cannot be reached" in capsys.readouterr().err


def test_every_command_renders_its_help(capsys: pytest.CaptureFixture[str]) -> None:
    """argparse expands ``%`` in help texts only when --help is asked: a stray one breaks that command's help
    and nothing else, so every command's (each registered as it is used) and the load generator's is asked."""
    from agents.loadgen.cli import parser as loadgen_parser
    from console.cli import COMMANDS, main

    for name, _ in COMMANDS:
        with pytest.raises(SystemExit) as done:
            main([name, "--help"])
        assert done.value.code == 0, name
        assert capsys.readouterr().out.startswith("usage: campaign " + name), name
    assert "(default 25% of MemAvailable)" in " ".join(loadgen_parser().format_help().split())
