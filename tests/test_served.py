"""What every bench, tripwire and quality row was served with: the server's reasoning parser, whether thinking
was on, and the sampling sent (campaign rule 9: the house-default-vs-vendor table turns on these three).

The rows come in through the real journal ingest, as the agent's tools report them, against a launch whose
arm row holds the argv its server really ran."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from console.cli import main
from console.readmodel import bench_run, tripwire_run
from console.recipes import load_catalog, resolve
from console.recipes.resolve import generic_box
from console.store import Box, Store
from console.store.served import NOT_APPLICABLE, sampling_sent, thinking

T0 = 1_788_658_020_000  # 2026-09-06 01:27:00 UTC


def test_thinking_says_what_decided_it() -> None:
    assert (
        thinking([{"temperature": 1.0}, {"chat_template_kwargs": {"enable_thinking": False}}], None, True)
        == "enable_thinking=False"
    )
    assert thinking([{"reasoning_effort": "high"}], None, None) == "reasoning_effort=high"
    assert thinking([{}], '{"enable_thinking":false}', True) == "enable_thinking=False (server default)"
    assert thinking([{}], None, True) == "model default: on"
    assert thinking([{}], None, False) == "model default: off"  # gemma-4, Hy3 (seed)
    assert thinking([], "not json", None) == "model default: not stated"


def test_sampling_sent_leaves_out_lengths_framing_and_the_template() -> None:
    assert sampling_sent(
        {"temperature": 1.0, "top_p": 0.95, "max_tokens": 9},
        {"top_k": 20, "min_p": 0.0, "chat_template_kwargs": {"enable_thinking": True}},
    ) == {"temperature": 1.0, "top_p": 0.95, "top_k": 20, "min_p": 0.0}
    loadgen = {
        "max_tokens": 128,
        "stream": True,
        "stream_options": {"include_usage": True},
        "min_tokens": 128,
        "ignore_eos": True,
    }
    assert sampling_sent(loadgen) == {}  # the load generator sends none: the server's defaults draw


@pytest.fixture
def served_db(tmp_path: Path) -> Path:
    """One launch of the shipped Qwen arm (its real resolved argv), a bench and a tripwire through ingest."""
    catalog = load_catalog()
    arm = "qwen3.8-27b-nvfp4-b12x"
    r = resolve(catalog, arm, generic_box(catalog, arm))
    path = tmp_path / "state.db"
    with Store(path, clock=lambda: T0) as store:
        store.boxes.add(Box(name="pro-a", host="203.0.113.7", ssh_user="root"))
        arm_id = store.launches.add_arm(
            arm, r.model, "pro-a", r.recipe_hash, r.replicas[0].argv, {}, [[0]], 1, []
        )
        store.launches.add("L1", "pro-a", arm, arm_id=arm_id, replica=0, gpus=[0], port=8100, forced=False)
        store.commands.add(
            "T1",
            "pro-a",
            "tripwire",
            {"tripwire_id": "T1", "launch_id": "L1", "arm": arm, "profile": r.profile.to_dict()},
        )
        request, extra = r.profile.request_params()
        tripwire = {
            "ok": 20,
            "degenerate": 0,
            "wrong": 0,
            "total": 20,
            "passed": True,
            "profile": None,
            "reasoning_parser": "qwen3",
            "request": request,
            "extra_body": extra,
            "max_tokens": 4096,
        }
        bench = {
            "shape": "router",
            "concurrency": 8,
            "input_len": 1024,
            "output_len": 128,
            "out_tok_per_s": 900.0,
            "endpoint": "/v1/completions",
            "request": {"max_tokens": 128, "stream": True, "min_tokens": 128, "ignore_eos": True},
        }
        store.ingest.batch(
            "pro-a",
            [
                {"v": 1, "seq": 1, "t_ms": T0, "kind": "launch_state", "launch_id": "L1", "state": "serving"},
                {
                    "v": 1,
                    "seq": 2,
                    "t_ms": T0 + 1,
                    "kind": "tripwire_result",
                    "tripwire_id": "T1",
                    "launch_id": "L1",
                    "result": tripwire,
                },
                {
                    "v": 1,
                    "seq": 3,
                    "t_ms": T0 + 2,
                    "kind": "bench_result",
                    "bench_id": "B1",
                    "launch_id": "L1",
                    "result": bench,
                },
            ],
        )
    return path


def test_tripwire_and_bench_rows_keep_what_they_were_served_with(served_db: Path) -> None:
    with Store(served_db, read_only=True) as store:
        tw = tripwire_run(store, "T1")
        row = bench_run(store, "B1")
    assert tw is not None and row is not None
    # The tripwire sent Qwen's thinking-mode sampling and no switch: the model's default (on) held.
    assert (tw.reasoning_parser, tw.thinking) == ("qwen3", "model default: on")
    assert json.loads(tw.sampling or "") == {"temperature": 1.0, "top_p": 0.95, "top_k": 20, "min_p": 0.0}
    assert tw.served == (
        "served with: reasoning parser qwen3; thinking model default: on; sampling "
        '{"min_p":0.0,"temperature":1.0,"top_k":20,"top_p":0.95}'
    )
    # The load generator's completions carry no chat template and no sampling field: said so, not guessed.
    assert (row.reasoning_parser, row.thinking, row.sampling) == ("qwen3", NOT_APPLICABLE, "{}")
    assert "sampling none sent (the server's defaults)" in row.served


def test_the_summary_export_carries_them(served_db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--db", str(served_db), "export", "summary", "--format", "csv"]) == 0
    [row] = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert (row["reasoning_parser"], row["thinking"], row["sampling"]) == ("qwen3", NOT_APPLICABLE, "{}")


def test_imported_rows_say_not_recorded(tmp_path: Path) -> None:
    from console.readmodel import bench_rows
    from ops.demo import build_demo

    with Store(tmp_path / "state.db") as store:
        build_demo(store)
        rows = bench_rows(store)
    assert rows and all(r.thinking is None and r.served == "served with: not recorded" for r in rows)
