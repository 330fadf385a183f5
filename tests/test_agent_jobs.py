"""No measurement lost across an agent restart: bench/tripwire runs outlive the daemon and are journaled once.

The daemon is a real detached process killed with SIGKILL mid-bench; the load generator it started is a
real child process; the server is a real loopback HTTP server framing completions as vLLM does
(``testbed/zero_server.py``'s bytes) that holds each answer until the test opens a gate, so "mid-bench"
and "finished while the agent was down" are exact moments, not sleeps.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from agents import proc
from agents.jobs import Jobs
from agents.journal import Journal
from testbed.agent_box import AgentBox
from testbed.ports import free_port
from testbed.zero_server import MAX_TOKENS, prompt_tokens, stream_body


class GatedServer:
    """Answers ``POST /v1/completions`` only once the gate for its ``max_tokens`` is open."""

    def __init__(self) -> None:
        self.gates: dict[int, threading.Event] = {}
        self.seen: Counter[int] = Counter()
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                body = json.dumps({"data": [{"id": "gated", "root": None, "max_model_len": 4096}]}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                found = MAX_TOKENS.search(body)
                assert found is not None
                max_tokens = int(found.group(1))
                with outer.lock:
                    outer.seen[max_tokens] += 1
                outer.gate(max_tokens).wait(120)
                self.wfile.write(stream_body("gated", max_tokens, prompt_tokens(body)))

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def gate(self, max_tokens: int) -> threading.Event:
        with self.lock:
            return self.gates.setdefault(max_tokens, threading.Event())

    def close(self) -> None:
        for gate in list(self.gates.values()):
            gate.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def _until(check: Any, timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        time.sleep(0.05)


def bench_args(server: GatedServer, bench_id: str, output_len: int) -> dict[str, Any]:
    return {
        "bench_id": bench_id,
        "launch_id": "L1",
        "base_url": server.base_url,
        "model": "gated",
        "vocab_size": 100,
        "input_len": 4,
        "output_len": output_len,
        "concurrency": 2,
        "prompts": 2,
        "warmup": 0,
        "seed": 5,
    }


def test_benches_survive_a_sigkilled_agent_and_are_journaled_exactly_once(tmp_path: Path) -> None:
    server = GatedServer()
    box = AgentBox(tmp_path / "home", path_prefix=[])
    box.start()
    try:
        early = box.ok("bench", bench_args(server, "early", 8), command_id="bench-early")
        box.ok("bench", bench_args(server, "late", 9), command_id="bench-late")
        _until(lambda: server.seen[8] >= 2 and server.seen[9] >= 2, what="both benches in flight")
        last = box.events()[-1]["seq"]
        box.kill_hard()  # mid-bench: both load generators are waiting on the server

        server.gate(8).set()  # "early" finishes while no agent is watching
        early_ticks = proc.start_ticks(early["pid"])
        _until(lambda: not proc.alive(early["pid"], early_ticks), what="the early bench to end")
        box.start()
        started = box.wait_for(lambda e: e["kind"] == "agent_started" and e["seq"] > last)
        assert started["restarted"] is True and started["adopted_jobs"] == ["bench:late"]
        result = box.wait_for(lambda e: e["kind"] == "bench_result" and e["bench_id"] == "early")
        assert result["launch_id"] == "L1" and result["exit_code"] is None  # not our child any more
        assert result["result"]["requests"] == 2 and result["result"]["failed"] == 0
        assert result["result"]["output_len"] == 8

        server.gate(9).set()  # "late" finishes under the new agent, watched by pid
        late = box.wait_for(lambda e: e["kind"] == "bench_result" and e["bench_id"] == "late")
        assert late["result"]["requests"] == 2 and late["result"]["mismatches"]["completion_tokens"] == 0

        box.shutdown()  # and one more restart journals nothing again
        box.start()
        box.wait_for(lambda e: e["kind"] == "agent_started" and e["seq"] > late["seq"])
        time.sleep(0.6)  # two ticks of the new agent
        events = box.events()
        results = Counter(e["bench_id"] for e in events if e["kind"] == "bench_result")
        done = {e["command_id"]: e for e in events if e["kind"] == "command_done"}
        assert results == {"early": 1, "late": 1}
        assert Counter(e["command_id"] for e in events if e["kind"] == "command_done") == {
            "bench-early": 1,
            "bench-late": 1,
        }
        assert done["bench-early"]["ok"] and done["bench-late"]["ok"]
        assert done["bench-late"]["result"] == {"exit_code": None}  # adopted: watched by pid, code unknown
        again = box.request("bench", bench_args(server, "late", 9), command_id="bench-late-2")
        assert not again["ok"] and "already used on this box" in again["error"]
    finally:
        server.close()
        box.stop()


def test_a_run_that_ends_between_ticks_is_journaled_as_it_ends(tmp_path: Path) -> None:
    """The end of a run's process wakes the agent: its result is journaled though the next tick is an hour
    away."""
    server = GatedServer()
    box = AgentBox(tmp_path / "home", path_prefix=[], interval_s=3600)
    box.start()
    try:
        box.ok("bench", bench_args(server, "gated", 8), command_id="bench-gated")
        _until(lambda: server.seen[8] >= 2, what="the bench in flight")
        server.gate(8).set()
        result = box.wait_for(lambda e: e["kind"] == "bench_result", what="the result before the next tick")
        assert result["bench_id"] == "gated" and result["result"]["requests"] == 2
        done = box.wait_for(lambda e: e["kind"] == "command_done" and e["command_id"] == "bench-gated")
        assert done["ok"] and done["result"] == {"exit_code": 0}
    finally:
        server.close()
        box.stop()


# -- the same machinery without a daemon: a Jobs table over a real journal file --------------------


def test_a_crash_between_saving_and_spawning_is_closed_with_a_reason(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal.db")
    jobs_dir = tmp_path / "jobs"
    journal.save_job(
        "tripwire:w1",
        "tripwire",
        "w1",
        "L1",
        "trip-1",
        None,
        None,
        str(jobs_dir / "w1.json"),
        str(jobs_dir / "w1.log"),
        "starting",
    )
    jobs = Jobs(tmp_path, journal)
    assert jobs.adopt() == []  # nothing of it runs
    jobs.tick()
    jobs.tick()
    done = [e for e in journal.events_after(0, 100) if e["kind"] == "command_done"]
    assert len(done) == 1 and done[0]["ok"] is False and "restarted while starting" in done[0]["error"]
    assert journal.running_jobs() == [] and journal.job("tripwire:w1")["state"] == "done"  # type: ignore[index]


def test_a_run_that_ended_with_its_result_while_down_is_read_from_its_output(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal.db")
    out = tmp_path / "jobs" / "tripwire-w2.json"
    out.parent.mkdir()
    out.write_text('{"passed": true, "score": "20/20"}\n')
    journal.save_job(
        "tripwire:w2",
        "tripwire",
        "w2",
        "L1",
        "trip-2",
        999_999_999,
        1,
        str(out),
        str(out.with_suffix(".log")),
        "running",
    )  # a pid that cannot exist: it has ended
    jobs = Jobs(tmp_path, journal)
    assert jobs.adopt() == []
    jobs.tick()
    events = journal.events_after(0, 100)
    assert [e["kind"] for e in events] == ["tripwire_result", "command_done"]
    assert events[0]["result"] == {"passed": True, "score": "20/20"} and events[0]["tripwire_id"] == "w2"
    assert Jobs(tmp_path, journal).adopt() == [] and journal.running_jobs() == []


def test_a_benchs_progress_samples_are_journaled_once_across_a_restart(tmp_path: Path) -> None:
    import os

    journal = Journal(tmp_path / "journal.db")
    out = tmp_path / "jobs" / "bench-b1.json"
    out.parent.mkdir()
    samples = out.with_suffix(".samples")
    line = '{{"t_ms": {t}, "requests": {n}, "out_tokens": {o}, "in_tokens": 0, "out_tok_per_s": 100.0, "in_tok_per_s": 0}}\n'
    samples.write_text(
        line.format(t=1000, n=1, o=100) + line.format(t=2000, n=2, o=200)[:30]
    )  # one half-written
    me = os.getpid()
    journal.save_job(
        "bench:b1",
        "bench",
        "b1",
        "L1",
        "bench-b1",
        me,
        proc.start_ticks(me),
        str(out),
        str(out.with_suffix(".log")),
        "running",
    )  # "running": this test process stands in for it
    jobs = Jobs(tmp_path, journal)
    assert jobs.adopt() == ["bench:b1"]
    jobs.tick()
    progress = [e for e in journal.events_after(0, 100) if e["kind"] == "bench_progress"]
    assert [(e["t_ms"], e["requests"], e["bench_id"], e["launch_id"]) for e in progress] == [
        (1000, 1, "b1", "L1")
    ]
    samples.write_text(
        line.format(t=1000, n=1, o=100) + line.format(t=2000, n=2, o=200)
    )  # the line completed
    restarted = Jobs(tmp_path, journal)  # a new agent process: it reads on from where the journal says
    restarted.adopt()
    restarted.tick()
    progress = [e for e in journal.events_after(0, 100) if e["kind"] == "bench_progress"]
    assert [e["t_ms"] for e in progress] == [1000, 2000] and progress[1]["out_tokens"] == 200


def test_atomic_rolls_back_the_events_and_the_state_together(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal.db")
    journal.save_job("bench:b", "bench", "b", None, None, 1, 1, "o", "e", "running")
    with pytest.raises(RuntimeError), journal.atomic():
        journal.append("bench_result", bench_id="b", result={})
        with journal.atomic():  # nested: part of the outer transaction
            journal.set_job_state("bench:b", "done")
        raise RuntimeError("the agent dies here")
    assert journal.events_after(0, 10) == [] and journal.job("bench:b")["state"] == "running"  # type: ignore[index]


def test_an_old_journal_gains_the_kill_column(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "journal.db"
    with sqlite3.connect(path) as db:  # the launches table as the previous agent version wrote it
        db.execute(
            "CREATE TABLE launches (launch_id TEXT PRIMARY KEY, pid INTEGER, start_ticks INTEGER, port INTEGER "
            "NOT NULL, gpus TEXT NOT NULL, log_path TEXT NOT NULL, state TEXT NOT NULL, t_ms INTEGER NOT NULL)"
        )
        db.execute("INSERT INTO launches VALUES ('a', 1, 1, 8000, '[0]', 'x.log', 'serving', 0)")
    journal = Journal(path)
    assert journal.live_launches()[0]["kill_command_id"] is None
    journal.set_launch_state("a", "stopping", kill_command_id="k1")
    journal.set_launch_state("a", "stopped")
    assert journal.live_launches()[0]["kill_command_id"] == "k1"  # ended, kill not answered: still listed
    journal.kill_answered("a")
    assert journal.live_launches() == []


def test_an_old_journal_gains_the_samples_offset_column(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "journal.db"
    with sqlite3.connect(path) as db:  # the jobs table as the previous agent version wrote it
        db.execute(
            "CREATE TABLE jobs (key TEXT PRIMARY KEY, op TEXT NOT NULL, job_id TEXT NOT NULL, launch_id TEXT, "
            "command_id TEXT, pid INTEGER, start_ticks INTEGER, out_path TEXT NOT NULL, err_path TEXT NOT NULL, "
            "state TEXT NOT NULL, t_ms INTEGER NOT NULL)"
        )
        db.execute(
            "INSERT INTO jobs VALUES ('bench:x', 'bench', 'x', 'L1', 'c1', 1, 1, 'o.json', 'o.log', 'running', 0)"
        )
    journal = Journal(path)
    assert journal.running_jobs()[0]["samples_offset"] is None  # read from the start, as a new run is
    journal.set_job_samples_offset("bench:x", 120)
    assert journal.running_jobs()[0]["samples_offset"] == 120


def test_pruning_spares_the_records_of_a_run_still_going(tmp_path: Path) -> None:
    import os

    journal = Journal(tmp_path / "journal.db")
    jobs = Jobs(tmp_path, journal)
    for age, name in enumerate(("bench-c", "bench-b", "bench-a", "bench-live")):
        path = jobs.dir / f"{name}.jsonl"
        path.write_bytes(b"r" * 1000)
        os.utime(path, (1_000_000 - age * 1000, 1_000_000 - age * 1000))  # bench-live oldest, bench-c newest
    journal.save_job(
        "bench:live",
        "bench",
        "live",
        None,
        None,
        1,
        1,
        str(jobs.dir / "bench-live.json"),
        str(jobs.dir / "bench-live.log"),
        "running",
    )
    jobs.adopt()
    assert jobs.prune_records(1500) == [
        ("bench-a.jsonl", 1000),
        ("bench-b.jsonl", 1000),
    ]  # oldest first, enough
    assert sorted(p.name for p in jobs.dir.iterdir()) == ["bench-c.jsonl", "bench-live.jsonl"]
    assert jobs.prune_records(10**9) == [("bench-c.jsonl", 1000)]  # the live run's records are never touched


def test_the_consoles_workload_name_reaches_the_load_generator_as_a_label() -> None:
    from agents.jobs import tool_argv

    argv = tool_argv(
        "bench",
        {
            "base_url": "http://127.0.0.1:1",
            "model": "m",
            "workload": "tiny",
            "input_len": 64,
            "output_len": 16,
            "prefix_len": 0,
            "concurrency": 2,
        },
    )
    assert argv[argv.index("--shape") + 1] == "tiny" and argv[argv.index("--input-len") + 1] == "64"
    own = tool_argv(
        "bench", {"base_url": "u", "model": "m", "shape": "router", "workload": "x", "concurrency": 1}
    )
    assert own[own.index("--shape") + 1] == "router"


def test_a_nodes_replicas_reach_the_load_generator_as_repeated_base_urls() -> None:
    from agents.jobs import tool_argv
    from agents.loadgen.cli import parser

    argv = tool_argv(
        "bench",
        {
            "base_url": ["http://127.0.0.1:8100", "http://127.0.0.1:8101"],
            "model": "m",
            "shape": "router",
            "concurrency": 8,
            "launch_ids": ["a", "b"],
        },
    )
    assert parser().parse_args(argv).base_url == ["http://127.0.0.1:8100", "http://127.0.0.1:8101"]


def test_a_state_change_the_full_disk_refused_is_journaled_once_space_is_back(tmp_path: Path) -> None:
    import sqlite3
    import sys

    from agents.supervisor import Supervisor

    journal = Journal(tmp_path / "journal.db")
    supervisor = Supervisor(tmp_path, journal, None)
    port = free_port()
    supervisor.launch(
        {"launch_id": "short", "argv": [sys.executable, "-c", "raise SystemExit(3)"], "port": port}
    )
    supervisor.launches["short"].popen.wait(30)  # type: ignore[union-attr]
    db = journal._db  # a real SQLite "database or disk is full": cap the file at its current size, fill it
    db.execute(f"PRAGMA max_page_count = {db.execute('PRAGMA page_count').fetchone()[0]}")
    for size in (2000, 200, 20, 0):  # down to the last free byte of the last page
        with pytest.raises(sqlite3.OperationalError, match="full"):
            while True:
                journal.append("warning", where="fill", message="x" * size)
    with pytest.raises(sqlite3.OperationalError, match="full"):
        supervisor.tick()
    assert supervisor.launches["short"].state == "starting"  # not failed in memory only
    db.execute("PRAGMA max_page_count = 1000000")
    supervisor.tick()
    supervisor.tick()
    states = [
        e for e in journal.events_after(0, 10_000) if e["kind"] == "launch_state" and e["state"] == "failed"
    ]
    assert len(states) == 1 and states[0]["exit_code"] == 3
    assert journal.live_launches() == []
    supervisor.close()


def test_a_start_resent_after_a_crash_before_the_ledger_is_answered_not_rerun(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal.db")
    journal.save_job(
        "bench:b7",
        "bench",
        "b7",
        "L1",
        "cmd-b7",
        4242,
        None,
        str(tmp_path / "jobs" / "bench-b7.json"),
        str(tmp_path / "jobs" / "bench-b7.log"),
        "running",
    )
    jobs = Jobs(tmp_path, journal)
    jobs.adopt()
    args = {"bench_id": "b7", "base_url": "http://127.0.0.1:9", "model": "m", "concurrency": 1}
    again = jobs.start("bench", args, "cmd-b7")
    assert again == {
        "started": True,
        "pid": 4242,
        "log_path": str(tmp_path / "jobs" / "bench-b7.log"),
        "replayed": True,
    }
    with pytest.raises(ValueError, match="already running"):
        jobs.start("bench", args, "cmd-other")
