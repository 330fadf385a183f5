"""The arm supervisor: runs a serving argv, watches it become ready, reads its log, kills it cleanly.

Why this shape: the console decides everything about an arm (argv, env, GPUs, port); the box only
runs it, faithfully and observably. Every launch gets its own session/process group (so a kill reaches
the engine's worker processes too), its own log file, and a row in the journal database so that a
restarted agent re-adopts it by (pid, start time) instead of orphaning it. All work happens in
``tick()`` on the daemon's 1 Hz loop, so launch state has a single writer and no locks. The HTTP
requests (readiness, ``/metrics``) run on a small thread pool and are collected by a later tick: a
server too busy to answer ``/metrics`` (normal at C2048) must never stall the GPU samples or the watchdog.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from agents import loglines, proc
from agents.environ import allowed_env
from agents.gpu import GpuSampler
from agents.journal import Journal
from agents.local_http import http_get, serves
from agents.metrics import RateTracker
from agents.protocol import GpuReading, KillResult, LaunchArgs, LaunchResult, LaunchStateName, ReleasedGpu

LAUNCH_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
LOG_READ_PER_TICK = 1024 * 1024
TAIL_LINES = 400
MAX_ANALYSED_CHARS = 64 * 1024
"""Lines are matched up to this length (an engine config line runs to several thousand characters)."""
RELEASE_WAIT_S = 10.0
"""After a kill, how long the driver gets to free the launch's GPU memory before we say it did not."""
_WAKING = frozenset({"ready", "gpu_processes"})
"""The pool's requests whose answer wakes the agent: a starting server is probed again a moment later (agents/
daemon.py WAKE_GAP_S), not a tick later, and one that answers ready serves at once; a release is decided as
soon as the GPUs' processes are read after the exit."""
METRICS_TIMEOUT_S = 5.0
"""A server under full load answers /metrics late; off the tick, waiting for it costs nothing."""


class AwaitedServer(TypedDict):
    """A loading launch as a client that waits for it sees it (agents/daemon.py ``op_tripwire``)."""

    base_url: str
    server_pid: int
    server_start_ticks: int | None


@dataclass
class Launch:
    launch_id: str
    port: int
    gpus: list[int]
    log_path: Path
    state: LaunchStateName
    pid: int | None = None
    start_ticks: int | None = None
    popen: subprocess.Popen[bytes] | None = None
    started_mono: float = 0.0
    ready_timeout_s: float = 600.0
    exit_code: int | None = None
    reason: str | None = None
    backends_accepted: list[str] | None = None
    """The set the engine said it accepts instead of a refused backend; None: it printed none."""
    log_offset: int = 0
    partial: bytes = b""
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=TAIL_LINES))
    seen_kernel_lines: set[str] = field(default_factory=set)
    kv_tokens: int | None = None
    max_concurrency: float | None = None
    kill_deadline: float | None = None
    kill_command_id: str | None = None
    fail_on_stop: bool = False
    killed_hard: bool = False
    members: dict[int, int] = field(default_factory=dict)
    exited_mono: float | None = None
    rates: RateTracker = field(default_factory=RateTracker)
    metrics_problem: str | None = None
    inflight: tuple[str, Future[Any]] | None = None
    """The HTTP request of this launch on the pool ("ready" or "metrics"), collected by a later tick."""
    headless: bool = False
    """No HTTP API to wait for or scrape (``LaunchArgs.headless``): serving once it runs past a tick."""

    def summary(self) -> LaunchResult:
        return {
            "launch_id": self.launch_id,
            "state": self.state,
            "pid": self.pid,
            "port": self.port,
            "gpus": self.gpus,
            "log_path": str(self.log_path),
            "exit_code": self.exit_code,
            "reason": self.reason,
            "backends_accepted": self.backends_accepted,
            "kv_cache_tokens": self.kv_tokens,
            "max_concurrency": self.max_concurrency,
        }


def port_in_use(port: int) -> bool:
    """Something already listens on 127.0.0.1:port (a stale server, another arm)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def _launch_argv(argv: object) -> list[str]:
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) and a for a in argv):
        raise ValueError("argv must be a non-empty list of non-empty strings (never a shell string)")
    return argv


def _launch_env(env: object) -> dict[str, str]:
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in env.items()
    ):
        raise ValueError("env must be an object of string to string")
    return env


def _launch_port(port: object) -> int:
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ValueError(f"port {port!r} must be an integer 1-65535")
    return port


PORT_SEARCH = 1000
"""How many ports above a taken one a launch whose port the operator did not pin may move to."""
LIVE = ("starting", "serving", "stopping")
"""Launch states that hold their port (a starting server binds it only once its model is loaded)."""


def free_port(taken: int, held: set[int], search: int = PORT_SEARCH) -> int | None:
    """The first loopback port above ``taken`` that nothing listens on and no live launch of this agent holds
    (None: none within ``search``). Upward from the console's choice, never an ephemeral port the kernel
    hands out: servers keep to the console's range (console/service/launches.py DEFAULT_BASE_PORT)."""
    for port in range(taken + 1, min(taken + search, 65535) + 1):
        if port not in held and not port_in_use(port):
            return port
    return None


def with_port(argv: list[str], old: int, new: int) -> list[str] | None:
    """``argv`` with the console's ``--port OLD`` made ``--port NEW`` (console/recipes/resolve.py puts it there,
    and only there: guard.py refuses a recipe's own); None when it is not there to move."""
    for i, word in enumerate(argv[:-1]):
        if word == "--port" and argv[i + 1] == str(old):
            return [*argv[: i + 1], str(new), *argv[i + 2 :]]
    return None


def _launch_gpus(gpus: object) -> list[int]:
    if not isinstance(gpus, list) or not all(isinstance(g, int) and not isinstance(g, bool) for g in gpus):
        raise ValueError(f"gpus {gpus!r} must be a list of GPU indexes")
    return gpus


class StopAll(TypedDict):
    """What the watchdog's stop-arms action stopped: the launches it began stopping."""

    stopping: list[str]


def _preflight_refusal(port: int | None, argv: list[str], env: dict[str, str]) -> str | None:
    """Why the launch cannot start, found before spawning: a busy port (None: a headless launch listens on
    none of its own), or argv[0] not on the launch's PATH."""
    if port is not None and port_in_use(port):
        return (
            f"port {port} is already in use on 127.0.0.1 (another server or a stale process); "
            "kill it or launch on a free port"
        )
    if shutil.which(argv[0], path=env.get("PATH")) is None:
        return (
            f"argv[0] {argv[0]!r} not found: not an executable path and not on the launch's PATH; "
            "check the box's serving environment (argv[0] is normally <serving_env>/bin/vllm)"
        )
    return None


class Supervisor:
    def __init__(self, home: Path, journal: Journal, gpu: GpuSampler | None) -> None:
        self.dir = home / "launches"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.journal = journal
        self.gpu = gpu
        self.launches: dict[str, Launch] = {}
        self.last_gpu_sample: list[GpuReading] = []
        self.wake: Callable[[], None] = lambda: None
        """Asks the agent for a pass before its next tick (agents/daemon.py ``Agent.wake``): a server exited, a
        readiness probe or a read of the GPUs' processes came back (``_WAKING``)."""
        self._http = ThreadPoolExecutor(max_workers=8, thread_name_prefix="http")

    def close(self) -> None:
        self._http.shutdown(wait=False, cancel_futures=True)

    # -- operations ---------------------------------------------------------------------------------

    def adopt(self) -> list[str]:
        """Re-adopt the servers a previous agent process left running; close out the ones that died."""
        adopted = []
        for row in self.journal.live_launches():
            launch = Launch(
                launch_id=row["launch_id"],
                port=row["port"],
                gpus=row["gpus"],
                log_path=Path(row["log_path"]),
                state=row["state"],
                pid=row["pid"],
                start_ticks=row["start_ticks"],
                started_mono=time.monotonic(),
                kill_command_id=row["kill_command_id"],
            )
            if row["log_offset"] is not None:  # read on from there: lines written while no agent ran count
                launch.log_offset = row["log_offset"]
            else:  # a launch of an agent that did not keep the offset
                launch.log_offset = launch.log_path.stat().st_size if launch.log_path.exists() else 0
            self.launches[launch.launch_id] = launch
            if launch.state in ("stopped", "failed"):  # ended, but its kill was not answered yet: answer it
                launch.exited_mono = time.monotonic()
            elif launch.pid is not None and proc.alive(launch.pid, launch.start_ticks):
                adopted.append(launch.launch_id)
                if launch.state == "stopping":  # the kill was interrupted by the restart: finish it
                    launch.kill_deadline = time.monotonic()
            else:
                launch.reason = "the server exited while the agent was not running; exit code unknown"
                self._read_log(launch)
                failure = loglines.failure_reason(list(launch.tail), None)
                if launch.state != "stopping" and not failure.reason.startswith("exited with code"):
                    launch.reason = f"{failure.reason}; {launch.reason}"  # its log says why
                    launch.backends_accepted = failure.backends_accepted
                self._finish(launch, "failed" if launch.state != "stopping" else "stopped")
                launch.exited_mono = time.monotonic()  # then check its GPUs were freed, as after any exit
        return adopted

    def launch(self, args: LaunchArgs) -> LaunchResult:
        """Start an arm's server, or record why it could not start: either way the launch is journaled.

        The arguments are checked again here, for a caller that did not come through the contract."""
        launch_id = self._new_launch_id(args.get("launch_id"))
        argv = _launch_argv(args.get("argv"))
        env = _launch_env(args.get("env") or {})
        port = _launch_port(args.get("port"))
        gpus = _launch_gpus(args.get("gpus") or [])
        ready_timeout_s = float(args.get("ready_timeout_s") or 600.0)
        headless = args.get("headless") is True
        if args.get("port_pinned") is False:  # the console chose it: a taken one moves to a free one
            argv, port = self._unpinned_port(launch_id, argv, port)

        launch = Launch(
            launch_id=launch_id,
            port=port,
            gpus=gpus,
            log_path=self.dir / f"{launch_id}.log",
            state="starting",
            started_mono=time.monotonic(),
            ready_timeout_s=ready_timeout_s,
            headless=headless,
        )
        self.launches[launch_id] = launch
        full_env = {**allowed_env(), **env}  # the box's allowlist and the arm's own env, nothing else
        refusal = _preflight_refusal(None if headless else port, argv, full_env)
        if refusal is None:
            refusal = self._spawn(launch, argv, full_env)
        if refusal is not None:
            self._record_refused(launch, refusal)
        else:
            self._record_started(launch)
        return launch.summary()

    def _unpinned_port(self, launch_id: str, argv: list[str], port: int) -> tuple[list[str], int]:
        """(argv, port) of a launch whose port the operator did not pin: as asked while it is free, else the
        first free one above it, said in a warning; the launch journals the port it really listens on, which
        the console stores. Unchanged when no port is free or argv has no ``--port`` to move (the preflight
        then refuses it as taken)."""
        held = {x.port for x in self.launches.values() if x.state in LIVE}
        if port not in held and not port_in_use(port):
            return argv, port
        moved = free_port(port, held)
        moved_argv = None if moved is None else with_port(argv, port, moved)
        if moved is None or moved_argv is None:
            return argv, port
        self.journal.append(
            "warning",
            where=f"launch:{launch_id}",
            message=f"port {port} is taken on 127.0.0.1; {launch_id} listens on {moved} instead",
        )
        return moved_argv, moved

    def _new_launch_id(self, launch_id: object) -> str:
        """The request's launch id: well formed, and never used on this box before (journal included)."""
        if not isinstance(launch_id, str) or not LAUNCH_ID.match(launch_id):
            raise ValueError(
                f"launch_id {launch_id!r}: use 1-128 characters of letters, digits, '.', '_', '-'"
            )
        if launch_id in self.launches or launch_id in self.journal.launch_ids():
            raise ValueError(
                f"launch_id {launch_id!r} was already used on this box; every launch needs a new id"
            )
        return launch_id

    def _spawn(self, launch: Launch, argv: list[str], env: dict[str, str]) -> str | None:
        """Start the server in its own session, output to its log; the refusal if the OS would not."""
        try:
            with open(launch.log_path, "ab") as log:
                launch.popen = subprocess.Popen(
                    argv,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    close_fds=True,
                    cwd=str(self.dir),
                )
        except OSError as exc:
            return f"could not start {argv[0]!r}: {exc}"
        proc.on_exit(launch.popen.pid, self.wake)
        return None

    def _record_refused(self, launch: Launch, refusal: str) -> None:
        launch.reason = refusal
        launch.state = "failed"
        with self.journal.atomic():
            self.journal.save_launch(
                launch.launch_id, None, None, launch.port, launch.gpus, str(launch.log_path), "failed"
            )
            self._state_event(launch)

    def _record_started(self, launch: Launch) -> None:
        """Journal the started server by (pid, start time), which is how a restarted agent re-adopts it."""
        assert launch.popen is not None
        launch.pid = launch.popen.pid
        launch.start_ticks = proc.start_ticks(launch.pid)
        with self.journal.atomic():
            self.journal.save_launch(
                launch.launch_id,
                launch.pid,
                launch.start_ticks,
                launch.port,
                launch.gpus,
                str(launch.log_path),
                "starting",
            )
            self._state_event(launch)

    def kill(self, launch_id: str, grace_s: float, command_id: str | None) -> KillResult:
        launch = self._get(launch_id)
        if launch.state in ("failed", "stopped"):
            return {"state": launch.state, "already": True}
        if launch.state == "stopping":
            return {"state": "stopping", "already": True}
        self._begin_stop(launch, grace_s, command_id)
        return {"state": launch.state}

    def stop_all(self, grace_s: float = 30.0) -> StopAll:
        """Stop every live arm (the watchdog's stop-arms action)."""
        stopping = []
        for launch in list(self.launches.values()):
            if launch.state in ("starting", "serving"):
                self._begin_stop(launch, grace_s, None)
                stopping.append(launch.launch_id)
        return {"stopping": stopping}

    def snapshot(self) -> list[LaunchResult]:
        return [launch.summary() for launch in list(self.launches.values())]  # list(): atomic vs. the tick

    def log_tail(self, launch_id: str, lines: int) -> list[str]:
        launch = self._get(launch_id)
        lines = max(1, min(int(lines), 5000))
        try:
            with open(launch.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - 256 * 1024))
                data = f.read()
        except FileNotFoundError:
            return []
        return [loglines.clean(x) for x in data.decode("utf-8", "replace").splitlines()[-lines:]]

    # -- the 1 Hz tick ------------------------------------------------------------------------------

    def tick(self, scrape: bool = True) -> None:
        """Advance every launch; one launch's fault (a journal write failing) does not hold up the others.
        ``scrape`` False (a pass between ticks): servers' metrics keep the tick's cadence."""
        now = time.monotonic()
        fault: Exception | None = None
        for launch in list(self.launches.values()):
            if launch.state in ("failed", "stopped") and launch.exited_mono is None:
                continue
            try:
                self._advance(launch, now, scrape)
            except Exception as exc:
                fault = fault or exc
        if fault is not None:
            raise fault  # the daemon journals it (or, with the disk full, writes it to agent.log)

    def awaits_sample(self) -> bool:
        """Whether an exited launch's release waits for a GPU reading taken after its exit."""
        return any(self._before_reading(launch) for launch in self.launches.values())

    def _before_reading(self, launch: Launch) -> bool:
        """Exited, with no GPU reading taken since (a box without a GPU source has none to wait for): its
        release would report memory read while the server still held it."""
        read = self.gpu.read_mono if self.gpu is not None else None
        return launch.exited_mono is not None and read is not None and read <= launch.exited_mono

    def _advance(self, launch: Launch, now: float, scrape: bool) -> None:
        self._read_log(launch)
        if launch.state in ("starting", "serving", "stopping"):
            self._check_exit(launch, now)
        if launch.state == "starting":
            self._check_ready(launch, now)
        elif launch.state == "serving" and not launch.headless and scrape:
            self._scrape(launch, now)
        elif launch.state == "stopping":
            self._escalate(launch, now)
        if launch.exited_mono is not None:
            self._check_released(launch, now)

    def _read_log(self, launch: Launch) -> None:
        try:
            with open(launch.log_path, "rb") as f:
                f.seek(launch.log_offset)
                data = f.read(LOG_READ_PER_TICK)
        except FileNotFoundError:
            return
        if not data:
            return
        launch.log_offset += len(data)
        chunks = (launch.partial + data).split(b"\n")
        launch.partial = chunks.pop()
        if len(launch.partial) > loglines.MAX_LINE_CHARS * 4:  # a line with no end (progress bars): cut it
            chunks.append(launch.partial)
            launch.partial = b""
        with self.journal.atomic():  # the lines' events and how far the log was read commit together
            for raw in chunks:
                self._line(launch, loglines.clean(raw.decode("utf-8", "replace"), limit=MAX_ANALYSED_CHARS))
            self.journal.set_log_offset(launch.launch_id, launch.log_offset - len(launch.partial))

    def _line(self, launch: Launch, line: str) -> None:
        if not line:
            return
        launch.tail.append(line[: loglines.MAX_LINE_CHARS])
        category = loglines.kernel_category(line)
        if category is not None:
            text = loglines.config_excerpt(line) if category == "config" else line[: loglines.MAX_LINE_CHARS]
            key = text.split("] ", 1)[-1]  # the message without the timestamped prefix: dedupe repeats
            if key not in launch.seen_kernel_lines:
                launch.seen_kernel_lines.add(key)
                self.journal.append("kernel_line", launch_id=launch.launch_id, category=category, line=text)
        budget = loglines.kv_budget(line)
        if budget is not None:
            launch.kv_tokens = (
                budget.kv_cache_tokens if budget.kv_cache_tokens is not None else launch.kv_tokens
            )
            if budget.max_concurrency is not None:
                launch.max_concurrency = budget.max_concurrency
            self.journal.append(
                "launch_budget",
                launch_id=launch.launch_id,
                kv_cache_tokens=launch.kv_tokens,
                max_concurrency=launch.max_concurrency,
            )

    def _check_exit(self, launch: Launch, now: float) -> None:
        if launch.popen is not None:
            code = launch.popen.poll()
            if code is None:
                return
            launch.exit_code = code
        elif launch.pid is not None and proc.alive(launch.pid, launch.start_ticks):
            return
        self._read_log(launch)
        if launch.partial:
            self._line(
                launch, loglines.clean(launch.partial.decode("utf-8", "replace"), limit=MAX_ANALYSED_CHARS)
            )
            launch.partial = b""
        leader = launch.pid if launch.pid is not None else -1
        launch.members.update(proc.group_members(leader, launch.start_ticks) if leader > 0 else {})
        if launch.state == "stopping":
            self._finish(launch, "failed" if launch.fail_on_stop else "stopped")
        else:
            if launch.members:  # the leader died on its own: its engine workers must not hold the GPUs
                for pid, ticks in launch.members.items():
                    proc.signal_pid(pid, ticks, signal.SIGTERM)
                launch.kill_deadline = now + 10.0
            failure = loglines.failure_reason(list(launch.tail), launch.exit_code)
            if launch.reason is None:
                launch.reason = failure.reason
            if failure.backends_accepted is not None:
                launch.backends_accepted = failure.backends_accepted
            self._finish(launch, "failed")
        launch.exited_mono = now

    def _collect(self, launch: Launch, kind: str, request: Callable[[], Any]) -> tuple[bool, Any]:
        """(answered, value) of this launch's ``kind`` request, never waiting for it.

        Returns the answer of the request sent by an earlier tick once it is in, and sends the next one;
        a request still in flight is left alone (one at a time per launch, so a hung server costs one
        pool thread, not one per tick). An answer of another kind (the launch changed state) is dropped.
        Some answers wake the agent when they come in (``_WAKING``), so the next pass collects them now
        rather than a tick later.
        """
        if launch.inflight is not None:
            sent, future = launch.inflight
            if not future.done():
                return False, None
            launch.inflight = None
            if sent == kind:
                launch.inflight = (kind, self._send(kind, request))
                return True, future.result()
        launch.inflight = (kind, self._send(kind, request))
        return False, None

    def _send(self, kind: str, request: Callable[[], Any]) -> Future[Any]:
        future = self._http.submit(request)
        if kind in _WAKING:
            future.add_done_callback(lambda _: self.wake())
        return future

    def _check_ready(self, launch: Launch, now: float) -> None:
        if launch.headless:  # _check_exit ran first this tick: the process still runs
            self._finish(launch, "serving")
            return
        answered, ready = self._collect(launch, "ready", lambda: serves(launch.port))
        if answered and ready:
            launch.inflight = None
            self._finish(launch, "serving")
            return
        if now - launch.started_mono > launch.ready_timeout_s:
            launch.reason = f"not ready after {launch.ready_timeout_s:.0f} s (/health and /v1/models); killed"
            launch.fail_on_stop = True
            self._begin_stop(launch, 10.0, None)

    def _scrape(self, launch: Launch, now: float) -> None:
        answered, timed = self._collect(
            launch,
            "metrics",
            lambda: (http_get(launch.port, "/metrics", METRICS_TIMEOUT_S), time.monotonic()),
        )
        if not answered:
            return
        got, now = timed  # rates use the moment the page came back, not the tick that collected it
        if got is None or got[0] != 200:
            self._metrics_problem(
                launch,
                f"GET /metrics on port {launch.port} failed"
                f" ({'no answer' if got is None else f'HTTP {got[0]}'})",
            )
            return
        fields, problems = launch.rates.sample(got[1].decode("utf-8", "replace"), now)
        if problems:
            self._metrics_problem(
                launch, f"malformed /metrics on port {launch.port}: {'; '.join(problems[:3])}"
            )
        else:
            launch.metrics_problem = None
        self.journal.append("server_sample", launch_id=launch.launch_id, **fields)

    def _metrics_problem(self, launch: Launch, message: str) -> None:
        """Journal a scrape fault once until it changes or clears (not once a second)."""
        if launch.metrics_problem != message:
            launch.metrics_problem = message
            self.journal.append("warning", where=f"metrics:{launch.launch_id}", message=message)

    # -- stopping -----------------------------------------------------------------------------------

    def _begin_stop(self, launch: Launch, grace_s: float, command_id: str | None) -> None:
        if launch.pid is not None:
            launch.members = proc.group_members(launch.pid, launch.start_ticks)
            proc.signal_group(launch.pid, launch.start_ticks, signal.SIGTERM)
        launch.kill_deadline = time.monotonic() + max(0.0, float(grace_s))
        launch.kill_command_id = command_id
        self._finish(launch, "stopping", kill_command_id=command_id)

    def _escalate(self, launch: Launch, now: float) -> None:
        if (
            launch.kill_deadline is not None
            and now >= launch.kill_deadline
            and not launch.killed_hard
            and launch.pid is not None
        ):
            launch.killed_hard = True
            proc.signal_group(launch.pid, launch.start_ticks, signal.SIGKILL)
            for pid, ticks in launch.members.items():
                proc.signal_pid(pid, ticks, signal.SIGKILL)

    def _check_released(self, launch: Launch, now: float) -> None:
        """After exit: wait for the whole group to go and the GPUs to drop its memory, then journal it."""
        assert launch.exited_mono is not None
        leftovers = [pid for pid, ticks in launch.members.items() if proc.alive(pid, ticks)]
        if leftovers and launch.kill_deadline is not None and now >= launch.kill_deadline:
            for pid in leftovers:
                proc.signal_pid(pid, launch.members[pid], signal.SIGKILL)
        # nvidia-smi is slowest just when a context is torn down: ask on the pool, collect on a later tick
        answered, on_gpus = self._collect(
            launch, "gpu_processes", self.gpu.processes if self.gpu else lambda: []
        )
        if not answered:
            return
        mine = set(launch.members) | ({launch.pid} if launch.pid else set())
        holding = [p for p in on_gpus if p["pid"] in mine]
        waited = now - launch.exited_mono
        if (self._before_reading(launch) or leftovers or holding) and waited < RELEASE_WAIT_S:
            return
        gpus: list[ReleasedGpu] = [
            {"gpu": s["gpu"], "mem_used_mib": s.get("mem_used_mib")}
            for s in self.last_gpu_sample
            if s["gpu"] in launch.gpus
        ]
        released = not leftovers and not holding
        with self.journal.atomic():  # the kill is answered once: its answer and "answered" commit together
            self.journal.append(
                "gpu_released",
                launch_id=launch.launch_id,
                released=released,
                gpus=gpus,
                leftover_pids=leftovers,
                holding=holding,
            )
            if launch.kill_command_id is not None:
                self.journal.append(
                    "command_done",
                    command_id=launch.kill_command_id,
                    op="kill",
                    ok=True,
                    result={"state": launch.state, "released": released},
                )
                self.journal.kill_answered(launch.launch_id)
        launch.exited_mono = None
        launch.inflight = None

    # -- helpers ------------------------------------------------------------------------------------

    def _finish(self, launch: Launch, state: LaunchStateName, kill_command_id: str | None = None) -> None:
        """Enter ``state``: the launches row and the launch_state event commit together (a crash between
        them would leave a state the console never hears of, or journal it twice after the restart).
        If the journal cannot be written (disk full) the launch keeps its old state, so a later tick
        sees the same change again and retries it."""
        previous, launch.state = launch.state, state
        try:
            with self.journal.atomic():
                self.journal.set_launch_state(launch.launch_id, state, kill_command_id)
                self._state_event(launch)
        except BaseException:
            launch.state = previous
            raise

    def _state_event(self, launch: Launch) -> None:
        s = launch.summary()
        self.journal.append(
            "launch_state",
            launch_id=s["launch_id"],
            state=s["state"],
            pid=s["pid"],
            port=s["port"],
            gpus=s["gpus"],
            exit_code=s["exit_code"],
            reason=s["reason"],
            backends_accepted=s["backends_accepted"],
            log_path=s["log_path"],
        )

    def awaited(self, launch_id: Any) -> AwaitedServer:
        """Where a client that waits for ``launch_id`` to serve sends its requests, and the process it watches:
        a launch that already ended, or that serves no API of its own (a multi-box worker), is refused."""
        launch = self._get(launch_id)
        if launch.state not in ("starting", "serving") or launch.pid is None or launch.headless:
            raise ValueError(
                f"launch {launch.launch_id} is {launch.state}"
                + (" and serves no API of its own" if launch.headless else "")
                + "; nothing to wait for"
            )
        return {
            "base_url": f"http://127.0.0.1:{launch.port}",
            "server_pid": launch.pid,
            "server_start_ticks": launch.start_ticks,
        }

    def _get(self, launch_id: Any) -> Launch:
        launch = self.launches.get(launch_id) if isinstance(launch_id, str) else None
        if launch is None:
            raise ValueError(f"no launch {launch_id!r} on this box; see the launches op for the ids it knows")
        return launch
