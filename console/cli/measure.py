"""What ``campaign bench`` and ``campaign tripwire`` share: start a run on the box, wait for its row.

The run itself happens on the box (the agent runs the load generator or the tripwire next to the
server); the console asks, then pulls the journal until the result row lands in state.db.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

from console.cli.common import run, say, service_for, wait_s_arg
from console.progress import ProgressLine
from console.service import Service

T = TypeVar("T")


_LINE: ContextVar[ProgressLine | None] = ContextVar("progress_line", default=None)
"""The line of the innermost ``progress_line()``, for the ``ticker``s made inside it."""


def ticker(label: str, line: ProgressLine | None = None) -> Callable[[float], None]:
    """A wait's tick as a step of ``line``: by default the innermost ``progress_line()``'s, else a line of its own."""
    shown = line or _LINE.get() or ProgressLine()

    def tick(elapsed: float) -> None:
        shown.step(f"{label}: running {elapsed:5.0f} s")

    return tick


def start_and_wait(
    args: argparse.Namespace,
    kind: str,
    start: Callable[[Service], Awaitable[str]],
    result: Callable[[Service, str, str], Awaitable[T]],
) -> T | None:
    """Start a ``kind`` run (``start`` returns its run id), then wait for its stored result (None: --no-wait)."""
    with service_for(args) as service:
        box = service.serving_launch(args.launch).box

        async def go() -> T | None:
            run_id = await start(service)
            if args.no_wait:
                say(f"started {kind} {run_id}; its row lands at the next `campaign box connect {box}`")
                return None
            return await result(service, box, run_id)

        with progress_line():
            return run(service, go)


@contextmanager
def progress_line() -> Iterator[ProgressLine]:
    """The progress line the ``ticker``s made inside it write to; ended (its last step shown, the line closed)
    on the way out, so the next output starts on its own line."""
    line = ProgressLine()
    token = _LINE.set(line)
    try:
        yield line
    finally:
        _LINE.reset(token)
        line.end()


def add_wait_options(p: argparse.ArgumentParser, default_timeout_s: float) -> None:
    p.add_argument(
        "--no-wait", action="store_true", help="start it and return; the row lands at the next sync"
    )
    p.add_argument(
        "--timeout",
        type=wait_s_arg,
        default=default_timeout_s,
        metavar="S",
        help=f"how long to wait for the result (default {default_timeout_s:.0f} s)",
    )
    p.add_argument(
        "--json", action="store_true", help="print the stored row as JSON (and nothing else) on stdout"
    )
