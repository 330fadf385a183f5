"""The box-side hard stop: a countdown that holds with the console, laptop or network gone, and never acts early.

Why this shape: the write-up's box was destroyed an hour early because a wall-clock cut-off was read in the
wrong zone, and a box whose clock jumped after a reboot fired a stop 297 s early. So the box's wall clock
never decides anything here. The rule (docs/timers.md says it for operators):

- *Trusted now* is a lower bound on true UTC: the console's UTC at its last confirmation (``set_deadline``
  or a probe's ``console_t_ms``; the console sent it before the box read it, so it is not ahead) plus the
  time elapsed since, on the boot clock (CLOCK_BOOTTIME: monotonic, counts suspend, immune to zones, DST
  and wall-clock steps). That pair is the *anchor*, persisted with the kernel's boot id.
- While armed, the anchor is re-based onto trusted now every ``CHECKPOINT_S`` and written to disk: that
  is the last-known-good UTC. After a restart in the same boot the count simply goes on. After a reboot
  (boot id changed, or the boot clock went backwards) the boot clock's origin means nothing, so trusted
  now restarts from the last-known-good UTC and counts from the first reading in the new boot: the time
  the box was down is not counted, so a stop after a reboot is late by at most that downtime plus
  ``CHECKPOINT_S``, never early. The next console confirmation removes the lateness.
- An action runs only when trusted now has reached the deadline, re-checked against the deadline read
  back from disk with the shared 30 s rule (``too_early``). The box wall clock is a second opinion only
  within the boot in which the console measured its offset: corrected by that offset, if it says more
  than ``GUARD_MS`` remain, the action waits (until it agrees or the console re-confirms UTC). When the
  box clock says the deadline has passed but trusted now says more than ``GUARD_MS`` remain, nothing is
  done either. Both are journaled as ``refused-early`` with both clocks, once a minute.
- The journal's event ``t_ms`` is not used as a bound: it is stamped by the box wall clock, the very
  clock that may run hours ahead.

State lives in ``<home>/deadline.json`` (mode 0600, written atomically) so a killed or restarted agent
re-arms. At the deadline the arms are stopped at once (results stay in the journal on disk); ``shutdown``
and ``destroy`` then wait ``shutdown_grace_s`` so a live console can pull the journal before the box
powers off. The box never destroys itself: that needs the provider's account key, which never goes on a
box; the console finishes a ``destroy`` through the provider adapter.

Standard library only, Python 3.10+: this file runs on the box.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from agents.protocol import (
    TIMER_ACTIONS,
    TIMER_STATES,
    CancelDeadlineResult,
    DeadlineState,
    SetDeadlineResult,
    TimerAction,
    TimerState,
    TimerStatus,
)

GUARD_MS = 30_000
"""Any stop or destroy more than this before its deadline is refused, from any path."""
WARN_AT_S = (1800, 600, 60)
"""Warnings at T-30, T-10 and T-1 minutes, journaled once each."""
RETRY_S = 10.0
"""After a failed action the watchdog tries again this much later: a deadline fails closed."""
REFUSAL_LOG_S = 60.0
"""A standing refusal is journaled at most this often, so a wrong clock cannot flood the journal."""
CHECKPOINT_S = 10.0
"""How often trusted now is written to disk while a deadline is live: the most a reboot can add to lateness
besides the downtime itself."""
STATE_FILE = "deadline.json"
STATE_VERSION = 2
BOOT_ID_PATH = Path("/proc/sys/kernel/random/boot_id")
LIVE: tuple[TimerState, ...] = TIMER_STATES[:2]
"""A timer still to act: armed, or its arms stopped and the power-off to come."""
Outcome = Mapping[str, object]
"""What stopping the arms or powering off reported: recorded as it came, in the state file and the journal."""


def too_early(now_ms: int, deadline_ms: int) -> bool:
    """The early-fire rule shared by both enforcers: more than ``GUARD_MS`` before the deadline."""
    return deadline_ms - now_ms > GUARD_MS


def require_int(what: str, **values: object) -> None:
    """Refuse anything but an integer (a bool is not one), naming the argument and what it should be."""
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{name} must be {what}, got {value!r}")


EPOCH_MS = "integer UTC epoch milliseconds"


def tz_in_force() -> str:
    """The process's zone as a reader of a refusal needs it: the TZ variable and what it resolves to."""
    return f"TZ={os.environ.get('TZ', '(unset)')} {time.strftime('%Z%z')}"


def utc_now_ms() -> int:
    """The box wall clock, UTC epoch ms: journaled beside trusted now, never acted on by itself."""
    return time.time_ns() // 1_000_000


def boot_clock() -> float:
    """Seconds on CLOCK_BOOTTIME where the OS has it (a suspended box keeps counting), else monotonic."""
    clock = getattr(time, "CLOCK_BOOTTIME", None)
    return time.clock_gettime(clock) if clock is not None else time.monotonic()


def read_boot_id(path: Path = BOOT_ID_PATH) -> str | None:
    """The kernel's per-boot id: a different value means the boot clock restarted."""
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


@dataclass(frozen=True)
class Anchor:
    """A point where UTC was known: ``utc_ms`` (a lower bound) at ``mono_ms`` on the boot clock of ``boot_id``."""

    boot_id: str | None
    mono_ms: int
    utc_ms: int
    skew_ms: int | None
    """Console UTC minus the box wall clock, measured at the console's confirmation in this boot; None once
    the anchor was carried across a reboot, where the box wall clock has no vote."""

    def __post_init__(self) -> None:
        require_int(EPOCH_MS, utc_ms=self.utc_ms)
        require_int("integer milliseconds on the boot clock", mono_ms=self.mono_ms)
        if self.skew_ms is not None:
            require_int("integer milliseconds or null", skew_ms=self.skew_ms)


@dataclass
class Deadline:
    """One armed timer, keyed by the console's timer id."""

    timer_id: str
    deadline_ms: int
    action: TimerAction
    state: TimerState = "armed"
    warned: list[int] = field(default_factory=list)
    shutdown_at_ms: int | None = None
    """Trusted now at which a stopped box powers off (shutdown / destroy, after the grace)."""
    stop_arms: Outcome | None = None

    def __post_init__(self) -> None:
        """The state file and the console's ``set_deadline`` reach here unchecked by a type checker: a word
        this watchdog cannot act on is refused, naming the ones it knows."""
        if self.action not in TIMER_ACTIONS:
            raise ValueError(f"action {self.action!r}: expected one of {', '.join(TIMER_ACTIONS)}")
        if self.state not in TIMER_STATES:
            raise ValueError(f"state {self.state!r}: expected one of {', '.join(TIMER_STATES)}")
        require_int(EPOCH_MS, deadline_ms=self.deadline_ms)


@dataclass(frozen=True)
class Clocks:
    """One reading of every clock, journaled with each refusal and action so the console shows why."""

    trusted_ms: int
    box_clock_ms: int
    box_clock_corrected_ms: int | None
    carried: bool
    """True when trusted now was carried across a reboot (no console confirmation in this boot yet)."""

    def detail(self) -> dict[str, Any]:
        return asdict(self)


class Watchdog:
    """Deadlines on the box, keyed by the console's timer id. ``tick()`` is called at about 1 Hz."""

    def __init__(
        self,
        home: Path,
        journal: Callable[[dict[str, Any]], None],
        stop_arms: Callable[[], Outcome],
        shutdown: Callable[[], Outcome],
        now_ms: Callable[[], int] = utc_now_ms,
        monotonic: Callable[[], float] = boot_clock,
        boot_id: Callable[[], str | None] = read_boot_id,
        shutdown_grace_s: float = 120.0,
    ):
        self.path = Path(home) / STATE_FILE
        self._journal = journal
        self._stop_arms = stop_arms
        self._shutdown = shutdown
        self._now_ms = now_ms
        self._mono = monotonic
        self._boot_id = boot_id
        self.shutdown_grace_s = shutdown_grace_s
        self._anchor: Anchor | None = None
        self._timers: dict[str, Deadline] = {}
        self._saved_mono_ms = 0
        self._retry_at: dict[str, float] = {}  # after a failed action, in boot-clock seconds
        self._logged_at: dict[str, float] = {}  # refusal-log throttle, in boot-clock seconds

    # -- time --------------------------------------------------------------------------------------
    def _mono_ms(self) -> int:
        return int(self._mono() * 1000)

    def _trusted_ms(self, anchor: Anchor, mono_ms: int) -> int:
        return anchor.utc_ms + (mono_ms - anchor.mono_ms)

    def clocks(self) -> Clocks:
        """Trusted now and the box wall clock (raw, and corrected where the console measured its offset)."""
        if self._anchor is None:
            raise RuntimeError("no UTC anchor: the watchdog holds no deadline the console armed")
        wall = self._now_ms()
        skew = self._anchor.skew_ms
        return Clocks(
            self._trusted_ms(self._anchor, self._mono_ms()),
            wall,
            None if skew is None else wall + skew,
            skew is None,
        )

    def confirm_utc(self, console_t_ms: int) -> None:
        """The console's UTC, read just before it sent a probe: the new anchor while a deadline is live;
        nothing to do otherwise (``arm`` anchors afresh)."""
        require_int(EPOCH_MS, console_t_ms=console_t_ms)
        if self._live():
            self._reanchor(console_t_ms)
            self._save()

    def _reanchor(self, console_now_ms: int) -> int:
        """Anchor trusted now on the console's UTC and measure the box wall clock's offset anew; returns
        the box wall clock's reading.

        The latest confirmation wins, even when it is lower than the count it replaces (a message that
        took long to arrive only makes the stop later). A carried anchor or a shift beyond the guard is
        journaled per live deadline, so the console sees how far off the box's count was."""
        before = self.clocks() if self._anchor is not None else None
        wall = self._now_ms()
        self._anchor = Anchor(self._boot_id(), self._mono_ms(), console_now_ms, console_now_ms - wall)
        if before is not None and (before.carried or abs(before.trusted_ms - console_now_ms) > GUARD_MS):
            for entry in self._live():
                self._emit(
                    entry,
                    "armed",
                    {
                        "reconfirmed": True,
                        "console_now_ms": console_now_ms,
                        "trusted_before_ms": before.trusted_ms,
                        "clocks": self.clocks().detail(),
                    },
                )
        return wall

    # -- persistence -----------------------------------------------------------------------------
    def _load(self) -> tuple[Anchor | None, dict[str, Deadline]]:
        try:
            data = json.loads(self.path.read_text())
            if data.get("version") == 1:
                return self._from_version_1(data.get("timers", {}))
            anchor = Anchor(**data["anchor"]) if data.get("anchor") else None
            timers = {k: Deadline(**v) for k, v in data.get("timers", {}).items()}
            if timers and anchor is None:
                raise ValueError("deadlines without a UTC anchor")
            return anchor, timers
        except FileNotFoundError:
            return None, {}
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            # Fail closed: a damaged state file must not silently disarm a deadline.
            raise RuntimeError(f"{self.path}: cannot read watchdog state ({exc}); fix or remove it") from exc

    def _from_version_1(self, timers: dict[str, dict[str, Any]]) -> tuple[Anchor | None, dict[str, Deadline]]:
        """A state file of an older agent (replaced while a timer was armed): its countdown ran on another
        clock, so trusted now restarts here from the latest console UTC it recorded, as after a reboot."""
        grace_ms = int(self.shutdown_grace_s * 1000)
        deadlines = {
            k: Deadline(
                v["timer_id"],
                v["deadline_ms"],
                v["action"],
                v["state"],
                list(v["warned"]),
                v["deadline_ms"] + grace_ms if v["state"] == "arms-stopped" else None,
                v.get("stop_arms"),
            )
            for k, v in timers.items()
        }
        console_utc = [v["armed_ms"] + v["skew_ms"] for v in timers.values()]
        anchor = Anchor(self._boot_id(), self._mono_ms(), max(console_utc), None) if console_utc else None
        return anchor, deadlines

    def _save(self) -> None:
        """Write the state, re-basing the anchor onto trusted now: the last-known-good UTC. A failed write
        (disk full) raises and is tried again at the next checkpoint; the old file stays whole."""
        mono = self._mono_ms()
        self._saved_mono_ms = mono
        if self._anchor is not None:
            self._anchor = replace(self._anchor, mono_ms=mono, utc_ms=self._trusted_ms(self._anchor, mono))
        state = {
            "version": STATE_VERSION,
            "anchor": None if self._anchor is None else asdict(self._anchor),
            "timers": {k: asdict(v) for k, v in self._timers.items()},
        }
        tmp = self.path.with_name(self.path.name + ".tmp")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with open(fd, "w") as f:
            json.dump(state, f, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    def _emit(self, entry: Deadline, state: DeadlineState, detail: dict[str, Any] | None = None) -> None:
        self._journal(
            {
                "kind": "deadline",
                "timer_id": entry.timer_id,
                "state": state,
                "deadline_ms": entry.deadline_ms,
                "remaining_s": (entry.deadline_ms - self.clocks().trusted_ms) / 1000,
                "action": entry.action,
                "detail": detail or {},
            }
        )

    def _live(self) -> list[Deadline]:
        return [e for e in self._timers.values() if e.state in LIVE]

    # -- what the console asks (docs/timers.md) ------------------------------------------------------
    def restore(self) -> list[TimerStatus]:
        """Re-arm from the state file at daemon start; after a reboot, from the last-known-good UTC."""
        self._anchor, self._timers = self._load()
        rebooted = False
        if self._anchor is not None:
            boot, mono = self._boot_id(), self._mono_ms()
            rebooted = self._anchor.boot_id != boot or mono < self._anchor.mono_ms
            if rebooted:  # the boot clock restarted: count on from the last-known-good UTC, from now
                self._anchor = Anchor(boot, mono, self._anchor.utc_ms, None)
        for entry in self._timers.values():
            if rebooted and entry.state == "arms-stopped":
                entry.state = "fired"  # it was waiting to power the box off; a new boot means that happened
            if entry.state in LIVE:
                self._emit(
                    entry, "armed", {"restored": True, "rebooted": rebooted, "clocks": self.clocks().detail()}
                )
        self._save()
        return self.timers()

    def arm(
        self, timer_id: int | str, deadline_ms: int, action: TimerAction, console_now_ms: int
    ) -> SetDeadlineResult:
        if isinstance(timer_id, bool) or not isinstance(timer_id, (int, str)) or not str(timer_id).strip():
            raise ValueError(f"timer_id must be the console's timer id (int or str), got {timer_id!r}")
        entry = Deadline(str(timer_id), deadline_ms, action)  # checks the action and the deadline
        require_int(EPOCH_MS, console_now_ms=console_now_ms)
        box_now = self._reanchor(console_now_ms)
        self._timers[entry.timer_id] = entry
        self._retry_at.pop(entry.timer_id, None)
        self._save()
        self._emit(entry, "armed", {"skew_ms": console_now_ms - box_now, "box_now_ms": box_now})
        return {"armed": True, "remaining_s": (deadline_ms - console_now_ms) / 1000}

    def cancel(self, timer_id: int | str) -> CancelDeadlineResult:
        entry = self._timers.pop(str(timer_id), None)
        if entry is None:
            return {"cancelled": False}
        self._save()
        self._emit(entry, "cancelled")
        return {"cancelled": True}

    def timers(self) -> list[TimerStatus]:
        """What is armed, with seconds remaining by trusted now (for ``hello``/status)."""
        return [
            {
                "timer_id": e.timer_id,
                "deadline_ms": e.deadline_ms,
                "action": e.action,
                "state": e.state,
                "remaining_s": (e.deadline_ms - self.clocks().trusted_ms) / 1000,
            }
            for e in self._timers.values()
        ]

    def tick(self) -> None:
        if not self._live():
            return
        for key in list(self._timers):
            entry = self._timers[key]
            if self._retry_at.get(key, 0.0) > self._mono():
                continue
            trusted = self.clocks().trusted_ms
            if entry.state == "armed":
                self._warn(entry)
                if trusted >= entry.deadline_ms:
                    self._fire(entry)
                else:
                    self._hold_if_box_clock_says_due(entry)
            elif (
                entry.state == "arms-stopped"
                and entry.shutdown_at_ms is not None
                and trusted >= entry.shutdown_at_ms
            ):
                self._power_off(entry)
        if self._mono_ms() - self._saved_mono_ms >= CHECKPOINT_S * 1000:  # after the actions: a full disk
            self._save()  # must not hold them up

    # -- internals -------------------------------------------------------------------------------
    def _warn(self, entry: Deadline) -> None:
        remaining = (entry.deadline_ms - self.clocks().trusted_ms) / 1000
        crossed = [w for w in WARN_AT_S if remaining <= w and w not in entry.warned]
        if not crossed or remaining <= 0:
            return
        entry.warned = sorted(set(entry.warned) | set(crossed))
        self._save()
        self._emit(entry, "warning", {"minutes_before": min(crossed) // 60})

    def _refuse(self, entry: Deadline, now_ms: int, deadline_ms: int, why: str) -> None:
        """Journal a refusal (at most once per ``REFUSAL_LOG_S`` per timer): the clock that said no, and all."""
        if self._logged_at.get(entry.timer_id, -REFUSAL_LOG_S) + REFUSAL_LOG_S > self._mono():
            return
        self._logged_at[entry.timer_id] = self._mono()
        self._emit(
            entry,
            "refused-early",
            {
                "now_ms": now_ms,
                "deadline_ms": deadline_ms,
                "remaining_s": (deadline_ms - now_ms) / 1000,
                "tz": tz_in_force(),
                "why": why,
                "clocks": self.clocks().detail(),
            },
        )

    def _hold_if_box_clock_says_due(self, entry: Deadline) -> None:
        """The box clock says the deadline has passed, trusted now says it is more than the guard away."""
        clocks = self.clocks()
        box_view = (
            clocks.box_clock_corrected_ms
            if clocks.box_clock_corrected_ms is not None
            else clocks.box_clock_ms
        )
        if box_view >= entry.deadline_ms and too_early(clocks.trusted_ms, entry.deadline_ms):
            self._refuse(
                entry,
                clocks.trusted_ms,
                entry.deadline_ms,
                "the box clock says the deadline has passed but trusted now (the console's last confirmed "
                "UTC plus boot-clock time since) says it has not; waiting for trusted now",
            )

    def _guard(self, entry: Deadline) -> bool:
        """Re-read the persisted deadline and refuse an early action; True when the action may go."""
        on_disk = self._load()[1].get(entry.timer_id)
        if on_disk is None:
            self._timers.pop(entry.timer_id, None)
            return False
        clocks = self.clocks()
        if too_early(clocks.trusted_ms, on_disk.deadline_ms):
            self._refuse(
                entry,
                clocks.trusted_ms,
                on_disk.deadline_ms,
                "trusted now is more than the guard before the deadline on disk; refusing to act early",
            )
            return False
        corrected = clocks.box_clock_corrected_ms
        if corrected is not None and too_early(corrected, on_disk.deadline_ms):
            self._refuse(
                entry,
                corrected,
                on_disk.deadline_ms,
                f"the countdown ran out but the box clock, corrected by its offset from the console's, says "
                f"the deadline is more than {GUARD_MS // 1000}s away; waiting until they agree or the "
                "console confirms UTC again",
            )
            return False
        return True

    def _firing_detail(self) -> dict[str, Any]:
        clocks = self.clocks()
        detail: dict[str, Any] = {"clocks": clocks.detail()}
        if clocks.carried:
            detail["late"] = (
                "counted from the last-known-good UTC saved before a reboot: the downtime is not "
                f"counted, so this is late by up to that downtime plus {CHECKPOINT_S:g}s, never early"
            )
        return detail

    def _fire(self, entry: Deadline) -> None:
        if not self._guard(entry):
            return
        why = self._firing_detail()
        self._emit(entry, "firing", why)
        try:
            stopped = self._stop_arms()
        except Exception as exc:  # the box must keep trying; the failure is journaled, not fatal
            self._retry_at[entry.timer_id] = self._mono() + RETRY_S
            self._emit(entry, "firing", why | {"stop_arms_error": f"{type(exc).__name__}: {exc}"})
            return
        if entry.action == "stop-arms":
            entry.state = "fired"
            self._save()
            self._emit(entry, "fired", {"stop_arms": stopped})
            return
        entry.state = "arms-stopped"
        entry.shutdown_at_ms = self.clocks().trusted_ms + int(self.shutdown_grace_s * 1000)
        entry.stop_arms = stopped
        self._save()
        self._emit(entry, "firing", why | {"stop_arms": stopped, "shutdown_in_s": self.shutdown_grace_s})

    def _power_off(self, entry: Deadline) -> None:
        if not self._guard(entry):
            return
        try:
            result = self._shutdown()
        except Exception as exc:
            self._retry_at[entry.timer_id] = self._mono() + RETRY_S
            self._emit(entry, "firing", {"shutdown_error": f"{type(exc).__name__}: {exc}"})
            return
        entry.state = "fired"
        self._save()
        self._emit(entry, "fired", {"stop_arms": entry.stop_arms, "shutdown": result})
