"""Plain ``campaign``: open the console on the database (the embedded default is ./state.db)."""

from __future__ import annotations

import argparse

from console.cli.common import open_store


def open_console(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        store.boxes.ensure_local()
        path = store.path
    from console.tui.app import run_console

    return run_console(path)
