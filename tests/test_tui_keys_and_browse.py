"""The keys file (remapping, refusals) and `campaign browse` (read-only, no writes, clear errors)."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from console.cli import main
from console.tui import keymap
from testbed import tui_fixture as F


def test_keys_file_remaps_by_binding_id(tmp_path: Path) -> None:
    path = tmp_path / "keys.toml"
    path.write_text('[keys]\n"arms.kill" = "ctrl+k"\n"view.fleet" = "f1, 1"\n')
    overrides = keymap.load(path)
    assert overrides == {"arms.kill": "ctrl+k", "view.fleet": "f1,1"}
    rows = {what: keys for _, keys, what in keymap.help_rows(overrides)}
    assert rows["kill"] == "ctrl+k" and rows["fleet"] == "f1 1" and rows["launch"] == "l"


def test_missing_keys_file_means_defaults(tmp_path: Path) -> None:
    assert keymap.load(tmp_path / "absent.toml") == {}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[keys]\n"arms.nuke" = "x"\n', "unknown binding id 'arms.nuke'"),
        ('[keys]\n"arms.kill" = ""\n', "'arms.kill' must be a key name"),
        ('[keys]\n"arms.kill" = 3\n', "'arms.kill' must be a key name"),
        ('[keys]\n"arms.kill" = "l"\n', "key 'l' is bound to both 'arms.launch' and 'arms.kill'"),
        ('[keys]\n"view.live" = "q"\n', "key 'q' is bound to both"),
        ("[keys\n", "not valid TOML"),
        ('kill = "k"\n', "expected only a [keys] table"),
    ],
)
def test_bad_keys_file_is_refused_with_file_and_fix(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "keys.toml"
    path.write_text(text)
    with pytest.raises(keymap.KeymapError, match=message.replace("[", r"\[")) as info:
        keymap.load(path)
    assert str(path) in str(info.value)


def test_keys_in_different_views_may_share_a_key(tmp_path: Path) -> None:
    path = tmp_path / "keys.toml"
    path.write_text('[keys]\n"results.sort" = "l"\n')  # l launches in Arms, sorts in Results: no clash
    assert keymap.load(path) == {"results.sort": "l"}


def test_default_keys_path_honours_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("CAMPAIGN_KEYS", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert keymap.default_path() == tmp_path / "campaign-console" / "keys.toml"
    monkeypatch.setenv("CAMPAIGN_KEYS", str(tmp_path / "k.toml"))
    assert keymap.default_path() == tmp_path / "k.toml"


def test_browse_refuses_a_missing_database(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["browse", str(tmp_path / "nope.db")]) == 2
    assert "no such database to browse" in capsys.readouterr().err
    assert not (tmp_path / "nope.db").exists()


def test_browse_refuses_a_foreign_sqlite_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (x)")
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    assert main(["browse", str(path)]) == 2
    assert "not a campaign state.db" in capsys.readouterr().err
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


def test_browse_reports_a_bad_keys_file_before_opening(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fx = F.build(tmp_path / "state.db")
    keys = tmp_path / "keys.toml"
    keys.write_text('[keys]\n"arms.nuke" = "x"\n')
    monkeypatch.setenv("CAMPAIGN_KEYS", str(keys))
    assert main(["browse", str(fx.path)]) == 2
    assert "unknown binding id 'arms.nuke'" in capsys.readouterr().err


async def test_browsing_never_writes_the_file(tmp_path: Path) -> None:
    from zoneinfo import ZoneInfo

    from console.tui.app import ConsoleApp

    fx = F.build(tmp_path / "state.db")
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in tmp_path.iterdir()}
    app = ConsoleApp(
        fx.path,
        read_only=True,
        clock=lambda: F.NOW,
        local_tz=ZoneInfo("UTC"),
        actions=F.FixedActions(read_only=True),
        keys_path=tmp_path / "none.toml",
    )
    async with app.run_test(size=(80, 24)) as pilot:
        for key in ("2", "3", "4", "left_square_bracket", "1", "l"):
            await pilot.press(key)
            await pilot.pause()
            await app.workers.wait_for_complete()
        assert app.store.read_only
    after = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in tmp_path.iterdir()}
    assert after["state.db"] == before["state.db"]
    # SQLite's read-only reader of a WAL database may leave its index (-shm) and an empty -wal; no data.
    wal = tmp_path / "state.db-wal"
    assert not wal.exists() or wal.stat().st_size == 0
