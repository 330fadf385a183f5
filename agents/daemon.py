"""The agent daemon: one process per box that outlives SSH sessions and answers agents/protocol.py.

Why a daemon: measurements must keep flowing into the journal while the operator's laptop sleeps.
So it detaches (double fork + setsid, stdio to files), holds an flock'd pidfile (a second start is
refused; a crashed one leaves no lock behind), listens only on a unix socket in its home (reachable
through the SSH link, never a network port), and does all periodic work on one 1 Hz loop: GPU
samples, log reading and readiness of launches, /metrics scraping, runs, the watchdog, the disk guard.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import signal
import socket
import socketserver
import sqlite3
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypedDict

from agents import protocol
from agents.environ import restrict_own_env
from agents.gpu import GpuSampler
from agents.jobs import Jobs
from agents.journal import EVENTS_MAX_BYTES, Journal, now_ms, wire_safe
from agents.package import agent_version
from agents.private import private_home
from agents.probe import probe, time_zone
from agents.supervisor import Supervisor
from agents.uv import run_uv
from agents.watchdog import BOOT_ID_PATH, Watchdog, read_boot_id

DISK_FLOOR_BYTES = 512 * 1024 * 1024
"""Below this much free space in the agent home, samples stop (lifecycle events are still written)."""
EVENTS_LIMIT = 10_000
EVENTS_MAX_WAIT_MS = 30_000
"""The longest an ``events`` call waits for a first event (its ``wait_ms``)."""
SOCKET_NAME = "agent.sock"
WAKE_GAP_S = 0.1
"""The least time between two passes of the loop, however often it is woken (``Agent.wake``)."""
_OUTSIDE_TICK = frozenset({"probe", "shutdown_agent"})
"""Mutating ops that touch no launch state: they run without stalling the 1 Hz loop (a probe takes seconds)."""
PIDFILE = "agent.pid"


class PowerOff(TypedDict):
    """What the box's shutdown command did (a hard-stop timer's ``shutdown``/``destroy``), for its record."""

    argv: list[str]
    rc: int
    output: str
    """The end of its output."""


class Agent:
    def __init__(
        self,
        home: Path,
        disk_floor_bytes: int = DISK_FLOOR_BYTES,
        shutdown_argv: list[str] | None = None,
        sample_interval_s: float = 1.0,
        gpu_source: str = "auto",
        boot_id_file: Path | None = None,
    ) -> None:
        self.home = home
        self.boot_id_file = boot_id_file
        """Where the watchdog reads the kernel's boot id; None: /proc/sys/kernel/random/boot_id."""
        self.disk_floor_bytes = disk_floor_bytes
        self.shutdown_argv = shutdown_argv or ["shutdown", "-h", "now"]
        self.interval = sample_interval_s
        self.gpu_source = gpu_source
        self.journal = Journal(home / "journal.db")
        self.started_ms = now_ms()
        self.stopping = threading.Event()
        self.woken = threading.Event()
        """Set by ``wake``: a pass before the next tick is asked for."""
        self.exit_requested = False
        self._mutate = threading.Lock()
        """Held by the tick and by ops that change launches, runs or timers: one writer at a time."""
        self._ledger = threading.Lock()
        """Held while a mutating command runs, so a re-sent id waits for and then replays the first."""
        self.gpu: GpuSampler | None = None
        self.supervisor = Supervisor(home, self.journal, None)
        self.jobs = Jobs(home, self.journal)
        self.supervisor.wake = self.jobs.wake = self.wake
        self.watchdog: Watchdog | None = None
        self.server: socketserver.ThreadingUnixStreamServer | None = None

    # -- lifecycle ----------------------------------------------------------------------------------

    def start(self) -> None:
        restarted = self.journal.get_meta("started_once") is not None
        self.journal.set_meta("started_once", "1")
        adopted = self.supervisor.adopt()
        adopted_jobs = self.jobs.adopt()
        self.journal.append(
            "agent_started",
            version=agent_version(),
            pid=os.getpid(),
            restarted=restarted,
            adopted_launches=adopted,
            adopted_jobs=adopted_jobs,
        )
        self.gpu = GpuSampler(self.warn, self.gpu_source)
        self.supervisor.gpu = self.gpu
        self.watchdog = self._make_watchdog()
        if self.watchdog is not None:
            self.watchdog.restore()
        self._serve()

    def _make_watchdog(self) -> Watchdog:
        def journal(event: dict[str, Any]) -> None:
            """Record what the watchdog does; a record that cannot be written (a full disk) must never stop
            the stop itself: it goes to the agent's log instead."""
            event = dict(event)
            kind = event.pop("kind")
            try:
                self.journal.append(kind, **event)
            except (sqlite3.Error, OSError) as exc:
                print(
                    f"watchdog: could not journal {kind} {event} ({exc}); acting anyway",
                    file=sys.stderr,
                    flush=True,
                )

        boot_id_file = self.boot_id_file or BOOT_ID_PATH
        return Watchdog(
            self.home,
            journal,
            self.supervisor.stop_all,
            self._shutdown_box,
            boot_id=lambda: read_boot_id(boot_id_file),
        )

    def _shutdown_box(self) -> PowerOff:
        proc = subprocess.run(self.shutdown_argv, capture_output=True, text=True, timeout=60, check=False)
        return {
            "argv": self.shutdown_argv,
            "rc": proc.returncode,
            "output": (proc.stdout + proc.stderr)[-300:],
        }

    def _serve(self) -> None:
        path = self.home / SOCKET_NAME
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        agent = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the caller went away
                    agent.handle_stream(self.rfile, self.wfile)

        old = os.umask(0o177)
        try:
            self.server = _Server(str(path), Handler)
        finally:
            os.umask(old)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, name="socket", daemon=True).start()

    def run(self) -> None:
        """The 1 Hz loop, until shutdown_agent or SIGTERM; between ticks, a pass when woken (``wake``)."""
        next_tick = time.monotonic()
        while not self.stopping.is_set():
            if time.monotonic() >= next_tick:
                self.tick()  # never raises: each step journals its own faults
                next_tick = max(next_tick + self.interval, time.monotonic())
            else:
                self.between_ticks()
            self.woken.wait(next_tick - time.monotonic())
            self.woken.clear()
            if not self.stopping.is_set():  # passes at most every WAKE_GAP_S, however often woken
                self.stopping.wait(min(WAKE_GAP_S, next_tick - time.monotonic()))
        self.close()

    def wake(self) -> None:
        """Ask for a pass over launches and runs now, not at the next tick: a launch was made, a server or a run
        exited, a readiness probe or a read of the GPUs' processes came back. Any thread may call it."""
        self.woken.set()

    def stop(self) -> None:
        self.stopping.set()
        self.woken.set()

    def close(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            with contextlib.suppress(FileNotFoundError):
                (self.home / SOCKET_NAME).unlink()
        if self.gpu is not None:
            self.gpu.close()
        self.supervisor.close()
        self.journal.close()

    def between_ticks(self) -> None:
        """The launches and runs advanced between ticks (woken): a change is journaled when it happens, not up
        to a tick later. Servers' metrics keep the tick's cadence; the GPUs are read only for a release
        waiting on a reading taken after its exit."""
        if self.supervisor.awaits_sample():
            self._step("gpu", self._sample_gpus)
        with self._mutate:
            self._step("launches", lambda: self.supervisor.tick(scrape=False))
            self._step("jobs", self.jobs.tick)
        if self.supervisor.awaits_sample():  # the next reading may not be in yet: look again shortly
            self.wake()

    def tick(self) -> None:
        """One pass of the periodic work. Each step is isolated: a fault in one (a full disk failing a
        journal write, a launch's odd log) is journaled and must not starve the others, above all the
        watchdog, which holds the box's hard stop."""
        self._step("disk", self._disk_guard)
        self._step("gpu", self._sample_gpus)
        with self._mutate:
            self._step("launches", self.supervisor.tick)
            self._step("jobs", self.jobs.tick)
            if self.watchdog is not None:
                self._step("watchdog", self.watchdog.tick)

    def _step(self, where: str, step: Callable[[], None]) -> None:
        try:
            step()
        except Exception:
            self.warn(f"tick:{where}", traceback.format_exc(limit=6)[-1500:])

    def _sample_gpus(self) -> None:
        """The GPUs' reading, journaled at the instant it was taken (the nvidia-smi loop's round may be up to a
        period old): a reading dated after a server's readiness shows what that server holds."""
        if self.gpu is not None:
            rows = self.gpu.read()
            taken = self.gpu.read_mono
            if rows and taken is not None:
                self.supervisor.last_gpu_sample = rows
                age_ms = max(0, round((time.monotonic() - taken) * 1000))
                self.journal.append("gpu_sample", gpus=rows, t_ms=self.journal.clock() - age_ms)

    def _disk_guard(self) -> None:
        free = shutil.disk_usage(self.home).free
        if free < self.disk_floor_bytes:
            freed = self.jobs.prune_records(int(self.disk_floor_bytes * 1.1) - free)
            if freed:
                total = sum(n for _, n in freed)
                self.warn(
                    "disk",
                    f"free space {free} bytes is below the floor: deleted the per-request records of "
                    f"{len(freed)} finished run(s), oldest first ({total} bytes: "
                    f"{', '.join(name for name, _ in freed[:20])}); their results are in the journal",
                )
                free = shutil.disk_usage(self.home).free
        low = free < self.disk_floor_bytes
        if low:
            for message in self.journal.release_stale():
                self.warn("journal", message)
        if low and not self.journal.samples_paused:
            self.journal.samples_paused = True
            self.journal.append(
                "disk_low",
                path=str(self.home),
                free_bytes=free,
                threshold_bytes=self.disk_floor_bytes,
                samples_paused=True,
            )
        elif not low and self.journal.samples_paused and free > self.disk_floor_bytes * 1.1:
            self.journal.samples_paused = False
            self.journal.append(
                "warning", where="disk", message=f"free space back to {free} bytes; samples resumed"
            )

    def warn(self, where: str, message: str) -> None:
        """Journal a survived fault; if even that fails (disk full), say it in agent.log and go on."""
        try:
            self.journal.append("warning", where=where, message=message)
        except sqlite3.Error as exc:
            print(f"warning {where}: {message} (not journaled: {exc})", file=sys.stderr, flush=True)

    # -- the protocol -------------------------------------------------------------------------------

    def handle_stream(self, rfile: Any, wfile: Any) -> None:
        while True:
            line = rfile.readline(protocol.MAX_LINE + 1)
            if not line:
                return
            if not line.strip():
                continue
            wfile.write(_encode(self.handle_line(line)))
            wfile.flush()
            if self.exit_requested:  # only now: the shutdown_agent reply (and its ledger row) is out
                self.stop()

    def handle_line(self, line: bytes) -> dict[str, Any]:
        try:
            message = protocol.decode(line)
        except protocol.ProtocolError as exc:
            return {"id": None, "ok": False, "error": str(exc)}
        command_id = message.get("id")
        op = message.get("op")
        args = message.get("args") or {}
        if not isinstance(command_id, str) or not command_id:
            return {"id": command_id, "ok": False, "error": "every request needs a non-empty string id"}
        if op not in protocol.OPS:
            return {
                "id": command_id,
                "ok": False,
                "error": f"unknown op {op!r}; this agent ({agent_version()}) knows {', '.join(protocol.OPS)}",
            }
        problem = protocol.args_problem(op, args)
        if problem is not None:  # the contract refuses it before anything runs, with the field and its value
            return {"id": command_id, "ok": False, "error": f"{problem}; nothing was run"}
        if op in protocol.IDEMPOTENT_OPS:
            return self._run(command_id, op, args)
        with self._ledger:
            previous = self.journal.command_response(command_id)
            if previous is not None:
                return previous | {"replayed": True}
            if op in _OUTSIDE_TICK:
                response = self._run(command_id, op, args)
            else:
                with self._mutate:
                    response = self._run(command_id, op, args)
            self.journal.record_command(command_id, op, response)
            return response

    def _run(self, command_id: str, op: str, args: dict[str, Any]) -> dict[str, Any]:
        try:
            result = getattr(self, f"op_{op}")(args, command_id)
        except (ValueError, TypeError, KeyError) as exc:
            return {"id": command_id, "ok": False, "error": f"{op}: {exc}"}
        except Exception as exc:
            self.warn(f"op:{op}", traceback.format_exc(limit=6)[-1500:])
            return {
                "id": command_id,
                "ok": False,
                "error": f"{op} failed inside the agent: {type(exc).__name__}: {exc}",
            }
        return {"id": command_id, "ok": True, "result": result}

    def op_hello(self, args: protocol.HelloArgs, command_id: str) -> protocol.HelloResult:
        """With ``consumer`` (a state.db's campaign id) and ``label``, registers that consumer: from now on
        the journal holds every event until it acks it, and a new one is owed every event still held."""
        consumer = args.get("consumer")
        registered = None
        if consumer is not None:
            registered = self.journal.register(consumer, str(args.get("label") or ""))
        consumers = self.journal.consumers()
        return {
            "version": agent_version(),
            "pid": os.getpid(),
            "started_ms": self.started_ms,
            "home": str(self.home),
            "last_seq": self.journal.last_seq(),
            "first_seq": self.journal.first_seq(),
            "acked_seq": registered["acked_seq"]
            if registered
            else min((c["acked_seq"] for c in consumers), default=0),
            "consumer": registered,
            "consumers": consumers,
            "now_ms": now_ms(),
            "tz": time_zone(),
            "python": sys.version.split()[0],
            "gpu_source": self.gpu.source if self.gpu else None,
            "samples_paused": self.journal.samples_paused,
            "timers": self._timers(),
        }

    def _timers(self) -> list[protocol.TimerStatus]:
        if self.watchdog is None:
            return []
        with self._mutate:  # the tick changes the watchdog's timers
            return self.watchdog.timers()

    def op_events(self, args: protocol.EventsArgs, command_id: str) -> protocol.EventsResult:
        """Events after ``after``. A consumer named but not registered (detached, perhaps by another console
        on the same state.db) gets none and ``registered: false``: the journal holds nothing for it, so
        what it would read could have holes, and a hole must never be committed as if it were history.
        ``wait_ms``: with nothing after ``after`` yet, the answer waits for the next event (up to
        EVENTS_MAX_WAIT_MS); this op holds no lock of the agent's, so nothing else waits on it."""
        after = args.get("after", 0)
        limit = args.get("limit", 1000)
        max_bytes = args.get("max_bytes", EVENTS_MAX_BYTES)
        wait_ms = args.get("wait_ms", 0)
        for name, value, least in (
            ("after", after, 0),
            ("limit", limit, 1),
            ("max_bytes", max_bytes, 1),
            ("wait_ms", wait_ms, 0),
        ):
            if value < least:
                raise ValueError(f"{name} must be an integer of at least {least}, got {value!r}")
        named = args.get("consumer")
        consumer = self.journal.consumer(named) if named is not None else None
        held = named is None or consumer is not None
        if held and wait_ms:
            self.journal.wait_after(after, min(wait_ms, EVENTS_MAX_WAIT_MS) / 1000)
        as_rows = bool(args.get("rows"))
        bounds = (after, min(limit, EVENTS_LIMIT), min(max_bytes, EVENTS_MAX_BYTES))
        answer: protocol.EventsResult = {
            "events": self.journal.events_after(*bounds) if held and not as_rows else [],
            "last_seq": self.journal.last_seq(),
            "acked_seq": consumer["acked_seq"] if consumer else None,
            "registered": consumer is not None,
        }
        if as_rows:
            answer["rows"] = self.journal.rows_after(*bounds) if held else []
        return answer

    def op_ack(self, args: protocol.AckArgs, command_id: str) -> protocol.AckResult:
        """A consumer's ack; ``registered: false`` when it was detached meanwhile (nothing is acked then).
        Without a consumer (a client run by hand) nothing is held or released: the seq is only checked (the
        contract made it an integer)."""
        seq, consumer = args["seq"], args.get("consumer")
        if consumer is None:
            if not 0 <= seq <= self.journal.last_seq():
                raise ValueError(f"ack seq must be an integer from 0 to the last journaled seq, got {seq!r}")
            return {"acked_seq": seq, "registered": False}
        acked = self.journal.ack(seq, consumer)
        return {"acked_seq": acked, "registered": acked is not None}

    def op_detach(self, args: protocol.DetachArgs, command_id: str) -> protocol.DetachResult:
        return {
            "detached": self.journal.detach(args["consumer"]),
            "first_seq": self.journal.first_seq(),
            "last_seq": self.journal.last_seq(),
        }

    def op_launch(self, args: protocol.LaunchArgs, command_id: str) -> protocol.LaunchResult:
        launched = self.supervisor.launch(args)
        self.wake()  # its first readiness probe goes now; each answer wakes the agent for the next
        return launched

    def op_kill(self, args: protocol.KillArgs, command_id: str) -> protocol.KillResult:
        return self.supervisor.kill(args["launch_id"], float(args.get("grace_s", 30.0)), command_id)

    def op_launches(self, args: protocol.NoArgs, command_id: str) -> protocol.LaunchesResult:
        return {"launches": self.supervisor.snapshot()}

    def op_log_tail(self, args: protocol.LogTailArgs, command_id: str) -> protocol.LogTailResult:
        return {"lines": self.supervisor.log_tail(args["launch_id"], args.get("lines", 100))}

    def op_probe(self, args: protocol.ProbeArgs, command_id: str) -> protocol.ProbeResult:
        console_t_ms = args.get("console_t_ms")
        if console_t_ms is not None and self.watchdog is not None:
            with self._mutate:  # the console's UTC re-anchors a live deadline (a box back from a reboot)
                self.watchdog.confirm_utc(console_t_ms)
        result = probe(
            console_t_ms=console_t_ms,
            serving_python=args.get("serving_python"),
            disk_path=str(self.home),
            serving_env_vars=args.get("serving_env"),
            gpu_source=self.gpu_source,
            patches=args.get("patches"),
        )
        self.journal.append("probe", probe=result)
        return {"probe": result}

    def op_bench(self, args: protocol.BenchArgs, command_id: str) -> protocol.RunStarted:
        return self.jobs.start("bench", args, command_id)

    def op_tripwire(self, args: protocol.TripwireArgs, command_id: str) -> protocol.RunStarted:
        # Sent while the launch loads: where it listens and which process it is are this agent's to say (a
        # launch whose port was taken moved to a free one), never the console's guess.
        waits = args.get("wait_ready_s") is not None
        awaited: Mapping[str, object] = self.supervisor.awaited(args.get("launch_id")) if waits else {}
        return self.jobs.start("tripwire", {**args, **awaited}, command_id)

    def op_kldiff(self, args: protocol.KldiffArgs, command_id: str) -> protocol.RunStarted:
        return self.jobs.start("kldiff", args, command_id)

    def op_specdiff(self, args: protocol.SpecdiffArgs, command_id: str) -> protocol.RunStarted:
        return self.jobs.start("specdiff", args, command_id)

    def op_set_deadline(self, args: protocol.SetDeadlineArgs, command_id: str) -> protocol.SetDeadlineResult:
        if self.watchdog is None:
            raise ValueError("the agent's watchdog has not started yet; try again in a moment")
        # The contract (protocol.SetDeadlineArgs) requires each argument; the watchdog checks their values.
        return self.watchdog.arm(
            args["timer_id"], args["deadline_ms"], args["action"], args["console_now_ms"]
        )

    def op_cancel_deadline(
        self, args: protocol.CancelDeadlineArgs, command_id: str
    ) -> protocol.CancelDeadlineResult:
        if self.watchdog is None:
            raise ValueError("the agent's watchdog has not started yet; try again in a moment")
        return self.watchdog.cancel(args["timer_id"])

    def op_uv(self, args: protocol.UvArgs, command_id: str) -> protocol.UvResult:
        return run_uv(args)

    def op_shutdown_agent(self, args: protocol.NoArgs, command_id: str) -> protocol.NoArgs:
        self.journal.append(
            "warning",
            where="agent",
            message=f"agent {os.getpid()} shutting down on request; arms keep running and will be re-adopted",
        )
        self.exit_requested = True
        return {}


def _encode(response: dict[str, Any]) -> bytes:
    """The reply line. A journal row holding a number JSON cannot carry (NaN; 1e999 decodes to inf) fails
    the encoding: such events are sent as malformed instead, so one bad row never breaks the reply."""
    try:
        return protocol.encode(response)
    except ValueError as exc:
        result = response.get("result")
        if not isinstance(result, dict) or not isinstance(result.get("events"), list):
            return protocol.encode(
                {
                    "id": response.get("id"),
                    "ok": False,
                    "error": f"the agent's answer is not valid JSON ({exc}); this is a bug",
                }
            )
        result["events"] = [wire_safe(e) for e in result["events"]]
        if isinstance(
            result.get("rows"), list
        ):  # a row the agent parsed itself (a large body) may hold one too
            result["rows"] = [wire_safe(r) if type(r) is dict else r for r in result["rows"]]
        return protocol.encode(response)


# -- starting the daemon --------------------------------------------------------------------------


class AlreadyRunning(RuntimeError):
    pass


class _Server(socketserver.ThreadingUnixStreamServer):
    request_queue_size = 128
    """The listen backlog. Every console command opens its own channel, so a sweep of several replicas opens
    many at once; with the default of 5 a busy box refuses the excess (sshd reports a channel open failure)."""


def lock_pidfile(home: Path) -> int:
    """Open and flock ``<home>/agent.pid``; raises AlreadyRunning naming the holder's pid."""
    fd = os.open(home / PIDFILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno not in (errno.EAGAIN, errno.EACCES):
            raise
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise AlreadyRunning(
            f"an agent is already running in {home} (pid {holder}); stop it with the shutdown_agent op first"
        ) from None
    return fd


def _write_pid(fd: int) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)


def _prepare(home: Path) -> None:
    """Before the first file: a private home (agents/private.py) and, for the daemon and everything it
    starts, the allowlisted environment (agents/environ.py)."""
    private_home(home)
    restrict_own_env()


def run_foreground(home: Path, **options: Any) -> int:
    _prepare(home)
    fd = lock_pidfile(home)
    _write_pid(fd)
    agent = Agent(home, **options)
    signal.signal(signal.SIGTERM, lambda *_: agent.stop())
    agent.start()
    agent.run()
    return 0


def detach(home: Path, ready_timeout_s: float = 20.0, **options: Any) -> dict[str, Any]:
    """Start the daemon detached from this session; return once its socket answers ``hello``.

    The pidfile lock is taken here, before forking, so a second start fails in the caller with a clear
    message; the grandchild inherits the locked descriptor and holds it for its lifetime.
    """
    _prepare(home)
    fd = lock_pidfile(home)
    pid = os.fork()
    if pid == 0:  # child: new session, then fork again so the daemon can never regain a terminal
        try:
            os.setsid()
            if os.fork() != 0:
                os._exit(0)
            _become_daemon(home, fd, options)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    os.close(fd)
    deadline = time.monotonic() + ready_timeout_s
    last_error = ""
    while time.monotonic() < deadline:
        try:
            return call(home, "hello", {}, timeout=2.0)
        except OSError as exc:
            last_error = str(exc)
            time.sleep(0.05)
    log = home / "agent.log"
    tail = log.read_text(errors="replace")[-1500:] if log.exists() else ""
    raise RuntimeError(
        f"agent did not answer on {home / SOCKET_NAME} within {ready_timeout_s} s ({last_error}); "
        f"agent.log ends:\n{tail}"
    )


def _become_daemon(home: Path, fd: int, options: dict[str, Any]) -> None:
    os.chdir(home)
    devnull = os.open(os.devnull, os.O_RDONLY)
    log = os.open(home / "agent.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(devnull, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(devnull)
    os.close(log)
    _write_pid(fd)
    agent = Agent(home, **options)
    signal.signal(signal.SIGTERM, lambda *_: agent.stop())
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        agent.start()
        agent.run()
    except Exception:
        traceback.print_exc()
        sys.stderr.flush()


def call(
    home: Path, op: str, args: dict[str, Any], timeout: float = 30.0, command_id: str | None = None
) -> dict[str, Any]:
    """One request to the local daemon's socket (used by ``detach`` and the CLI; the console has its own)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(str(home / SOCKET_NAME))
        s.sendall(
            protocol.encode(
                {"id": command_id or f"cli-{os.getpid()}-{time.monotonic_ns()}", "op": op, "args": args}
            )
        )
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(1 << 20)
            if not chunk:
                raise ConnectionError(f"agent closed the socket before answering {op}")
            buf += chunk
    reply = protocol.decode(buf)
    if not reply.get("ok"):
        raise RuntimeError(reply.get("error"))
    result: dict[str, Any] = reply["result"]
    return result


def dumps(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=True)
