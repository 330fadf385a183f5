"""The CLI's one table renderer (``console.cli.common.print_table``): a Rich table on a terminal, plain aligned
text anywhere else (a pipe, a file, a test's capture), which scripts and the other CLI tests read."""

from __future__ import annotations

import io
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

from console.cli import common
from console.cli.common import Column, print_table

ROOT = Path(__file__).resolve().parent.parent
BOX_DRAWING = re.compile("[\u2500-\u257f]")
LIST = "import sys; from console.cli import main; sys.exit(main(['recipe', 'list']))"


def _env(home: Path) -> dict[str, str]:
    """The shipped recipes only (no operator's own), and no switch that would force or forbid Rich's styling."""
    drop = {
        "CAMPAIGN_RECIPES",
        "NO_COLOR",
        "FORCE_COLOR",
        "TTY_COMPATIBLE",
        "TTY_INTERACTIVE",
        "COLUMNS",
        "LINES",
    }
    env = {k: v for k, v in os.environ.items() if k not in drop}
    return env | {"HOME": str(home), "TERM": "xterm-256color", "PYTHONPATH": str(ROOT)}


def test_a_pipe_gets_plain_aligned_text_without_escape_codes(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", LIST],
        cwd=ROOT,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    out = done.stdout
    assert "\x1b" not in out and not BOX_DRAWING.search(out)
    lines = out.splitlines()
    assert lines[0].split() == ["ARM", "MODEL", "LAYOUT", "KERNELS", "LINT", "SOURCE"]
    assert all(line == line.rstrip() for line in lines)
    # Aligned: every column starts where its heading does, so a script may cut by the heading's offsets.
    starts = [lines[0].index(h) for h in ("MODEL", "LAYOUT", "KERNELS", "LINT", "SOURCE")]
    for line in lines[1:]:
        assert all(line[s - 2 : s] == "  " and line[s] != " " for s in starts), line
    assert len(lines) > 5 and all(line.endswith("shipped") for line in lines[1:])


def test_a_terminal_gets_a_rich_table(tmp_path: Path) -> None:
    leader, follower = pty.openpty()
    os.set_inheritable(follower, True)
    env = _env(tmp_path) | {"COLUMNS": "220", "LINES": "50"}
    proc = subprocess.Popen(
        [sys.executable, "-c", LIST],
        cwd=ROOT,
        env=env,
        stdin=follower,
        stdout=follower,
        stderr=subprocess.PIPE,
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
    out = b"".join(chunks).decode()
    assert BOX_DRAWING.search(out), out  # the rule under the headings
    plain = re.sub(r"\x1b\[[0-9;]*m", "", out)
    assert "ARM" in plain and "SOURCE" in plain and "shipped" in plain
    assert "\x1b[" in out  # bold headings


def test_plain_columns_rjust_min_width_indent_and_no_header(capsys: pytest.CaptureFixture[str]) -> None:
    rows: list[dict[str, str | None]] = [
        {"name": "split", "a": "0 to 3", "b": None},
        {"name": "mean tokens", "a": "230.5", "b": "12"},
    ]
    print_table(
        rows,
        [Column("name"), Column("a", right=True, min_width=9), Column("b", right=True)],
        header=False,
        indent=2,
    )
    assert capsys.readouterr().out.splitlines() == [
        "  split           0 to 3",
        "  mean tokens      230.5  12",
    ]
    print_table([{"id": 1}], ["id", Column("note", heading="WHY")])
    assert capsys.readouterr().out.splitlines() == ["ID  WHY", "1"]


def test_rich_cells_are_text_not_markup(monkeypatch: pytest.MonkeyPatch) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Terminal()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setenv("COLUMNS", "100")
    print_table([{"arm": "[bold]x[/bold]", "state": "ok"}], ["arm", "state"])
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue())
    assert "[bold]x[/bold]" in text and BOX_DRAWING.search(text)


def test_a_stream_without_isatty_is_plain(monkeypatch: pytest.MonkeyPatch) -> None:
    class Closed:
        def isatty(self) -> bool:
            raise ValueError("I/O operation on closed file")

    assert common._is_terminal(Closed()) is False
    assert common._is_terminal(object()) is False
