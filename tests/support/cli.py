"""Run the console's CLI in this process against one state.db, as an operator's shell would, and keep what it
wrote: the exit status, stdout and stderr (one-line errors go to stderr, results to stdout)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

from console.cli import main

ROOT = Path(__file__).resolve().parent.parent.parent


def run_cli(db: Path, *argv: str) -> tuple[int, str, str]:
    """``campaign --db DB ARGV...``: its exit status, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["--db", str(db), *argv])
    return code, out.getvalue(), err.getvalue()


def campaign_env(recipes: Path | None = None) -> dict[str, str]:
    """The environment of a ``campaign`` started as its own process: this checkout importable, and the recipes
    layer ``recipes`` when given (``CAMPAIGN_RECIPES``)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if recipes is not None:
        env["CAMPAIGN_RECIPES"] = str(recipes)
    return env


def campaign_argv(db: Path, *argv: str) -> list[str]:
    """``campaign --db DB ARGV...`` as its own process's argv (this interpreter, ``python -m console``)."""
    return [sys.executable, "-m", "console", "--db", str(db), *argv]


def run_campaign(
    db: Path, *argv: str, recipes: Path | None = None, timeout: float = 900
) -> subprocess.CompletedProcess[str]:
    """``campaign --db DB ARGV...`` in its own process, as a second terminal runs it (signals, a console that
    dies, two consoles at once): its exit status, stdout and stderr."""
    return subprocess.run(
        campaign_argv(db, *argv), env=campaign_env(recipes), text=True, capture_output=True, timeout=timeout
    )
