"""What ``campaign bench`` and ``campaign tripwire`` share: start a run on the box, wait for its row.

The run itself happens on the box (the agent runs the load generator or the tripwire next to the
server); the console only asks, then pulls the journal until the result row lands in state.db.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from console.cli.common import CliError, open_store, print_json
from console.cli.remote import reaching
from console.service import Service


def _ticker(label: str) -> Callable[[float], None]:
    def tick(elapsed: float) -> None:
        if sys.stderr.isatty():
            sys.stderr.write(f"\r{label}: running {elapsed:5.0f} s")
            sys.stderr.flush()

    return tick


def run_and_wait(
    args: argparse.Namespace,
    kind: str,
    start: Callable[[Service], Awaitable[str]],
    show: Callable[[dict[str, Any]], None],
) -> int:
    """Start a ``kind`` run with ``start(service)`` (returns its run id), then wait for and show its row."""
    with open_store(args) as store:
        service = Service(store)
        launch = store.launches.get(args.launch)
        if launch is None:
            raise CliError(f"no launch {args.launch!r} in this state.db; `campaign launch ARM --box NAME` first")

        async def go() -> dict[str, Any] | str:
            try:
                run_id = await start(service)
                if args.no_wait:
                    return run_id
                return await service.wait_for_run(launch["box"], run_id, kind, args.timeout, _ticker(run_id))
            finally:
                await service.close()

        try:
            with reaching(launch["box"]):
                outcome = asyncio.run(go())
        finally:
            if sys.stderr.isatty():
                sys.stderr.write("\n")
    if isinstance(outcome, str):
        print(f"started {kind} {outcome}; its row lands at the next `campaign box connect {launch['box']}`")
        return 0
    if args.json:
        print_json(outcome)
    else:
        show(outcome)
    return 0


def add_wait_options(p: argparse.ArgumentParser, default_timeout_s: float) -> None:
    p.add_argument("launch", metavar="LAUNCH", help="a serving launch id (see `campaign box connect` / the Arms view)")
    p.add_argument("--no-wait", action="store_true", help="start it and return; the row lands at the next sync")
    p.add_argument("--timeout", type=float, default=default_timeout_s, metavar="S",
                   help=f"how long to wait for the result (default {default_timeout_s:.0f} s)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the stored row as JSON")
