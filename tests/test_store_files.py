"""What ``--db`` may point at: a state.db, or a new path to start one; anything else is refused untouched.

Read-only places are real here (a read-only bind mount, which refuses writes even to root) and so is a
full disk (a small tmpfs): the test runs as root, as the suite does.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.store import Store
from console.store.schema import LATEST
from tests.support import disks

ROOT = Path(__file__).resolve().parent.parent


def campaign(db: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "console", "--db", str(db), *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )


def one_line(done: subprocess.CompletedProcess[str], status: int) -> str:
    """The command failed with ``status`` and said why in one line, without a traceback."""
    assert done.returncode == status, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    lines = [x for x in done.stderr.strip().splitlines() if not x.startswith("campaign: notice: ")]
    [line] = lines
    assert line.startswith("campaign: "), line
    return line


def test_an_empty_file_is_not_a_campaign(tmp_path: Path) -> None:
    empty = tmp_path / "notes.txt"
    empty.touch(mode=0o644)
    line = one_line(campaign(empty, "box", "list"), 2)
    assert "is an empty file, not a state.db" in line
    assert empty.stat().st_size == 0 and stat.S_IMODE(empty.stat().st_mode) == 0o644  # untouched


def test_a_text_file_is_not_a_campaign(tmp_path: Path) -> None:
    text = tmp_path / "passwd"
    text.write_text("root:x:0:0:root:/root:/bin/bash\n")
    line = one_line(campaign(text, "box", "list"), 2)
    assert "is not a SQLite database" in line
    assert text.read_text().startswith("root:x:0:0")


def test_a_character_device_is_refused_and_its_mode_untouched() -> None:
    before = os.stat("/dev/null").st_mode
    line = one_line(campaign(Path("/dev/null"), "box", "list"), 2)
    assert "is not a regular file" in line
    assert os.stat("/dev/null").st_mode == before


def test_a_fifo_is_refused_without_hanging(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    line = one_line(campaign(fifo, "box", "list"), 2)  # the subprocess timeout fails the test on a hang
    assert "is not a regular file" in line


def test_a_newer_state_db_is_refused_and_left_exactly_as_it_was(tmp_path: Path) -> None:
    """Refusing a database never changes it: not a byte, not its mode (a 0644 file is not tightened to 0600),
    and no -wal or -shm is left beside it."""
    db = tmp_path / "state.db"
    assert campaign(db, "box", "list").returncode == 0
    conn = sqlite3.connect(db)  # a newer campaign-console wrote it
    conn.execute("INSERT INTO schema_migrations VALUES (?, 'from the future', 0)", [LATEST + 1])
    conn.commit()
    conn.close()
    os.chmod(db, 0o644)
    before = (db.read_bytes(), stat.S_IMODE(db.stat().st_mode), sorted(p.name for p in tmp_path.iterdir()))
    line = one_line(campaign(db, "box", "list"), 2)
    assert (
        f"schema version {LATEST + 1}, newer than the {LATEST}" in line and "upgrade campaign-console" in line
    )
    after = (db.read_bytes(), stat.S_IMODE(db.stat().st_mode), sorted(p.name for p in tmp_path.iterdir()))
    assert after == before, after[1:]


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(a writable folder, the same folder seen through a read-only bind mount)."""
    src = tmp_path / "src"
    src.mkdir()
    with disks.read_only_view(src, tmp_path / "ro") as ro:
        yield src, ro


def test_a_read_only_state_db_opens_read_only_with_a_notice(read_only_dir: tuple[Path, Path]) -> None:
    src, ro = read_only_dir
    assert campaign(src / "state.db", "box", "list").returncode == 0  # a real campaign, made writable
    listed = campaign(ro / "state.db", "box", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert (
        "opened read-only" in listed.stderr
        and "read-only" in listed.stderr
        and "Traceback" not in listed.stderr
    )
    assert '"local"' in listed.stdout  # read, as asked
    line = one_line(campaign(ro / "state.db", "box", "add", "pro-a", "--ssh", "root@203.0.113.7"), 2)
    assert "opened read-only" in line and "copy the file somewhere writable" in line
    with Store(src / "state.db") as store:
        assert [b.name for b in store.boxes.every() if b.name == "pro-a"] == []  # nothing was written


def test_a_new_state_db_in_a_read_only_folder_is_refused_clearly(read_only_dir: tuple[Path, Path]) -> None:
    _, ro = read_only_dir
    line = one_line(campaign(ro / "new.db", "box", "list"), 2)
    assert "cannot create a state.db in" in line and "give a --db path in a folder you can write" in line
    assert not (ro / "new.db").exists()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with disks.tmpfs(tmp_path / "small-disk", "4m") as mnt:
        yield mnt


def fill(path: Path, leave: int) -> None:
    """Fill the filesystem under ``path`` until about ``leave`` bytes are free."""
    free = os.statvfs(path.parent).f_bavail * os.statvfs(path.parent).f_frsize
    with path.open("wb") as f:
        f.write(b"\0" * max(0, free - leave))


@pytest.mark.parametrize("leave", [0, 64 * 1024, 256 * 1024, 768 * 1024])
def test_a_new_campaign_on_a_nearly_full_disk_is_whole_or_not_there(small_disk: Path, leave: int) -> None:
    """The first command creates the database and imports the demo, each in one transaction: whatever the
    disk lets through, what is left opens (or nothing is left), and the error is one line."""
    filler = small_disk / "filler"
    fill(filler, leave)
    db = small_disk / "state.db"
    done = campaign(db, "box", "list")
    if done.returncode != 0:
        line = one_line(done, 2)
        assert "disk full" in line and "free space" in line
    filler.unlink()
    if db.exists():
        with Store(db) as store:  # whatever is there is a state.db that opens
            imported = store.scalar("SELECT count(*) FROM bench_runs")
        assert imported == 0 or imported > 50  # the demo is all there or not at all
    assert campaign(db, "box", "list").returncode == 0  # with space back, the campaign starts


def test_a_second_store_in_one_process_keeps_the_first_ones_writes_reaching_the_file(tmp_path: Path) -> None:
    """The console holds two Stores on one state.db (its panels read-only, its service writing) while
    `campaign bench` opens and closes the same file from another process. Opening the second Store must
    not release the first one's SQLite locks: the other process would then delete the WAL under it and
    every later write would go to a deleted file, never reaching state.db."""
    from console.store import Box

    db = tmp_path / "state.db"
    Store(db).close()
    writer = Store(db)
    reader = Store(db, read_only=True)
    try:
        subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from console.store import Store; Store(sys.argv[1]).close()",
                str(db),
            ],
            check=True,
            cwd=Path(__file__).resolve().parent.parent,
        )
        writer.boxes.add(Box(name="after", host="203.0.113.9", ssh_user="root"))
        with Store(db, read_only=True) as fresh:  # what any other reader of the file sees
            assert fresh.boxes.get("after") is not None
        assert reader.boxes.get("after") is not None
    finally:
        reader.close()
        writer.close()
