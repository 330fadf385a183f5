"""The command ledger: every intent sent to a box, stored BEFORE it is sent, then its answer.

A crash between send and ack can re-send the same id, which the agent answers from its own ledger instead
of running the command twice. A long operation's answer may arrive as a journaled ``command_done`` event
before (or instead of) the immediate reply; whichever lands first wins.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from console.errors import InputError
from console.store.jsonutil import dumps

if TYPE_CHECKING:
    from console.store.connection import Connection

CommandState = Literal["pending", "sent", "acked", "failed"]
"""Stored, handed to the box, answered ok, answered with an error (or never sent)."""
COMMAND_STATES: tuple[CommandState, ...] = typing.get_args(CommandState)


class NoSuchCommand(InputError, KeyError):
    def __init__(self, command_id: str):
        super().__init__(f"no command with id {command_id!r} in this state.db")

    def __str__(self) -> str:  # KeyError would quote the message
        return InputError.__str__(self)


@dataclass(frozen=True)
class Command:
    id: str
    box: str
    op: str
    args: dict[str, Any]
    """The op's arguments as sent (agents.protocol ``OPS[op].args`` declares them)."""
    state: CommandState
    created_ms: int
    sent_ms: int | None = None
    acked_ms: int | None = None
    result: Any = None
    error: str | None = None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Command:
        return cls(
            id=row["id"],
            box=row["box"],
            op=row["op"],
            args=json.loads(row["args"]),
            state=row["state"],
            created_ms=row["created_ms"],
            sent_ms=row["sent_ms"],
            acked_ms=row["acked_ms"],
            result=json.loads(row["result"]) if row["result"] is not None else None,
            error=row["error"],
        )


class Commands:
    """``store.commands``."""

    def __init__(self, store: Connection):
        self.store = store

    def add(self, command_id: str, box: str, op: str, args: Mapping[str, object]) -> Command:
        """Store a command BEFORE it is sent, so a crash between send and ack can re-send the same id."""
        now = self.store.clock()
        with self.store.atomic() as db:
            db.table("commands").insert(
                {
                    "id": command_id,
                    "box": box,
                    "op": op,
                    "args": dumps(args),
                    "state": "pending",
                    "created_ms": now,
                }
            )
        return self.get(command_id)

    def get(self, command_id: str) -> Command:
        rows = self.store.rows("SELECT * FROM commands WHERE id = ?", [command_id])
        if not rows:
            raise NoSuchCommand(command_id)
        return Command.from_row(rows[0])

    def find(self, command_id: str) -> Command | None:
        rows = self.store.rows("SELECT * FROM commands WHERE id = ?", [command_id])
        return Command.from_row(rows[0]) if rows else None

    def mark_sent(self, command_id: str) -> None:
        with self.store.atomic() as db:
            db.execute(
                "UPDATE commands SET state = 'sent', sent_ms = ? WHERE id = ? AND state = 'pending'",
                [self.store.clock(), command_id],
            )

    def finish(self, command_id: str, ok: bool, result: Any = None, error: str | None = None) -> None:
        """The agent's immediate answer. A long op's ``command_done`` may have been ingested first: it wins."""
        with self.store.atomic():
            if self.get(command_id).state in ("pending", "sent"):
                self.record_answer(command_id, ok, result, error, self.store.clock())

    def record_answer(self, command_id: str, ok: bool, result: Any, error: str | None, t_ms: int) -> None:
        """Write an answer as it stands (ingest calls this inside its own transaction)."""
        self.store.db.execute(
            "UPDATE commands SET state = ?, acked_ms = ?, result = ?, error = ? WHERE id = ?",
            ["acked" if ok else "failed", t_ms, None if result is None else dumps(result), error, command_id],
        )

    def unfinished(self, box: str) -> list[Command]:
        """Commands stored but never answered: re-sent after a reconnect (the agent dedupes on the id)."""
        rows = self.store.rows(
            "SELECT * FROM commands WHERE box = ? AND state IN ('pending', 'sent') ORDER BY created_ms, rowid",
            [box],
        )
        return [Command.from_row(r) for r in rows]
