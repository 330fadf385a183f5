"""``campaign timer set|list|show|cancel`` on a real state.db, with the console's clock injected."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import console.cli.common as cli_common
import console.cli.timer as timer_cli
from console.cli import main
from console.store import Box, Store, resolve_db_path
from testbed.agent_box import stop_agent
from testbed.ports import free_port
from tests.test_timers import CUTOFF_MS, NOW_MS, add_probe, process_tz  # noqa: F401 - every TZ


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    path = tmp_path / "state.db"
    with Store(path) as store:
        store.boxes.add(Box(name="pro-a", ssh_user="root", host="203.0.113.7", port=22022))
        add_probe(store, "pro-a", "Europe/London")
        store.boxes.add(Box(name="bare", ssh_user="root", host="203.0.113.8"))
        store.boxes.add(
            Box(name="vast-1", ssh_user="root", host="198.51.100.4", provider="vast", instance_id="24871932")
        )

    def at_seed_time(args: argparse.Namespace, *, read_only: bool = False) -> Store:
        return Store(resolve_db_path(args.db), read_only=read_only, clock=lambda: NOW_MS)

    monkeypatch.setattr(timer_cli, "open_store", at_seed_time)  # list, show
    monkeypatch.setattr(cli_common, "open_store", at_seed_time)  # the service's store: set, cancel, watch
    monkeypatch.delenv("VAST_API_KEY", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    yield str(path)


def timers(db: str) -> list[dict[str, object]]:
    with Store(db) as store:
        return store.rows("SELECT * FROM timers ORDER BY id")


@pytest.mark.parametrize("typed", ["01:27", "2026-09-06 01:27"])
def test_set_refuses_the_seeds_cutoff_without_a_zone(
    db: str, typed: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--db", db, "timer", "set", "pro-a", "--at", typed, "--yes", "--no-arm"]) == 2
    err = capsys.readouterr().err
    assert "names no time zone" in err
    assert "read as UTC: 2026-09-06 01:27:00 UTC" in err
    assert "read in the box's zone (Europe/London): 2026-09-06 00:27:00 UTC" in err
    assert timers(db) == []


def test_set_echoes_every_reading_and_stores_an_integer_utc_deadline(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(["--db", db, "timer", "set", "pro-a", "--at", "2026-09-06T02:27+01:00", "--yes", "--no-arm"])
        == 0
    )
    out = capsys.readouterr().err  # the readings are what the operator confirms: prose, on stderr
    assert "UTC        2026-09-06 01:27:00 UTC" in out
    assert "box        2026-09-06 02:27:00 BST (+01:00) [Europe/London]" in out
    assert "remaining  3h12m" in out and "console    2026-09-0" in out
    [row] = timers(db)
    assert row["deadline_ms"] == CUTOFF_MS and isinstance(row["deadline_ms"], int)
    assert row["input_text"] == "2026-09-06T02:27+01:00" and row["state"] == "armed"

    assert main(["--db", db, "timer", "list", "--json"]) == 0
    [listed] = json.loads(capsys.readouterr().out)
    assert {k: listed[k] for k in ("box", "deadline_ms", "deadline_utc", "action", "state")} == {
        "box": "pro-a",
        "deadline_ms": CUTOFF_MS,
        "deadline_utc": "2026-09-06 01:27:00 UTC",
        "action": "stop-arms",
        "state": "armed",
    }
    assert listed["deadline_box"] == "2026-09-06 02:27:00 BST (+01:00)" and listed["remaining_s"] == 11520.0


def test_set_with_a_duration_and_a_box_never_probed(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            ["--db", db, "timer", "set", "bare", "--in", "3h12m", "--action", "shutdown", "--yes", "--no-arm"]
        )
        == 0
    )
    assert "box        box zone unknown" in capsys.readouterr().err
    assert timers(db)[0]["deadline_ms"] == CUTOFF_MS
    assert main(["--db", db, "timer", "list"]) == 0
    assert "box zone unknown" in capsys.readouterr().out


def test_without_a_terminal_nothing_is_armed_unless_yes(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--db", db, "timer", "set", "pro-a", "--in", "4h30m"]) == 2
    assert "pass --yes" in capsys.readouterr().err and timers(db) == []


def test_destroy_needs_a_destroyable_box_and_a_key(
    db: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(["--db", db, "timer", "set", "pro-a", "--in", "1h", "--action", "destroy", "--yes", "--no-arm"])
        == 2
    )
    assert "cannot be destroyed by the console; use --action shutdown" in capsys.readouterr().err
    assert (
        main(["--db", db, "timer", "set", "vast-1", "--in", "1h", "--action", "destroy", "--yes", "--no-arm"])
        == 2
    )
    assert "no Vast API key" in capsys.readouterr().err
    key = "vk-" + "5" * 40
    monkeypatch.setenv("VAST_API_KEY", key)
    assert (
        main(["--db", db, "timer", "set", "vast-1", "--in", "1h", "--action", "destroy", "--yes", "--no-arm"])
        == 0
    )
    assert timers(db)[0]["action"] == "destroy"
    assert key.encode() not in Path(db).read_bytes()


def test_show_and_cancel(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--db", db, "timer", "set", "pro-a", "--at", "2026-09-06T01:27Z", "--yes", "--no-arm"]) == 0
    assert main(["--db", db, "timer", "cancel", "1", "--no-arm"]) == 2  # no terminal: like every confirmation
    assert "pass --yes" in capsys.readouterr().err and timers(db)[0]["state"] == "armed"
    assert main(["--db", db, "timer", "cancel", "1", "--no-arm", "--yes"]) == 0
    assert "timer 1 cancelled" in capsys.readouterr().out
    assert main(["--db", db, "timer", "cancel", "1", "--no-arm", "--yes"]) == 2
    assert "only an armed timer" in capsys.readouterr().err
    assert main(["--db", db, "timer", "cancel", "42", "--yes"]) == 2
    assert "no timer with id 42" in capsys.readouterr().err
    assert main(["--db", db, "timer", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert main(["--db", db, "timer", "show", "1", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["state"] == "cancelled" and [e["event"] for e in shown["log"]] == ["armed", "cancelled"]
    assert shown["log"][0]["detail"]["readings"]["UTC"] == "2026-09-06 01:27:00 UTC"


def test_unknown_box(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--db", db, "timer", "set", "nope", "--in", "1h", "--yes", "--no-arm"]) == 2
    assert "no box named 'nope'" in capsys.readouterr().err
    assert main(["--db", db, "timer", "list", "--box", "nope"]) == 2
    assert "no box named 'nope'" in capsys.readouterr().err


def test_an_imported_box_has_nothing_to_stop(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The demo's boxes are someone else's figures: a timer there would arm nothing and mislead."""
    with Store(db) as store:
        store.boxes.add(Box(name="seed-a", status="imported", status_detail="imported figures"))
    assert main(["--db", db, "timer", "set", "seed-a", "--in", "1h", "--yes", "--no-arm"]) == 2
    assert (
        "box seed-a cannot be reached (it holds imported figures (someone else's measurements), not a machine to connect to); nothing to stop"
        in capsys.readouterr().err
    )
    assert timers(db) == []


@pytest.fixture
def local_home(tmp_path: Path) -> Iterator[Path]:
    """The agent home of a ``local`` box; the daemon the CLI starts there is stopped afterwards."""
    home = tmp_path / "local-agent"
    yield home
    stop_agent(home)


def test_set_arms_and_cancel_disarms_the_real_box_watchdog(
    db: str, local_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Store(db) as store:
        store.boxes.add(Box(name="local", kind="local", agent_home=str(local_home)))
    assert main(["--db", db, "timer", "set", "local", "--at", "2026-09-06T01:27Z", "--yes"]) == 0
    assert "box watchdog: armed on local, 3h12m on its clock" in capsys.readouterr().err
    state = json.loads((local_home / "deadline.json").read_text())["timers"]
    with Store(db) as store:
        named = store.timers.box_id(1)  # the campaign's id, then its timer's
    assert state[named]["deadline_ms"] == CUTOFF_MS and state[named]["action"] == "stop-arms"
    assert main(["--db", db, "timer", "cancel", "1", "--yes"]) == 0
    assert "box watchdog: disarmed on local" in capsys.readouterr().err
    assert json.loads((local_home / "deadline.json").read_text())["timers"] == {}


def test_set_says_loudly_when_the_box_cannot_be_reached(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    with Store(db) as store:
        store.boxes.add(Box(name="gone", ssh_user="root", host="127.0.0.1", port=free_port()))
    assert main(["--db", db, "timer", "set", "gone", "--in", "2h", "--yes"]) == 3
    err = capsys.readouterr().err
    assert "box watchdog: NOT armed on gone" in err and "keep `campaign timer watch`" in err
    assert timers(db)[0]["state"] == "armed"  # the console side still holds it


def test_watch_enforces_until_the_timers_have_fired(
    tmp_path: Path, local_home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "live.db")
    monkeypatch.setattr(cli_common, "open_store", lambda args: Store(resolve_db_path(args.db)))
    with Store(db) as store:
        store.boxes.add(Box(name="local", kind="local", agent_home=str(local_home)))
        assert main(["--db", db, "timer", "watch"]) == 0
        assert capsys.readouterr().out == "no live timers\n"
        now = store.clock()
        store.timers.add("local", now + 2000, "stop-arms", "in 2s", now_ms=now)
    assert main(["--db", db, "timer", "watch", "--interval", "0.2"]) == 0
    captured = capsys.readouterr()
    assert "box local: stop-arms" in captured.err and "timer 1: stop-arms of box local fired" in captured.out
    with Store(db) as store:
        log = {e["event"]: e for e in store.timers.log_for(1)}
    assert {"armed-on-box", "warn-1m", "pulled-early", "firing", "pulled", "fired"} <= set(log)
    assert log["fired"]["t_ms"] >= now + 2000


@pytest.mark.parametrize(
    "typed", ["01:27Z", "01:27 UTC", "02:27+01:00", "02:27 Europe/London", "21:27 America/New_York"]
)
def test_a_zoned_time_of_day_means_its_next_occurrence(
    db: str, typed: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """At 22:15 UTC on the 5th, '01:27Z' is the write-up's cut-off the next night, whatever zone reads it."""
    assert main(["--db", db, "timer", "set", "pro-a", "--at", typed, "--yes", "--no-arm"]) == 0
    err = capsys.readouterr().err
    assert "UTC        2026-09-06 01:27:00 UTC" in err  # the full date, in UTC
    assert "box        2026-09-06 02:27:00 BST (+01:00) [Europe/London]" in err  # in the box's zone
    assert "console    2026-09-0" in err  # and in this console's zone, with its offset
    assert timers(db)[0]["deadline_ms"] == CUTOFF_MS


def test_a_time_of_day_already_past_today_is_tomorrows(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--db", db, "timer", "set", "pro-a", "--at", "22:00Z", "--yes", "--no-arm"]) == 0
    assert "2026-09-06 22:00:00 UTC" in capsys.readouterr().err  # 22:15 has passed 22:00 on the 5th
