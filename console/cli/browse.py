"""`campaign browse [DB]`: open a state.db read-only in the console, offline, with a replay cursor.

Nothing here touches the network or writes the file: the store is opened with SQLite's read-only mode
(and ``query_only``), and launch, kill and timers are refused in the console with a message.
"""

from __future__ import annotations

import argparse
from typing import Any

from console.cli.common import readable_db_path


def register(sub: argparse._SubParsersAction[Any], help_text: str) -> None:
    p = sub.add_parser(
        "browse",
        help=help_text,
        description=f"{help_text}. [ and ] step the replay cursor through the record; end jumps to its end.",
    )
    p.add_argument(
        "database",
        nargs="?",
        metavar="DB",
        help="the state.db to browse (default: --db, $CAMPAIGN_DB, else ./state.db)",
    )
    p.set_defaults(func=browse)


def browse(args: argparse.Namespace) -> int:
    path = readable_db_path(
        args, args.database
    )  # a missing, foreign or too-old file: refused before the screen
    from console.tui.app import run_browse

    return run_browse(path)
