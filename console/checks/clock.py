"""Clock: the box clock against the console clock, and the box's time zone shown.

The write-up's hard stop destroyed a box an hour before the agreed stop because the operator's script read
its 01:27 cut-off in the host's local time (BST) rather than UTC. The console keeps every instant in
UTC, but the operator still reads the box's zone, so it is shown with every clock verdict; the skew is
judged against the console clock the request carried (the agent stamps both).
"""

from __future__ import annotations

from typing import Any

from agents.protocol import ProbeReport
from console.checks.probe_view import num
from console.checks.verdict import FAIL, OK, WARN, Verdict

CHECK = "clock"
WARN_S = 2.0
FAIL_S = 60.0


def _span(seconds: float) -> str:
    s = abs(seconds)
    if s < 60:
        return f"{s:.1f} s"
    h, rem = divmod(int(round(s)), 3600)
    m, sec = divmod(rem, 60)
    return f"{h}h{m:02d}m{sec:02d}s" if h else f"{m}m{sec:02d}s"


def _offset(offset_s: int | None) -> str:
    if offset_s is None:
        return "UTC offset unknown"
    sign = "+" if offset_s >= 0 else "-"
    h, m = divmod(abs(offset_s) // 60, 60)
    return f"UTC{sign}{h:02d}:{m:02d}"


def zone_note(probe: ProbeReport) -> str:
    tz = probe.get("tz") or "unknown"
    offset = probe.get("utc_offset_s")
    text = f"box time zone {tz} ({_offset(offset)})"
    if offset:
        text += (
            "; local times on this box are not UTC: a cut-off read in box-local time is "
            f"{_span(offset)} off (the write-up's hard stop fired an hour early from BST vs UTC); "
            "console timers take UTC"
        )
    return text


def check_clock(probe: ProbeReport) -> list[Verdict]:
    box_ms = num(probe.get("t_ms"))
    console_ms = num(probe.get("console_t_ms"))
    numbers: dict[str, Any] = {
        "box_t_ms": probe.get("t_ms"),
        "console_t_ms": probe.get("console_t_ms"),
        "tz": probe.get("tz"),
        "utc_offset_s": probe.get("utc_offset_s"),
        "warn_s": WARN_S,
        "fail_s": FAIL_S,
    }
    if box_ms is None or console_ms is None:
        return [
            Verdict(
                CHECK,
                WARN,
                "clock skew unknown: the probe carries no "
                f"{'box time' if box_ms is None else 'console time'}; {zone_note(probe)}",
                numbers,
            )
        ]
    skew_s = (box_ms - console_ms) / 1000.0
    numbers["skew_s"] = round(skew_s, 3)
    direction = "ahead of" if skew_s > 0 else "behind"
    text = f"box clock {_span(skew_s)} {direction} the console; {zone_note(probe)}"
    if abs(skew_s) > FAIL_S:
        return [
            Verdict(
                CHECK,
                FAIL,
                f"{text}; timers and sample times would be wrong by as much: fix NTP on "
                "the box (`timedatectl set-ntp true`) before any timed run",
                numbers,
            )
        ]
    if abs(skew_s) > WARN_S:
        return [Verdict(CHECK, WARN, f"{text}; more than {WARN_S:.0f} s: check NTP on the box", numbers)]
    return [
        Verdict(
            CHECK,
            OK,
            f"box clock within {WARN_S:.0f} s of the console ({_span(skew_s)}); {zone_note(probe)}",
            numbers,
        )
    ]
