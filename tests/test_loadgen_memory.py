"""The load generator's memory: a run it cannot hold is refused before anything is allocated or sent, the
estimate bounds what a real run holds, and the hard cap ends a run the estimate misjudged in one line.

Every load generator here runs as its own process under an address-space limit (``GUARD_BYTES``), so a
version that did allocate a huge run would die of a MemoryError instead of exhausting the machine, and
under a wall-clock guard (``GUARD_S``) that only ends a hung run: nothing asserts how fast anything is.
The console's side (``check_bench_size``) is checked against a real probe of this machine.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.loadgen import main, memory
from agents.loadgen.shapes import SHAPES
from agents.probe import probe
from agents.protocol import ProbeReport
from console.errors import InputError
from console.recipes import load_catalog
from console.service import Service
from console.store import Store
from tests.support.listening import start_listening, stop

ROOT = Path(__file__).resolve().parents[1]
ZERO_SERVER = [sys.executable, str(ROOT / "testbed" / "zero_server.py"), "--port", "0"]
GUARD_BYTES = 2 << 30
"""Address space a load generator under test may map: far more than any run here needs, far less than
the machine has."""
GUARD_S = 120
ROUTER = SHAPES["router"]


@pytest.fixture(scope="module")
def zero_server() -> Iterator[str]:
    proc, url = start_listening(ZERO_SERVER)
    yield url
    stop(proc)


@pytest.fixture
def silent_port() -> Iterator[socket.socket]:
    """A listening socket nobody accepts on: a connection to it shows as a pending accept."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    sock.setblocking(False)
    yield sock
    sock.close()


GUARD = (
    "import os, resource, sys\n"
    f"resource.setrlimit(resource.RLIMIT_AS, ({GUARD_BYTES}, {GUARD_BYTES}))\n"
    "pid = os.fork()\n"
    "if pid == 0:\n"
    "    os.execv(sys.executable, [sys.executable, *sys.argv[2:]])\n"
    "_, status, usage = os.wait4(pid, 0)\n"
    "open(sys.argv[1], 'w').write(str(usage.ru_maxrss * 1024))\n"
    "sys.exit(os.waitstatus_to_exitcode(status))\n"
)
"""Runs the rest of its argv under the address-space guard and writes that process's peak RSS to the file
its first argument names. Why a small parent of its own: a child's peak RSS counts what it held before its
exec, and a child forked from the test process starts as large as the test process."""


def run_guarded(argv: list[str]) -> tuple[int, str, str, int]:
    """Run ``[python, *argv]`` from the repository root under the guards; (exit code, stdout, stderr, its
    peak RSS in bytes)."""
    with tempfile.TemporaryDirectory() as tmp:
        out_path, err_path, peak_path = Path(tmp) / "out", Path(tmp) / "err", Path(tmp) / "peak"
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen(
                [sys.executable, "-c", GUARD, str(peak_path), *argv],
                cwd=ROOT,
                stdout=out,
                stderr=err,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
                start_new_session=True,
            )
        timer = threading.Timer(GUARD_S, os.killpg, (proc.pid, signal.SIGKILL))
        timer.start()
        try:
            code = proc.wait()
        finally:
            timer.cancel()
        return code, out_path.read_text(), err_path.read_text(), int(peak_path.read_text())


def loadgen(*args: str) -> list[str]:
    return ["-m", "agents.loadgen", *args]


# ---------------------------------------------------------------- refused before anything is allocated


def test_a_huge_concurrency_is_refused_in_one_line_before_anything_is_allocated_or_sent(
    silent_port: socket.socket,
) -> None:
    budget = 256 << 20
    port = silent_port.getsockname()[1]
    code, out, err, peak = run_guarded(
        loadgen(
            "--base-url",
            f"http://127.0.0.1:{port}",
            "--model",
            "zero",
            "--vocab-size",
            "1000",
            "--shape",
            "router",
            "--concurrency",
            str(10**9),
            "--mem-budget-bytes",
            str(budget),
            "--json",
        )
    )
    assert code == 2, err
    [line] = err.splitlines()  # one line, no traceback
    assert json.loads(out) == {"error": line.removeprefix("loadgen: ")}
    assert line.startswith("loadgen: --concurrency 1000000000 with 8000000000 prompts needs ~")
    load = memory.Load(10**9, 8 * 10**9, ROUTER.input_len, ROUTER.output_len, 1)
    most = memory.largest_fitting(budget, load, memory.PROMPTS_PER_STREAM, len(os.sched_getaffinity(0)))
    per_request = re.search(r"at ~[\d.]+ \w+ \((\d+) bytes\) per in-flight request", line)
    assert per_request and 100_000 < int(per_request[1]) < 200_000, line  # router: 1024 in, 8 x 128 out
    assert f"memory budget of 256 MiB ({budget} bytes: --mem-budget-bytes)" in line
    assert 0 < most < 10**9 and line.endswith(f"at most --concurrency {most} fits: lower it")
    with pytest.raises(BlockingIOError):
        silent_port.accept()  # nothing was sent: not even the preflight's connection
    assert peak < memory.BASE_BYTES  # what an interpreter that parsed its arguments holds, nothing of the run


def test_without_a_budget_flag_the_budget_is_a_quarter_of_memavailable(silent_port: socket.socket) -> None:
    port = silent_port.getsockname()[1]
    code, _, err, _ = run_guarded(
        loadgen(
            "--base-url",
            f"http://127.0.0.1:{port}",
            "--model",
            "zero",
            "--vocab-size",
            "1000",
            "--shape",
            "rollout",
            "--concurrency",
            str(10**12),
        )
    )
    assert code == 2 and len(err.splitlines()) == 1
    assert "25% of this box's MemAvailable of" in err and "--mem-budget-bytes N overrides" in err
    found = re.search(r"memory budget of [\d.]+ \w+ \((\d+) bytes", err)
    assert found, err
    budget = int(found[1])
    info = memory.meminfo()
    assert info is not None and budget <= info["total_bytes"] // 4
    with pytest.raises(BlockingIOError):
        silent_port.accept()


# ---------------------------------------------------------------- normal runs, held to the estimate


def test_the_estimate_bounds_what_a_real_run_holds(zero_server: str, tmp_path: Path) -> None:
    budget = 1 << 30
    code, out, err, peak = run_guarded(
        loadgen(
            "--base-url",
            zero_server,
            "--model",
            "zero",
            "--vocab-size",
            "150000",
            "--input-len",
            "512",
            "--output-len",
            "64",
            "--concurrency",
            "256",
            "--processes",
            "1",
            "--warmup",
            "0",
            "--mem-budget-bytes",
            str(budget),
            "--records",
            str(tmp_path / "r.jsonl"),
            "--json",
            "--quiet",
        )
    )
    assert code == 0, err
    result = json.loads(out)
    assert result["completed"] == 256 * memory.PROMPTS_PER_STREAM and result["failed"] == 0
    mem = result["memory"]
    assert mem["budget_bytes"] == budget and mem["cap_bytes"] is not None and mem["cap_bytes"] > budget
    assert mem["estimate_bytes"] == memory.estimate_bytes(memory.Load(256, 2048, 512, 64, 1))
    assert peak <= mem["estimate_bytes"], (
        f"the run held {peak} bytes, the estimate said {mem['estimate_bytes']}"
    )


# ---------------------------------------------------------------- the hard cap


def test_the_cap_turns_an_allocation_past_the_budget_into_memory_error_and_is_put_back() -> None:
    script = (
        "from agents.loadgen import memory\n"
        "with memory.capped(64 << 20) as cap:\n"
        "    assert cap is not None\n"
        "    try:\n"
        "        bytearray(512 << 20)\n"
        "    except MemoryError:\n"
        "        print('refused')\n"
        "print(len(bytearray(512 << 20)) == 512 << 20)\n"
    )
    code, out, err, _ = run_guarded(["-c", script])
    assert (code, out.split()) == (0, ["refused", "True"]), err


@pytest.mark.parametrize("processes", [1, 2])
def test_a_run_the_estimate_misjudged_ends_at_its_cap_with_one_line(
    zero_server: str, tmp_path: Path, processes: int
) -> None:
    """The figures are zeroed so a run far over its 32 MiB budget passes the check: the only way to stand
    for an estimate that is wrong. The cap must end it, in the parent or in a worker, with one line."""
    script = (
        "import sys\n"
        "from agents.loadgen import main, memory as m\n"
        "m.BASE_BYTES = m.WORKER_BYTES = m.STREAM_BYTES = m.PROMPT_TOKEN_BYTES = m.RECORD_BYTES = m.EVENT_BYTES = 0\n"
        "raise SystemExit(main(sys.argv[1:]))\n"
    )
    code, out, err, _ = run_guarded(
        [
            "-c",
            script,
            "--base-url",
            zero_server,
            "--model",
            "zero",
            "--vocab-size",
            "1000",
            "--input-len",
            "16",
            "--output-len",
            "512",
            "--concurrency",
            "64",
            "--prompts",
            "400000",
            "--warmup",
            "0",
            "--processes",
            str(processes),
            "--mem-budget-bytes",
            str(32 << 20),
            "--records",
            str(tmp_path / "r.jsonl"),
            "--json",
            "--quiet",
        ]
    )
    assert code == 1
    [line] = err.splitlines()
    assert json.loads(out) == {"error": line.removeprefix("loadgen: ")}
    assert re.search(r"ran out of memory at its cap|went over its memory cap", line), line
    assert line.endswith("lower --concurrency or --prompts")


# ---------------------------------------------------------------- every concurrency: accepted or refused


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(concurrency=st.integers(min_value=-(10**6), max_value=10**15) | st.integers())
def test_the_load_generator_accepts_within_the_bound_or_refuses_in_one_line(
    concurrency: int, capsys: pytest.CaptureFixture[str]
) -> None:
    budget = 512 << 20
    code = main(
        [
            "--base-url",
            "http://127.0.0.1:9",
            "--model",
            "zero",
            "--vocab-size",
            "1000",
            "--shape",
            "short",
            "--concurrency",
            str(concurrency),
            "--mem-budget-bytes",
            str(budget),
            "--processes",
            "1",
            "--json",
        ]
    )
    error = json.loads(capsys.readouterr().out)["error"]
    assert code == 2
    short = SHAPES["short"]
    bound = memory.largest_fitting(
        budget, memory.Load(1, 8, short.input_len, short.output_len, 1), memory.PROMPTS_PER_STREAM, None
    )
    if concurrency < 1:
        assert error == f"--concurrency {concurrency}: must be at least 1"
    elif concurrency <= bound:
        assert "is the server up" in error  # accepted: it went on to ask the (absent) server
    else:
        assert "memory budget of 512 MiB" in error and f"at most --concurrency {bound} fits" in error


@pytest.fixture(scope="module")
def sized_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Service, ProbeReport]]:
    """A service whose ``local`` box has this machine's real probe stored (with its memory figures)."""
    db = tmp_path_factory.mktemp("sized") / "state.db"
    with Store(db) as store:
        store.boxes.ensure_local()
        figures = probe(console_t_ms=store.clock())
        store.checks.add_probe("local", figures)
        yield Service(store, catalog=load_catalog([ROOT / "recipes"])), figures


def test_the_probe_reports_the_boxs_memory(sized_service: tuple[Service, ProbeReport]) -> None:
    figures = sized_service[1]["memory"]
    assert figures is not None  # a Linux box with MemAvailable
    assert figures == {"total_bytes": figures["total_bytes"], "available_bytes": figures["available_bytes"]}
    assert 0 < figures["available_bytes"] <= figures["total_bytes"]


@settings(max_examples=200, deadline=None)
@given(
    concurrency=st.integers(min_value=-(10**6), max_value=10**12) | st.integers(),
    prompts=st.none() | st.integers(min_value=-5, max_value=10**9),
)
def test_the_console_accepts_within_the_bound_or_refuses_with_input_error(
    sized_service: tuple[Service, ProbeReport], concurrency: int, prompts: int | None
) -> None:
    service, figures = sized_service
    shape = service.catalog.shapes["router"]
    box_memory = figures["memory"]
    assert box_memory is not None  # a Linux box with MemAvailable
    budget = memory.budget_of(box_memory["available_bytes"])
    try:
        service.check_bench_size("local", "router", concurrency, prompts)
    except InputError as exc:
        text = str(exc)
        assert "\n" not in text
        if concurrency < 1:
            assert text.startswith(f"-c {concurrency}: a bench needs at least 1 stream")
        elif prompts is not None and prompts < 1:
            assert text == f"--prompts {prompts}: must be 1 or more"
        else:
            assert (
                f"memory budget of {memory.size(budget)} ({budget} bytes: 25% of box local's MemAvailable"
                in text
            )
            assert re.search(r"at ~[\d.]+ \w+ \(\d+ bytes\) per in-flight request", text), text
            load = memory.Load(
                concurrency,
                prompts or 8 * concurrency,
                shape.prefix_len + shape.input_len,
                shape.output_len,
                memory.processes_for(concurrency, figures["cpu_count"]),
            )
            assert memory.estimate_bytes(load) > budget
        return
    assert concurrency >= 1 and (prompts is None or prompts >= 1)
    load = memory.Load(
        concurrency,
        prompts or 8 * concurrency,
        shape.prefix_len + shape.input_len,
        shape.output_len,
        memory.processes_for(concurrency, figures["cpu_count"]),
    )
    assert memory.estimate_bytes(load) <= budget
