"""What every subcommand shares: opening the store and the service, confirmation, and output.

Output discipline: with ``--json`` stdout carries JSON and nothing else; progress and prose go to stderr,
so ``campaign ... --json | jq`` always parses. Errors are ``console.errors.ConsoleError``s: ``main`` prints
them as one line and maps them to the exit status.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from console.errors import InputError
from console.store import Store, resolve_db_path

if TYPE_CHECKING:
    from console.service import Service

T = TypeVar("T")


def open_store(args: argparse.Namespace, *, read_only: bool = False, seed: bool = True) -> Store:
    """The campaign's store. Whichever command creates a database sets it up as every new one starts: this
    machine registered as the box ``local`` and (unless ``seed`` is off: ``campaign demo`` imports it itself,
    with its progress) the seed campaign's published figures imported to browse. A reading command
    (``read_only``: export, report) never creates one: a mistyped path is refused."""
    store = Store(resolve_db_path(getattr(args, "db", None)), read_only=read_only)
    if store.notice:
        say(f"campaign: notice: {store.notice}")
    if store.created:
        store.boxes.ensure_local()
        if seed:
            from ops.demo import seed_if_empty

            seed_if_empty(store)
    return store


@contextmanager
def service_for(args: argparse.Namespace) -> Iterator[Service]:
    """A ``console.service.Service`` over the command's store; its links are closed by ``run``."""
    from console.service import Service

    with open_store(args) as store:
        yield Service(store)


def run(service: Service, intent: Callable[[], Awaitable[T]]) -> T:
    """Run one async intent of ``service`` to completion, then close the service's box links."""

    async def go() -> T:
        try:
            return await intent()
        finally:
            await service.close()

    return asyncio.run(go())


def print_json(value: Any) -> None:
    json.dump(value, sys.stdout, indent=2, sort_keys=True, default=str)
    sys.stdout.write("\n")


def say(text: str) -> None:
    """Prose for the operator: on stderr, so stdout stays what the command produces."""
    print(text, file=sys.stderr, flush=True)


def confirm(question: str, assume_yes: bool) -> bool:
    """Ask y/N on the terminal; ``--yes`` answers for the operator. No terminal means no."""
    if assume_yes:
        return True
    if not sys.stdin.isatty():
        raise InputError(question, "no terminal to confirm on; pass --yes to confirm")
    answer = input(f"{question} [y/N] ").strip().lower()
    return answer in ("y", "yes")


def print_table(rows: list[dict[str, Any]], columns: list[str]) -> None:
    """A plain aligned table for the terminal (no colour-only meaning)."""
    cells = [[("" if r.get(c) is None else str(r.get(c))) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    print("  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())


def ms(value: float | None) -> str:
    """A latency for people: ``42.1 ms``, ``1.52 s``; ``-`` when not measured."""
    if value is None:
        return "-"
    return f"{value / 1000:.2f} s" if value >= 10_000 else f"{value:.1f} ms"


def csv_values(text: str | None, what: str, cast: Callable[[str], T]) -> list[T] | None:
    """``--what a,b,c`` as a list (None when not given); an empty or malformed list is refused."""
    if text is None:
        return None
    try:
        values = [cast(part.strip()) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        raise InputError(f"--{what} {text!r}: expected a comma-separated list, e.g. 1,8,32") from exc
    if not values:
        raise InputError(f"--{what} {text!r}: give at least one value")
    return values

