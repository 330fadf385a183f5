"""Hard-stop timers and their log: every arm, warning, pull, refusal and firing, with the numbers.

Deadlines are integer UTC epoch milliseconds; what the operator typed is kept beside them, for the
record only, never re-parsed. State changes go through compare-and-set so two enforcers (a TUI and a
CLI watcher on the same state.db) cannot both fire one timer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Literal, Protocol, TypedDict

from agents.protocol import TIMER_ACTIONS, Deadline, TimerAction
from console.errors import ConsoleError, InputError
from console.store.connection import Connection
from console.store.jsonutil import dumps
from console.timeutil import zone

TimerState = Literal["armed", "firing", "fired", "cancelled", "failed"]
"""A timer's life in the store (``timers.state``); only ``ACTIVE`` ones are enforced. ``transition`` moves it."""
ACTIVE: tuple[TimerState, ...] = ("armed", "firing")
ACTIONS: tuple[TimerAction, ...] = TIMER_ACTIONS
"""The actions a timer may take: the protocol's, so the console never arms one the box's watchdog refuses."""


def timer_action(text: str) -> TimerAction:
    """The action an operator typed, as one the box's watchdog knows (agents.protocol ``TIMER_ACTIONS``, the
    one list: the CHECK on ``timers.action`` names the same words); ValueError for any other word."""
    for action in TIMER_ACTIONS:
        if action == text:
            return action
    raise ValueError(f"action {text!r}: expected one of {', '.join(TIMER_ACTIONS)}")


@dataclass
class Timer:
    id: int
    box: str
    deadline_ms: int
    action: TimerAction
    state: TimerState
    input_text: str | None
    created_ms: int
    updated_ms: int

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Timer:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in row.items() if k in names})


class TimerLogRow(TypedDict):
    """One line of a timer's log as read back (``Timers.log``): an arm, warning, pull, refusal or firing."""

    id: int
    timer_id: int
    t_ms: int
    event: str
    enforcer: str | None
    now_ms: int | None
    deadline_ms: int | None
    remaining_s: float | None
    tz: str | None
    detail: Any
    """What the writer logged with it (an error, a box's or a provider's answer): a JSON object of any shape,
    or None when nothing was."""


class NoSuchTimer(InputError, KeyError):
    def __init__(self, timer_id: int):
        super().__init__(f"no timer with id {timer_id}", "`campaign timer list` shows them")

    def __str__(self) -> str:  # KeyError would quote the message
        return ConsoleError.__str__(self)


class Consumer(Protocol):
    """The reader of the box journals (``Ingest``), as far as a timer names it: this state.db's campaign id."""

    def consumer_id(self) -> str: ...


class TimersConnection(Connection, Protocol):
    """What ``Timers`` needs of the store: its connection, and ingest's campaign id (a timer's id on a box
    journal carries it). A protocol, not ``Ingest``: ingest hands agent events to the timers."""

    @property
    def ingest(self) -> Consumer: ...


class Timers:
    def __init__(self, store: TimersConnection):
        self.store = store

    def add(
        self,
        box: str,
        deadline_ms: int,
        action: TimerAction,
        input_text: str,
        *,
        now_ms: int,
        detail: Mapping[str, object] | None = None,
    ) -> Timer:
        if action not in ACTIONS:
            raise ValueError(f"action {action!r}: expected one of {', '.join(ACTIONS)}")
        if isinstance(deadline_ms, bool) or not isinstance(deadline_ms, int):
            raise TypeError(f"deadline_ms must be integer UTC epoch milliseconds, got {deadline_ms!r}")
        row = {
            "box": box,
            "deadline_ms": deadline_ms,
            "action": action,
            "state": "armed",
            "input_text": input_text,
            "created_ms": now_ms,
            "updated_ms": now_ms,
        }
        with self.store.atomic():
            timer_id = self.store.insert("timers", row)
            self.log(
                timer_id, "armed", enforcer="console", now_ms=now_ms, deadline_ms=deadline_ms, detail=detail
            )
        return self.get(timer_id)

    def get(self, timer_id: int) -> Timer:
        rows = self.store.rows("SELECT * FROM timers WHERE id = ?", [timer_id])
        if not rows:
            raise NoSuchTimer(timer_id)
        return Timer.from_row(rows[0])

    def every(self, box: str | None = None, *, active_only: bool = False) -> list[Timer]:
        where, params = [], []
        if box is not None:
            where.append("box = ?")
            params.append(box)
        if active_only:
            where.append(f"state IN ({', '.join('?' * len(ACTIVE))})")
            params.extend(ACTIVE)
        sql = "SELECT * FROM timers" + (f" WHERE {' AND '.join(where)}" if where else "")
        return [Timer.from_row(r) for r in self.store.rows(sql + " ORDER BY deadline_ms, id", params)]

    def next_for(self, box: str) -> Timer | None:
        """The earliest live deadline of a box: what the TUI header shows."""
        active = self.every(box, active_only=True)
        return active[0] if active else None

    def transition(
        self, timer_id: int, from_states: tuple[TimerState, ...], to: TimerState, *, now_ms: int
    ) -> bool:
        """Move a timer to ``to`` only if it is still in one of ``from_states``; False if another won."""
        with self.store.atomic() as db:
            cur = db.execute(
                f"UPDATE timers SET state = ?, updated_ms = ? WHERE id = ? "
                f"AND state IN ({', '.join('?' * len(from_states))})",
                [to, now_ms, timer_id, *from_states],
            )
            return cur.rowcount == 1

    def log(
        self,
        timer_id: int,
        event: str,
        *,
        enforcer: str,
        now_ms: int,
        deadline_ms: int | None = None,
        tz: str | None = None,
        detail: Mapping[str, object] | None = None,
    ) -> None:
        remaining_s = None if deadline_ms is None else (deadline_ms - now_ms) / 1000
        row = {
            "timer_id": timer_id,
            "t_ms": now_ms,
            "event": event,
            "enforcer": enforcer,
            "now_ms": now_ms,
            "deadline_ms": deadline_ms,
            "remaining_s": remaining_s,
            "tz": tz,
            "detail": None if detail is None else dumps(detail),
        }
        with self.store.atomic() as db:
            db.table("timer_log").insert(row)

    def log_for(self, timer_id: int) -> list[TimerLogRow]:
        return [
            TimerLogRow(
                id=r["id"],
                timer_id=r["timer_id"],
                t_ms=r["t_ms"],
                event=r["event"],
                enforcer=r["enforcer"],
                now_ms=r["now_ms"],
                deadline_ms=r["deadline_ms"],
                remaining_s=r["remaining_s"],
                tz=r["tz"],
                detail=None if r["detail"] is None else json.loads(r["detail"]),
            )
            for r in self.store.rows(
                "SELECT * FROM timer_log WHERE timer_id = ? ORDER BY t_ms, id", [timer_id]
            )
        ]

    def has_event(self, timer_id: int, event: str) -> bool:
        return bool(
            self.store.scalar(
                "SELECT 1 FROM timer_log WHERE timer_id = ? AND event = ? LIMIT 1", [timer_id, event]
            )
        )

    def last_event_ms(self, timer_id: int, event: str) -> int | None:
        t_ms = self.store.scalar(
            "SELECT max(t_ms) FROM timer_log WHERE timer_id = ? AND event = ?", [timer_id, event]
        )
        return None if t_ms is None else int(t_ms)

    def box_tz(self, box: str) -> str | None:
        """The box's zone from its latest probe; None when it was never probed (never guessed)."""
        raw = self.store.scalar(
            "SELECT data FROM probes WHERE box = ? ORDER BY t_ms DESC, id DESC LIMIT 1", [box]
        )
        if raw is None:
            return None
        tz = json.loads(raw).get("tz")
        if not isinstance(tz, str) or not tz:
            return None
        try:
            zone(tz)
        except ValueError:
            return None  # a name this Python does not know (e.g. "BST"): unknown, never guessed
        return tz

    def box_id(self, timer_id: int) -> str:
        """The timer's name on a box's watchdog: every state.db numbers its timers from 1, and one box may
        serve several campaigns, so the campaign id comes first."""
        return f"{self.store.ingest.consumer_id()}:{timer_id}"

    def from_box_id(self, text: str) -> int | None:
        """This store's timer id for a watchdog's name; None for another campaign's timer. A bare number is
        a timer armed by a console from before campaign ids (read as this campaign's)."""
        campaign, _, number = text.rpartition(":")
        if not number.isdigit() or campaign not in ("", self.store.ingest.consumer_id()):
            return None
        return int(number)

    def on_agent_event(self, box: str, event: Deadline) -> None:
        """Mirror a box watchdog's ``deadline`` journal event into the timer's log (enforcer 'agent').

        Called by the fleet's ingest, inside its transaction. When the box fired a stop-arms or shutdown
        by itself (the console was away), the timer is fired; a destroy still needs the console and its
        provider, so it stays live until the console confirms it.
        """
        timer_id = self.from_box_id(str(event.get("timer_id", "")))
        if timer_id is None:
            return  # not one of this store's timers (another campaign's, or a shutdown handed to the box)
        rows = self.store.rows("SELECT * FROM timers WHERE id = ? AND box = ?", [timer_id, box])
        if not rows:
            return
        timer = Timer.from_row(rows[0])
        detail = dict(event.get("detail") or {})
        state = str(event.get("state"))
        with self.store.atomic():
            self.log(
                timer.id,
                f"agent-{state}",
                enforcer="agent",
                now_ms=int(event["t_ms"]),
                deadline_ms=timer.deadline_ms,
                tz=detail.get("tz"),
                detail=detail | {"box_remaining_s": event.get("remaining_s"), "seq": event.get("seq")},
            )
            if state == "fired" and timer.action != "destroy":
                self.transition(timer.id, ACTIVE, "fired", now_ms=int(event["t_ms"]))
