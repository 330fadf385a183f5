"""One worker process: ``concurrency`` slots, each a keep-alive connection to one target, in a closed loop
or paced by an arrival schedule.

A node's replicas are several targets: each slot is bound to one of them (``slot_targets``, assigned
round-robin over the whole run by ``agents.loadgen.run``), and each record says which target served it.
Slots pull the next prompt index as soon as their previous request ends (closed loop). A warm-up of
a few requests runs first and is drained; then all workers meet at a barrier so the timed phase starts
together. The worker measures itself (CPU seconds through getrusage, event-loop lag with a 10 ms
sleeper) over the timed phase only, and turns each exchange into a compact record the parent merges.

With ``arrivals`` (a rate-paced run, agents/loadgen/arrivals.py) the timed phase is open-loop instead: each
request is released at its offset from the phase's start and then takes the first free slot, so the slots
are a cap on the requests in flight; one whose time came while every slot was busy goes as soon as one
frees (no request is skipped). The warm-up stays a closed loop, uncounted.
"""

from __future__ import annotations

import asyncio
import json
import resource
import time
from array import array
from collections import deque
from collections.abc import Callable, MutableSequence
from dataclasses import dataclass, field
from typing import Any

from agents.loadgen import memory
from agents.loadgen.prompts import PromptPlan
from agents.loadgen.wire import EVENT, Exchange, StreamConnection

LAG_PERIOD_S = 0.01


@dataclass(frozen=True)
class Target:
    host: str
    port: int
    path: str
    model: str
    api_key: str | None = None


@dataclass(frozen=True)
class WorkerSpec:
    worker: int
    targets: tuple[Target, ...]
    slot_targets: tuple[int, ...]
    """The target (index into ``targets``) of each of this worker's ``concurrency`` slots."""
    plan: PromptPlan
    output_len: int
    indices: tuple[int, ...]
    concurrency: int
    warmup: tuple[int, ...]
    timeout_s: float
    exact_output: bool = True
    """Send ignore_eos so every request generates exactly output_len tokens.

    ignore_eos alone, as `vllm bench serve` sends it: vLLM then stops on no EOS id at all (the generation
    config's extra EOS ids join the stop ids only without it), so min_tokens as well would only add a
    sampling parameter the reference does not send (its cost measured within noise: bench/agreement.py)."""
    arrivals: tuple[float, ...] | None = None
    """Seconds from the timed phase's start at which each of ``indices`` is released (a rate-paced run);
    None: the closed loop."""


@dataclass
class Record:
    """One request as measured; times are perf_counter seconds (one clock for every process)."""

    index: int
    worker: int
    start: float
    end: float
    times: MutableSequence[float]
    """One stamp per read that carried token events (an array from the wire, a list where tests build one)."""
    counts: MutableSequence[int]
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    error: str | None = None
    target: int = 0
    """The index of the base URL that served it."""

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class WorkerResult:
    worker: int
    records: list[Record]
    t_start: float
    t_end: float
    cpu_s: float
    lags_ms: list[float] = field(default_factory=list)


def request_fields(output_len: int, exact_output: bool) -> dict[str, object]:
    """Every field of a request besides ``model`` and ``prompt``: lengths and framing, no sampling field (the
    server's defaults draw the tokens). The result reports them, so a row says what the bench sent."""
    params: dict[str, object] = {
        "max_tokens": output_len,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if exact_output:
        params["ignore_eos"] = True
    return params


class RequestBuilder:
    """Request bytes for prompt ``i``: the JSON body is assembled from pre-encoded parts."""

    def __init__(self, spec: WorkerSpec, t: Target) -> None:
        self._plan = spec.plan
        params = request_fields(spec.output_len, spec.exact_output)
        self._head = ('{"model":' + json.dumps(t.model) + ',"prompt":').encode()
        self._rest = ("," + json.dumps(params, separators=(",", ":"))[1:]).encode()
        auth = f"Authorization: Bearer {t.api_key}\r\n" if t.api_key else ""
        self._request_head = (
            f"POST {t.path} HTTP/1.1\r\nHost: {t.host}:{t.port}\r\nContent-Type: application/json\r\n"
            f"Accept: text/event-stream\r\n{auth}Content-Length: "
        ).encode()

    def __call__(self, index: int) -> bytes:
        body = self._head + self._plan.prompt_json(index) + self._rest
        return self._request_head + str(len(body)).encode() + b"\r\n\r\n" + body


def parse_tail(tail: bytes) -> tuple[dict[str, Any] | None, str | None, str | None, int]:
    """(usage, finish_reason, error, trailing events that carried no token) from a stream's last bytes.

    The events are found from the end with ``rfind`` (an event begins at ``\\ndata:``, agents/loadgen/wire.py),
    so only the last few of the tail's ~60 are sliced; splitting the whole tail made an object of each."""
    usage = finish = error = None
    trailing = 0
    end = len(tail)
    while (start := tail.rfind(EVENT, 0, end)) >= 0:
        piece, end = tail[start + len(EVENT) : end], start
        payload = piece.split(b"\n\n", 1)[0].strip()
        if payload == b"[DONE]":
            trailing += 1
            continue
        try:
            event = json.loads(payload)
        except ValueError:
            return usage, finish, f"unparseable event near the end of the stream: {payload[:120]!r}", trailing
        if not isinstance(event, dict):
            return usage, finish, f"unexpected event {payload[:120]!r}", trailing
        if "error" in event or event.get("object") == "error":
            err = event.get("error", event)
            message = err.get("message", err) if isinstance(err, dict) else err
            return usage, finish, f"error event in stream: {str(message)[:300]}", trailing
        if usage is None and isinstance(event.get("usage"), dict):
            usage = event["usage"]
        choices = event.get("choices")
        if not choices:
            trailing += 1
            continue
        finish = choices[0].get("finish_reason")
        break
    return usage, finish, error, trailing


def error_of(ex: Exchange) -> str:
    """A one-line reason for a non-200 answer, from the server's JSON error when it sent one."""
    text = ex.tail.decode("utf-8", "replace").strip()
    try:
        body = json.loads(text)
        err = body.get("error", body) if isinstance(body, dict) else body
        text = str(err.get("message", err) if isinstance(err, dict) else err)
    except ValueError:
        pass
    return f"HTTP {ex.status}: {text[:300]}"


def to_record(index: int, worker: int, ex: Exchange, end: float, target: int = 0) -> Record:
    rec = Record(index, worker, ex.start, end, ex.times, ex.counts, target=target)
    if ex.error is not None:
        rec.error = ex.error
        return rec
    if ex.status != 200:
        rec.error = error_of(ex)
        return rec
    usage, rec.finish_reason, rec.error, trailing = parse_tail(ex.tail)
    # The usage event and [DONE] were counted as events: take them off the end.
    while trailing and rec.counts:
        take = min(trailing, rec.counts[-1])
        rec.counts[-1] -= take
        trailing -= take
        if rec.counts[-1] == 0:
            rec.counts.pop()
            rec.times.pop()
    if rec.error is None and not rec.counts:
        rec.error = "stream ended without a token event"
    if usage:
        rec.prompt_tokens = usage.get("prompt_tokens")
        rec.completion_tokens = usage.get("completion_tokens")
    return rec


Progress = Callable[[Record], None]
"""Told of each measured request as it ends (the parent's counters of requests and tokens)."""


class Worker:
    def __init__(self, spec: WorkerSpec, progress: Progress = lambda record: None) -> None:
        self.spec = spec
        self.builders = [RequestBuilder(spec, t) for t in spec.targets]
        self.progress = progress
        self.lags_ms: list[float] = []
        self._lagging = False
        self._task: asyncio.Task[Any] | None = None
        self.out_of_memory = False
        """A transport callback hit the memory cap (``_on_loop_error``)."""

    async def _request(self, slot: list[StreamConnection | None], target: int, index: int) -> Record:
        request = self.builders[target](index)
        t = self.spec.targets[target]
        conn = slot[0]
        if conn is None or not conn.usable():
            try:
                conn = slot[0] = await StreamConnection.open(t.host, t.port)
            except OSError as exc:
                now = time.perf_counter()
                return Record(
                    index,
                    self.spec.worker,
                    now,
                    now,
                    array("d"),
                    array("I"),
                    error=f"connect to {t.host}:{t.port}: {exc}",
                    target=target,
                )
        done = conn.send(request)
        timer = asyncio.get_running_loop().call_later(self.spec.timeout_s, conn.stalled, self.spec.timeout_s)
        ex = await done
        end = time.perf_counter()
        timer.cancel()
        return to_record(index, self.spec.worker, ex, end, target)

    async def _phase(self, indices: tuple[int, ...], concurrency: int, count: bool) -> list[Record]:
        queue = deque(indices)
        records: list[Record] = []

        async def slot_loop(slot: list[StreamConnection | None], target: int) -> None:
            while queue:
                record = await self._request(slot, target, queue.popleft())
                records.append(record)
                if count:
                    self.progress(record)

        used = max(1, min(concurrency, len(indices)))
        await asyncio.gather(
            *(slot_loop(s, t) for s, t in zip(self._slots[:used], self.spec.slot_targets[:used], strict=True))
        )
        return records

    async def _paced(self, t_start: float) -> list[Record]:
        """The timed phase of a rate-paced run: request ``indices[i]`` released at ``t_start + arrivals[i]``,
        then sent on the first free slot (a FIFO of free slots, so the targets keep their round-robin share)."""
        spec = self.spec
        assert spec.arrivals is not None
        free: asyncio.Queue[int] = asyncio.Queue()
        for s in range(spec.concurrency):
            free.put_nowait(s)
        records: list[Record] = []

        async def send(s: int, index: int) -> None:
            try:
                record = await self._request(self._slots[s], spec.slot_targets[s], index)
                records.append(record)
                self.progress(record)
            finally:
                free.put_nowait(s)

        sent = []
        for index, offset in zip(spec.indices, spec.arrivals, strict=True):
            wait = t_start + offset - time.perf_counter()
            if wait > 0:
                await asyncio.sleep(wait)
            sent.append(asyncio.ensure_future(send(await free.get(), index)))
        await asyncio.gather(*sent)
        return records

    async def _lag_probe(self) -> None:
        while self._lagging:
            t = time.perf_counter()
            await asyncio.sleep(LAG_PERIOD_S)
            self.lags_ms.append((time.perf_counter() - t - LAG_PERIOD_S) * 1000)

    def _on_loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """A MemoryError in a transport callback (a read over the memory cap) ends the run at once.

        Why: asyncio logs such an error with a traceback, drops that connection and goes on, so every
        later read failed the same way, one traceback per request, until the interpreter itself aborted
        (seen: 703 tracebacks, then a fatal error). Cancelling the run instead lets ``run_worker`` raise
        one MemoryError, which the caller turns into a one-line reason."""
        if isinstance(context.get("exception"), MemoryError):
            if not self.out_of_memory:
                self.out_of_memory = True
                memory.wind_down()
                if self._task is not None:
                    self._task.cancel()
            return
        loop.default_exception_handler(context)

    async def run(self, barrier: Callable[[], None]) -> WorkerResult:
        spec = self.spec
        self._task = asyncio.current_task()
        asyncio.get_running_loop().set_exception_handler(self._on_loop_error)
        self._slots: list[list[StreamConnection | None]] = [[None] for _ in range(spec.concurrency)]
        if spec.warmup:
            await self._phase(spec.warmup, spec.concurrency, count=False)
        for slot, target in zip(self._slots, spec.slot_targets, strict=True):
            # connect every slot now so the timed phase measures requests, not TCP set-up
            if slot[0] is None or not slot[0].usable():
                t = spec.targets[target]
                try:
                    slot[0] = await StreamConnection.open(t.host, t.port)
                except OSError:
                    slot[0] = None  # the timed phase retries and records the failure per request
        barrier()
        self._lagging = True
        lag_task = asyncio.ensure_future(self._lag_probe())
        usage0 = resource.getrusage(resource.RUSAGE_SELF)
        t_start = time.perf_counter()
        if spec.arrivals is None:
            records = await self._phase(spec.indices, spec.concurrency, count=True)
        else:
            records = await self._paced(t_start)
        t_end = time.perf_counter()
        usage1 = resource.getrusage(resource.RUSAGE_SELF)
        self._lagging = False
        await lag_task
        for slot in self._slots:
            if slot[0] is not None and slot[0].transport is not None:
                slot[0].transport.close()
        cpu = (usage1.ru_utime - usage0.ru_utime) + (usage1.ru_stime - usage0.ru_stime)
        return WorkerResult(spec.worker, records, t_start, t_end, cpu, self.lags_ms)


def run_worker(spec: WorkerSpec, barrier: Callable[[], None], progress: Progress) -> WorkerResult:
    worker = Worker(spec, progress)
    try:
        return asyncio.run(worker.run(barrier))
    except asyncio.CancelledError:
        if worker.out_of_memory:
            raise MemoryError("a read went over the memory cap") from None
        raise
    except MemoryError:
        memory.wind_down()
        raise
