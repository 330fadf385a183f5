"""The box-side hard stop: a monotonic countdown that holds with the console, laptop or network gone.

Why monotonic: the seed's box was destroyed an hour early because a wall-clock cut-off was read in the
host's local zone. The console sends the *seconds remaining* (deadline minus the console's own UTC
clock) and the watchdog counts them down on ``time.monotonic()``, which no time zone, DST change or
wall-clock step can move. The UTC deadline is kept too, for two jobs only: re-arming after a reboot
(monotonic restarts at boot, detected by the kernel's boot_id) and the early-fire guard, which re-reads
the persisted deadline before any action and refuses if the skew-corrected wall clock says more than
``GUARD_MS`` remain. A refusal is journaled with now, deadline, remaining seconds and the zone in force.

State lives in ``<home>/deadline.json`` (written atomically) so a killed or restarted agent re-arms.
At the deadline the arms are stopped at once (results stay in the journal on disk); ``shutdown`` and
``destroy`` then wait ``shutdown_grace_s`` so a live console can pull the journal before the box powers
off. The box never destroys itself: that needs the provider's account key, which never goes on a box;
the console finishes a ``destroy`` through the provider adapter.

Standard library only, Python 3.10+: this file runs on the box.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ACTIONS = ("stop-arms", "shutdown", "destroy")
GUARD_MS = 30_000
"""Any stop or destroy more than this before its deadline is refused, from any path."""
WARN_AT_S = (1800, 600, 60)
"""Warnings at T-30, T-10 and T-1 minutes, journaled once each."""
RETRY_S = 10.0
"""After a failed action the watchdog tries again this much later: a deadline fails closed."""
REFUSAL_LOG_S = 60.0
"""A standing refusal is journaled at most this often, so a wrong clock cannot flood the journal."""
STATE_FILE = "deadline.json"


def too_early(now_ms: int, deadline_ms: int) -> bool:
    """The early-fire rule shared by both enforcers: more than ``GUARD_MS`` before the deadline."""
    return deadline_ms - now_ms > GUARD_MS


def tz_in_force() -> str:
    """The process's zone as a reader of a refusal needs it: the TZ variable and what it resolves to."""
    return f"TZ={os.environ.get('TZ', '(unset)')} {time.strftime('%Z%z')}"


def utc_now_ms() -> int:
    return time.time_ns() // 1_000_000


def read_boot_id() -> str | None:
    """The kernel's per-boot id: a different value means monotonic time restarted."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


class Watchdog:
    """Deadlines on the box, keyed by the console's timer id. ``tick()`` is called at about 1 Hz."""

    def __init__(
        self,
        home: Path,
        journal: Callable[[dict[str, Any]], None],
        stop_arms: Callable[[], dict[str, Any]],
        shutdown: Callable[[], dict[str, Any]],
        now_ms: Callable[[], int] = utc_now_ms,
        monotonic: Callable[[], float] = time.monotonic,
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
        self._timers: dict[str, dict[str, Any]] = {}
        self._not_before: dict[str, float] = {}  # retry / refusal-log throttles, in monotonic seconds

    # -- persistence -----------------------------------------------------------------------------
    def _load(self) -> dict[str, dict[str, Any]]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            # Fail closed: a damaged state file must not silently disarm a deadline.
            raise RuntimeError(f"{self.path}: cannot read watchdog state ({exc}); fix or remove it") from exc
        return dict(data.get("timers", {}))

    def _save(self) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "w") as f:
            json.dump({"version": 1, "timers": self._timers}, f, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    def _emit(self, entry: dict[str, Any], state: str, detail: dict[str, Any] | None = None) -> None:
        self._journal(
            {
                "kind": "deadline",
                "timer_id": entry["timer_id"],
                "state": state,
                "deadline_ms": entry["deadline_ms"],
                "remaining_s": round(self._remaining_s(entry), 3),
                "action": entry["action"],
                "detail": detail or {},
            }
        )

    def _remaining_s(self, entry: dict[str, Any]) -> float:
        return float(entry["mono_deadline"]) - self._mono()

    def _wall_remaining_s(self, entry: dict[str, Any]) -> float:
        return (entry["deadline_ms"] - (self._now_ms() + entry["skew_ms"])) / 1000

    # -- the contract (C4) -----------------------------------------------------------------------
    def restore(self) -> list[dict[str, Any]]:
        """Re-arm from the state file at daemon start; after a reboot, from the UTC deadline."""
        self._timers = self._load()
        boot = self._boot_id()
        for entry in self._timers.values():
            rebooted = entry.get("boot_id") != boot
            if rebooted:
                entry["boot_id"] = boot
                entry["mono_deadline"] = self._mono() + self._wall_remaining_s(entry)
                if entry["state"] == "arms-stopped":
                    # It was waiting to power the box off; a new boot means that happened.
                    entry["state"] = "fired"
            if entry["state"] in ("armed", "arms-stopped"):
                self._emit(entry, "armed", {"restored": True, "rebooted": rebooted})
        self._save()
        return self.timers()

    def arm(self, timer_id: int | str, deadline_ms: int, action: str, console_now_ms: int) -> dict[str, Any]:
        if action not in ACTIONS:
            raise ValueError(f"action {action!r}: expected one of {', '.join(ACTIONS)}")
        if isinstance(timer_id, bool) or not isinstance(timer_id, (int, str)) or not str(timer_id).strip():
            raise ValueError(f"timer_id must be the console's timer id (int or str), got {timer_id!r}")
        for name, value in (("deadline_ms", deadline_ms), ("console_now_ms", console_now_ms)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{name} must be integer UTC epoch milliseconds, got {value!r}")
        box_now = self._now_ms()
        remaining_s = (deadline_ms - console_now_ms) / 1000
        entry = {
            "timer_id": str(timer_id),
            "deadline_ms": deadline_ms,
            "action": action,
            "skew_ms": console_now_ms - box_now,  # console clock minus box clock, measured now
            "armed_ms": box_now,
            "boot_id": self._boot_id(),
            "mono_deadline": self._mono() + remaining_s,
            "warned": [],
            "state": "armed",
        }
        self._timers[entry["timer_id"]] = entry
        self._not_before.pop(entry["timer_id"], None)
        self._save()
        self._emit(entry, "armed", {"skew_ms": entry["skew_ms"], "box_now_ms": box_now})
        return {"armed": True, "remaining_s": remaining_s}

    def cancel(self, timer_id: int | str) -> dict[str, Any]:
        entry = self._timers.pop(str(timer_id), None)
        if entry is None:
            return {"cancelled": False}
        self._save()
        self._emit(entry, "cancelled")
        return {"cancelled": True}

    def timers(self) -> list[dict[str, Any]]:
        """What is armed, with seconds remaining on the monotonic countdown (for ``hello``/status)."""
        return [
            {k: e[k] for k in ("timer_id", "deadline_ms", "action", "state")} | {"remaining_s": self._remaining_s(e)}
            for e in self._timers.values()
        ]

    def tick(self) -> None:
        for key in list(self._timers):
            entry = self._timers[key]
            if self._not_before.get(key, 0.0) > self._mono():
                continue
            if entry["state"] == "armed":
                self._warn(entry)
                if self._remaining_s(entry) <= 0:
                    self._fire(entry)
            elif entry["state"] == "arms-stopped" and self._mono() >= entry["shutdown_mono"]:
                self._power_off(entry)

    # -- internals -------------------------------------------------------------------------------
    def _warn(self, entry: dict[str, Any]) -> None:
        remaining = self._remaining_s(entry)
        crossed = [w for w in WARN_AT_S if remaining <= w and w not in entry["warned"]]
        if not crossed or remaining <= 0:
            return
        entry["warned"] = sorted(set(entry["warned"]) | set(crossed))
        self._save()
        self._emit(entry, "warning", {"minutes_before": min(crossed) // 60})

    def _guard(self, entry: dict[str, Any]) -> bool:
        """Re-read the persisted deadline and refuse an early action; True when the action may go."""
        on_disk = self._load().get(entry["timer_id"])
        if on_disk is None:
            self._timers.pop(entry["timer_id"], None)
            return False
        corrected_now = self._now_ms() + on_disk["skew_ms"]
        if not too_early(corrected_now, on_disk["deadline_ms"]):
            return True
        self._not_before[entry["timer_id"]] = self._mono() + REFUSAL_LOG_S
        self._emit(
            on_disk | {"mono_deadline": entry["mono_deadline"]},
            "refused-early",
            {
                "now_ms": corrected_now,
                "deadline_ms": on_disk["deadline_ms"],
                "remaining_s": (on_disk["deadline_ms"] - corrected_now) / 1000,
                "tz": tz_in_force(),
                "why": "the countdown ran out but the UTC clock says the deadline is more than "
                f"{GUARD_MS // 1000}s away; refusing to act early",
            },
        )
        return False

    def _fire(self, entry: dict[str, Any]) -> None:
        if not self._guard(entry):
            return
        self._emit(entry, "firing")
        try:
            stopped = self._stop_arms()
        except Exception as exc:  # the box must keep trying; the failure is journaled, not fatal
            self._not_before[entry["timer_id"]] = self._mono() + RETRY_S
            self._emit(entry, "firing", {"stop_arms_error": f"{type(exc).__name__}: {exc}"})
            return
        if entry["action"] == "stop-arms":
            entry["state"] = "fired"
            self._save()
            self._emit(entry, "fired", {"stop_arms": stopped})
            return
        entry["state"] = "arms-stopped"
        entry["shutdown_mono"] = self._mono() + self.shutdown_grace_s
        entry["stop_arms"] = stopped
        self._save()
        self._emit(entry, "firing", {"stop_arms": stopped, "shutdown_in_s": self.shutdown_grace_s})

    def _power_off(self, entry: dict[str, Any]) -> None:
        if not self._guard(entry):
            return
        try:
            result = self._shutdown()
        except Exception as exc:
            self._not_before[entry["timer_id"]] = self._mono() + RETRY_S
            self._emit(entry, "firing", {"shutdown_error": f"{type(exc).__name__}: {exc}"})
            return
        entry["state"] = "fired"
        self._save()
        self._emit(entry, "fired", {"stop_arms": entry.get("stop_arms"), "shutdown": result})
