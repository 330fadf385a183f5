"""Guarded hard-stop timers, console side: reading the deadline, showing it, and enforcing it.

The write-up's box was destroyed at 00:27 UTC, an hour before the agreed 01:27 UTC stop, because a script
read "01:27" in the host's local zone (BST). Three rules here make that impossible:

* Reading: a deadline is either a duration or an instant that names its zone. A bare "01:27" or a naive
  date-time is refused with every reading it could have had (UTC, the box's zone, this console's zone),
  so the operator sees the hour's difference before anything is armed. Wall times inside a DST change
  are refused too.
* Enforcing: the enforcer compares the console's UTC clock with the stored UTC deadline; no zone is
  involved. It warns at T-30/T-10/T-1, closes the box to new benches from T-10, pulls the journal and
  launch logs at T-10 and again at T, then acts. A destroy counts only when the provider confirms.
* Guarding: every deadline-driven stop or destroy calls ``guard()`` first, which re-reads the deadline
  from the store and refuses (and logs now, deadline, remaining seconds and the zone in force) if now is
  more than 30 s before it. The box's watchdog applies the same rule (``agents.watchdog.too_early``).

The actions go through ``BoxActions``, which ``console.service`` implements over the box links; destroy
goes through the provider adapters in ``ops.providers``.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta, tzinfo
from typing import Any, Protocol

from agents.protocol import TimerAction
from agents.watchdog import GUARD_MS, WARN_AT_S, too_early, tz_in_force
from console.errors import InputError, Refused
from console.store import Store
from console.store.timers import ACTIVE, Timer
from console.timeutil import (
    MAX_DURATION_MS,
    AmbiguousWallTimeError,
    Clock,
    NaiveTimeError,
    fmt_local,
    fmt_remaining,
    fmt_utc,
    fmt_zone,
    from_ms,
    parse_duration,
    parse_instant_strict,
    system_clock,
    to_ms,
    zone,
)
from ops.providers import Provider, ProviderError, for_box

MIN_LEAD_MS = 60_000
"""A deadline closer than this leaves no time for the warnings and the pull: refuse it."""
PULL_BEFORE_MS = 10 * 60_000
"""Results are pulled at the T-10 warning, so a failed final pull still loses at most ten minutes."""
BENCH_GATE_MS = 10 * 60_000
"""No new benches start within this of a hard stop: a bench cut in half is a wasted measurement."""
PULL_GRACE_MS = 5 * 60_000
"""A destroy waits this long past the deadline for a successful final pull before going anyway."""
RETRY_MS = 15_000
"""A failed arm/pull/action is tried again this much later: a deadline fails closed."""

UNKNOWN_BOX_ZONE = "box zone unknown"


class TimerInputError(InputError, ValueError):
    """The deadline as typed cannot be armed; the message shows what it could mean and how to write it."""


class EarlyFireError(Refused):
    """A stop or destroy was refused because its deadline is more than 30 s away."""


# -- reading -------------------------------------------------------------------------------------
_TIME_OF_DAY = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2}))?$")
_NAIVE_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{1,2}:\d{2}(?::\d{2})?$")


def _naive_readings(text: str, now_ms: int, box_tz: str | None) -> list[tuple[str, int | None]] | None:
    """What a zoneless time would mean read as UTC, in the box's zone and in this console's zone.

    A bare time of day means its next occurrence in that zone (the way a cron-like script reads it).
    None when the text is not a time at all.
    """
    tod = _TIME_OF_DAY.match(text)
    if not tod and not _NAIVE_DATETIME.match(text):
        return None

    def aware(naive: datetime, tz: tzinfo | None) -> datetime:
        # tz None: this process's local zone with its DST rules, exactly as a naive script would read it.
        return naive.astimezone() if tz is None else naive.replace(tzinfo=tz)

    def reading(tz: tzinfo | None) -> int:
        if not tod:
            return to_ms(aware(datetime.fromisoformat(text.replace(" ", "T")), tz))
        h, m, s = (int(g) if g else 0 for g in tod.groups())
        today = from_ms(now_ms, tz or from_ms(now_ms).astimezone().tzinfo or UTC).date()
        candidates = [
            to_ms(aware(datetime.combine(today + timedelta(days=d), time(h, m, s)), tz)) for d in (0, 1)
        ]
        return next((c for c in candidates if c > now_ms), candidates[-1])

    try:
        readings: list[tuple[str, int | None]] = [("read as UTC", reading(UTC))]
    except ValueError:
        return None  # e.g. 25:99: not a time, let the caller say so
    readings.append(
        (f"read in the box's zone ({box_tz or 'unknown'})", reading(zone(box_tz)) if box_tz else None)
    )
    readings.append((f"read in this console's zone ({tz_in_force()})", reading(None)))
    return readings


def _explain_naive(text: str, now_ms: int, box_tz: str | None) -> str:
    readings = _naive_readings(text, now_ms, box_tz)
    if readings is None:
        return (
            f"--at {text!r}: cannot read it as a time; write an instant with its zone, e.g. "
            "2026-09-06T01:27Z, 2026-09-06T02:27+01:00 or '2026-09-06 01:27 Europe/London'"
        )
    lines = [
        f"--at {text!r} names no time zone, so it is not an instant (the write-up's box was destroyed an hour "
        "early when a cut-off like this was read in the host's local time). It could mean:"
    ]
    for label, ms in readings:
        if ms is None:
            lines.append(f"  {label}: {UNKNOWN_BOX_ZONE}, no probe has recorded it (`campaign check BOX`)")
        else:
            box_view = f" = {fmt_zone(ms, zone(box_tz))}" if box_tz else ""
            lines.append(f"  {label}: {fmt_utc(ms)}{box_view}  (in {fmt_remaining(ms - now_ms)})")
    utc_ms, box_ms = readings[0][1], readings[1][1]
    assert utc_ms is not None
    forms = [f"--at {from_ms(utc_ms).strftime('%Y-%m-%dT%H:%M')}Z (UTC)"]
    if box_ms is not None and box_tz:
        forms.append(f"--at '{from_ms(box_ms, zone(box_tz)).strftime('%Y-%m-%d %H:%M')} {box_tz}' (box time)")
    forms.append(f"--in {fmt_remaining(utc_ms - now_ms)}")
    lines.append("Write it with its zone: " + ", or ".join(forms))
    return "\n".join(lines)


def parse_deadline(at: str | None, within: str | None, *, now_ms: int, box_tz: str | None) -> int:
    """The deadline in UTC epoch ms from ``--at TIME`` or ``--in DURATION``; anything ambiguous is refused."""
    if (at is None) == (within is None):
        raise TimerInputError("give exactly one of --at TIME or --in DURATION")
    if within is not None:
        try:
            deadline = now_ms + parse_duration(within)
        except ValueError as exc:
            raise TimerInputError(f"--in: {exc}") from exc
    else:
        assert at is not None
        try:
            deadline = parse_instant_strict(at, now_ms)
        except AmbiguousWallTimeError as exc:
            raise TimerInputError(f"--at {exc}") from exc
        except NaiveTimeError:
            raise TimerInputError(_explain_naive(at.strip(), now_ms, box_tz)) from None
        except ValueError as exc:  # an unknown zone name
            raise TimerInputError(f"--at {at!r}: {exc}") from exc
    lead = deadline - now_ms
    if lead <= 0:
        raise TimerInputError(f"the deadline {fmt_utc(deadline)} is in the past ({fmt_remaining(-lead)} ago)")
    if lead < MIN_LEAD_MS:
        raise TimerInputError(
            f"the deadline {fmt_utc(deadline)} is only {fmt_remaining(lead)} away; a hard stop needs at "
            f"least {MIN_LEAD_MS // 1000}s for its warnings and the results pull"
        )
    if lead > MAX_DURATION_MS:  # the longest --in too: one limit however the deadline is typed
        raise TimerInputError(
            f"the deadline {fmt_utc(deadline)} is {fmt_remaining(lead)} away, more than 31 days: check the date"
        )
    return deadline


def readings(deadline_ms: int, now_ms: int, box_tz: str | None) -> list[tuple[str, str]]:
    """The deadline as the operator confirms it: UTC, this console's zone, the box's zone, remaining."""
    return [
        ("UTC", fmt_utc(deadline_ms)),
        ("console", fmt_local(deadline_ms)),
        ("box", f"{fmt_zone(deadline_ms, zone(box_tz))} [{box_tz}]" if box_tz else UNKNOWN_BOX_ZONE),
        ("remaining", fmt_remaining(deadline_ms - now_ms)),
    ]


# -- the early-fire guard ------------------------------------------------------------------------
def guard(store: Store, timer_id: int, *, now_ms: int, enforcer: str = "console") -> Timer:
    """Re-read the deadline and refuse a stop/destroy more than 30 s before it. Call on every path."""
    timer = store.timers.get(timer_id)
    if timer.state not in ACTIVE:
        raise EarlyFireError(f"timer {timer_id} is {timer.state}; nothing may fire for it")
    if too_early(now_ms, timer.deadline_ms):
        remaining_s = (timer.deadline_ms - now_ms) / 1000
        store.timers.log(
            timer_id,
            "refused-early",
            enforcer=enforcer,
            now_ms=now_ms,
            deadline_ms=timer.deadline_ms,
            tz=tz_in_force(),
            detail={
                "now_utc": fmt_utc(now_ms),
                "deadline_utc": fmt_utc(timer.deadline_ms),
                "remaining_s": remaining_s,
                "action": timer.action,
                "box": timer.box,
            },
        )
        raise EarlyFireError(
            f"refusing {timer.action} of box {timer.box}: now {fmt_utc(now_ms)} is {remaining_s:.0f}s before "
            f"the deadline {fmt_utc(timer.deadline_ms)} (more than {GUARD_MS // 1000}s early; {tz_in_force()})"
        )
    return timer


def cancel(store: Store, timer_id: int, *, now_ms: int) -> Timer:
    """Disarm a timer in the store; the enforcer then disarms the box's watchdog when it reaches it."""
    timer = store.timers.get(timer_id)
    if not store.timers.transition(timer_id, ("armed",), "cancelled", now_ms=now_ms):
        raise TimerInputError(
            f"timer {timer_id} is {store.timers.get(timer_id).state}; only an armed timer can be cancelled"
        )
    store.timers.log(timer_id, "cancelled", enforcer="console", now_ms=now_ms, deadline_ms=timer.deadline_ms)
    return store.timers.get(timer_id)


def bench_refusal(store: Store, box: str, now_ms: int) -> str | None:
    """Why a new bench may not start on ``box`` now (a hard stop is close), or None."""
    timer = store.timers.next_for(box)
    if timer is None or timer.deadline_ms - now_ms > BENCH_GATE_MS:
        return None
    return (
        f"box {box} stops ({timer.action}) at {fmt_utc(timer.deadline_ms)}, in "
        f"{fmt_remaining(timer.deadline_ms - now_ms)} (timer {timer.id}): no new benches within "
        f"{BENCH_GATE_MS // 60_000} minutes of a hard stop; cancel or move the timer to run more"
    )


# -- the console enforcer ------------------------------------------------------------------------
class BoxActions(Protocol):
    """What the enforcer asks of the fleet layer. Each returns a JSON-able summary for the log."""

    async def arm_watchdog(
        self, box: str, timer_id: int, deadline_ms: int, action: TimerAction, console_now_ms: int
    ) -> dict[str, Any]: ...

    async def cancel_watchdog(self, box: str, timer_id: int) -> dict[str, Any]: ...

    async def pull(self, box: str) -> dict[str, Any]:
        """Ingest every unacknowledged journal event and the launch logs of ``box``."""
        ...

    async def stop_arms(self, box: str) -> dict[str, Any]: ...

    async def shutdown(self, box: str) -> dict[str, Any]: ...


@dataclass
class Enforcer:
    """Enforces every live timer in the store against the console's UTC clock; ``tick()`` at ~1 Hz."""

    store: Store
    actions: BoxActions
    clock: Clock = system_clock
    providers: Callable[[str | None], Provider] = for_box
    notify: Callable[[Timer, str], None] | None = None  # the TUI's toast; the log is the record
    name: str = "console"

    async def run(self, stop: asyncio.Event, interval_s: float = 1.0) -> None:
        while not stop.is_set():
            await self.tick()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval_s)

    async def tick(self) -> None:
        """One pass over every live timer, concurrently: a box that takes 30 s to time out must not make
        another box's stop late."""
        await asyncio.gather(*(self._isolated(t) for t in self.store.timers.every(active_only=True)))
        for timer in self.store.timers.every():
            if timer.state == "cancelled":
                await self.disarm_box(timer)

    async def _isolated(self, timer: Timer) -> None:
        try:
            await self._step(timer)
        except Exception as exc:  # one box's failure must not stop the other boxes' deadlines
            self._log(timer, "error", {"error": f"{type(exc).__name__}: {exc}"})

    async def arm_box(self, timer: Timer) -> dict[str, Any] | None:
        """Arm the box's own watchdog for ``timer`` unless done (or failed less than RETRY_MS ago)."""
        if not self._due(timer, None, "armed-on-box", "arm-on-box-failed"):
            return None
        return await self._attempt(
            timer,
            "armed-on-box",
            "arm-on-box-failed",
            self.actions.arm_watchdog(timer.box, timer.id, timer.deadline_ms, timer.action, self.clock()),
        )

    async def disarm_box(self, timer: Timer) -> dict[str, Any] | None:
        """Cancel a cancelled timer on the box too, if it was ever armed there."""
        if not self._due(timer, "armed-on-box", "cancelled-on-box", "cancel-on-box-failed"):
            return None
        return await self._attempt(
            timer,
            "cancelled-on-box",
            "cancel-on-box-failed",
            self.actions.cancel_watchdog(timer.box, timer.id),
        )

    def _log(
        self, timer: Timer, event: str, detail: dict[str, Any] | None = None, *, tz: str | None = None
    ) -> None:
        self.store.timers.log(
            timer.id,
            event,
            enforcer=self.name,
            now_ms=self.clock(),
            deadline_ms=timer.deadline_ms,
            tz=tz,
            detail=detail,
        )

    def _due(self, timer: Timer, needs: str | None, done: str, failed: str) -> bool:
        """A step is due when its prerequisite happened, it has not succeeded, and no retry is pending."""
        timers = self.store.timers
        if (needs and not timers.has_event(timer.id, needs)) or timers.has_event(timer.id, done):
            return False
        last_fail = timers.last_event_ms(timer.id, failed)
        return last_fail is None or self.clock() - last_fail >= RETRY_MS

    async def _attempt(
        self, timer: Timer, ok: str, failed: str, call: Awaitable[dict[str, Any]]
    ) -> dict[str, Any] | None:
        try:
            result = await call
        except Exception as exc:
            self._log(timer, failed, {"error": f"{type(exc).__name__}: {exc}"})
            return None
        self._log(timer, ok, result)
        return result

    async def _step(self, timer: Timer) -> None:
        if timer.state == "firing":
            if self._retry_due(timer):
                await self._fire(timer)
            return
        await self.arm_box(timer)
        remaining = timer.deadline_ms - self.clock()
        self._warn(timer, remaining)
        if remaining <= 0:
            await self._fire(timer)
        elif remaining <= PULL_BEFORE_MS and self._due(timer, None, "pulled-early", "pull-early-failed"):
            await self._attempt(timer, "pulled-early", "pull-early-failed", self.actions.pull(timer.box))

    def _warn(self, timer: Timer, remaining_ms: int) -> None:
        if remaining_ms <= 0:
            return
        crossed = [w for w in WARN_AT_S if remaining_ms <= w * 1000]
        if not crossed:
            return
        event = f"warn-{min(crossed) // 60}m"
        if any(
            self.store.timers.has_event(timer.id, f"warn-{w // 60}m") for w in WARN_AT_S if w <= min(crossed)
        ):
            return
        message = (
            f"box {timer.box}: {timer.action} at {fmt_utc(timer.deadline_ms)} "
            f"(in {fmt_remaining(remaining_ms)})"
        )
        self._log(timer, event, {"message": message})
        if self.notify is not None:
            self.notify(timer, message)

    def _retry_due(self, timer: Timer) -> bool:
        last = max(
            (self.store.timers.last_event_ms(timer.id, e) or 0)
            for e in ("firing", "pull-failed", "action-failed", "unconfirmed")
        )
        return self.clock() - last >= RETRY_MS

    async def _fire(self, timer: Timer) -> None:
        now = self.clock()
        if timer.state == "armed":
            if not self.store.timers.transition(timer.id, ("armed",), "firing", now_ms=now):
                return  # another enforcer on this state.db took it
            self._log(timer, "firing")
        pulled = await self._attempt(timer, "pulled", "pull-failed", self.actions.pull(timer.box))
        if pulled is None and timer.action == "destroy" and self.clock() < timer.deadline_ms + PULL_GRACE_MS:
            return  # a destroy loses whatever was not pulled: retry the pull first, within the grace
        try:
            guard(self.store, timer.id, now_ms=self.clock(), enforcer=self.name)
        except EarlyFireError:
            self.store.timers.transition(timer.id, ("firing",), "armed", now_ms=self.clock())
            return
        try:
            done = await self._act(timer)
        except Exception as exc:
            self._log(timer, "action-failed", {"error": f"{type(exc).__name__}: {exc}"})
            return
        if done.get("confirmed") is False:
            self._log(timer, "unconfirmed", done)
            return
        self.store.timers.transition(timer.id, ("firing",), "fired", now_ms=self.clock())
        self._log(timer, "fired", {"pulled": pulled, "done": done})
        if self.notify is not None:
            self.notify(timer, f"box {timer.box}: {timer.action} done at {fmt_utc(self.clock())}")

    async def _act(self, timer: Timer) -> dict[str, Any]:
        """Do the timer's action. A box rented through a provider API is stopped or destroyed there
        (confirmed by the provider); an owned or monthly host powers itself off through its agent."""
        if timer.action == "stop-arms":
            return await self.actions.stop_arms(timer.box)
        box = self.store.boxes.get(timer.box)
        provider = self.providers(box.provider)
        if timer.action == "shutdown" and not provider.can_destroy:
            return await self.actions.shutdown(timer.box)
        if not box.instance_id:
            raise ProviderError(f"box {box.name} has no provider instance id; `campaign box add --instance`")
        call = provider.destroy if timer.action == "destroy" else provider.stop
        result = await asyncio.to_thread(call, box.instance_id)
        if result.confirmed and timer.action == "destroy":
            self.store.boxes.update(
                box.name, status="destroyed", status_detail=result.detail, destroyed_ms=self.clock()
            )
        return {
            "confirmed": result.confirmed,
            "provider": provider.name,
            "state": result.state,
            "detail": result.detail,
            "requests": result.attempts,
        }
