"""Progress to a pipe or a file is one plain line per step; on a terminal it is one line redrawn in place.

The writer runs in a real process each time, its stderr a real pipe or a real pseudo-terminal, so
``isatty`` answers as it would for an operator: nothing is patched. The last test follows a real box
(`campaign box connect NAME --follow` over sshd) with stderr sent to a file, as a log would be.
"""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from console.progress import EVERY_S
from console.store import Store
from testbed import backlog
from testbed.fleet_fixtures import box_started, register, sshd_farm
from testbed.sshd import SshdFarm

ROOT = Path(__file__).resolve().parent.parent
__all__ = ["sshd_farm"]

FEED = """
import sys, time
from pathlib import Path
from console.fleet import BoxLink
from console.fleet.progress import IngestProgress
from console.progress import ProgressLine
from console.store import Store
from console.store.ingest import IngestReport

db, steps, pause, every = Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
with Store(db) as store:
    link = BoxLink(store, "alpha")
    link.box_last_seq = 100 * steps
    progress = IngestProgress(link, line=ProgressLine(every_s=every))
    for n in range(1, steps + 1):
        progress(IngestReport("alpha", inserted=100, cursor=100 * n,
                              journal_only={"odd_kind": "no table for it"} if n == 2 else {}))
        time.sleep(pause)
    progress.done()
"""
"""The CLI's ingest progress fed ``steps`` batches of 100 events, ``pause`` seconds apart, lines at most
``every`` seconds apart off a terminal; a batch in the middle carries an event kept in the journal only."""

STEP = re.compile(r"^alpha: \[[# ]{30}\] seq (\d+)/(\d+) \(\+\d+ events\)$")
NOTICE = "alpha: kept in the journal only: {'odd_kind': 'no table for it'}"


def _feed(tmp_path: Path, steps: int, pause: float, every: float, *, terminal: bool) -> str:
    """What the feed wrote on stderr: a pipe, or the terminal side of a pseudo-terminal."""
    argv = [sys.executable, "-c", FEED, str(tmp_path / "state.db"), str(steps), str(pause), str(every)]
    if not terminal:
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stderr
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen(
            argv, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=follower
        )
        os.close(follower)
        out = b""
        while chunk := _read(leader):
            out += chunk
        assert proc.wait(120) == 0, out
    finally:
        os.close(leader)
    return out.decode().replace("\r\n", "\n")  # the terminal's own line discipline turns \n into \r\n


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, 65536)
    except OSError:  # EIO: the writer has exited and closed its side
        return b""


def _lines(err: str) -> list[str]:
    assert "\r" not in err and "\x1b" not in err, repr(err)  # no redraw, no escape: plain text
    assert err.endswith("\n"), repr(err)
    return err.splitlines()


def test_to_a_pipe_each_step_is_its_own_line(tmp_path: Path) -> None:
    """Steps further apart than the interval: every one of them is a plain line, in order."""
    lines = _lines(_feed(tmp_path, steps=5, pause=0.3, every=0.2, terminal=False))
    steps = [line for line in lines if line != NOTICE]
    assert lines.count(NOTICE) == 1 and lines.index(NOTICE) == 2  # right after the step that carried it
    assert [m.groups() if (m := STEP.match(line)) else line for line in steps] == [
        (str(100 * n), "500") for n in range(1, 6)
    ]


def test_to_a_pipe_steps_closer_than_the_interval_give_the_first_and_the_last(tmp_path: Path) -> None:
    """A burst of batches (the default interval, EVERY_S) is the first line and the final one, not one per
    batch: the steps between are held back and replaced, and the end writes the last."""
    assert EVERY_S >= 1.0
    lines = _lines(_feed(tmp_path, steps=40, pause=0.0, every=EVERY_S, terminal=False))
    steps = [m.groups() if (m := STEP.match(line)) else line for line in lines if line != NOTICE]
    assert steps == [("100", "4000"), ("4000", "4000")]
    assert lines.count(NOTICE) == 1


def test_on_a_terminal_the_line_is_redrawn_in_place_and_ended(tmp_path: Path) -> None:
    out = _feed(tmp_path, steps=5, pause=0.0, every=EVERY_S, terminal=True)
    assert out.count("\r\x1b[2K") >= 2 and out.endswith(
        "\n"
    )  # redrawn, and ended so what follows starts afresh
    last = out.rsplit("\r\x1b[2K", 1)[-1]
    assert STEP.match(last.rstrip("\n")) and "seq 500/500" in last
    assert f"\n{NOTICE}\n" in out  # the notice on a line of its own


@pytest.mark.sshd
@pytest.mark.timeout(240)
def test_following_a_box_into_a_log_file_writes_lines(sshd_farm: SshdFarm, tmp_path: Path) -> None:
    """`campaign box connect NAME --follow 2>>log`: a backlog of several batches arrives as plain lines, a few
    seconds apart at most, the last of them the caught-up cursor; no carriage return anywhere."""
    box = box_started("progress-log", gpu_fixture=None)
    db = tmp_path / "state.db"
    with Store(db) as store:
        register(store, box)
    cli = [sys.executable, "-m", "console", "--db", str(db), "box", "connect", box.name]
    assert subprocess.run(cli, cwd=ROOT, capture_output=True, timeout=120).returncode == 0
    last = backlog.write(box, backlog.samples(1500, gpus=8, servers=4))  # 7,500 events: several batches
    log = tmp_path / "follow.log"
    started = time.monotonic()
    with log.open("wb") as sink:
        follower = subprocess.Popen([*cli, "--follow"], cwd=ROOT, stdout=sink, stderr=sink)
    try:
        deadline = time.monotonic() + 120
        while _cursor(db, box.name) < last:
            assert time.monotonic() < deadline and follower.poll() is None, log.read_text(errors="replace")
            time.sleep(0.1)
    finally:
        follower.terminate()
        follower.wait(30)
    elapsed = time.monotonic() - started
    text = log.read_text()
    lines = _lines(text)
    steps = [m for m in (re.match(rf"^{box.name}: \[[# ]{{30}}\] seq (\d+)/(\d+)", x) for x in lines) if m]
    assert steps and steps[-1].groups() == (str(last), str(last)), text
    assert len(steps) <= 2 + elapsed / EVERY_S, text  # rate-limited: not a line per batch


def _cursor(db: Path, box: str) -> int:
    with Store(db, read_only=True) as store:
        row = store.rows("SELECT seq FROM ingest_cursor WHERE box = ?", [box])
    return int(row[0]["seq"]) if row else 0


WRITERS = """
from types import SimpleNamespace as N
from console.cli.launch import Progress
from console.cli.measure import progress_line, ticker
from console.cli.sweep import ProgressBar
from console.cli.timer import _progress
from console.progress import ProgressLine

with progress_line():
    tick = ticker("bench")
    for s in range(3):
        tick(float(s))
bar, launch, line = ProgressBar(), Progress(), ProgressLine()
for n in range(3):
    bar(N(id=7), [N(state="served")] * n + [N(state="pending")] * (2 - n), f"arm {n}")
    launch([N(id=f"L-x.{n}", state="starting")])
    _progress(line, [N(action="destroy", box="alpha", deadline_ms=1_788_658_020_000)], 1_788_658_000_000)
bar.done()
launch.done()
line.end()
"""
"""The CLI's other progress writers (bench/tripwire/kldiff's ticker, sweep run, launch, timer watch), each
stepped three times at once: off a terminal, each is its first step and its last, as plain lines."""


def test_the_clis_progress_writers_write_plain_lines_to_a_pipe(tmp_path: Path) -> None:
    """`campaign demo --force` with stderr on a pipe: its import steps are lines of their own, the last one the
    whole bar; and so for every other writer the CLI has."""
    demo = subprocess.run(
        [sys.executable, "-m", "console", "demo", "--force", "--db", str(tmp_path / "state.db")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert demo.returncode == 0, demo.stderr
    steps = [line for line in _lines(demo.stderr) if re.match(r"^\[[# ]{30}\] \d+/\d+ ", line)]
    assert len(steps) >= 2 and steps[-1].startswith(f"[{'#' * 30}] 3/3 "), demo.stderr
    assert "demo campaign imported" in demo.stdout
    others = subprocess.run(
        [sys.executable, "-c", WRITERS], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert others.returncode == 0, others.stderr
    lines = _lines(others.stderr)
    assert [line for line in lines if line.startswith("bench: ")] == [
        "bench: running     0 s",
        "bench: running     2 s",
    ]
    sweep = [line for line in lines if line.startswith("sweep #7 ")]
    assert len(sweep) == 2 and sweep[-1].startswith("sweep #7 [") and "2/2 arms (2 served)" in sweep[-1]
    assert sweep[-1].endswith("| arm 2")
    launch = [line for line in lines if line.endswith(" starting")]
    assert len(launch) == 2 and launch[-1].endswith("s  2 starting")
    timer = [line for line in lines if line.startswith("1 live timer(s); next: destroy of alpha at ")]
    assert len(timer) == 2
