"""``campaign``: one entry point, a subcommand per capability.

Each subcommand lives in its own module with ``register(subparsers)`` (named as the command, or as
``MODULES`` says); plain ``campaign`` opens the TUI.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from console import __version__
from console.errors import ConsoleError, InputError, exit_code

# (module, one-line help) in the order --help lists them.
COMMANDS: tuple[tuple[str, str], ...] = (
    ("box", "boxes: add, list, remove, connect"),
    ("check", "preflight checks of a box: power, driver/CUDA, topology, clock, disk"),
    ("recipe", "recipes: list, show and lint arms"),
    ("launch", "launch an arm on a box (lint-gated)"),
    ("kill", "kill a launch or an arm on a box (confirms)"),
    ("bench", "benchmark the node: every serving replica of an arm at once"),
    ("curve", "measure an arm's curve: a bench per concurrency, linked and resumable"),
    ("curves", "the curves in state.db, each point valid or invalid with its reasons, offline"),
    ("compare", "is one configuration faster than another, or a tie inside the spread"),
    ("pareto", "the throughput-per-GPU vs interactivity frontier across arms, ties inside the spread"),
    ("import", "import another client's runs (vllm bench serve, vllm bench sweep) as imported bench rows"),
    ("requests", "one bench run from its requests: honest tails, interactivity, SLO goodput"),
    ("tripwire", "run the corruption tripwire against a launch"),
    ("quality", "task accuracy per item: import, run, compare, list, pairs"),
    ("kldiff", "logit-level divergence of two launches, read against a control pair"),
    ("specdiff", "greedy output of a speculative launch against its base, read against a control"),
    ("sweep", "walk a sweep list of arms on a box or several as one queue, resumably"),
    ("timer", "guarded hard-stop timers: set, list, cancel"),
    ("browse", "open a state.db read-only in the console, offline"),
    ("export", "export summary, kernels, economics or kldiff as TSV/CSV/JSON"),
    ("report", "write a markdown handover of the campaign"),
    ("demo", "build a state.db from the campaign write-up's published figures"),
)
MODULES: dict[str, str] = {"import": "imports"}
"""A command whose name is a Python keyword lives in a module of another name (``console.cli.<module>``)."""


class Parser(argparse.ArgumentParser):
    """argparse, with its errors as the console's: one line and exit 2 (``InputError``), not the usage block.

    A refused number (console/bounds.py, through ``console.cli.common.argument``) says what it must be and
    what to do; the usage would only push that line up. Subcommands' parsers are of this class too
    (``add_subparsers`` makes them of the parent's class).
    """

    def error(self, message: str) -> NoReturn:
        where = self.prog.partition(" ")[2]  # "bench", "box add"; "" for plain `campaign`
        raise InputError(f"{where}: {message}" if where else message, f"`{self.prog} --help` shows the usage")


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The parser; only the subcommand being run is imported, the others are listed by name and help.

    ``campaign browse`` must show its first screen in under a second, and importing every subcommand
    (asyncssh, the fleet, the recipes engine) costs most of that.
    """
    parser = Parser(
        prog="campaign",
        description="Terminal operations console for GPU inference-benchmark campaigns. "
        "Without a subcommand it opens the console on the database.",
    )
    parser.add_argument("--version", action="version", version=f"campaign-console {__version__}")
    parser.add_argument(
        "--db",
        metavar="PATH",
        help="the campaign database (default: $CAMPAIGN_DB, else ./state.db)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = _chosen_command(argv)
    for name, help_text in COMMANDS:
        if name == chosen:
            module = importlib.import_module(f"console.cli.{MODULES.get(name, name)}")
            module.register(sub, help_text)
        else:
            sub.add_parser(name, help=help_text, add_help=False)
    _accept_db_anywhere(sub)
    return parser


def _chosen_command(argv: Sequence[str]) -> str | None:
    """The subcommand named on the line (skipping ``--db PATH``); None when there is none (help, version)."""
    words = list(argv)
    names = {name for name, _ in COMMANDS}
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--db":
            i += 2
            continue
        if word.startswith("-"):
            return None
        return word if word in names else None
    return None


def _accept_db_anywhere(sub: argparse._SubParsersAction[Parser]) -> None:
    """Let ``--db PATH`` also follow the subcommand (``campaign export summary --db x.db``)."""
    for parser in sub.choices.values():
        if "--db" not in parser._option_string_actions:
            parser.add_argument("--db", metavar="PATH", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                _accept_db_anywhere(action)


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    try:
        args = build_parser(words).parse_args(words)
        handler = getattr(args, "func", None)
        if handler is None:
            from console.cli.open_console import open_console

            return open_console(args)
        return int(handler(args) or 0)
    except ConsoleError as exc:
        print(f"campaign: {exc}", file=sys.stderr)
        return exit_code(exc)
    except KeyboardInterrupt:
        print("campaign: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `campaign recipe list | head`: the reader left; stop quietly like any Unix filter.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
