"""The load generator's per-request hot path gives the figures a hand computation gives.

Why these tests: the request bytes come from pre-encoded prompt parts (agents/loadgen/prompts.py) and a
stream's end is read backwards from its tail (agents/loadgen/worker.py ``parse_tail``), both to spend less
of the client's core per request; neither may change a prompt's ids or a request's figures. A real
loopback server streams a known trace (which events arrive together, at which instants), the worker runs
against it unchanged, and every per-request figure is asserted against values worked out by hand. The one
thing faked is the client's clock, read through the wire's and the worker's ``time`` modules: the server
sets it before each write, so the instants are the trace's, not the machine's; no timing is asserted.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.loadgen import metrics, wire, worker
from agents.loadgen.prompts import PromptPlan, Vocab
from agents.loadgen.worker import Record, Target, Worker, WorkerSpec, parse_tail
from testbed.zero_server import SSE_HEAD, chunk

# ---------------------------------------------------------------- prompts from pre-encoded parts


@settings(max_examples=60, deadline=None)
@given(
    size=st.integers(3, 3000),  # two ids at least besides the special one (prompts._check_usable)
    seed=st.integers(0, 2**32),
    input_len=st.integers(1, 1500),
    prefix_len=st.integers(0, 40),
    index=st.integers(0, 10**7),
)
def test_prompt_bytes_are_the_json_of_the_prompts_ids(
    size: int, seed: int, input_len: int, prefix_len: int, index: int
) -> None:
    plan = PromptPlan.build(Vocab(size, frozenset({0}), "test"), seed, input_len, prefix_len)
    ids = plan.ids(index)
    assert len(ids) == prefix_len + input_len
    assert plan.prompt_json(index) == json.dumps(ids, separators=(",", ":")).encode()


# ---------------------------------------------------------------- the end of a stream, read backwards


def sse(payload: object) -> bytes:
    return b"data: " + (payload if isinstance(payload, bytes) else json.dumps(payload).encode()) + b"\n\n"


@settings(max_examples=200, deadline=None)
@given(
    tokens=st.integers(1, 200),
    finish=st.sampled_from(["length", "stop", None]),
    usage=st.booleans(),
    done=st.booleans(),
    prompt_tokens=st.integers(1, 5000),
    cut=st.integers(0, 16384),
)
def test_parse_tail_reads_usage_finish_and_trailing_events_from_any_tail(
    tokens: int, finish: str | None, usage: bool, done: bool, prompt_tokens: int, cut: int
) -> None:
    """The tail a stream leaves (its last bytes, cut anywhere before the last token event) gives the usage,
    the last token event's finish reason and the events after it that carried no token."""
    events = [
        sse(
            {"choices": [{"text": " t", "finish_reason": finish if i == tokens - 1 else None}], "usage": None}
        )
        for i in range(tokens)
    ]
    counts = {"prompt_tokens": prompt_tokens, "completion_tokens": tokens}
    events += [sse({"choices": [], "usage": counts})] if usage else []
    events += [sse(b"[DONE]")] if done else []
    body = b"\r\n" + b"".join(chunk(e) for e in events) + b"0\r\n\r\n"
    last_token = (
        body.rindex(b"\ndata: {") if not usage else body.rindex(b"\ndata: {", 0, body.rindex(b"\ndata: {"))
    )
    tail = body[min(cut, last_token) :]
    assert parse_tail(tail) == (counts if usage else None, finish, None, int(usage) + int(done))


def test_parse_tail_reports_an_error_event_or_an_unparseable_one() -> None:
    error = b"\r\n" + chunk(sse({"error": {"message": "engine died"}})) + chunk(sse(b"[DONE]")) + b"0\r\n\r\n"
    assert parse_tail(error) == (None, None, "error event in stream: engine died", 1)
    broken = b"\r\n" + chunk(sse(b'{"choices": [')) + b"0\r\n\r\n"
    assert parse_tail(broken)[2] == "unparseable event near the end of the stream: b'{\"choices\": ['"


# ---------------------------------------------------------------- a known trace, end to end


class TraceClock:
    """The client's clock (``perf_counter``), set by the server to each write's instant. ``wire_reads``
    counts the wire's reads of it (a request's send and each socket read), not the worker's (its
    event-loop lag probe reads the clock too)."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.wire_reads = 0

    def wire(self) -> float:
        self.wire_reads += 1
        return self.now

    def worker(self) -> float:
        return self.now


TOKEN = sse({"choices": [{"text": " t", "finish_reason": None}], "usage": None})
LAST = sse({"choices": [{"text": " t", "finish_reason": "length"}], "usage": None})
DONE = sse(b"[DONE]")


def usage_event(prompt_tokens: int, completion_tokens: int) -> bytes:
    return sse(
        {"choices": [], "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}}
    )


TRACE: list[tuple[float, list[bytes]]] = [
    # (ms after the request was sent, the events of one write)
    (50.0, [TOKEN]),
    (70.0, [TOKEN, TOKEN]),  # two events in one read: one stamp, an ITL gap of 0
    (100.0, [TOKEN]),
    (130.0, [LAST]),
    (140.0, [b"usage", DONE]),  # the trailer alone, later: not a token event, E2E stays at 130 ms
]
"""Five tokens: TTFT 50 ms, E2E 130 ms, TPOT (130 - 50) / 4 = 20 ms, ITL gaps 20, 0, 30, 30 ms."""


async def serve_trace(clock: TraceClock, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Answer each completion with TRACE: before each write the clock moves to the request's send instant
    plus the trace's offset, and the next write waits until the client has read this one."""
    try:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            body = json.loads(await reader.readexactly(length))
            sent = clock.now  # the client stamped the request's start with this value
            for i, (offset_ms, events) in enumerate(TRACE):
                clock.now = sent + offset_ms / 1000
                payload = b"".join(
                    chunk(usage_event(len(body["prompt"]), 5) if e == b"usage" else e) for e in events
                )
                reads = clock.wire_reads
                writer.write(
                    (SSE_HEAD if i == 0 else b"") + payload + (b"0\r\n\r\n" if i == len(TRACE) - 1 else b"")
                )
                await writer.drain()
                while clock.wire_reads == reads:  # the client's read of this write stamps the clock once
                    await asyncio.sleep(0)
    finally:
        writer.close()


def run_trace(clock: TraceClock, requests: int) -> list[Record]:
    """``requests`` requests in turn on one keep-alive connection (one slot: a second would read the
    shared clock while the first's trace moves it)."""

    async def main() -> list[Record]:
        server = await asyncio.start_server(lambda r, w: serve_trace(clock, r, w), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        plan = PromptPlan.build(Vocab(100, frozenset(), "test"), 3, 12, 4)
        spec = WorkerSpec(
            worker=0,
            targets=(Target("127.0.0.1", port, "/v1/completions", "trace"),),
            slot_targets=(0,),
            plan=plan,
            output_len=5,
            indices=tuple(range(requests)),
            concurrency=1,
            warmup=(),
            timeout_s=60,
        )
        try:
            result = await Worker(spec).run(lambda: None)
        finally:
            server.close()
            await server.wait_closed()
        return result.records

    return asyncio.run(main())


def test_each_requests_figures_are_the_hand_computed_ones_of_a_known_trace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = TraceClock()
    monkeypatch.setattr(wire, "time", SimpleNamespace(perf_counter=clock.wire))
    monkeypatch.setattr(worker, "time", SimpleNamespace(perf_counter=clock.worker))
    records = run_trace(clock, requests=6)
    assert sorted(r.index for r in records) == list(range(6))
    for r in records:
        assert r.error is None and (r.prompt_tokens, r.completion_tokens, r.finish_reason) == (
            16,
            5,
            "length",
        )
        assert list(r.counts) == [1, 2, 1, 1]
        assert [round((t - r.start) * 1000, 6) for t in r.times] == [50.0, 70.0, 100.0, 130.0]
        assert round((r.end - r.start) * 1000, 6) == 140.0
        row = dict(zip(metrics.TIMING_COLUMNS, metrics.request_timing(r, r.start), strict=True))
        assert row == {
            "start_ms": 0.0,
            "target": 0,
            "ttft_ms": 50.0,
            "tpot_ms": 20.0,
            "itl_p50_ms": 25.0,  # of 0, 20, 30, 30
            "itl_max_ms": 30.0,
            "e2e_ms": 130.0,
            "in_tokens": 16,
            "out_tokens": 5,
            "error": None,
        }
    pooled = metrics.summarize(records, duration_s=1.0)
    assert _rounded(pooled, ("ttft_ms_p50", "tpot_ms_p99", "e2e_ms_p99", "itl_ms_p50", "itl_ms_p99")) == [
        50.0,
        20.0,
        130.0,
        25.0,
        30.0,
    ]
    assert pooled["out_tok_per_s"] == 30.0 and pooled["in_tok_per_s"] == 96.0


def _rounded(stats: dict[str, float | int | None], keys: Sequence[str]) -> list[float]:
    return [round(float(stats[k] or 0), 6) for k in keys]
