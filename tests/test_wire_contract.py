"""The wire contract (agents/protocol.py): declared once, used by both sides, and no value a box sends can
stop ingest. Property-based: arbitrary bytes, JSON and numbers thrown at the decoder, the agent's journal
reader and the console's ingest find no traceback, lose nothing, and quarantine every bad row with a reason.
"""

from __future__ import annotations

import ast
import json
import math
import sqlite3
import typing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents import protocol
from agents.daemon import Agent
from agents.journal import Journal, wire_event
from console.store import Box, Store

ROOT = Path(__file__).resolve().parent.parent
T0 = 1_788_658_020_000

# -- declared once ---------------------------------------------------------------------------------------


def _calls(package: str) -> list[ast.Call]:
    calls = []
    for path in (ROOT / package).rglob("*.py"):
        calls += [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Call)]
    return calls


def _first_text(call: ast.Call) -> str | None:
    first = call.args[0] if call.args else None
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None


def journaled_kinds() -> set[str]:
    """Every event kind the agent journals: ``<journal>.append("kind", ...)``, the watchdog's ``"kind"``
    entries, and the runs' ``f"{op}_result"`` for each op that starts a run."""
    kinds = set()
    for call in _calls("agents"):
        func = call.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "append"
            and isinstance(func.value, ast.Attribute)
            and func.value.attr == "journal"
            and _first_text(call)
        ):
            kinds.add(str(_first_text(call)))
    for path in (ROOT / "agents").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values, strict=True):
                    if (
                        isinstance(key, ast.Constant)
                        and key.value == "kind"
                        and isinstance(value, ast.Constant)
                    ):
                        kinds.add(str(value.value))
    kinds |= {
        f"{op}_result" for op in ("bench", "tripwire", "kldiff", "specdiff")
    }  # agents/jobs.py: f"{job.op}_result"
    kinds.add("launch_state")  # agents/supervisor.py journals it beside the launches row, by keyword
    return kinds


def sent_ops() -> set[str]:
    """Every op the console sends: ``link.command("op", ...)`` and ``channel.call("op", ...)``."""
    ops = set()
    for call in _calls("console"):
        if (
            isinstance(call.func, ast.Attribute)
            and call.func.attr in ("command", "call")
            and _first_text(call)
        ):
            ops.add(str(_first_text(call)))
    return ops


def test_every_event_kind_the_agent_journals_is_declared() -> None:
    kinds = journaled_kinds()
    assert {
        "gpu_sample",
        "deadline",
        "bench_result",
        "command_done",
        "warning",
    } <= kinds  # the scan finds them
    assert kinds <= set(protocol.EVENTS), f"journaled but not declared: {kinds - set(protocol.EVENTS)}"
    assert set(protocol.EVENTS) <= kinds, f"declared but never journaled: {set(protocol.EVENTS) - kinds}"
    assert set(protocol.EVENTS) == set(typing.get_args(protocol.EventKind))


def test_a_state_or_action_outside_its_literal_is_refused_with_the_words_it_may_be() -> None:
    """Launch states, deadline states, timer actions and kernel categories are declared as Literals: a word
    this side cannot act on is quarantined at the edge, and the reason lists the words it knows."""
    good = {"seq": 1, "t_ms": T0, "kind": "launch_state", "launch_id": "l1", "state": "serving"}
    assert protocol.event_problem(good) is None
    found = protocol.event_problem(good | {"state": "servin"})
    assert found is not None and "servin" in found and "starting, serving, failed, stopping, stopped" in found
    deadline = {"seq": 2, "t_ms": T0, "kind": "deadline", "timer_id": "1", "state": "fired", "action": "halt"}
    assert "stop-arms, shutdown, destroy" in (protocol.event_problem(deadline) or "")
    args = {"timer_id": 1, "deadline_ms": T0, "action": "reboot", "console_now_ms": T0}
    assert "action" in (protocol.args_problem("set_deadline", args) or "")
    assert protocol.args_problem("set_deadline", args | {"action": "shutdown"}) is None


def test_every_op_the_console_sends_is_declared_and_the_daemon_answers_exactly_those() -> None:
    ops = sent_ops()
    assert {"hello", "events", "ack", "launch", "kill", "bench"} <= ops
    assert ops <= set(protocol.OPS), f"sent but not declared: {ops - set(protocol.OPS)}"
    answered = {name[len("op_") :] for name in vars(Agent) if name.startswith("op_")}
    assert answered == set(protocol.OPS)


def test_no_other_module_keeps_a_copy_of_the_fields() -> None:
    """The store's old copy of the field lists is gone; every module takes them from the contract."""
    assert not (ROOT / "console" / "store" / "validate.py").exists()
    for path in [*(ROOT / "console").rglob("*.py"), *(ROOT / "agents").rglob("*.py")]:
        if path.name != "protocol.py":
            text = path.read_text()
            assert (
                '"enforced_limit_w", "max_limit_w"' not in text
                and '"prompt_tok_per_s", "running"' not in text
            ), path


def test_the_agents_own_answers_keep_the_contract(tmp_path: Path) -> None:
    """Results as the daemon gives them conform to their declarations (what the console relies on)."""
    agent = Agent(tmp_path, gpu_source="none")
    agent.journal.append("warning", where="test", message="m")
    try:
        for op, args in (
            ("hello", {"consumer": "c1", "label": "test"}),
            ("events", {"after": 0, "limit": 10, "consumer": "c1"}),
            ("ack", {"seq": 1, "consumer": "c1"}),
            ("launches", {}),
            ("probe", {"console_t_ms": T0}),
            ("detach", {"consumer": "c1"}),
        ):
            reply = agent.handle_line(protocol.encode({"id": f"t-{op}", "op": op, "args": args}))
            assert reply["ok"], reply
            assert protocol.check(reply["result"], protocol.OPS[op].result, "result") is None, (
                op,
                reply["result"],
            )
            if op == "events":
                assert all(protocol.event_problem(e) is None for e in reply["result"]["events"])
    finally:
        agent.journal.close()


def test_the_daemon_refuses_arguments_outside_the_contract_before_running_anything(tmp_path: Path) -> None:
    agent = Agent(tmp_path, gpu_source="none")
    try:
        for op, args, why in (
            (
                "launch",
                {"launch_id": "L1", "argv": ["x"], "port": 8000, "ready_timeout_s": 1e308 * 10},
                "finite",
            ),
            ("bench", {"bench_id": "b", "concurrency": 2**64}, "64 bits"),
            ("events", {"after": "0"}, "not an integer"),
            ("kill", {}, "has no launch_id"),
        ):
            line = json.dumps({"v": 1, "id": f"t-{op}", "op": op, "args": args}).encode() + b"\n"
            reply = agent.handle_line(line)
            assert not reply["ok"] and why in reply["error"] and "nothing was run" in reply["error"], reply
        assert agent.journal.command_response("t-launch") is None  # refused before the ledger
    finally:
        agent.journal.close()


# -- hostile values ---------------------------------------------------------------------------------------

_numbers = st.one_of(
    st.integers(),
    st.integers(min_value=2**62, max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
)
_scalars = st.one_of(st.none(), st.booleans(), _numbers, st.text(), st.sampled_from(["\ud800", "a\udfffb"]))
_json = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=30,
)


def _deep(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def _event(kind: str, fields: dict[str, Any]) -> dict[str, Any]:
    return {"v": 1, "t_ms": T0, "kind": kind, **fields}


_kinds = st.sampled_from([*protocol.EVENTS, "from_a_newer_agent"])
_fields_of_kind = st.dictionaries(
    st.sampled_from(
        [
            "gpus",
            "launch_id",
            "state",
            "result",
            "bench_id",
            "seed",
            "power_w",
            "ok",
            "command_id",
            "message",
            "where",
            "probe",
            "line",
            "category",
            "released",
            "timer_id",
            "pid",
            "gpu",
        ]
    ),
    _json,
    max_size=6,
)


@given(st.binary(max_size=300))
def test_decoding_any_bytes_gives_a_message_or_one_protocol_error(line: bytes) -> None:
    try:
        message = protocol.decode(line)
    except protocol.ProtocolError as exc:
        assert "\n" not in str(exc)
    else:
        assert isinstance(message, dict)


def test_decoding_json_nested_beyond_python_is_a_protocol_error() -> None:
    with pytest.raises(protocol.ProtocolError, match="nested"):
        protocol.decode(b'{"v": 1, "x": ' + b"[" * 200_000 + b"]" * 200_000 + b"}")


@given(_kinds, _fields_of_kind)
def test_event_problem_never_raises_and_a_valid_event_can_be_stored(
    kind: str, fields: dict[str, Any]
) -> None:
    event = {"seq": 1, **_event(kind, fields)}
    why = protocol.event_problem(event)
    if why is None:  # what the contract lets through, SQLite and JSON can carry
        json.dumps(event, allow_nan=False).encode("utf-8")
    else:
        assert isinstance(why, str) and why


@given(st.binary(max_size=200), st.one_of(st.binary(max_size=20), st.text(max_size=20)))
def test_the_agent_sends_any_stored_row_as_an_event_or_a_malformed_stub(body: bytes, kind: Any) -> None:
    sent = wire_event(7, T0, kind, body, "text")
    encoded = protocol.encode({"id": "x", "ok": True, "result": {"events": [sent]}})  # never fails to encode
    assert protocol.decode(encoded)["result"]["events"][0]["seq"] == 7
    if "malformed" in sent:
        assert sent["malformed"] and isinstance(sent["body"], str)


def test_rows_the_agent_cannot_decode_go_as_stubs_and_the_rows_after_them_still_go(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal.db")
    try:
        journal.append("warning", where="test", message="before")
        with sqlite3.connect(tmp_path / "journal.db") as raw:
            raw.execute(
                "INSERT INTO events (t_ms, kind, body) VALUES (?, 'warning', CAST(? AS TEXT))",
                (T0, b'{"message": "caf\xe9 \xff"}'),
            )
            raw.execute(
                "INSERT INTO events (t_ms, kind, body) VALUES (?, CAST(? AS TEXT), '{}')", (T0, b"\xfe\xfd")
            )
            raw.execute(
                "INSERT INTO events (t_ms, kind, body) VALUES (?, 'warning', ?)",
                (T0, json.dumps({"x": _deep(900)})),
            )
        journal.append("warning", where="test", message="after")
        events = journal.events_after(0, 100)
    finally:
        journal.close()
    assert [e.get("message") for e in (events[0], events[-1])] == ["before", "after"]
    stubs = events[1:4]
    assert "not valid UTF-8" in stubs[0]["malformed"] and "caf" in stubs[0]["body"]
    assert "kind" in stubs[1]["malformed"] and "UTF-8" in stubs[1]["malformed"]
    assert "nests deeper than 32" in stubs[2]["malformed"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(_kinds, _fields_of_kind), min_size=1, max_size=6))
def test_ingest_of_arbitrary_events_loses_nothing_and_quarantines_with_a_reason(
    tmp_path_factory: pytest.TempPathFactory, rows: list[tuple[str, dict[str, Any]]]
) -> None:
    with Store(tmp_path_factory.mktemp("db") / "state.db", clock=lambda: T0) as store:
        store.boxes.add(Box(name="b1", ssh_user="root", host="127.0.0.1", port=22))
        good = _event("warning", {"where": "test", "message": "good"})
        events = [{"seq": i + 1, **e} for i, e in enumerate([good, *(_event(k, f) for k, f in rows), good])]
        report = store.ingest.batch("b1", events)
        assert report.cursor == len(events) == store.ingest.cursor("b1")
        journal = {r["seq"] for r in store.rows("SELECT seq FROM journal")}
        quarantine = {r["seq"]: r["reason"] for r in store.rows("SELECT seq, reason FROM quarantine")}
        assert journal | set(quarantine) == set(range(1, len(events) + 1)) and not journal & set(quarantine)
        assert {1, len(events)} <= journal  # the events around the bad ones are ingested
        assert all(quarantine.values())


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        (
            {"bench_id": "B1", "launch_id": "L1", "result": {"seed": 99999999999999999999}},
            "outside SQLite's 64 bits",
        ),
        ({"bench_id": "B1", "launch_id": "L1", "result": {"throughput": math.inf}}, "not a finite number"),
        ({"bench_id": "B1", "launch_id": "L1", "result": _deep(40)}, "not an object"),
        ({"bench_id": "B1", "launch_id": "L1", "result": {"x": _deep(40)}}, "nests deeper than 32"),
        ({"bench_id": "B1", "launch_id": "L1", "result": {"model": "\ud800"}}, "not valid UTF-8"),
        ({"bench_id": 7, "launch_id": "L1", "result": {}}, "bench_id is 7, not text"),
        ({"launch_id": "L1", "result": {}}, "has no bench_id"),
    ],
)
def test_a_hostile_bench_result_is_quarantined_with_its_reason(
    fields: dict[str, Any], reason: str, tmp_path: Path
) -> None:
    with Store(tmp_path / "state.db", clock=lambda: T0) as store:
        store.boxes.add(Box(name="b1", ssh_user="root", host="127.0.0.1", port=22))
        events = [
            {"seq": 1, **_event("bench_result", fields)},
            {"seq": 2, **_event("warning", {"message": "after"})},
        ]
        report = store.ingest.batch("b1", events)
        assert report.cursor == 2 and reason in report.quarantined[1] and report.inserted == 1


def test_a_body_with_many_brackets_but_shallow_nesting_goes_as_an_event() -> None:
    """More brackets than MAX_DEPTH is only the cue to walk the nesting: a wide, shallow body is an event."""
    body = json.dumps({"gpus": [{"gpu": i} for i in range(protocol.MAX_DEPTH + 5)]})
    sent = wire_event(3, T0, "gpu_sample", body)
    assert "malformed" not in sent and len(sent["gpus"]) == protocol.MAX_DEPTH + 5
