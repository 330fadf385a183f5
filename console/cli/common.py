"""What every subcommand shares: opening the store and the service, confirmation, and output.

This is the one module of the CLI that names ``console.store`` (to open the database); every command reads
through ``console.readmodel`` and acts through ``console.service`` (the import contracts in pyproject.toml).

Output discipline: with ``--json`` stdout carries JSON and nothing else; progress and prose go to stderr,
so ``campaign ... --json | jq`` always parses. Errors are ``console.errors.ConsoleError``s: ``main`` prints
them as one line and maps them to the exit status.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from console import bounds
from console.errors import InputError
from console.files import read_regular
from console.store import Store, resolve_db_path
from console.timeutil import parse_duration

if TYPE_CHECKING:
    from console.service import Service

T = TypeVar("T")


def open_store(args: argparse.Namespace, *, read_only: bool = False, seed: bool = True) -> Store:
    """The campaign's store. Whichever command creates a database sets it up as every new one starts: this
    machine registered as the box ``local`` and (unless ``seed`` is off: ``campaign demo`` imports it itself,
    with its progress) the campaign write-up's published figures imported to browse. A reading command
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


def readable_db_path(args: argparse.Namespace, given: str | None = None) -> Path:
    """The database at ``given`` (else ``--db``, $CAMPAIGN_DB, ./state.db), opened read-only once and closed:
    a missing, foreign or too-old file is refused before anything else starts (nothing is created)."""
    path = Path(given) if given else resolve_db_path(getattr(args, "db", None))
    Store(path, read_only=True).close()
    return path


@contextmanager
def store_and_service(args: argparse.Namespace) -> Iterator[tuple[Store, Service]]:
    """The command's store, which it reads through ``console.readmodel`` (never ``store.`` itself), and a
    ``console.service.Service`` over it for its intents; the service's links are closed by ``run``."""
    from console.service import Service

    with open_store(args) as store:
        yield store, Service(store)


@contextmanager
def service_for(args: argparse.Namespace) -> Iterator[Service]:
    """A ``console.service.Service`` over the command's store; its links are closed by ``run``."""
    with store_and_service(args) as (_, service):
        yield service


def run(service: Service, intent: Callable[[], Awaitable[T]]) -> T:
    """Run one async intent of ``service`` to completion, then close the service's box links."""

    async def go() -> T:
        try:
            return await intent()
        finally:
            await service.close()

    return asyncio.run(go())


def json_file_arg(
    path: str,
    flag: str,
    max_bytes: int,
    parse: Callable[[Any, str], T],
    errors: tuple[type[Exception], ...],
    doc: str,
) -> T:
    """An operator's JSON input file (``flag PATH``), read and checked here so a typo fails before anything runs
    on a box: a regular file of at most ``max_bytes`` (never a FIFO), decoded and handed to ``parse``; bad JSON
    or any of ``errors`` is one line naming the flag and ``doc``, the page that describes the file."""
    data = read_regular(Path(path), flag, max_bytes)
    caught: tuple[type[Exception], ...] = (*errors, json.JSONDecodeError, UnicodeDecodeError)
    try:
        return parse(json.loads(data.decode("utf-8")), path)
    except caught as exc:
        raise InputError(f"{flag} {path}: {exc}", f"{doc} describes the file") from exc


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


@dataclass(frozen=True)
class Column:
    """One column of ``print_table``: the row key, its heading (default: the key in capitals), right-aligned
    for figures, and a least width (in plain text) that keeps a block's columns where readers expect them."""

    key: str
    heading: str | None = None
    right: bool = False
    min_width: int = 0


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or the stream is closed
        return False


def print_table(
    rows: Sequence[Mapping[str, object]],
    columns: Sequence[str | Column],
    *,
    header: bool = True,
    indent: int = 0,
) -> None:
    """The CLI's one table renderer, on stdout. On a terminal a Rich table (box-drawn, wrapped to the
    terminal's width). Anywhere else (a pipe, a file, a test's capture) plain aligned text, as scripts read it:
    a capitalised heading line, then one line per row, columns ljust (``right``: rjust) and two spaces apart,
    trailing blanks stripped, no box drawing and no escape codes. A missing or None cell is empty."""
    cols = [c if isinstance(c, Column) else Column(c) for c in columns]
    headings = [c.heading if c.heading is not None else c.key.upper() for c in cols]
    cells = [[("" if r.get(c.key) is None else str(r.get(c.key))) for c in cols] for r in rows]
    if _is_terminal(sys.stdout):
        _print_rich(cols, headings, cells, header=header, indent=indent)
        return
    widths = [
        max([c.min_width, len(h) if header else 0] + [len(row[i]) for row in cells])
        for i, (c, h) in enumerate(zip(cols, headings, strict=True))
    ]

    def line(values: list[str]) -> str:
        return (
            " " * indent
            + "  ".join(
                v.rjust(w) if c.right else v.ljust(w) for c, v, w in zip(cols, values, widths, strict=True)
            )
        ).rstrip()

    if header:
        print(line(headings))
    for row in cells:
        print(line(row))


def _print_rich(
    cols: list[Column], headings: list[str], cells: list[list[str]], *, header: bool, indent: int
) -> None:
    from rich import box
    from rich.console import Console
    from rich.padding import Padding
    from rich.table import Table
    from rich.text import Text

    table = Table(
        show_header=header,
        header_style="bold",
        box=box.SIMPLE_HEAD if header else None,
        show_edge=False,
        pad_edge=False,
    )
    for c, heading in zip(cols, headings, strict=True):
        table.add_column(heading, justify="right" if c.right else "left", min_width=c.min_width or None)
    for row in cells:
        table.add_row(*(Text(v) for v in row))  # Text: a cell's brackets are shown, never read as markup
    Console(file=sys.stdout, highlight=False).print(Padding(table, (0, 0, 0, indent)) if indent else table)


def ms(value: float | None) -> str:
    """A latency for people: ``42.1 ms``, ``1.52 s``; ``-`` when not measured."""
    if value is None:
        return "-"
    return f"{value / 1000:.2f} s" if value >= 10_000 else f"{value:.1f} ms"


def csv_values(text: str | None, what: str, cast: Callable[[str], T], *, most: int = 64) -> list[T] | None:
    """``--what a,b,c`` as a list (None when not given), each value read by ``cast`` (a bound's ``parse`` for
    numbers); an empty, malformed or longer-than-``most`` list is refused in one line naming the option."""
    if text is None:
        return None
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if not parts:
        raise InputError(f"--{what} {bounds.shown(text)}: give at least one value")
    if len(parts) > most:
        raise InputError(f"--{what}: {len(parts)} values", f"give at most {most}")
    try:
        return [cast(part) for part in parts]
    except InputError as exc:
        raise InputError(f"--{what} {bounds.shown(text)}: {exc.message}", exc.hint) from exc
    except ValueError as exc:
        raise InputError(
            f"--{what} {bounds.shown(text)}: expected a comma-separated list, e.g. 1,8,32"
        ) from exc


def argument(parse: Callable[[str], T]) -> Callable[[str], T]:
    """An argparse ``type=`` from one of the shared parsers: its refusal becomes argparse's error, which
    ``console.cli.Parser`` prints as one line (exit 2) before any store is opened or box reached."""

    def read(text: str) -> T:
        try:
            return parse(text)
        except InputError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from exc

    return read


def _duration_text(text: str) -> str:
    parse_duration(text)
    return text


# The ``type=`` of every numeric option; the ranges are console/bounds.py's, the same the service enforces.
seed_arg = argument(bounds.SEED.parse)
row_id_arg = argument(bounds.ROW_ID.parse)
concurrency_arg = argument(bounds.CONCURRENCY.parse)
prompts_arg = argument(bounds.PROMPTS.parse)
repeat_arg = argument(bounds.REPEAT.parse)
max_tokens_arg = argument(bounds.MAX_TOKENS.parse)
positions_arg = argument(bounds.POSITIONS.parse)
top_k_arg = argument(bounds.TOP_K.parse)
port_arg = argument(bounds.PORT.parse)
wait_s_arg = argument(bounds.WAIT_S.parse)
grace_s_arg = argument(bounds.GRACE_S.parse)
interval_s_arg = argument(bounds.INTERVAL_S.parse)
price_per_hour_arg = argument(bounds.PRICE_PER_HOUR.parse)
utilisation_arg = argument(bounds.UTILISATION.parse)
duration_arg = argument(_duration_text)
"""``--in 4h30m``: checked here (form and the 31-day maximum), passed on as typed (the timer records it)."""
