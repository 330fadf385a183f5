"""Ingest's shortcut for samples (agents/protocol.py ``plain_sample`` and ``plain_figures``) and the rows form of
the ``events`` reply (``row_event``): neither may change what is kept, refused or said.

The oracle is the contract check itself: over generated batches of gpu and server samples, hostile values
mixed in (NaN, infinities, integers past 64 bits, booleans, text, lone surrogates, unknown fields, missing
keys), every event ``event_problem`` refuses is quarantined with exactly its reason, every other one lands in
the journal and the sample tables, and the journal's text reads back as the event (or, for a sample whose
every field has a column, its rows do). Batches go in both as parsed events and as the rows a box sends,
read as the console reads them and as they travel (each body marked by the agent's ``wire_row``, the reply
encoded and decoded): carrying a body as JSON rather than as a string changes nothing either.
"""

from __future__ import annotations

import itertools
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.journal import wire_row
from agents.protocol import (
    GPU_COLUMNS,
    GPU_ROW_TYPES,
    SERVER_COLUMNS,
    JsonObjectText,
    decode,
    encode,
    event_problem,
    plain_figures,
    plain_sample,
    row_event,
)
from console.fleet.replyjson import loads
from console.store import Box, Store
from console.store.ingest import HELD_IN

_FINITE = st.floats(allow_nan=False, allow_infinity=False, width=64)
_HOSTILE = st.sampled_from(
    [float("nan"), float("inf"), -float("inf"), 2**63, -(2**63) - 1, 10**400, True, "7", "\udc80", [], {}]
)
_FIGURE = st.one_of(st.none(), _FINITE, st.integers(-(2**63), 2**63 - 1), _HOSTILE)
"""A figure: mostly what a box sends (so the shortcut is taken), sometimes what it must never accept."""
_EXTRA = st.dictionaries(
    st.sampled_from(["extra", "note"]), st.one_of(st.integers(), st.text(max_size=3), _HOSTILE), max_size=1
)


def _reading() -> st.SearchStrategy[Any]:
    figures = st.fixed_dictionaries({}, optional=dict.fromkeys(GPU_COLUMNS, _FIGURE))
    gpu = st.one_of(st.integers(0, 7), _HOSTILE)
    shaped = st.builds(lambda g, f, x: {"gpu": g, **f, **x}, gpu, figures, _EXTRA)
    return st.one_of(shaped, shaped, shaped, st.just({"power_w": 1.0}), st.just("not a reading"))


_T_MS = st.one_of(st.integers(1_788_658_020_000, 1_788_658_080_000), _HOSTILE)
_GPU_SAMPLE = st.builds(
    lambda t, gpus, extra: {"kind": "gpu_sample", "t_ms": t, "gpus": gpus, **extra},
    _T_MS,
    st.one_of(st.lists(_reading(), max_size=4), st.lists(_reading(), max_size=4), st.just("nope")),
    _EXTRA,
)
_SERVER_SAMPLE = st.builds(
    lambda t, launch, figures, extra: {
        "kind": "server_sample",
        "t_ms": t,
        "launch_id": launch,
        **figures,
        **extra,
    },
    _T_MS,
    st.one_of(st.just("arm.5e0c81f2.r0"), st.text(max_size=4), _HOSTILE),
    st.fixed_dictionaries({}, optional=dict.fromkeys(SERVER_COLUMNS, _FIGURE)),
    _EXTRA,
)
_BATCH = st.lists(st.one_of(_GPU_SAMPLE, _SERVER_SAMPLE), min_size=1, max_size=12)

_boxes = itertools.count(1)


@pytest.fixture(scope="module")
def store() -> Any:
    with tempfile.TemporaryDirectory() as folder, Store(Path(folder) / "state.db") as opened:
        yield opened


def _new_box(store: Store) -> str:
    name = f"b{next(_boxes)}"
    store.boxes.add(Box(name=name, ssh_user="u", host="127.0.0.1", port=22))
    return name


def _on_box(box: str, batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The batch numbered from seq 1, its launch ids made the box's own: server_samples' key is (launch id, t_ms)
    across boxes, as a launch id names one launch anywhere."""
    own = [
        {**e, "launch_id": f"{box}/{e['launch_id']}"} if type(e.get("launch_id")) is str else e for e in batch
    ]
    return [{**e, "seq": i + 1} for i, e in enumerate(own)]


def _body(event: dict[str, Any]) -> str:
    """What the box journal holds for an event: its fields but the envelope, as JSON (NaN written as such)."""
    return json.dumps({k: v for k, v in event.items() if k not in ("seq", "t_ms", "kind")}, default=repr)


def _figures(event: dict[str, Any]) -> list[tuple[Any, ...]]:
    if event["kind"] == "gpu_sample":
        return sorted((g["gpu"], *map(g.get, GPU_COLUMNS)) for g in event["gpus"])
    return [tuple(map(event.get, SERVER_COLUMNS))]


def _from_rows(store: Store, box: str, event: dict[str, Any]) -> list[tuple[Any, ...]]:
    """A sample held by its rows alone (its journal payload names the table), read back from them."""
    if event["kind"] == "gpu_sample":
        sql = f"SELECT gpu, {', '.join(GPU_COLUMNS)} FROM gpu_samples WHERE box = ? AND t_ms = ? ORDER BY gpu"
        return [tuple(r) for r in store.db.execute(sql, [box, event["t_ms"]]).fetchall()]
    sql = f"SELECT {', '.join(SERVER_COLUMNS)} FROM server_samples WHERE launch_id = ? AND t_ms = ?"
    return [tuple(r) for r in store.db.execute(sql, [event["launch_id"], event["t_ms"]]).fetchall()]


def _check_kept(store: Store, box: str, events: list[dict[str, Any]], report: Any) -> None:
    refused = {e["seq"]: why for e in events if (why := event_problem(e)) is not None}
    assert report.quarantined == refused
    journal = {
        r["seq"]: r["payload"] for r in store.rows("SELECT seq, payload FROM journal WHERE box = ?", [box])
    }
    assert set(journal) == {e["seq"] for e in events} - set(refused)
    accepted = [e for e in events if e["seq"] in journal]
    for event in accepted:
        if journal[event["seq"]] in HELD_IN.values():
            assert _from_rows(store, box, event) == _figures(event)
        else:
            assert json.loads(journal[event["seq"]]) == event
    readings = {(g["gpu"], e["t_ms"]) for e in accepted if e["kind"] == "gpu_sample" for g in e["gpus"]}
    assert store.scalar("SELECT count(*) FROM gpu_samples WHERE box = ?", [box]) == len(readings)
    servers = {(e["launch_id"], e["t_ms"]) for e in accepted if e["kind"] == "server_sample"}
    assert store.scalar("SELECT count(*) FROM server_samples WHERE box = ?", [box]) == len(servers)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=_BATCH)
def test_a_batch_of_parsed_samples_keeps_and_refuses_exactly_what_the_contract_does(
    store: Store, batch: list[dict[str, Any]]
) -> None:
    box = _new_box(store)
    events = _on_box(box, batch)
    report = store.ingest.batch(box, [dict(e) for e in events])
    _check_kept(store, box, events, report)


def _sent(rows: list[list[Any]]) -> list[Any]:
    """Journal rows as a box's ``rows`` reply carries them: each read by the agent (``wire_row``: a body that
    reads as one JSON object goes as JSON), the reply encoded, then decoded as the console's link does."""
    reply = encode({"id": "e", "ok": True, "result": {"events": [], "rows": [wire_row(*r) for r in rows]}})
    assert reply.count(b"\n") == 1  # one message, one line, whatever the bodies hold
    answer: list[Any] = decode(reply, loads)["result"]["rows"]
    return answer


@pytest.mark.parametrize("travelled", [False, True], ids=["rows", "rows-over-the-wire"])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=_BATCH)
def test_a_batch_sent_as_rows_keeps_the_box_text_and_refuses_exactly_what_the_contract_does(
    store: Store, travelled: bool, batch: list[dict[str, Any]]
) -> None:
    box = _new_box(store)
    rows = [[e["seq"], e["t_ms"], e["kind"], _body(e)] for e in _on_box(box, batch)]
    read = [row_event(r) for r in (_sent(rows) if travelled else rows)]
    report = store.ingest.batch(box, [e for e, _ in read], texts=[t for _, t in read])
    events = [e for e, _ in read]
    for event, (_, text) in zip(events, read, strict=True):
        if text is not None:  # the text ingest keeps is the event, byte for byte what the box sent
            assert json.loads(text) == event
    _check_kept(store, box, events, report)


@settings(max_examples=300, deadline=None)
@given(batch=_BATCH)
def test_the_shortcut_never_accepts_a_sample_the_contract_refuses(batch: list[dict[str, Any]]) -> None:
    for event in ({**e, "seq": 1} for e in batch):
        if event["kind"] != "gpu_sample" or not plain_sample(dict(event)):
            continue
        rows = [(0, g["gpu"], event["t_ms"], *map(g.get, GPU_COLUMNS)) for g in event["gpus"]]
        if plain_figures(rows, GPU_ROW_TYPES):
            assert event_problem(event) is None, event


_JSON_OBJECT = st.dictionaries(
    st.text(max_size=5),
    st.recursive(
        st.none() | st.booleans() | st.integers() | _FINITE | st.text(max_size=5),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
        max_leaves=8,
    ),
    max_size=5,
)


@settings(max_examples=300, deadline=None)
@given(fields=_JSON_OBJECT, pad=st.sampled_from(["", " ", "\n", " \t "]), kind=st.text(max_size=8))
def test_a_row_reads_as_its_event_and_its_text_as_the_same_event(
    fields: dict[str, Any], pad: str, kind: str
) -> None:
    body = pad + json.dumps(fields, indent=None if pad == "" else 1) + pad
    event, text = row_event([5, 1_788_658_020_000, kind, body])
    expected = {**fields, "seq": 5, "t_ms": 1_788_658_020_000, "kind": kind}
    assert event == expected
    if {"seq", "t_ms", "kind"} & fields.keys():
        assert text is None  # the body's own envelope key: ingest encodes the event, the envelope winning
    else:
        assert text is not None and json.loads(text) == expected


@settings(max_examples=300, deadline=None)
@given(
    body=st.one_of(
        st.builds(
            lambda fields, pad, indent: pad + json.dumps(fields, indent=indent) + pad,
            _JSON_OBJECT,
            st.sampled_from(["", " ", "\n", "\r\n", " \t "]),
            st.sampled_from([None, 1]),
        ),
        st.builds(lambda fields: json.dumps(fields).replace("0", "NaN", 1), _JSON_OBJECT),
        st.text(max_size=40),
    ),
    kind=st.text(max_size=8),
)
def test_a_body_travels_as_json_only_where_it_reads_back_as_the_same_event(body: str, kind: str) -> None:
    """The agent carries a body as JSON (no second decode on the console) only where the console's decoder reads
    it as one object, strictly and on one line; the event the console reads is the one its text would give,
    and what the text path refuses (not JSON, NaN, not an object) goes as text, refused the same way."""
    row: list[Any] = [7, 1_788_658_020_000, kind, body]
    wired = wire_row(*row)
    (travelled,) = _sent([row])
    as_text, _ = row_event(list(row))
    as_sent, text = row_event(travelled)
    assert as_sent == as_text
    if type(wired[3]) is JsonObjectText:
        assert "\n" not in body and "malformed" not in as_text
        assert type(travelled[3]) is dict and text is None  # ingest encodes it only if it keeps its text
    else:
        assert travelled == row  # sent as the text the box holds, for the console to judge as before


def test_bodies_strict_json_lacks_or_spread_over_lines_travel_as_text() -> None:
    """NaN and Infinity (Python reads them, strict JSON has none), a newline (it would end the reply's line) and
    nesting past the bound go as the box's text; a body holding the reply's own placeholder goes as JSON."""
    for body in (
        '{"power_w": NaN}',
        '{"power_w": -Infinity}',
        '{\n"a": 1}',
        '{"a":' + "[" * 40 + "]" * 40 + "}",
    ):
        assert type(wire_row(3, 1, "warning", body)[3]) is str, body
    mark = '{"note": "\\u0000rows\\u0000"}'
    assert type(wire_row(3, 1, "warning", mark)[3]) is JsonObjectText
    (travelled,) = _sent([[3, 1, "warning", mark]])
    assert travelled == [3, 1, "warning", {"note": "\x00rows\x00"}]


@settings(max_examples=200, deadline=None)
@given(body=st.text(max_size=40))
def test_a_row_whose_body_is_no_object_is_malformed_with_its_reason_and_text(body: str) -> None:
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):
        parsed = None
    event, text = row_event([9, 1_788_658_020_000, "warning", body])
    if isinstance(parsed, dict):
        assert "malformed" not in event
        return
    assert text is None
    assert event["seq"] == 9 and event["body"] == body and event["malformed"].startswith("body is")
    assert event_problem(event) == f"the box journal row is unreadable: {event['malformed']}"


def test_rows_that_are_not_journal_rows_are_refused_not_read() -> None:
    """A broken agent's row: the wrong length goes to ingest as it is (it has no seq, so the batch is refused);
    a row of four with the wrong types becomes malformed under its seq, so the rows after it still land."""
    assert row_event([1, 2, 3]) == ([1, 2, 3], None)
    event, text = row_event([4, "soon", "warning", "{}"])
    assert text is None and event["seq"] == 4 and "is not a journal row" in event["malformed"]


def test_a_body_nested_past_the_bound_is_malformed() -> None:
    deep = "[" * 40 + "]" * 40
    event, _ = row_event([3, 1, "warning", '{"a":' + deep + "}"])
    assert "nests deeper than" in event["malformed"]
    event, _ = row_event([3, 1, "warning", "[" * 100_000])
    assert event["malformed"].startswith("body is")
