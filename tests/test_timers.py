"""Hard-stop timers, console side: reading, refusing, guarding and enforcing, under any TZ.

Every test here runs once per process zone in ``TZS`` (the ``process_tz`` fixture sets TZ and calls
``time.tzset()``); the clocks are injected, so the instants asserted must come out identical under
each. The write-up's incident is the reference: the agreed stop was 01:27 UTC, in BST; a script read
"01:27" in local time and destroyed the box at 00:27 UTC.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeGuard

import pytest

from agents.protocol import Deadline, TimerAction, event_problem
from agents.watchdog import Watchdog
from console.store import Box, Store
from console.timers import (
    PULL_GRACE_MS,
    RETRY_MS,
    EarlyFireError,
    Enforcer,
    TimerInputError,
    bench_refusal,
    cancel,
    guard,
    parse_deadline,
    readings,
)
from console.timeutil import fmt_local, parse_instant
from ops.providers import for_box
from ops.providers.vast import VastProvider
from tests.support.fake_vast import FakeVast, FakeVastServer

TZS = ["Europe/London", "America/Los_Angeles", "Asia/Kolkata", "UTC"]
CUTOFF_MS = 1788658020000  # 2026-09-06T01:27:00Z, the write-up's agreed stop (02:27 BST)
SEED_MISREAD_MS = CUTOFF_MS - 3_600_000  # 00:27 UTC: when the write-up's box was destroyed
NOW_MS = parse_instant("2026-09-05T22:15Z")  # the operator arms it 3h12m before
MIN = 60_000


@pytest.fixture(autouse=True, params=TZS)
def process_tz(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Run the test with the console process in this TZ; the results must not change."""
    monkeypatch.setenv("TZ", request.param)
    time.tzset()
    yield request.param
    monkeypatch.undo()
    time.tzset()


class FakeClock:
    """An injected clock (UTC epoch ms) the test moves by hand; also a monotonic source in seconds."""

    def __init__(self, now_ms: int):
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms

    def mono(self) -> float:
        return self.now_ms / 1000

    def advance(self, ms: int) -> None:
        self.now_ms += ms


def add_probe(store: Store, box: str, tz: str, t_ms: int = NOW_MS - 60_000) -> None:
    store.checks.add_probe(box, {"t_ms": t_ms, "console_t_ms": t_ms, "hostname": box, "tz": tz, "gpus": []})


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "state.db") as s:
        s.boxes.add(Box(name="pro-a", ssh_user="root", host="203.0.113.7", port=22022))
        add_probe(s, "pro-a", "Europe/London")
        yield s


# -- reading the deadline ------------------------------------------------------------------------
@pytest.mark.parametrize("typed", ["01:27", "2026-09-06 01:27", "2026-09-06T01:27"])
def test_the_seeds_cutoff_typed_without_a_zone_is_refused_with_both_readings(typed: str) -> None:
    with pytest.raises(TimerInputError) as err:
        parse_deadline(typed, None, now_ms=NOW_MS, box_tz="Europe/London")
    text = str(err.value)
    assert "names no time zone" in text
    assert "read as UTC: 2026-09-06 01:27:00 UTC" in text
    # The box's zone reading is the write-up's misreading, shown an hour early, before anything is armed.
    assert (
        "read in the box's zone (Europe/London): 2026-09-06 00:27:00 UTC = 2026-09-06 01:27:00 BST (+01:00)"
        in text
    )
    assert "--at 2026-09-06T01:27Z" in text and "--at '2026-09-06 01:27 Europe/London'" in text


def test_box_zone_unknown_is_said_never_guessed(store: Store) -> None:
    with pytest.raises(TimerInputError) as err:
        parse_deadline("01:27", None, now_ms=NOW_MS, box_tz=None)
    assert "read in the box's zone (unknown): box zone unknown" in str(err.value)
    assert dict(readings(CUTOFF_MS, NOW_MS, None))["box"] == "box zone unknown"
    assert store.timers.box_tz("pro-a") == "Europe/London" and store.timers.box_tz("never-probed") is None
    add_probe(store, "pro-a", "BST", t_ms=NOW_MS)  # an abbreviation is not a zone
    assert store.timers.box_tz("pro-a") is None


@pytest.mark.parametrize(
    "typed",
    [
        "2026-09-06T01:27Z",
        "2026-09-06T02:27+01:00",
        "2026-09-06 02:27 Europe/London",
        "2026-09-06 01:27 UTC",
        "2026-09-05T18:27-07:00",
        "2026-09-06 06:57 Asia/Kolkata",
    ],
)
def test_the_cutoff_with_its_zone_is_0127_utc_never_0027(typed: str) -> None:
    deadline = parse_deadline(typed, None, now_ms=NOW_MS, box_tz="Europe/London")
    assert deadline == CUTOFF_MS != SEED_MISREAD_MS


def test_durations_and_the_confirmation_readings() -> None:
    assert parse_deadline(None, "3h12m", now_ms=NOW_MS, box_tz=None) == CUTOFF_MS
    shown = dict(readings(CUTOFF_MS, NOW_MS, "Europe/London"))
    assert shown["UTC"] == "2026-09-06 01:27:00 UTC"
    assert shown["box"] == "2026-09-06 02:27:00 BST (+01:00) [Europe/London]"
    assert shown["remaining"] == "3h12m"
    assert shown["console"] == fmt_local(CUTOFF_MS)
    offsets = {
        "Europe/London": "(+01:00)",
        "America/Los_Angeles": "(-07:00)",
        "Asia/Kolkata": "(+05:30)",
        "UTC": "(+00:00)",
    }
    assert shown["console"].endswith(offsets[os.environ["TZ"]])


@pytest.mark.parametrize(
    ("at", "within", "why"),
    [
        ("2026-09-05T21:00Z", None, "in the past"),
        ("2026-09-05T22:15:30Z", None, "only 30s away"),
        ("2026-11-06T01:27Z", None, "more than 31 days"),
        ("2026-10-25 01:30 Europe/London", None, "happens twice"),
        ("2026-03-29 01:30 Europe/London", None, "does not exist"),
        ("2026-09-06 01:27 BST", None, "unknown time zone"),
        ("tomorrow", None, "cannot read it as a time"),
        (None, "90", "write it like 4h30m"),
        (None, None, "exactly one of"),
    ],
)
def test_bad_deadlines_are_refused_with_the_reason(at: str | None, within: str | None, why: str) -> None:
    with pytest.raises(TimerInputError, match=why):
        parse_deadline(at, within, now_ms=NOW_MS, box_tz="Europe/London")


@pytest.mark.parametrize(
    ("now", "within", "expected"),
    [  # a duration across a DST change is elapsed time, not wall-clock arithmetic
        ("2026-10-24T23:00Z", "4h", "2026-10-25T03:00Z"),  # Europe/London leaves BST at 01:00 UTC
        ("2026-11-01T06:00Z", "6h", "2026-11-01T12:00Z"),  # America/Los_Angeles leaves PDT at 09:00 UTC
        ("2026-03-29T00:30Z", "1h", "2026-03-29T01:30Z"),  # Europe/London enters BST at 01:00 UTC
    ],
)
def test_durations_across_a_dst_change(now: str, within: str, expected: str) -> None:
    assert parse_deadline(None, within, now_ms=parse_instant(now), box_tz="Europe/London") == parse_instant(
        expected
    )


def test_zone_names_across_a_dst_change() -> None:
    now = parse_instant("2026-10-24T23:00Z")
    # 02:30 London on 25 Oct is after the change: GMT, so 02:30 UTC; 03:00 Los Angeles on 1 Nov is PST.
    assert parse_deadline("2026-10-25 02:30 Europe/London", None, now_ms=now, box_tz=None) == parse_instant(
        "2026-10-25T02:30Z"
    )
    assert dict(readings(parse_instant("2026-10-25T02:30Z"), now, "Europe/London"))["box"].startswith(
        "2026-10-25 02:30:00 GMT (+00:00)"
    )
    later = parse_instant("2026-10-31T12:00Z")
    assert parse_deadline(
        "2026-11-01 03:00 America/Los_Angeles", None, now_ms=later, box_tz=None
    ) == parse_instant("2026-11-01T11:00Z")


# -- the early-fire guard ------------------------------------------------------------------------
def test_guard_refuses_an_hour_early_and_logs_why(store: Store) -> None:
    timer = store.timers.add("pro-a", CUTOFF_MS, "destroy", "2026-09-06T01:27Z", now_ms=NOW_MS)
    with pytest.raises(EarlyFireError, match="3600s before the deadline 2026-09-06 01:27:00 UTC"):
        guard(store, timer.id, now_ms=SEED_MISREAD_MS)
    refused = [e for e in store.timers.log_for(timer.id) if e["event"] == "refused-early"]
    assert len(refused) == 1
    entry = refused[0]
    assert entry["now_ms"] == SEED_MISREAD_MS and entry["deadline_ms"] == CUTOFF_MS
    assert entry["remaining_s"] == 3600.0
    assert entry["tz"] is not None and entry["tz"].startswith(f"TZ={os.environ['TZ']} ")
    assert entry["detail"]["now_utc"] == "2026-09-06 00:27:00 UTC"
    assert guard(store, timer.id, now_ms=CUTOFF_MS - 29_000).id == timer.id  # within 30 s: allowed
    cancel(store, timer.id, now_ms=NOW_MS)
    with pytest.raises(EarlyFireError, match="cancelled"):
        guard(store, timer.id, now_ms=CUTOFF_MS)


def test_guard_rereads_a_moved_deadline(store: Store) -> None:
    timer = store.timers.add("pro-a", CUTOFF_MS, "stop-arms", "x", now_ms=NOW_MS)
    with store.atomic() as db:  # the deadline moved an hour later after the caller read it
        db.execute("UPDATE timers SET deadline_ms = ? WHERE id = ?", [CUTOFF_MS + 3_600_000, timer.id])
    with pytest.raises(EarlyFireError):
        guard(store, timer.id, now_ms=CUTOFF_MS)


def test_no_new_benches_within_ten_minutes_of_a_stop(store: Store) -> None:
    store.timers.add("pro-a", CUTOFF_MS, "stop-arms", "x", now_ms=NOW_MS)
    assert bench_refusal(store, "pro-a", CUTOFF_MS - 11 * MIN) is None
    reason = bench_refusal(store, "pro-a", CUTOFF_MS - 9 * MIN)
    assert reason is not None and "no new benches" in reason and "2026-09-06 01:27:00 UTC" in reason
    assert bench_refusal(store, "other", CUTOFF_MS - 9 * MIN) is None


# -- the console enforcer, against a real local box ----------------------------------------------
class LocalBox:
    """A real box on this machine for the enforcer: arms are real processes, the watchdog is the real
    ``agents.watchdog`` on a real home directory, the journal is the box's list of unacknowledged events."""

    def __init__(self, home: Path, clock: FakeClock):
        self.clock = clock
        self.arms = [
            subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"]) for _ in range(2)
        ]
        self.unacked: list[dict[str, Any]] = [{"seq": i, "kind": "bench_result"} for i in range(1, 4)]
        self.ingested: list[dict[str, Any]] = []
        self.journal: list[dict[str, Any]] = []
        self.calls: list[tuple[str, int]] = []
        self.pull_error: str | None = None
        self.watchdog = Watchdog(
            home,
            self.journal.append,
            self._kill_arms,
            lambda: {"powered_off": True},
            now_ms=clock,
            monotonic=clock.mono,
            boot_id=lambda: "boot-1",
        )

    def _kill_arms(self) -> dict[str, Any]:
        for p in self.arms:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                p.wait(10)
        return {"stopped": [p.pid for p in self.arms]}

    async def arm_watchdog(
        self, box: str, timer_id: int, deadline_ms: int, action: TimerAction, console_now_ms: int
    ) -> dict[str, Any]:
        self.calls.append(("arm_watchdog", self.clock()))
        return dict(self.watchdog.arm(timer_id, deadline_ms, action, console_now_ms))

    async def cancel_watchdog(self, box: str, timer_id: int) -> dict[str, Any]:
        self.calls.append(("cancel_watchdog", self.clock()))
        return dict(self.watchdog.cancel(timer_id))

    async def pull(self, box: str) -> dict[str, Any]:
        self.calls.append(("pull", self.clock()))
        if self.pull_error:
            raise ConnectionError(self.pull_error)
        got, self.unacked = self.unacked, []
        self.ingested += got
        return {"events": len(got), "logs": ["launch-1.log"]}

    async def stop_arms(self, box: str) -> dict[str, Any]:
        self.calls.append(("stop_arms", self.clock()))
        return self._kill_arms()

    async def shutdown(self, box: str) -> dict[str, Any]:
        self.calls.append(("shutdown", self.clock()))
        return {"powered_off": True}

    def alive(self) -> int:
        return sum(1 for p in self.arms if p.poll() is None)

    def close(self) -> None:
        self._kill_arms()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW_MS)


@pytest.fixture
def local_box(tmp_path: Path, clock: FakeClock) -> Iterator[LocalBox]:
    box = LocalBox(tmp_path / "agent-home", clock)
    yield box
    box.close()


async def run_until(enforcer: Enforcer, clock: FakeClock, until_ms: int, step_ms: int = 30_000) -> None:
    """Tick the enforcer as a 1 Hz loop would, coarsely far from the deadline and every step near it."""
    while clock.now_ms < until_ms:
        await enforcer.tick()
        remaining = enforcer.store.timers.every()[0].deadline_ms - clock.now_ms
        clock.advance(step_ms if remaining <= 31 * MIN else min(remaining - 31 * MIN, 30 * MIN))
    await enforcer.tick()


def events(store: Store, timer_id: int) -> list[tuple[str, int]]:
    return [(e["event"], e["t_ms"]) for e in store.timers.log_for(timer_id)]


async def test_the_seeds_night_stops_at_0127_utc_with_results_pulled_first(
    store: Store, clock: FakeClock, local_box: LocalBox
) -> None:
    timer = store.timers.add(
        "pro-a",
        parse_deadline("2026-09-06T02:27+01:00", None, now_ms=clock(), box_tz="Europe/London"),
        "stop-arms",
        "2026-09-06T02:27+01:00",
        now_ms=clock(),
    )
    notes: list[str] = []
    enforcer = Enforcer(store, local_box, clock=clock, notify=lambda t, m: notes.append(m))
    await run_until(enforcer, clock, SEED_MISREAD_MS + 5 * MIN)
    assert local_box.alive() == 2, "nothing may stop at 00:27 UTC"
    assert store.timers.get(timer.id).state == "armed"
    await run_until(enforcer, clock, CUTOFF_MS + 2 * MIN)

    log = events(store, timer.id)
    names = [e for e, _ in log]
    assert names[:2] == ["armed", "armed-on-box"]
    at = {e: t for e, t in log}
    assert at["warn-30m"] == CUTOFF_MS - 30 * MIN
    assert at["warn-10m"] == at["pulled-early"] == CUTOFF_MS - 10 * MIN
    assert at["warn-1m"] == CUTOFF_MS - 1 * MIN
    assert at["firing"] == at["pulled"] == at["fired"] == CUTOFF_MS  # the firing instant, under every TZ
    assert names.index("pulled") < names.index("fired")
    assert store.timers.get(timer.id).state == "fired"
    assert local_box.alive() == 0 and local_box.ingested == [
        {"seq": i, "kind": "bench_result"} for i in (1, 2, 3)
    ]
    fired = store.timers.log_for(timer.id)[-1]["detail"]
    assert fired["done"]["stopped"] == [p.pid for p in local_box.arms]
    assert fired["pulled"] == {"events": 0, "logs": ["launch-1.log"]}  # the T-10 pull already had them
    assert len(notes) == 4 and "2026-09-06 01:27:00 UTC" in notes[0]
    # The box's own watchdog counted the same seconds down and would have stopped the arms by itself.
    local_box.watchdog.tick()
    assert [e["state"] for e in local_box.journal if e["state"] != "warning"][-1] == "fired"


async def test_the_box_watchdog_alone_stops_the_arms_when_the_console_is_gone(
    store: Store, clock: FakeClock, local_box: LocalBox
) -> None:
    store.timers.add("pro-a", CUTOFF_MS, "stop-arms", "2026-09-06T01:27Z", now_ms=clock())
    await Enforcer(store, local_box, clock=clock).tick()  # arms the box, then the laptop closes
    while clock.now_ms < CUTOFF_MS + MIN:
        local_box.watchdog.tick()
        if local_box.alive() == 0:
            break
        clock.advance(1000)
    assert clock.now_ms == CUTOFF_MS and local_box.alive() == 0


async def test_two_enforcers_on_one_store_fire_once(
    store: Store, clock: FakeClock, local_box: LocalBox
) -> None:
    timer = store.timers.add("pro-a", CUTOFF_MS, "shutdown", "x", now_ms=clock())
    clock.now_ms = CUTOFF_MS
    a, b = Enforcer(store, local_box, clock=clock), Enforcer(store, local_box, clock=clock, name="tui")
    await asyncio.gather(a.tick(), b.tick())
    assert [c for c, _ in local_box.calls].count("shutdown") == 1
    assert store.timers.get(timer.id).state == "fired"


async def test_cancel_disarms_the_box_watchdog(store: Store, clock: FakeClock, local_box: LocalBox) -> None:
    timer = store.timers.add("pro-a", CUTOFF_MS, "stop-arms", "x", now_ms=clock())
    enforcer = Enforcer(store, local_box, clock=clock)
    await enforcer.tick()
    assert local_box.watchdog.timers()[0]["timer_id"] == str(timer.id)
    cancel(store, timer.id, now_ms=clock())
    await enforcer.tick()
    assert local_box.watchdog.timers() == []
    clock.now_ms = CUTOFF_MS + MIN
    await enforcer.tick()
    assert local_box.alive() == 2
    with pytest.raises(TimerInputError, match="only an armed timer"):
        cancel(store, timer.id, now_ms=clock())


@pytest.fixture
def vast_box(store: Store, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[FakeVast, str]]:
    key = "vk-" + "9" * 40
    fake = FakeVast(api_key=key)
    fake.add("24871932")
    store.boxes.add(
        Box(
            name="vast-1",
            ssh_user="root",
            host="198.51.100.4",
            port=41022,
            provider="vast",
            instance_id="24871932",
        )
    )
    with FakeVastServer(fake) as url:
        monkeypatch.setenv("VAST_API_KEY", key)
        monkeypatch.setenv("VAST_URL", url)
        yield fake, key


def fast_vast(provider: str | None) -> VastProvider:
    assert provider == "vast"
    return VastProvider(backoff_s=0.001, poll_s=0.001, confirm_timeout_s=0.2)


async def test_destroy_is_confirmed_by_the_provider_before_the_box_is_marked(
    store: Store, clock: FakeClock, local_box: LocalBox, vast_box: tuple[FakeVast, str]
) -> None:
    fake, key = vast_box
    fake.fail("DELETE", [429, 503])
    timer = store.timers.add("vast-1", CUTOFF_MS, "destroy", "2026-09-06T01:27Z", now_ms=clock())
    enforcer = Enforcer(store, local_box, clock=clock, providers=fast_vast)
    clock.now_ms = CUTOFF_MS
    await enforcer.tick()
    assert store.timers.get(timer.id).state == "fired"
    box = store.boxes.get("vast-1")
    assert box.status == "destroyed" and box.destroyed_ms == CUTOFF_MS
    done = store.timers.log_for(timer.id)[-1]["detail"]["done"]
    assert done["confirmed"] is True and done["state"] == "gone" and done["requests"] >= 4
    assert fake.count("DELETE") == 3 and "24871932" not in fake.instances
    assert key.encode() not in Path(store.path).read_bytes()
    assert all(key not in str(e) for e in store.timers.log_for(timer.id))


async def test_an_unconfirmed_destroy_is_retried_and_the_box_not_marked(
    store: Store, clock: FakeClock, local_box: LocalBox, vast_box: tuple[FakeVast, str]
) -> None:
    fake, _ = vast_box
    fake.settle_polls = 10_000  # the provider keeps reporting it running
    timer = store.timers.add("vast-1", CUTOFF_MS, "destroy", "x", now_ms=clock())
    enforcer = Enforcer(store, local_box, clock=clock, providers=fast_vast)
    clock.now_ms = CUTOFF_MS
    await enforcer.tick()
    assert store.timers.get(timer.id).state == "firing"
    assert store.boxes.get("vast-1").status != "destroyed"
    assert events(store, timer.id)[-1][0] == "unconfirmed"
    fake.settle_polls = 0
    fake._pending["24871932"] = ("destroy", 0)
    clock.advance(RETRY_MS)
    await enforcer.tick()
    assert store.timers.get(timer.id).state == "fired" and store.boxes.get("vast-1").status == "destroyed"


async def test_destroy_waits_for_the_final_pull_within_a_grace(
    store: Store, clock: FakeClock, local_box: LocalBox, vast_box: tuple[FakeVast, str]
) -> None:
    timer = store.timers.add("vast-1", CUTOFF_MS, "destroy", "x", now_ms=clock())
    enforcer = Enforcer(store, local_box, clock=clock, providers=fast_vast)
    local_box.pull_error = "link down"
    clock.now_ms = CUTOFF_MS
    await enforcer.tick()
    assert store.timers.get(timer.id).state == "firing" and "24871932" in vast_box[0].instances
    clock.advance(RETRY_MS)
    local_box.pull_error = None
    await enforcer.tick()  # the link is back: pulled, then destroyed
    assert local_box.ingested and store.timers.get(timer.id).state == "fired"
    names = [e for e, _ in events(store, timer.id)]
    assert names.index("pull-failed") < names.index("pulled") < names.index("fired")


async def test_destroy_goes_ahead_without_a_pull_after_the_grace(
    store: Store, clock: FakeClock, local_box: LocalBox, vast_box: tuple[FakeVast, str]
) -> None:
    timer = store.timers.add("vast-1", CUTOFF_MS, "destroy", "x", now_ms=clock())
    enforcer = Enforcer(store, local_box, clock=clock, providers=fast_vast)
    local_box.pull_error = "link down"
    clock.now_ms = CUTOFF_MS
    while store.timers.get(timer.id).state == "firing" or clock.now_ms == CUTOFF_MS:
        await enforcer.tick()
        clock.advance(RETRY_MS)
    assert store.timers.get(timer.id).state == "fired"
    fired_at = events(store, timer.id)[-1][1]
    assert CUTOFF_MS + PULL_GRACE_MS <= fired_at <= CUTOFF_MS + PULL_GRACE_MS + RETRY_MS
    assert store.timers.log_for(timer.id)[-1]["detail"]["pulled"] is None


def test_providers_by_box() -> None:
    assert for_box(None).can_destroy is False and for_box("manual").name == "manual"
    with pytest.raises(Exception, match="unknown provider 'runpod'"):
        for_box("runpod")


async def test_a_stop_across_the_end_of_bst_fires_at_its_utc_instant(
    store: Store, local_box: LocalBox
) -> None:
    clock = local_box.clock
    clock.now_ms = parse_instant("2026-10-24T23:30Z")  # 00:30 BST; clocks go back at 01:00 UTC
    deadline = parse_deadline("2026-10-25 02:30 Europe/London", None, now_ms=clock(), box_tz="Europe/London")
    assert deadline == parse_instant("2026-10-25T02:30Z")  # GMT by then, not BST
    timer = store.timers.add("pro-a", deadline, "stop-arms", "2026-10-25 02:30 Europe/London", now_ms=clock())
    await run_until(Enforcer(store, local_box, clock=clock), clock, deadline + 2 * MIN)
    at = dict(events(store, timer.id))
    assert at["fired"] == deadline and local_box.alive() == 0
    assert [c for c, t in local_box.calls if t < deadline - 31 * MIN] == ["arm_watchdog"]


def is_deadline(event: dict[str, Any]) -> TypeGuard[Deadline]:
    return event.get("kind") == "deadline" and event_problem(event) is None


def ingested(entry: dict[str, Any], seq: int) -> Deadline:
    """A watchdog journal entry as the ingest hands it to the timers: numbered, stamped, and checked against
    the protocol's deadline event first."""
    event = entry | {"seq": seq, "t_ms": CUTOFF_MS}
    assert is_deadline(event), event_problem(event)
    return event


def test_the_box_watchdog_events_are_mirrored_into_the_timer_log(
    store: Store, clock: FakeClock, local_box: LocalBox
) -> None:
    stop = store.timers.add("pro-a", CUTOFF_MS, "stop-arms", "x", now_ms=clock())
    destroy = store.timers.add("pro-a", CUTOFF_MS, "destroy", "x", now_ms=clock())
    for timer in (stop, destroy):
        local_box.watchdog.arm(timer.id, CUTOFF_MS, timer.action, clock())
    clock.now_ms = CUTOFF_MS
    local_box.watchdog.tick()
    for seq, event in enumerate(local_box.journal, 1):
        store.timers.on_agent_event("pro-a", ingested(event, seq))
    store.timers.on_agent_event("other-box", ingested(local_box.journal[-1], 99))
    assert store.timers.get(stop.id).state == "fired"  # the box did it with the console away
    assert store.timers.get(destroy.id).state == "armed"  # only the console can finish a destroy
    agent_events = [e["event"] for e in store.timers.log_for(stop.id) if e["enforcer"] == "agent"]
    assert agent_events == ["agent-armed", "agent-firing", "agent-fired"]


async def test_shutdown_of_a_provider_box_is_a_confirmed_stop_at_the_provider(
    store: Store, clock: FakeClock, local_box: LocalBox, vast_box: tuple[FakeVast, str]
) -> None:
    fake, _ = vast_box
    timer = store.timers.add("vast-1", CUTOFF_MS, "shutdown", "x", now_ms=clock())
    clock.now_ms = CUTOFF_MS
    await Enforcer(store, local_box, clock=clock, providers=fast_vast).tick()
    done = store.timers.log_for(timer.id)[-1]["detail"]["done"]
    assert done["confirmed"] is True and done["state"] == "stopped" and fake.count("PUT") == 1
    assert fake.instances["24871932"]["actual_status"] == "stopped"
    assert store.boxes.get("vast-1").status != "destroyed" and "shutdown" not in [
        c for c, _ in local_box.calls
    ]
