"""The box journal on a real SQLite file: one cursor per consumer, byte-bounded batches, unreadable rows
sent for quarantine, the bound on one event, and releasing a silent consumer under the disk floor."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agents import protocol
from agents.daemon import _encode
from agents.journal import EVENTS_MAX_BYTES, MAX_EVENT_BYTES, TEXT_ROW_CHARS, Journal
from agents.protocol import RAW_HEAD_CHARS

T0 = 1_788_658_020_000
GPU = {
    "power_w": 581.25,
    "power_limit_w": 600.0,
    "enforced_limit_w": 600.0,
    "max_limit_w": 600.0,
    "sm_clock_mhz": 2842.0,
    "util_pct": 99.0,
    "mem_used_mib": 90211.0,
    "mem_total_mib": 97887.0,
    "temp_c": 71.0,
}


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def journal(tmp_path: Path, clock: Clock) -> Journal:
    return Journal(tmp_path / "journal.db", clock=clock)


def _held(journal: Journal) -> list[int]:
    return [e["seq"] for e in journal.events_after(0, 10_000)]


def _warnings(journal: Journal, n: int) -> list[int]:
    return [journal.append("warning", where="test", message=f"m{i}") or 0 for i in range(n)]


def test_an_event_stays_until_every_registered_consumer_acked_it(journal: Journal) -> None:
    a = journal.register("campaign-a", "laptop:/a/state.db")
    assert (a["new"], a["acked_seq"]) == (True, 0)
    journal.register("campaign-b", "laptop:/b/state.db")
    seqs = _warnings(journal, 10)
    assert journal.ack(10, "campaign-a") == 10
    assert _held(journal) == seqs  # b has acked nothing: everything stays
    assert journal.ack(4, "campaign-b") == 4
    assert _held(journal) == seqs[4:]
    assert journal.ack(2, "campaign-b") == 4  # an old ack never moves a cursor back
    # A newly attached database is owed every event still held, and holds them from now on.
    c = journal.register("campaign-c", "desk:/c/state.db")
    assert (c["new"], c["acked_seq"]) == (True, 4) and journal.first_seq() == 5
    assert journal.register("campaign-c", "desk:/moved/state.db")["new"] is False
    assert journal.ack(10, "campaign-b") == 10
    assert _held(journal) == seqs[4:]  # c still needs them
    # Detaching a consumer releases what only it needed; an ack from it afterwards changes nothing.
    assert journal.detach("campaign-c") is True and _held(journal) == []
    assert journal.detach("campaign-c") is False
    assert journal.ack(10, "campaign-c") is None
    assert {c["consumer"] for c in journal.consumers()} == {"campaign-a", "campaign-b"}
    with pytest.raises(ValueError, match="beyond the last journaled seq"):
        journal.ack(11, "campaign-a")
    with pytest.raises(ValueError, match="consumer must be a campaign id"):
        journal.ack(1, "")


def test_with_no_consumer_registered_nothing_is_ever_deleted(journal: Journal) -> None:
    seqs = _warnings(journal, 3)
    journal.register("only", "x")
    journal.ack(3, "only")
    more = _warnings(journal, 2)
    journal.detach("only")
    assert _held(journal) == more  # what the last consumer acked went; the rest waits for the next one
    assert journal.register("next", "y")["acked_seq"] == seqs[-1]


def test_batches_are_bounded_in_bytes_but_always_carry_one_event(journal: Journal) -> None:
    for i in range(40):
        journal.append("gpu_sample", gpus=[{"gpu": g, **GPU} for g in range(8)], t_ms=T0 + i)
    size = len(json.dumps(journal.events_after(0, 1)[0], separators=(",", ":")))
    assert 1400 < size < 1700  # an 8-GPU sample: the size the issue measured (~1.5 kB)
    got = journal.events_after(0, 1000, max_bytes=10 * size)
    assert 8 <= len(got) <= 10
    assert sum(len(json.dumps(e, separators=(",", ":"))) for e in got) <= 10 * size
    assert len(journal.events_after(0, 5, max_bytes=10**9)) == 5  # the count still bounds it
    big = journal.append("warning", where="test", message="x" * 200_000)
    alone = journal.events_after(40, 1000, max_bytes=1000)
    assert [e["seq"] for e in alone] == [big]  # larger than the bound, yet it goes: the link never stalls


def test_unreadable_rows_are_sent_as_malformed_and_the_rows_after_them_still_go(
    journal: Journal, tmp_path: Path
) -> None:
    before = journal.append("warning", where="test", message="before")
    bad = {
        "not json": ("warning", T0, "{oops"),
        "a list": ("warning", T0, "[1, 2]"),
        "NaN": ("gpu_sample", T0, '{"gpus": [{"gpu": 0, "power_w": NaN}]}'),
        "overflow": ("warning", T0, '{"where": "x", "message": 1e999}'),
        "blob": ("warning", T0, b"\xff\x00binary"),
        "text t_ms": ("warning", "yesterday", '{"where": "x", "message": "y"}'),
        "too large": ("warning", T0, '{"message": "' + "z" * MAX_EVENT_BYTES + '"}'),
    }
    with sqlite3.connect(tmp_path / "journal.db") as db:  # another writer, or a damaged disk
        for kind, t_ms, body in bad.values():
            db.execute("INSERT INTO events (t_ms, kind, body) VALUES (?, ?, ?)", (t_ms, kind, body))
    after = journal.append("warning", where="test", message="after")
    assert before is not None and after is not None
    reply = protocol.decode(
        _encode({"id": "e1", "ok": True, "result": {"events": journal.events_after(0, 100)}})
    )
    events = reply["result"]["events"]
    assert [e["seq"] for e in events] == list(range(before, after + 1))
    assert events[0]["message"] == "before" and events[-1]["message"] == "after"
    malformed = dict(zip(bad, events[1:-1], strict=True))
    assert all("malformed" in e for e in malformed.values())
    assert malformed["not json"]["body"] == "{oops" and "not JSON" in malformed["not json"]["malformed"]
    assert "a JSON array, not an object" in malformed["a list"]["malformed"]
    assert "NaN" in malformed["NaN"]["malformed"] and malformed["NaN"]["kind"] == "gpu_sample"
    assert "infinity" in malformed["overflow"]["malformed"]
    assert "stored as blob" in malformed["blob"]["malformed"] and "binary" in malformed["blob"]["body"]
    assert malformed["text t_ms"]["t_ms"] == "yesterday"
    assert (
        len(malformed["too large"]["body"]) == RAW_HEAD_CHARS
        and "exceeds" in malformed["too large"]["malformed"]
    )


def test_rows_carry_the_same_events_as_parsed_events_and_refuse_the_same_rows(
    journal: Journal, tmp_path: Path
) -> None:
    """The ``rows`` form (bodies as text, read by the console's ``row_event``) keeps and refuses exactly what
    the parsed form does, whether the agent judges a row (a blob, a text t_ms, a body too large to send as
    text) or the console does (not JSON, not an object, NaN, 1e999); the rows after the bad ones still go."""
    journal.append("gpu_sample", gpus=[{"gpu": 0, **GPU}], t_ms=T0)
    with sqlite3.connect(tmp_path / "journal.db") as db:
        for kind, t_ms, body in [
            ("warning", T0, "{oops"),
            ("warning", T0, "[1, 2]"),
            ("gpu_sample", T0, '{"gpus": [{"gpu": 0, "power_w": NaN}]}'),
            ("warning", T0, '{"where": "x", "message": 1e999}'),
            ("warning", T0, b"\xff\x00binary"),
            ("warning", "yesterday", '{"where": "x", "message": "y"}'),
            ("warning", T0, ' {"where": "padded", "message": "m"}\n'),
            ("warning", T0, '{"where": "huge", "message": "' + "z" * TEXT_ROW_CHARS + '"}'),
        ]:
            db.execute("INSERT INTO events (t_ms, kind, body) VALUES (?, ?, ?)", (t_ms, kind, body))
    journal.append("warning", where="test", message="after")

    def sent(result: dict[str, Any]) -> dict[str, Any]:
        answer: dict[str, Any] = protocol.decode(_encode({"id": "e", "ok": True, "result": result}))["result"]
        return answer

    parsed = sent({"events": journal.events_after(0, 100)})["events"]
    rows = sent({"events": [], "rows": journal.rows_after(0, 100)})["rows"]
    read = [protocol.row_event(r) for r in rows]
    assert [e["seq"] for e, _ in read] == [e["seq"] for e in parsed] == list(range(1, 11))
    assert sum(type(r) is list for r in rows) == 7  # the blob, the text t_ms and the huge body went parsed
    for (event, text), same in zip(read, parsed, strict=True):
        assert (protocol.event_problem(event) is None) == (protocol.event_problem(same) is None), same["seq"]
        if protocol.event_problem(event) is None:
            assert event == same and (text is None or json.loads(text) == same)
    assert [e["seq"] for e, _ in read if protocol.event_problem(e) is None] == [1, 8, 9, 10]


def test_one_event_is_bounded_so_every_reply_fits_a_protocol_line(journal: Journal) -> None:
    envelope = len(json.dumps({"seq": 2**63, "t_ms": 2**63, "kind": "x" * 64}))
    assert MAX_EVENT_BYTES + envelope < protocol.MAX_LINE  # one event as append writes it (ASCII JSON)
    assert 6 * RAW_HEAD_CHARS + 1000 < protocol.MAX_LINE  # an unreadable row's head, every char escaped
    assert EVENTS_MAX_BYTES + MAX_EVENT_BYTES < protocol.MAX_LINE  # a full batch plus one event past it
    assert 6 * (EVENTS_MAX_BYTES + TEXT_ROW_CHARS) < protocol.MAX_LINE  # the same as rows, every char escaped
    seq = journal.append("bench_result", bench_id="b1", launch_id="L", result={"blob": "r" * MAX_EVENT_BYTES})
    event = journal.events_after(0, 10)[0]
    assert event["seq"] == seq and event["kind"] == "warning" and event["where"] == "journal"
    assert f"a bench_result event of {MAX_EVENT_BYTES + 54} bytes exceeds" in event["message"]


def test_under_the_disk_floor_a_silent_consumer_is_released_with_a_warning(
    journal: Journal, clock: Clock
) -> None:
    journal.register("away", "laptop:/away/state.db")
    journal.register("here", "desk:/here/state.db")
    seqs = _warnings(journal, 6)
    journal.append("gpu_sample", gpus=[{"gpu": 0, **GPU}])
    journal.ack(2, "away")
    clock.now += 30 * 60_000
    journal.ack(7, "here")
    assert journal.release_stale(stale_after_ms=60 * 60_000) == []  # silent 30 min: not yet
    clock.now += 45 * 60_000
    journal.ack(7, "here")  # "here" keeps acking: never released
    [message] = journal.release_stale(stale_after_ms=60 * 60_000)
    assert "released consumer away (laptop:/away/state.db), silent for 75 min" in message
    assert "seq 3..7: 1 gpu_sample, 4 warning" in message
    assert _held(journal) == [] and [c["consumer"] for c in journal.consumers()] == ["here"]
    assert seqs[-1] == 6
    # Nothing goes that no consumer has committed, even when every consumer is silent.
    _warnings(journal, 2)
    clock.now += 10 * 60 * 60_000
    assert journal.release_stale(stale_after_ms=60 * 60_000) == [] and len(_held(journal)) == 2
