"""Subcommands whose capability has not landed yet say so plainly instead of pretending."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from console.cli.common import CliError


def placeholder(name: str, issue: int) -> Callable[[argparse._SubParsersAction, str], None]:
    def register(sub: argparse._SubParsersAction, help_text: str) -> None:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)

        def run(_args: argparse.Namespace) -> int:
            raise CliError(f"`campaign {name}` is not built yet (tracked in issue {issue})")

        p.set_defaults(func=run)

    return register
