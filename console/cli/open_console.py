"""Plain ``campaign``: open the console on the database (the embedded default is ./state.db)."""

from __future__ import annotations

import argparse
from pathlib import Path

from console.cli.common import store_and_service
from console.readmodel import database_path


def prepare(args: argparse.Namespace) -> Path:
    """Register this machine as the box ``local`` (a new database also gets the demo campaign: see
    ``open_store``); an existing database is never given demo rows."""
    with store_and_service(args) as (store, service):
        service.ensure_local_box()
        return database_path(store)


def open_console(args: argparse.Namespace) -> int:
    path = prepare(args)
    from console.tui.app import run_console

    return run_console(path)
