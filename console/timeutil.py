"""Instants are integer UTC epoch milliseconds; local time appears only at display edges.

The write-up's hard stop fired an hour early because a cut-off was read in the host's local zone. Every
conversion here refuses naive datetimes instead of guessing a zone, so that class of bug cannot enter.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from console.bounds import OutOfBounds, shown
from console.errors import InputError

Clock = Callable[[], int]
"""A source of 'now' in UTC epoch milliseconds; injected wherever time matters so tests control it."""


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class NaiveTimeError(InputError, ValueError):
    """A time without a zone or offset was given where an instant is required."""


def system_clock() -> int:
    """Now, in UTC epoch milliseconds."""
    return time.time_ns() // 1_000_000


INSTANT_MIN_MS = 0
"""1970-01-01 UTC: no deadline or record of the console's lies before it."""
INSTANT_MAX_MS = 253370764800000
"""9999-01-01 UTC: the last instant every zone can still show a date for (``from_ms`` of a later one, in a zone
ahead of UTC, is past datetime's year 9999 and fails)."""


class InstantOutOfRange(OutOfBounds):
    """An instant before 1970 or after 9998: no date the console could show or act on."""


def to_ms(dt: datetime) -> int:
    """Convert an aware datetime to UTC epoch milliseconds; a naive one is refused, and so is one outside
    ``INSTANT_MIN_MS``..``INSTANT_MAX_MS``, which no display (``fmt_utc``, ``fmt_zone``) could show."""
    if dt.tzinfo is None or dt.tzinfo.utcoffset(dt) is None:
        raise NaiveTimeError(
            f"naive datetime {dt.isoformat()} has no time zone; give an offset (+01:00), Z or a zone name"
        )
    try:
        ms = (dt - _EPOCH) // timedelta(milliseconds=1)
    except OverflowError:  # year 1 at a positive offset is before datetime's year 1 in UTC
        ms = INSTANT_MIN_MS - 1
    if not INSTANT_MIN_MS <= ms < INSTANT_MAX_MS:
        raise InstantOutOfRange(
            f"{dt.isoformat()} is outside the years 1970 to 9998 the console holds", "check the date"
        )
    return ms


def from_ms(ms: int, tz: tzinfo = UTC) -> datetime:
    """An aware datetime for an epoch-millisecond instant, in ``tz`` (UTC unless told)."""
    return datetime.fromtimestamp(ms / 1000, tz=tz)


class UnknownZone(InputError, ValueError):
    """A zone name the IANA database does not know."""


def zone(name: str | None) -> tzinfo:
    """A tzinfo for an IANA name; None means the console's own local zone (display only)."""
    if name is None:
        local = datetime.now(UTC).astimezone().tzinfo
        assert local is not None
        return local
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise UnknownZone(
            f"unknown time zone {name!r}", "use an IANA name such as Europe/London or UTC"
        ) from exc


def fmt_utc(ms: int) -> str:
    """``2026-09-06 01:27:00 UTC``."""
    return from_ms(ms).strftime("%Y-%m-%d %H:%M:%S UTC")


def fmt_zone(ms: int, tz: tzinfo) -> str:
    """A wall-clock reading that always carries its offset and abbreviation: ``02:27:00 BST (+01:00)``."""
    d = from_ms(ms, tz)
    off = d.strftime("%z")
    return f"{d.strftime('%Y-%m-%d %H:%M:%S')} {d.tzname()} ({off[:3]}:{off[3:]})"


def fmt_remaining(ms: int) -> str:
    """``3h12m`` / ``42s`` / ``-5m`` for a signed duration in milliseconds."""
    sign = "-" if ms < 0 else ""
    s = abs(ms) // 1000
    d, rem = divmod(s, 86400)
    h, rem = divmod(rem, 3600)
    m, sec = divmod(rem, 60)
    if d:
        return f"{sign}{d}d{h}h{m:02d}m"
    if h:
        return f"{sign}{h}h{m:02d}m"
    if m:
        return f"{sign}{m}m{sec:02d}s"
    return f"{sign}{sec}s"


_DURATION = re.compile(r"^\s*(?:(\d+)d)?\s*(?:(\d+)h)?\s*(?:(\d+)m)?\s*(?:(\d+)s)?\s*$", re.ASCII)
_UNIT_MS = (86_400_000, 3_600_000, 60_000, 1000)

MAX_DURATION_MS = 31 * 86_400_000
"""The longest duration the console reads: a hard stop (the only thing typed as one) further ahead than a
month is almost surely a typo, and ``console.timers`` refuses a deadline beyond it either way."""


def parse_duration(text: str, maximum_ms: int = MAX_DURATION_MS) -> int:
    """``4h30m``, ``90m``, ``1d2h``, ``45s`` to milliseconds, at most ``maximum_ms``. A bare number is refused
    (which unit?), and so are a zero duration and one longer than the maximum (``OutOfBounds``)."""
    m = _DURATION.match(text)
    if not m or not any(m.groups()):
        raise OutOfBounds(f"cannot read duration {shown(text)}", "write it like 4h30m, 90m, 1d2h or 45s")
    if any(len(g.lstrip("0")) > 12 for g in m.groups() if g):  # beyond any maximum; int() of it costs time
        ms = maximum_ms + 1
    else:
        ms = sum(int(g) * unit for g, unit in zip(m.groups(), _UNIT_MS, strict=True) if g)
    if ms <= 0:
        raise OutOfBounds(f"duration {shown(text)} is zero", "give a positive duration")
    if ms > maximum_ms:
        longest = fmt_duration(maximum_ms)
        raise OutOfBounds(
            f"duration {shown(text)} is longer than {longest}, the most the console accepts",
            f"give at most {longest}",
        )
    return ms


def fmt_duration(ms: int) -> str:
    """A positive duration as it is typed: ``31d``, ``4h30m``, ``45s`` (what ``parse_duration`` reads back)."""
    parts, rest = [], ms // 1000
    for unit_s, suffix in ((86_400, "d"), (3600, "h"), (60, "m"), (1, "s")):
        count, rest = divmod(rest, unit_s)
        if count:
            parts.append(f"{count}{suffix}")
    return "".join(parts) or "0s"


def deadline_words(text: str) -> tuple[str | None, str | None]:
    """One typed deadline as ``(at, within)``: written as a duration (``4h30m``), in range or not, it is
    ``--in``; anything else is ``--at``. Both are read and explained by ``console.timers.parse_deadline``,
    so a duration too long is refused as one, never misread as an instant."""
    m = _DURATION.match(text)
    return (None, text) if m and any(m.groups()) else (text, None)


_ZONED = re.compile(
    r"^(?P<dt>\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2})?)\s+(?P<zone>[A-Za-z_]+(?:/[A-Za-z_+\-0-9]+)*)$"
)


def parse_instant(text: str) -> int:
    """Read an instant that names its zone: ``...Z``, ``...+01:00`` or ``... Europe/London``.

    Anything without an offset or zone raises NaiveTimeError: the caller decides how to explain it.
    """
    text = text.strip()
    m = _ZONED.match(text)
    if m:
        naive = datetime.fromisoformat(m["dt"].replace(" ", "T"))
        tz = zone(m["zone"])
        return to_ms(naive.replace(tzinfo=tz))
    iso = text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text
    try:
        dt = datetime.fromisoformat(iso)
    except ValueError as exc:
        raise NaiveTimeError(f"cannot read {text!r} as an instant") from exc
    return to_ms(dt)


def fmt_local(ms: int) -> str:
    """The console's own wall clock at ``ms``, with the offset in force *at that instant* (DST-correct)."""
    return fmt_zone(ms, from_ms(ms).astimezone().tzinfo or UTC)


class AmbiguousWallTimeError(InputError, ValueError):
    """A zone's wall-clock time that happens twice (DST ends) or never (DST starts)."""


_TIME_OF_DAY_ZONED = re.compile(
    r"^(?P<time>\d{1,2}:\d{2}(?::\d{2})?)\s*(?:(?P<z>[Zz])|(?P<offset>[+-]\d{2}:\d{2})"
    r"|\s(?P<zone>[A-Za-z_]+(?:/[A-Za-z_+\-0-9]+)*))$"
)


def next_time_of_day(text: str, now_ms: int) -> int | None:
    """A time of day that names its zone (``01:27Z``, ``02:27+01:00``, ``01:27 Europe/London``) as the next
    such instant after ``now_ms``; None when ``text`` is not of that form (a bare ``01:27`` is not).

    The date is the one in force in that zone at ``now_ms`` (or the next day when that instant has passed),
    so the reading never depends on the zone of the machine doing the reading.
    """
    m = _TIME_OF_DAY_ZONED.match(text.strip())
    if not m:
        return None
    hh, mm, *rest = (int(part) for part in m["time"].split(":"))
    clock = f"{hh:02d}:{mm:02d}:{rest[0] if rest else 0:02d}"
    suffix = "+00:00" if m["z"] else m["offset"] or f" {m['zone']}"
    tz = zone(m["zone"]) if m["zone"] else datetime.fromisoformat(f"2000-01-01T00:00{suffix}").tzinfo
    assert tz is not None
    today = from_ms(now_ms, tz).date()
    for day in (today, today + timedelta(days=1)):
        sep = " " if m["zone"] else "T"
        ms = parse_instant_strict(f"{day.isoformat()}{sep}{clock}{suffix}")
        if ms > now_ms:
            return ms
    raise ValueError(f"{text!r}: no such instant in the next day")  # unreachable for a valid time of day


def parse_instant_strict(text: str, now_ms: int | None = None) -> int:
    """``parse_instant``, but a named-zone time inside a DST change is refused instead of guessed.

    ``2026-10-25 01:30 Europe/London`` happens twice (BST, then GMT an hour later) and
    ``2026-03-29 01:30 Europe/London`` never happens; zoneinfo would silently pick one reading.
    With ``now_ms``, a time of day that names its zone means its next occurrence (``next_time_of_day``).
    """
    if now_ms is not None:
        upcoming = next_time_of_day(text, now_ms)
        if upcoming is not None:
            return upcoming
    ms = parse_instant(text)
    m = _ZONED.match(text.strip())
    if not m:
        return ms
    naive = datetime.fromisoformat(m["dt"].replace(" ", "T"))
    tz = zone(m["zone"])
    first, second = naive.replace(tzinfo=tz, fold=0), naive.replace(tzinfo=tz, fold=1)
    if first.utcoffset() == second.utcoffset():
        return ms
    a, b = sorted((to_ms(first), to_ms(second)))
    if from_ms(a, tz).replace(tzinfo=None) != naive:
        raise AmbiguousWallTimeError(
            f"{text!r} does not exist: the clocks in {m['zone']} jump over it (DST starts); "
            f"give the instant with an offset or in UTC"
        )
    raise AmbiguousWallTimeError(
        f"{text!r} happens twice in {m['zone']} (DST ends): {fmt_utc(a)} or {fmt_utc(b)}; "
        "give the instant with an offset or in UTC"
    )
