"""Run the console's CLI in this process against one state.db, as an operator's shell would, and keep what it
wrote: the exit status, stdout and stderr (one-line errors go to stderr, results to stdout)."""

from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

from console.cli import main


def run_cli(db: Path, *argv: str) -> tuple[int, str, str]:
    """``campaign --db DB ARGV...``: its exit status, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["--db", str(db), *argv])
    return code, out.getvalue(), err.getvalue()
