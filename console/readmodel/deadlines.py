"""Hard-stop timers now, as ``campaign timer list|show|cancel|watch`` read them: each deadline with the box's
zone and the time left on the store's clock, and a timer's log. (The TUI reads them as of its cursor:
``queries.timers``.)"""

from __future__ import annotations

from dataclasses import asdict

from console.readmodel.records import TimerEntry, TimerLogEntry
from console.store import Store
from console.store.timers import Timer


def timer_entries(store: Store, box: str | None = None, *, active_only: bool = True) -> list[TimerEntry]:
    """The live timers (every one with ``active_only`` off), of ``box`` only when given. A box the store does
    not know is its one-line error: a mistyped name must not read as "no timers: nothing will stop"."""
    if box is not None:
        store.boxes.get(box)
    now = store.clock()
    return [_entry(store, t, now) for t in store.timers.every(box, active_only=active_only)]


def timer_entry(store: Store, timer_id: int) -> TimerEntry:
    """One timer now (an unknown id is the store's one-line error)."""
    return _entry(store, store.timers.get(timer_id), store.clock())


def timer_log(store: Store, timer_id: int) -> list[TimerLogEntry]:
    """Every event of the timer's log, oldest first."""
    return [
        TimerLogEntry(
            id=e["id"],
            timer_id=e["timer_id"],
            t_ms=e["t_ms"],
            event=e["event"],
            enforcer=e["enforcer"],
            now_ms=e["now_ms"],
            deadline_ms=e["deadline_ms"],
            remaining_s=e["remaining_s"],
            tz=e["tz"],
            detail=e["detail"],
        )
        for e in store.timers.log_for(timer_id)
    ]


def _entry(store: Store, timer: Timer, now: int) -> TimerEntry:
    return TimerEntry.from_row(asdict(timer), at=now, box_tz=store.timers.box_tz(timer.box))
