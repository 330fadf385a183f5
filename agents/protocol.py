"""The wire contract between the console and the box agent. Standard library only (runs on the box).

Transport: newline-delimited JSON over a stream. The agent daemon listens on a unix socket in its home
directory (``<home>/agent.sock``, mode 0600); the console reaches it through the SSH link
(``direct-streamlocal``: asyncssh ``open_unix_connection``), through ``<agent> call --home DIR`` run
over SSH exec (a stdio <-> socket relay, for hosts that forbid streamlocal forwarding) or, on the
``local`` box, directly. Nothing listens on a network port.

Requests and responses::

    -> {"v": 1, "id": "<command id>", "op": "<op>", "args": {...}}
    <- {"v": 1, "id": "<same id>", "ok": true, "result": {...}}
    <- {"v": 1, "id": "<same id>", "ok": false, "error": "<what, where, how to fix>"}

The ``id`` is chosen by the console and stored before sending. The agent records every mutating
command's id and result in its journal database, so a command re-sent after a reconnect returns the
recorded response, marked ``"replayed": true``, instead of running twice (ops in ``IDEMPOTENT_OPS`` are
safe to repeat and not recorded). A launch the box refuses (port in use, argv[0] missing) is not an
error: it answers ``ok`` with ``state: "failed"`` and the reason, and journals that launch_state.

Events (``op: events``) are the only way measurements leave the box::

    {"v": 1, "seq": 42, "t_ms": 1788658020000, "kind": "<kind>", ...kind-specific fields}

``seq`` strictly increases per box and survives agent restarts; ``t_ms`` is UTC epoch milliseconds of
the box clock. A journal row that is not a valid event (corrupt body, NaN, wrong t_ms) is sent as
``{"seq", "t_ms", "kind", "malformed": "<why>", "body": "<the stored text>"}`` for the console to quarantine.

Consumers: any number of campaigns may read one box. Each state.db names itself by its campaign id
(``consumer``) in ``hello`` (which registers it), ``events`` and ``ack``. The journal keeps an event until
every registered consumer acked it; a newly registered consumer is owed every event still held;
``detach`` unregisters one. Clients that name no consumer (a hand-run ``agent call``) hold nothing.

Bounds: one ``events`` reply carries at most ``limit`` events and ``max_bytes`` of them (the agent caps
both), but always at least one event; one event is at most agents.journal.MAX_EVENT_BYTES plus its
envelope, so every reply fits MAX_LINE. The console's SSH channel window must hold MAX_LINE too.
"""

from __future__ import annotations

import json
from typing import Any

PROTOCOL_VERSION = 1
MAX_LINE = 64 * 1024 * 1024
"""A response line may carry a batch of events; bound it so a corrupt stream cannot eat memory. It holds
the largest event the journal writes (8 MiB) and the largest batch (4 MiB) with room to spare."""

# Operations the agent answers. Args / result in brief (see agents.daemon for the authority):
OPS: dict[str, str] = {
    "hello": "(consumer?, label?) -> {version, pid, started_ms, home, last_seq, first_seq (oldest held), acked_seq, "
    "consumer: {consumer, label, acked_seq, registered_ms, acked_ms, new} | null, consumers: [...], now_ms, tz, "
    "python, gpu_source, samples_paused, timers: [{timer_id, deadline_ms, action, state, remaining_s}]}",
    "events": "(after: int, limit: int, max_bytes?: int, consumer?) -> {events: [event...], last_seq, "
    "acked_seq (the consumer's, null without one)}",
    "ack": "(seq: int, consumer?) -> {acked_seq, registered}; events every consumer acked may go; registered "
    "false: the consumer was detached and nothing was acked",
    "detach": "(consumer) -> {detached, first_seq, last_seq}; the journal stops holding events for it",
    "launch": "(launch_id, argv: [str], env: {str: str}, gpus: [int], port: int, ready_timeout_s) -> {launch_id, "
    "state, pid, port, gpus, log_path, exit_code, reason, backends_accepted, kv_cache_tokens, max_concurrency}",
    "kill": "(launch_id, grace_s) -> {state, already?}; results arrive as launch_state / gpu_released / "
    "command_done events",
    "launches": "() -> {launches: [{launch_id, state, pid, port, gpus, ...}]}",
    "log_tail": "(launch_id, lines) -> {lines: [str]}",
    "probe": "(console_t_ms, serving_python?, serving_env?: {str: str}) -> {probe}; also journaled as a probe event",
    "kldiff": "(kldiff_id, launch_id (server a's), argv?: [kldiff flags] | a, b (base URLs), model, model_b?, "
    "contexts?: [context], positions?, top_k?, seed?, timeout?; python?: the interpreter to run it under, one "
    "with openai: the serving env's) -> {started, pid, log_path}; the figures arrive as kldiff_result + command_done",
    "bench": "(bench_id, launch_id, argv?: [loadgen flags] | base_url (one, or a list: a node's replicas, the "
    "streams round-robin over them), model, tokenizer?, vocab_size?, shape? | "
    "workload? (a recipe shape's name: with the lengths given, a label), "
    "input_len?, output_len?, prefix_len?, concurrency, prompts?, warmup?, seed?, processes?, timeout?) -> "
    "{started, pid, log_path}; progress arrives as bench_progress events, the result as bench_result + "
    "command_done",
    "tripwire": "(tripwire_id, launch_id, argv?: [tripwire flags] | base_url, model, profile (name, or the "
    "resolved dict: --profile-json), max_tokens?, concurrency?, timeout?; python?: the interpreter to run it "
    "under, one with openai: the serving env's) -> {started, pid, log_path}; the verdict arrives as "
    "tripwire_result + command_done",
    "set_deadline": "(timer_id, deadline_ms, action, console_now_ms) -> {armed, remaining_s}",
    "cancel_deadline": "(timer_id) -> {cancelled}",
    "shutdown_agent": "() -> {}; the daemon exits, its arms keep running",
}
IDEMPOTENT_OPS = frozenset({"hello", "events", "ack", "detach", "launches", "log_tail"})

# Event kinds and their fields (besides v, seq, t_ms, kind).
EVENT_KINDS: dict[str, str] = {
    "agent_started": "version, pid, restarted (bool), adopted_launches [launch_id], adopted_jobs [\"bench:<id>\" | "
    "\"tripwire:<id>\"] (runs of a previous agent process still going; their results follow as usual)",
    "gpu_sample": "gpus: [{gpu, power_w, power_limit_w, enforced_limit_w, max_limit_w, sm_clock_mhz, "
    "util_pct, mem_used_mib, mem_total_mib, temp_c}] (one event per tick for all GPUs; None = missing)",
    "server_sample": "launch_id, gen_tok_per_s, prompt_tok_per_s, running, waiting, kv_usage, "
    "prefix_hit_rate, gen_tokens_total, prompt_tokens_total",
    "launch_state": "launch_id, state (starting|serving|failed|stopping|stopped), pid, port, gpus, "
    "exit_code, reason, backends_accepted [str] | null (null: the engine printed no accepted set), log_path",
    "kernel_line": "launch_id, category (linear|moe|attention|config|other), line",
    "launch_budget": "launch_id, kv_cache_tokens, max_concurrency",
    "gpu_released": "launch_id, released (bool), gpus: [{gpu, mem_used_mib}], leftover_pids [int] (the launch's "
    "processes still alive), holding [{gpu, pid, name, used_mib}] (its processes still on a GPU)",
    "probe": "probe: {...} (see agents.probe)",
    "bench_progress": "bench_id, launch_id, requests, out_tokens, in_tokens (measured requests ended so far and "
    "their tokens), out_tok_per_s, in_tok_per_s (over the last second; None for a last sample too soon after "
    "one): the load generator's own sample, once a second while a bench runs",
    "bench_result": "bench_id, launch_id, result: {the load generator's JSON}, exit_code",
    "tripwire_result": "tripwire_id, launch_id, result: {the tripwire's JSON}, exit_code",
    "kldiff_result": "kldiff_id, launch_id, result: {agents.kldiff's JSON}, exit_code",
    "deadline": "timer_id, state (armed|warning|firing|fired|refused-early|cancelled), deadline_ms, "
    "remaining_s, action, detail",
    "command_done": "command_id, op, ok, result|error (for long ops: bench, tripwire, kill)",
    "warning": "where, message (a fault the agent survived: malformed /metrics, NVML missing, ...; where "
    "\"journal\": a consumer released under the disk floor, an event too large to journal)",
    "disk_low": "path, free_bytes, threshold_bytes, samples_paused (gpu/server samples and bench progress stop; "
    "nothing else does)",
}


class ProtocolError(ValueError):
    """A line that is not a valid message of this protocol."""


def encode(message: dict[str, Any]) -> bytes:
    """One message as one line of compact JSON."""
    message.setdefault("v", PROTOCOL_VERSION)
    return json.dumps(message, separators=(",", ":"), allow_nan=False).encode() + b"\n"


def decode(line: bytes) -> dict[str, Any]:
    if len(line) > MAX_LINE:
        raise ProtocolError(f"message of {len(line)} bytes exceeds the {MAX_LINE}-byte limit")
    try:
        message = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"not JSON: {line[:80]!r}") from exc
    if not isinstance(message, dict):
        raise ProtocolError(f"expected a JSON object, got {type(message).__name__}")
    version = message.get("v")
    if version != PROTOCOL_VERSION:
        raise ProtocolError(
            f"protocol version {version!r} but this side speaks {PROTOCOL_VERSION}; push the matching agent"
        )
    return message
