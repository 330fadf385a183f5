"""What every subcommand shares: opening the store, errors with exit codes, output helpers."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from console.store import Store, StoreError, resolve_db_path


class CliError(Exception):
    """An error the operator can act on: printed as one message, no traceback."""

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message)
        self.exit_code = exit_code


def open_store(args: argparse.Namespace, *, read_only: bool = False) -> Store:
    path = resolve_db_path(getattr(args, "db", None))
    try:
        return Store(path, read_only=read_only)
    except StoreError as exc:
        raise CliError(str(exc)) from exc


def print_json(value: Any) -> None:
    json.dump(value, sys.stdout, indent=2, sort_keys=True, default=str)
    sys.stdout.write("\n")


def confirm(question: str, assume_yes: bool) -> bool:
    """Ask y/N on the terminal; ``--yes`` answers for the operator. No terminal means no."""
    if assume_yes:
        return True
    if not sys.stdin.isatty():
        raise CliError(f"{question} -- no terminal to confirm on; pass --yes to confirm")
    answer = input(f"{question} [y/N] ").strip().lower()
    return answer in ("y", "yes")


def print_table(rows: list[dict[str, Any]], columns: list[str]) -> None:
    """A plain aligned table for the terminal (no colour-only meaning)."""
    cells = [[("" if r.get(c) is None else str(r.get(c))) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    print("  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
