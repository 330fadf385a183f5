"""Instants: naive datetimes are refused; zoned input maps to one UTC instant whatever TZ is."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta, timezone

import pytest

from console.timeutil import (
    NaiveTimeError,
    fmt_remaining,
    fmt_zone,
    from_ms,
    parse_duration,
    parse_instant,
    to_ms,
    zone,
)

CUTOFF_MS = 1788658020000  # 2026-09-06T01:27:00Z, the write-up's agreed stop


def test_naive_datetime_is_refused() -> None:
    with pytest.raises(NaiveTimeError, match="no time zone"):
        to_ms(datetime(2026, 9, 6, 1, 27))  # noqa: DTZ001 - the naive value is the point of the test


def test_to_ms_is_exact_and_round_trips() -> None:
    dt = datetime(2026, 9, 6, 1, 27, 0, 999000, tzinfo=UTC)
    assert to_ms(dt) == CUTOFF_MS + 999
    assert from_ms(CUTOFF_MS + 999) == dt
    assert to_ms(datetime(2026, 9, 6, 2, 27, tzinfo=timezone(timedelta(hours=1)))) == CUTOFF_MS


@pytest.mark.parametrize("tz", ["UTC", "Europe/London", "America/Los_Angeles", "Asia/Kolkata"])
def test_parse_instant_does_not_depend_on_tz(tz: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", tz)
    time.tzset()
    try:
        assert parse_instant("2026-09-06T01:27Z") == CUTOFF_MS
        assert parse_instant("2026-09-06T02:27+01:00") == CUTOFF_MS
        assert parse_instant("2026-09-06T02:27 Europe/London") == CUTOFF_MS  # BST in September
        assert parse_instant("2026-09-06 01:27 UTC") == CUTOFF_MS
        for naive in ("2026-09-06T01:27", "01:27", "2026-09-06"):
            with pytest.raises(NaiveTimeError):
                parse_instant(naive)
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    assert os.environ.get("TZ") is None


def test_display_always_carries_offset() -> None:
    assert fmt_zone(CUTOFF_MS, zone("Europe/London")) == "2026-09-06 02:27:00 BST (+01:00)"
    assert fmt_zone(CUTOFF_MS, zone("Asia/Kolkata")).endswith("(+05:30)")
    with pytest.raises(ValueError, match="unknown time zone"):
        zone("Mars/Olympus")


def test_durations() -> None:
    assert parse_duration("4h30m") == (4 * 3600 + 30 * 60) * 1000
    assert parse_duration("1d2h") == 26 * 3600 * 1000
    assert parse_duration("45s") == 45000
    for bad in ("90", "4x", "", "0m"):
        with pytest.raises(ValueError):
            parse_duration(bad)
    assert fmt_remaining(3 * 3600 * 1000 + 12 * 60 * 1000) == "3h12m"
    assert fmt_remaining(-90 * 1000) == "-1m30s"
