"""The load generator: statistics, prompts, the streaming wire parser and whole runs against real servers.

Servers here are real processes: testbed/zero_server.py (vLLM's framing, zero cost) and
tests/support/scripted_server.py, which splits its bytes at every position, returns errors or short outputs,
or stalls.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agents.loadgen import main, metrics
from agents.loadgen.prompts import PromptPlan, Vocab, VocabError, vocab_from_dir
from agents.loadgen.run import client_stats
from agents.loadgen.worker import Record, WorkerResult, parse_tail
from testbed.vllm_env import VllmEnv
from testbed.vllm_server import TinyServer
from tests.support.listening import start_listening, stop

ROOT = Path(__file__).resolve().parents[1]
ZERO_SERVER = [sys.executable, str(ROOT / "testbed" / "zero_server.py"), "--port", "0"]
ISSUE_KEYS = [
    "requests",
    "failed",
    "duration_s",
    "req_per_s",
    "in_tok_per_s",
    "out_tok_per_s",
    "total_tok_per_s",
    "ttft_ms_p50",
    "ttft_ms_p99",
    "tpot_ms_p50",
    "tpot_ms_p99",
    "itl_ms_p50",
    "itl_ms_p99",
    "e2e_ms_p50",
    "e2e_ms_p99",
    "client_cpu",
    "client_bound",
    "steady",
]


# ---------------------------------------------------------------- statistics


def numpy_linear(values: list[float], q: float) -> float:
    """numpy.percentile's default method, written out independently for the check."""
    s = sorted(values)
    k = (len(s) - 1) * q / 100
    f = int(k)
    c = min(f + 1, len(s) - 1)
    return s[f] + (s[c] - s[f]) * (k - f)


def test_percentiles_match_linear_interpolation_and_pooled_zeros_equal_expanded() -> None:
    rng = random.Random(3)
    for _ in range(50):
        gaps = sorted(rng.random() + 1e-9 for _ in range(rng.randint(0, 30)))
        zeros = rng.randint(0 if gaps else 1, 5)
        expanded = [0.0] * zeros + gaps  # the ITL multiset: gaps of 0 (events of one read) and the rest
        for q in (0, 50, 99, 100):
            assert metrics.percentile(sorted(expanded), q) == pytest.approx(numpy_linear(expanded, q))
            assert metrics.pooled_percentile(zeros, gaps, q) == pytest.approx(numpy_linear(expanded, q))
    assert metrics.percentile([], 50) is None
    assert metrics.pooled_percentile(0, [], 50) is None


def rec(
    start: float,
    times: list[float],
    counts: list[int],
    tokens: int | None = None,
    error: str | None = None,
    end: float | None = None,
) -> Record:
    return Record(
        0,
        0,
        start,
        end if end is not None else (times[-1] if times else start),
        times,
        counts,
        prompt_tokens=10,
        completion_tokens=tokens if tokens is not None else sum(counts),
        finish_reason="length",
        error=error,
    )


def test_vllm_definitions_of_ttft_tpot_itl_e2e() -> None:
    # Request 1: events at 0.1 (1 event), 0.3 (2 events in one read), 0.4 (1) -> 4 tokens.
    r1 = rec(0.0, [0.1, 0.3, 0.4], [1, 2, 1])
    # Request 2: one read with 3 events at 0.5.
    r2 = rec(0.2, [0.5], [3])
    failed = rec(0.0, [], [], tokens=0, error="HTTP 500: boom", end=0.05)
    s = metrics.summarize([r1, r2, failed], duration_s=1.0)
    assert s["req_per_s"] == 2.0
    assert s["out_tok_per_s"] == 7.0
    assert s["in_tok_per_s"] == 20.0
    assert s["total_tok_per_s"] == 27.0
    assert s["ttft_ms_p50"] == pytest.approx(numpy_linear([100.0, 300.0], 50))
    assert s["e2e_ms_p99"] == pytest.approx(numpy_linear([400.0, 300.0], 99))
    # TPOT = (E2E - TTFT) / (out - 1): r1 (400-100)/3 = 100 ms; r2 (300-300)/2 = 0 ms.
    assert s["tpot_ms_p50"] == pytest.approx(50.0)
    # ITL per event: r1 gaps 200 (first event of the 0.3 read), 0 (its second event), 100; r2 gaps 0, 0.
    assert s["itl_ms_p50"] == pytest.approx(0.0)
    assert s["itl_ms_p99"] == pytest.approx(numpy_linear([0, 0, 0, 100, 200], 99))


def test_steady_window_is_the_span_at_or_above_95_percent_of_concurrency() -> None:
    # C=4: in flight 1,2,3,4 from t=1..4, all four until 10, then ends at 10, 11, 12, 13.
    records = [rec(float(i), [float(i) + 9], [1], end=10.0 + i - 1) for i in range(1, 5)]
    assert metrics.steady_window(records, 4) == (4.0, 10.0)
    steady = metrics.steady_state(records, 4, run_s=12.0)
    assert steady["window_s"] == 6.0 and steady["requests"] == 1 and steady["short"] is True
    assert metrics.steady_window(records[:2], 4) is None
    never = metrics.steady_state(records[:2], 4, run_s=12.0)
    assert never["out_tok_per_s"] is None and "never reached 4" in str(never["reason"])


def test_client_bound_when_a_worker_saturates_its_core_or_workers_share_too_few_cores() -> None:
    def worker(w: int, cpu: float) -> WorkerResult:
        return WorkerResult(w, [], 0.0, 10.0, cpu, [0.1, 0.2])

    assert client_stats([worker(0, 9.5)], 10.0, cores=4)["client_bound"] is True
    assert client_stats([worker(0, 5.0)], 10.0, cores=4)["client_bound"] is False
    squeezed = client_stats([worker(0, 4.8), worker(1, 4.8)], 10.0, cores=1)
    assert squeezed["client_bound"] is True and squeezed["client_cpu"] == 0.48
    assert client_stats([worker(0, 4.8), worker(1, 4.8)], 10.0, cores=2)["client_bound"] is False


# ---------------------------------------------------------------- prompts


def test_vocab_from_a_model_directory_excludes_special_ids(tmp_path: Path) -> None:
    (tmp_path / "tokenizer.json").write_text(
        json.dumps(
            {
                "model": {"vocab": {f"t{i}": i for i in range(3, 40)}},
                "added_tokens": [
                    {"id": 0, "special": True},
                    {"id": 1, "special": True},
                    {"id": 2, "special": True},
                ],
            }
        )
    )
    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": 48, "eos_token_id": [2, 39]}))
    vocab = vocab_from_dir(tmp_path)
    assert vocab.size == 40 and vocab.special_ids == {0, 1, 2, 39}
    with pytest.raises(VocabError, match="pass --tokenizer DIR"):
        vocab_from_dir(tmp_path / "missing")


def test_prompts_have_exact_length_shared_prefix_unique_suffix_and_follow_the_seed() -> None:
    vocab = Vocab(50, frozenset({0, 1, 2}), "test")
    plan = PromptPlan.build(vocab, seed=7, input_len=40, prefix_len=24)
    prompts = [plan.ids(i) for i in range(3000)]
    assert all(len(p) == 64 for p in prompts)
    assert all(p[:24] == prompts[0][:24] for p in prompts)
    assert len({tuple(p[24:]) for p in prompts}) == 3000
    assert not {0, 1, 2} & {t for p in prompts for t in p}
    assert json.loads(plan.prompt_json(5)) == prompts[5]
    assert PromptPlan.build(vocab, 7, 40, 24).ids(9) == prompts[9]
    other = PromptPlan.build(vocab, 8, 40, 24)
    assert other.ids(0)[:24] != prompts[0][:24]


def test_parse_tail_finds_usage_finish_reason_and_stream_errors() -> None:
    tail = (
        b'xx"}]}\n\n\r\n10\r\ndata: {"choices":[{"text":"a","finish_reason":"length"}],"usage":null}\n\n\r\n'
        b'20\r\ndata: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":9}}\n\n\r\n'
        b"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n"
    )
    usage, finish, error, trailing = parse_tail(tail)
    assert usage == {"prompt_tokens": 5, "completion_tokens": 9} and finish == "length"
    assert error is None and trailing == 2
    broken = b'\r\n9\r\ndata: {"error": {"message": "KV cache exhausted", "code": 500}}\n\n\r\n0\r\n\r\n'
    assert "KV cache exhausted" in (parse_tail(broken)[2] or "")


# ---------------------------------------------------------------- whole runs against real servers


@pytest.fixture(scope="module")
def zero_server() -> Iterator[str]:
    proc, url = start_listening(ZERO_SERVER)
    yield url
    stop(proc)


def run_json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, dict[str, Any]]:
    rc = main(argv)
    return rc, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("processes", [1, 2])
def test_run_against_the_zero_server_reports_every_issue_key(
    zero_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], processes: int
) -> None:
    records = tmp_path / "records.jsonl"
    rc, out = run_json(
        capsys,
        [
            "--base-url",
            zero_server,
            "--model",
            "zero",
            "--vocab-size",
            "1000",
            "--input-len",
            "16",
            "--output-len",
            "32",
            "--concurrency",
            "8",
            "--prompts",
            "200",
            "--processes",
            str(processes),
            "--seed",
            "11",
            "--records",
            str(records),
            "--json",
            "--quiet",
        ],
    )
    assert rc == 0
    for key in ISSUE_KEYS:
        assert key in out, key
    for key in metrics.RATE_KEYS + metrics.LATENCY_KEYS:
        assert key in out["steady"], key
    assert out["requests"] == 200 and out["failed"] == 0 and out["completed"] == 200
    assert out["mismatches"] == {
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "finish_reason": {},
        "no_usage": 0,
    }
    assert out["out_tok_per_s"] == pytest.approx(32 * out["req_per_s"])
    assert out["seed"] == 11 and out["client"]["processes"] == processes
    # Sized and run under its memory cap (agents/loadgen/memory.py), workers included: a normal run fits.
    memory = out["memory"]
    assert 0 < memory["estimate_bytes"] <= memory["budget_bytes"] < memory["cap_bytes"]
    # What every request carried besides model and prompt: lengths and framing, no sampling field.
    assert out["endpoint"] == "/v1/completions" and set(out["request"]) == {
        "max_tokens",
        "stream",
        "stream_options",
        "ignore_eos",
    }
    assert {"full_run", "steady", "ttft", "tpot", "itl", "e2e"} <= set(
        out["definitions"]
    )  # which figure is which
    assert out["records_path"] == str(records)
    lines = records.read_text().splitlines()
    assert len(lines) == 201 and json.loads(lines[0])["run"]["seed"] == 11
    first = json.loads(lines[1])
    assert first["completion_tokens"] == 32 and sum(n for _, n in first["events"]) == 32
    assert out["steady"]["window_s"] > 0


def test_a_node_run_deals_its_streams_round_robin_over_every_base_url(
    zero_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    second, other = start_listening(ZERO_SERVER)
    try:
        records = tmp_path / "records.jsonl"
        rc, out = run_json(
            capsys,
            [
                "--base-url",
                zero_server,
                "--base-url",
                other,
                "--model",
                "zero",
                "--vocab-size",
                "1000",
                "--input-len",
                "16",
                "--output-len",
                "8",
                "--concurrency",
                "5",
                "--processes",
                "2",
                "--records",
                str(records),
                "--json",
                "--quiet",
            ],
        )
    finally:
        stop(second)
    assert rc == 0 and out["base_urls"] == [zero_server, other]
    assert out["prompts"] == 40  # 8 x C by default
    first, second_url = out["per_url"]
    # Streams 0, 2, 4 go to the first URL and 1, 3 to the second, across both worker processes.
    assert (first["base_url"], first["streams"], second_url["streams"]) == (zero_server, 3, 2)
    assert first["requests"] > 0 and second_url["requests"] > 0
    assert first["requests"] + second_url["requests"] == out["requests"] == 40
    # The node's throughput is the sum of its replicas' (one duration for all), its latencies over all requests.
    assert first["out_tok_per_s"] + second_url["out_tok_per_s"] == pytest.approx(out["out_tok_per_s"])
    targets = [json.loads(line)["target"] for line in records.read_text().splitlines()[1:]]
    assert sorted(set(targets)) == [0, 1] and targets.count(0) == first["requests"]


def test_samples_file_gets_the_runs_progress_once_a_second(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.test_agent_jobs import GatedServer

    server = GatedServer()  # holds every answer until its gate opens
    samples = tmp_path / "run.samples"

    def open_after_the_first_sample() -> None:
        while not (samples.exists() and samples.read_text().count("\n")) and not server.gate(16).is_set():
            threading.Event().wait(0.05)
        server.gate(16).set()

    threading.Thread(target=open_after_the_first_sample, daemon=True).start()
    try:
        rc, out = run_json(
            capsys,
            [
                "--base-url",
                server.base_url,
                "--model",
                "gated",
                "--vocab-size",
                "100",
                "--input-len",
                "8",
                "--output-len",
                "16",
                "--concurrency",
                "2",
                "--prompts",
                "12",
                "--warmup",
                "0",
                "--json",
                "--quiet",
                "--records",
                str(tmp_path / "r.jsonl"),
                "--samples",
                str(samples),
            ],
        )
    finally:
        server.close()
    assert rc == 0 and out["completed"] == 12
    lines = [json.loads(line) for line in samples.read_text().splitlines()]
    assert len(lines) >= 2  # one a second, and the last one at the end
    assert all(
        set(s) == {"t_ms", "requests", "out_tokens", "in_tokens", "out_tok_per_s", "in_tok_per_s"}
        for s in lines
    )
    assert [s["requests"] for s in lines] == sorted(s["requests"] for s in lines)
    assert (lines[-1]["requests"], lines[-1]["out_tokens"], lines[-1]["in_tokens"]) == (12, 12 * 16, 12 * 8)
    assert lines[0]["out_tok_per_s"] == lines[0]["out_tokens"] == 0  # nothing had ended by the first sample
    assert "samples_path" not in out  # plumbing, not part of the result


def test_loadgen_module_entry_point_runs_a_builtin_shape(zero_server: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "agents.loadgen",
            "--base-url",
            zero_server,
            "--model",
            "zero",
            "--vocab-size",
            "500",
            "--shape",
            "promptopt",
            "--concurrency",
            "4",
            "--prompts",
            "12",
            "--warmup",
            "0",
            "--json",
            "--records",
            str(tmp_path / "r.jsonl"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert (out["shape"], out["prefix_len"], out["input_len"], out["output_len"]) == (
        "promptopt",
        3072,
        512,
        256,
    )
    assert out["mismatches"]["prompt_tokens"] == 0  # the zero server counts the ids it was sent
    assert "loadgen [" in done.stderr  # progress on stderr


def test_preflight_errors_say_what_and_how_to_fix(
    zero_server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out = run_json(
        capsys,
        [
            "--base-url",
            zero_server,
            "--model",
            "nope",
            "--vocab-size",
            "9",
            "--input-len",
            "4",
            "--output-len",
            "4",
            "--concurrency",
            "1",
            "--json",
        ],
    )
    assert rc == 2 and "does not serve model 'nope'" in out["error"] and "['zero']" in out["error"]
    rc, out = run_json(
        capsys,
        [
            "--base-url",
            zero_server,
            "--model",
            "zero",
            "--input-len",
            "4",
            "--output-len",
            "4",
            "--concurrency",
            "1",
            "--json",
        ],
    )
    assert rc == 2 and "pass --tokenizer DIR" in out["error"]
    rc, out = run_json(
        capsys,
        [
            "--base-url",
            "http://127.0.0.1:9",
            "--model",
            "zero",
            "--vocab-size",
            "9",
            "--input-len",
            "4",
            "--output-len",
            "4",
            "--concurrency",
            "1",
            "--json",
        ],
    )
    assert rc == 2 and "is the server up" in out["error"]
    rc, out = run_json(
        capsys,
        ["--base-url", zero_server, "--model", "zero", "--shape", "huge", "--concurrency", "1", "--json"],
    )
    assert rc == 2 and "not built in" in out["error"]


def test_a_recipe_shape_unknown_here_is_a_label_for_explicit_lengths(
    zero_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out = run_json(
        capsys,
        [
            "--base-url",
            zero_server,
            "--model",
            "zero",
            "--vocab-size",
            "50",
            "--shape",
            "tiny",
            "--input-len",
            "64",
            "--output-len",
            "16",
            "--concurrency",
            "2",
            "--prompts",
            "4",
            "--json",
            "--quiet",
            "--records",
            str(tmp_path / "r.jsonl"),
        ],
    )
    assert rc == 0 and (out["shape"], out["input_len"], out["output_len"]) == ("tiny", 64, 16)


class ScriptedServer:
    """tests/support/scripted_server.py as its own process, for the duration of a ``with``: ``port`` to
    reach it, then ``bodies``, every completion request's JSON body in arrival order."""

    def __init__(self, script: list[str]) -> None:
        self.script = script
        self.bodies: list[dict[str, Any]] = []

    def __enter__(self) -> ScriptedServer:
        fd, name = tempfile.mkstemp(prefix="scripted-bodies-", suffix=".jsonl")
        os.close(fd)
        self._bodies = Path(name)
        self._proc, port = start_listening(
            [
                sys.executable,
                "-m",
                "tests.support.scripted_server",
                "--script",
                ",".join(self.script),
                "--bodies",
                name,
            ]
        )
        self.port = int(port)
        return self

    def __exit__(self, *exc: object) -> None:
        stop(self._proc)
        self.bodies = [json.loads(line) for line in self._bodies.read_text().splitlines()]
        self._bodies.unlink()


def test_events_are_counted_exactly_when_reads_split_anywhere(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with ScriptedServer(["split"]) as server:
        rc, out = run_json(
            capsys,
            [
                "--base-url",
                f"http://127.0.0.1:{server.port}",
                "--model",
                "scripted",
                "--vocab-size",
                "100",
                "--input-len",
                "6",
                "--output-len",
                "24",
                "--concurrency",
                "3",
                "--prompts",
                "30",
                "--warmup",
                "0",
                "--processes",
                "1",
                "--timeout",
                "60",
                "--json",
                "--quiet",
                "--records",
                str(tmp_path / "r.jsonl"),
            ],
        )
    # A response the client never sees end fails at 60 s saying how far it got, instead of hanging the run.
    assert rc == 0 and out["failed"] == 0, out["failures"]
    assert out["mismatches"] == {
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "finish_reason": {},
        "no_usage": 0,
    }
    for line in (tmp_path / "r.jsonl").read_text().splitlines()[1:]:
        assert sum(n for _, n in json.loads(line)["events"]) == 24  # usage event and [DONE] not counted
    # The sampling asked for is `vllm bench serve --ignore-eos`'s: ignore_eos alone, no min_tokens.
    for body in server.bodies:
        assert {k: v for k, v in body.items() if k != "prompt"} == {
            "model": "scripted",
            "max_tokens": 24,
            "stream": True,
            "stream_options": {"include_usage": True},
            "ignore_eos": True,
        }


def test_failures_and_length_mismatches_are_reported_with_reasons(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with ScriptedServer(["split", "short", "http400", "error-event"]) as server:
        rc, out = run_json(
            capsys,
            [
                "--base-url",
                f"http://127.0.0.1:{server.port}",
                "--model",
                "scripted",
                "--vocab-size",
                "100",
                "--input-len",
                "6",
                "--output-len",
                "8",
                "--concurrency",
                "1",
                "--prompts",
                "8",
                "--warmup",
                "0",
                "--json",
                "--quiet",
                "--records",
                str(tmp_path / "r.jsonl"),
            ],
        )
    assert rc == 0
    assert (out["requests"], out["completed"], out["failed"]) == (8, 4, 4)
    assert out["failures"] == {
        "HTTP 400: This model's maximum context length is 8 tokens": 2,
        "error event in stream: engine died": 2,
    }
    assert out["mismatches"]["completion_tokens"] == 2 and out["mismatches"]["finish_reason"] == {"stop": 2}


def test_a_stream_that_stops_fails_at_the_timeout_saying_how_far_it_got(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with ScriptedServer(["stall", "split"]) as server:
        rc, out = run_json(
            capsys,
            [
                "--base-url",
                f"http://127.0.0.1:{server.port}",
                "--model",
                "scripted",
                "--vocab-size",
                "100",
                "--input-len",
                "6",
                "--output-len",
                "8",
                "--concurrency",
                "1",
                "--prompts",
                "2",
                "--warmup",
                "0",
                "--timeout",
                "2",
                "--json",
                "--quiet",
                "--records",
                str(tmp_path / "r.jsonl"),
            ],
        )
    assert rc == 0 and (out["completed"], out["failed"]) == (1, 1)  # the next request got a new connection
    [(reason, count)] = out["failures"].items()
    assert count == 1 and reason.startswith(
        "no complete response within 2 s: HTTP 200 stream stopped after 3 events, last bytes"
    )


# ---------------------------------------------------------------- end to end: the real tiny vLLM on CPU


@pytest.mark.vllm
def test_exact_lengths_against_real_vllm(
    tiny_server: TinyServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out = run_json(
        capsys,
        [
            "--base-url",
            tiny_server.base_url,
            "--model",
            tiny_server.model,
            "--tokenizer",
            str(tiny_server.model_dir),
            "--prefix-len",
            "32",
            "--input-len",
            "32",
            "--output-len",
            "16",
            "--concurrency",
            "4",
            "--prompts",
            "16",
            "--warmup",
            "2",
            "--json",
            "--quiet",
            "--records",
            str(tmp_path / "r.jsonl"),
        ],
    )
    assert rc == 0 and out["failed"] == 0, out["failures"]
    assert out["mismatches"] == {
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "finish_reason": {},
        "no_usage": 0,
    }
    assert out["out_tok_per_s"] > 0 and out["ttft_ms_p50"] > 0 and out["e2e_ms_p50"] >= out["ttft_ms_p50"]
    # TPOT is (E2E - TTFT) / (tokens - 1): zero when a busy server delivers the tokens in one chunk, never less.
    assert out["tpot_ms_p50"] is not None and out["tpot_ms_p50"] >= 0
    assert out["vocab_source"] == str(tiny_server.model_dir)


@pytest.mark.vllm
def test_vocab_found_through_the_served_model_root(
    tiny_server: TinyServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out = run_json(
        capsys,
        [
            "--base-url",
            tiny_server.base_url,
            "--model",
            tiny_server.model,
            "--input-len",
            "20",
            "--output-len",
            "4",
            "--concurrency",
            "2",
            "--prompts",
            "4",
            "--warmup",
            "0",
            "--json",
            "--quiet",
            "--records",
            str(tmp_path / "r.jsonl"),
        ],
    )
    assert rc == 0 and out["failed"] == 0 and out["mismatches"]["prompt_tokens"] == 0
    assert Path(out["vocab_source"]).resolve() == Path(tiny_server.model_dir).resolve()


@pytest.mark.vllm
def test_agrees_with_vllm_bench_serve_on_what_the_server_counted(
    tiny_server: TinyServer, vllm_env: VllmEnv, tmp_path: Path
) -> None:
    """Both clients run once against the shared server, read from the server's own /metrics as well.
    Exact where the work is defined (requests, generation and max tokens, our prompt length, no prompt
    answered from the prefix cache), within noise where each client's timing is set beside the server's
    for the same run, and loose between the two runs (throughput within a factor of 4 on a busy machine:
    the server's own pace moves that much between runs, docs/facts.md)."""
    from testbed.agreement import Shape, Target, measured, run_ours, run_reference

    shape = Shape(input_len=256, output_len=16, prompts=16, concurrency=4)
    target = Target(tiny_server.base_url, tiny_server.model, tiny_server.model_dir, vllm_env.python)
    cpus = sorted(os.sched_getaffinity(0))
    session = tiny_server.process.pid  # the server runs in a process session of its own
    ours = measured(target.base_url, session, lambda s: run_ours(target, shape, cpus, tmp_path, s))
    theirs = measured(target.base_url, session, lambda s: run_reference(target, shape, cpus, tmp_path, 7, s))
    for name, run in (("ours", ours), ("vllm", theirs)):
        client, server, vs = run["client"], run["server"], run["vs_server"]
        assert (client["completed"], client["failed"]) == (16, 0), name
        # The same work: as many requests (no warm-up on either side), each asked for and given 16 tokens.
        assert server["requests"] == 16, name
        assert server["max_tokens_per_request"] == server["generation_tokens_per_request"] == 16, name
        # No client sees a first or a last token before the server made it.
        assert vs["ttft_ms_mean_added"] >= 0 and vs["e2e_ms_mean_added"] >= 0, (name, vs)
        # Each times the decode as the server did (0.89-1.09 in 110 pinned runs, docs/facts.md) when it read
        # the decode steps apart: both read all of them apart here alone (share 1.0). Beside two busy loops
        # they read 40-64% apart, and once a client starved of its core read 16 tokens in a read or two and
        # timed a TPOT of 0.07 x the server's; its decode_seen_share says when that happened.
        if vs["decode_seen_share"] is None or vs["decode_seen_share"] >= 0.8:
            tpot = vs["tpot_p50_over_server_itl"]
            assert tpot is not None and 0.5 < tpot < 2, (name, vs)
        assert server["cpu_ms_per_token"] > 0 and server["in_flight"] > 0, name
    # Ours sends distinct token ids: exactly the asked length, and (with two 128-token blocks a prompt) no
    # block the server could take from its prefix cache; vLLM's re-encoded text lands within a few tokens.
    assert (
        ours["server"]["prompt_tokens_per_request"] == 256 and ours["server"]["prefix_cache_hit_share"] == 0
    )
    assert theirs["server"]["prompt_tokens_per_request"] == pytest.approx(256, abs=3)
    ratio = ours["client"]["out_tok_per_s"] / theirs["client"]["out_tok_per_s"]
    assert 0.25 < ratio < 4, f"ours/vllm output tok/s {ratio:.2f}: the two clients tell different stories"
