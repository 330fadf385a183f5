"""Benchmark and tripwire runs on the box: the load generator / tripwire as child processes.

Why child processes: a run lasts minutes and uses several cores; the daemon must stay responsive and
keep sampling at 1 Hz meanwhile, and a crashing run must not take the agent with it. The child is the
agent's own entry point (``<agent> loadgen ...`` / ``<agent> tripwire ...``) so the zipapp the console
pushed is all the box needs. The tripwire's child runs under the ``python`` its command names (the
serving environment's, which has the ``openai`` package its client needs: agents/tripwire/client.py),
else under the agent's own interpreter. Its one JSON object on stdout becomes a ``bench_result`` /
``tripwire_result`` event; any failure becomes a ``command_done`` with the reason.

No measurement is lost to an agent restart (crash, ``kill -9``, a pushed new version): every run is a
row of the journal's ``jobs`` table (pid + kernel start time, output paths) before and after it starts,
so the next agent process re-adopts it, watches it by pid (it is no longer our child), and when it has
ended reads its output file. The result events and the row's ``done`` state commit in one transaction,
so each result is journaled exactly once whatever moment the agent dies at.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents import proc, protocol
from agents.environ import allowed_env
from agents.journal import Journal
from agents.protocol import EventKind, RunStarted

RunArgs = Mapping[str, object]
"""A run op's arguments (protocol.BenchArgs, TripwireArgs or KldiffArgs, already checked against the
contract), read by the names the contract declares: the tool's flags are taken from it, not copied."""

# Protocol arg -> CLI flag of agents.loadgen / agents.tripwire (agents/protocol.py names the args).
_NOT_FLAGS = frozenset(
    {"bench_id", "tripwire_id", "kldiff_id", "specdiff_id", "launch_id", "argv", "workload", "python"}
)
"""Args of a run that are the agent's, not its tool's: every other declared arg is the tool's flag."""
_FLAGS = {
    op: tuple(k for k in protocol.OPS[op].args.__annotations__ if k not in _NOT_FLAGS)
    for op in ("bench", "tripwire", "kldiff", "specdiff")
}
"""The tool flags each run op passes on, from the wire contract (agents/protocol.py) rather than a copy."""
_REPEATED = frozenset({"base_url"})
"""Args whose list value is the flag repeated (``--base-url A --base-url B``: a node's replicas)."""
_ID_KEY = {"bench": "bench_id", "tripwire": "tripwire_id", "kldiff": "kldiff_id", "specdiff": "specdiff_id"}
_RESULT_KIND: dict[str, EventKind] = {
    "bench": "bench_result",
    "tripwire": "tripwire_result",
    "kldiff": "kldiff_result",
    "specdiff": "specdiff_result",
}
"""The event each run's result is journaled as."""
SAMPLE_FIELDS = ("t_ms", "requests", "out_tokens", "in_tokens", "out_tok_per_s", "in_tok_per_s")
"""What a ``bench_progress`` event carries from the load generator's samples file (agents/loadgen/run.py)."""
MAX_SAMPLES_BYTES = 1 << 20
"""Read per tick at most: a backlog after a long restart is journaled over several ticks."""
_TOOL = {"bench": "loadgen", "tripwire": "tripwire", "kldiff": "kldiff", "specdiff": "specdiff"}


def _archive() -> str | None:
    """The zipapp this agent was imported from, if any."""
    return getattr(getattr(sys.modules["agents"], "__loader__", None), "archive", None)


def agent_command(python: str | None = None) -> list[str]:
    """How to start this agent again under ``python`` (default: this interpreter): the zipapp it runs
    from, else ``python -m agents``."""
    interpreter = python or sys.executable
    archive = _archive()
    return [interpreter, archive] if archive else [interpreter, "-m", "agents"]


def tripwire_python(args: RunArgs) -> str | None:
    """The interpreter a tripwire command names (``python``), checked before anything is started."""
    python = args.get("python")
    if python is None:
        return None
    if not isinstance(python, str) or not os.path.isfile(python) or not os.access(python, os.X_OK):
        raise ValueError(
            f"tripwire python {python!r} is not an executable file on this box; name the serving "
            "environment's interpreter (<serving_env>/bin/python), or leave python out to run the "
            "tripwire under the agent's own"
        )
    return python


def agent_env() -> dict[str, str]:
    """The environment for a child started with ``agent_command()``: the allowlist, ``agents`` importable."""
    env = allowed_env()
    if not _archive():
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = root
    return env


def tool_argv(op: str, args: RunArgs) -> list[str]:
    """The tool's argv from the op's args: an explicit ``argv`` list, else the known fields as flags."""
    if "argv" in args:
        argv = args["argv"]
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            raise ValueError(f"{op} argv must be a list of strings")
        out = list(argv)
    else:
        if op == "bench" and args.get("shape") is None and args.get("workload") is not None:
            # The console names the recipe's shape ``workload`` and sends its lengths: the name is a label.
            args = {**args, "shape": args["workload"]}
        out = []
        for key in _FLAGS[op]:
            val = args.get(key)
            if val is None:
                continue
            if key in _REPEATED and isinstance(val, list):
                out += [part for item in val for part in (f"--{key.replace('_', '-')}", str(item))]
            elif isinstance(val, (dict, list)):
                out += [f"--{key.replace('_', '-')}-json", json.dumps(val)]
            else:
                out += [f"--{key.replace('_', '-')}", str(val)]
    for flag in ("--json", "--quiet"):  # one JSON object on stdout; no progress bars in the run's log
        if flag not in out:
            out.append(flag)
    return out


@dataclass
class Job:
    op: str
    job_id: str
    launch_id: str | None
    command_id: str | None
    pid: int | None
    start_ticks: int | None
    out_path: Path
    err_path: Path
    popen: subprocess.Popen[bytes] | None = None
    """None for a run adopted from a previous agent process: watched by pid + start time instead."""
    samples_offset: int = 0
    """How far the load generator's progress samples were journaled (bench only)."""

    @property
    def samples_path(self) -> Path:
        return self.out_path.with_suffix(".samples")

    @property
    def key(self) -> str:
        return f"{self.op}:{self.job_id}"

    def exit_code(self) -> tuple[bool, int | None]:
        """(ended, exit code): the code is unknown (None) for an adopted run, which is not our child."""
        if self.popen is not None:
            code = self.popen.poll()
            return code is not None, code
        return self.pid is None or not proc.alive(self.pid, self.start_ticks), None


class Jobs:
    def __init__(self, home: Path, journal: Journal) -> None:
        self.dir = home / "jobs"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.journal = journal
        self.running: dict[str, Job] = {}
        self.wake: Callable[[], None] = lambda: None
        """Asks the agent for a pass before its next tick when a run's process ends (agents/daemon.py)."""

    def adopt(self) -> list[str]:
        """Take over the runs a previous agent process started; returns the keys still running.

        Ended ones are finished by the next ``tick()`` (their result read from the output file).
        """
        still = []
        for row in self.journal.running_jobs():
            job = Job(
                row["op"],
                row["job_id"],
                row["launch_id"],
                row["command_id"],
                row["pid"],
                row["start_ticks"],
                Path(row["out_path"]),
                Path(row["err_path"]),
                samples_offset=row["samples_offset"] or 0,
            )
            self.running[job.key] = job
            if not job.exit_code()[0]:
                still.append(job.key)
        return still

    def start(self, op: str, args: RunArgs, command_id: str | None) -> RunStarted:
        job_id = args.get(_ID_KEY[op])
        if not isinstance(job_id, (str, int)) or isinstance(job_id, bool) or str(job_id) == "":
            raise ValueError(f"{op} needs {_ID_KEY[op]} (a string or integer id chosen by the console)")
        job_id = str(job_id)
        key = f"{op}:{job_id}"
        known = self.journal.job(key)
        if known is not None and command_id is not None and known["command_id"] == command_id:
            # The agent died after starting it but before the ledger kept the reply: same answer again.
            return {"started": True, "pid": known["pid"], "log_path": known["err_path"], "replayed": True}
        if key in self.running:
            raise ValueError(f"{op} {job_id} is already running")
        if known is not None:
            raise ValueError(f"{op} id {job_id!r} was already used on this box; every run needs a new id")
        safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in job_id)
        python = (
            tripwire_python(args) if op in ("tripwire", "kldiff", "specdiff") else None
        )  # kldiff's and specdiff's client is openai's too
        argv = agent_command(python) + [_TOOL[op], *tool_argv(op, args)]
        out_path, err_path = self.dir / f"{op}-{safe}.json", self.dir / f"{op}-{safe}.log"
        if op == "bench" and "--records" not in argv:
            # One records file per bench id: benches on several replicas start in the same second.
            argv += ["--records", str(self.dir / f"{op}-{safe}.jsonl")]
        if op == "bench" and "--samples" not in argv:
            argv += ["--samples", str(out_path.with_suffix(".samples"))]
        launch_id = args.get("launch_id")
        launch_id = None if launch_id is None else str(launch_id)
        # Saved before the spawn: a crash in between leaves a row the next agent closes with a reason.
        self.journal.save_job(
            key, op, job_id, launch_id, command_id, None, None, str(out_path), str(err_path), "starting"
        )
        try:
            with open(out_path, "wb") as out, open(err_path, "wb") as err:
                popen = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    env=agent_env(),
                    start_new_session=True,
                    cwd=str(self.dir),
                )
        except OSError:
            self.journal.set_job_state(key, "failed")
            raise
        ticks = proc.start_ticks(popen.pid)
        self.journal.save_job(
            key, op, job_id, launch_id, command_id, popen.pid, ticks, str(out_path), str(err_path), "running"
        )
        self.running[key] = Job(
            op, job_id, launch_id, command_id, popen.pid, ticks, out_path, err_path, popen
        )
        proc.on_exit(popen.pid, self.wake)
        return {"started": True, "pid": popen.pid, "log_path": str(err_path)}

    def prune_records(self, need_bytes: int) -> list[tuple[str, int]]:
        """Delete per-request records of finished runs, oldest first, until ``need_bytes`` are freed.

        Why: a C1024 bench of long outputs writes hundreds of MB of per-event records, and a sweep runs
        dozens; nothing else bounds them. Only the disk guard calls this, below the disk floor, where
        the choice is between old raw records and the journal itself. Results (``.json``) and logs stay.
        Returns (file name, bytes) of what went.
        """
        live = {job.out_path.with_suffix(".jsonl") for job in self.running.values()}
        candidates = []
        for path in self.dir.glob("*.jsonl"):
            try:
                st = path.stat()
            except FileNotFoundError:
                continue
            if path not in live:
                candidates.append((st.st_mtime, path, st.st_size))
        freed: list[tuple[str, int]] = []
        for _, path, size in sorted(candidates):
            if sum(n for _, n in freed) >= need_bytes:
                break
            try:
                path.unlink()
            except FileNotFoundError:
                continue
            freed.append((path.name, size))
        return freed

    def tick(self) -> None:
        for key, job in list(self.running.items()):
            ended, code = job.exit_code()
            if job.op == "bench":
                self._forward_samples(
                    job, drain=ended
                )  # after the exit check: an ended run's samples are all there
            if not ended:
                continue
            with self.journal.atomic():  # the result and "done" commit together: journaled exactly once
                self._finish(job, code)
                self.journal.set_job_state(key, "done")
            del self.running[key]

    def _forward_samples(self, job: Job, drain: bool) -> None:
        """Journal the load generator's new progress lines as ``bench_progress`` events (all of them when
        ``drain``, else at most MAX_SAMPLES_BYTES a tick).

        The events and how far the file was read commit together, so a restarted agent neither loses nor
        repeats one. Lines are whole up to the last newline (the load generator flushes each one).
        """
        while True:
            try:
                with open(job.samples_path, "rb") as f:
                    f.seek(job.samples_offset)
                    chunk = f.read(MAX_SAMPLES_BYTES)
            except FileNotFoundError:  # not started yet
                return
            end = chunk.rfind(b"\n") + 1
            if not end:
                return
            with self.journal.atomic():
                for line in chunk[:end].splitlines():
                    try:
                        sample = json.loads(line)
                    except json.JSONDecodeError:  # not the load generator's line: nothing to chart
                        continue
                    if isinstance(sample, dict):
                        fields = {k: sample[k] for k in SAMPLE_FIELDS if k in sample}
                        self.journal.append(
                            "bench_progress", bench_id=job.job_id, launch_id=job.launch_id, **fields
                        )
                job.samples_offset += end
                self.journal.set_job_samples_offset(job.key, job.samples_offset)
            if not drain or len(chunk) < MAX_SAMPLES_BYTES:
                return

    def _finish(self, job: Job, code: int | None) -> None:
        text = _read(job.out_path).strip()
        result: Any = None
        error = None
        try:
            result = json.loads(text.splitlines()[-1]) if text else None
        except json.JSONDecodeError:
            error = f"{job.op} printed no JSON result: {text[-300:]!r}"
        if result is None and error is None:
            err = _read(job.err_path, 600).strip()
            if job.pid is None:
                error = (
                    f"the agent restarted while starting this {job.op}; it may not have run. "
                    f"Run it again with a new id; stderr: {err}"
                )
            elif code is None:
                error = f"{_TOOL[job.op]} ended while the agent was not watching it, without a result; stderr: {err}"
            else:
                error = f"{_TOOL[job.op]} exited {code} without a result; stderr: {err}"
        if error is None and isinstance(result, dict):
            self.journal.append(
                _RESULT_KIND[job.op],
                **{
                    _ID_KEY[job.op]: job.job_id,
                    "launch_id": job.launch_id,
                    "result": result,
                    "exit_code": code,
                },
            )
        elif error is None:
            error = f"{job.op} result is not a JSON object: {text[:200]!r}"
        if job.command_id is not None:
            done: dict[str, Any] = {"command_id": job.command_id, "op": job.op, "ok": error is None}
            done.update({"result": {"exit_code": code}} if error is None else {"error": error})
            self.journal.append("command_done", **done)
        elif error is not None:
            self.journal.append("warning", where=f"{job.op}:{job.job_id}", message=error)


def _read(path: Path, tail: int | None = None) -> str:
    """A run's output or log file (its end when ``tail``); empty if the run never created it."""
    try:
        with open(path, "rb") as f:
            if tail is not None:
                f.seek(max(0, f.seek(0, os.SEEK_END) - tail))
            return f.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""
