"""`campaign curve`: the concurrency list and ladder parsers and their refusals, the curve's record (migration,
points, resume), and end to end on the suite's real CPU vLLM of the tiny model: a curve at C 1,2,4,8 with
--repeat 2 stores every point as a linked repeat group, decode slows as the batch grows, the same command
again measures nothing, and a curve interrupted after its first point measures only the rest."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from console.cli import main
from console.errors import InputError
from console.readmodel import curve
from console.service.curves import checked_levels, concurrency_list, ladder
from console.store import Store
from testbed.vllm_env import VllmEnv
from tests.support.cli import run_campaign
from tests.support.local_box import serving_tiny_cpu

# ---------------------------------------------------------------- parsing


def test_a_ladder_doubles_from_start_and_always_ends_at_end() -> None:
    assert ladder("1:8:x2") == [1, 2, 4, 8]
    assert ladder("1:64:x2") == [1, 2, 4, 8, 16, 32, 64]
    assert ladder("1:48:x2") == [1, 2, 4, 8, 16, 32, 48]  # END included though not a power
    assert ladder("3:100:x4") == [3, 12, 48, 100]
    assert ladder("8:8:x2") == [8]
    assert ladder(" 2:5:X3 ") == [2, 5]


@pytest.mark.parametrize(
    "text",
    [
        "8:1:x2",
        "0:8:x2",
        "1:8:x1",
        "1:8:x0",
        "1:8:2",
        "1:8",
        "a:8:x2",
        "1:99999:x2",
        "1:8:x2.5",
        "1:8:x-2",
        "",
    ],
)
def test_a_bad_ladder_is_refused_in_one_line(text: str) -> None:
    with pytest.raises(InputError) as refused:
        ladder(text)
    assert "\n" not in str(refused.value)


def test_a_concurrency_list_is_bounded_sorted_and_has_no_repeats() -> None:
    assert concurrency_list("8,1,4,2") == [1, 2, 4, 8]
    for bad in ("1,1", "0,2", "1,,2", "", "1,x", "16385", ",".join(str(i) for i in range(1, 70))):
        with pytest.raises(InputError):
            concurrency_list(bad)
    with pytest.raises(InputError):
        checked_levels([])


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789:xX,-+ .e", max_size=24) | st.text(max_size=24))
@example("1:16384:x2")
@example("1:9999999999999999999999999:x2")
def test_the_parsers_give_a_list_or_a_refusal_and_nothing_else(text: str) -> None:
    for parse in (ladder, concurrency_list):
        try:
            levels = parse(text)
        except (InputError, ValueError):
            continue
        assert isinstance(levels, list) and levels == sorted(set(levels))
        assert all(isinstance(c, int) and 1 <= c <= 16384 for c in levels)


def test_the_cli_refuses_a_bad_ladder_with_exit_2_and_stores_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "state.db"
    code = main(
        ["--db", str(db), "curve", "tiny-cpu", "--box", "local", "--shape", "tiny", "--ladder", "8:1:x2"]
    )
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "below START" in err
    assert not db.exists()
    code = main(["--db", str(db), "curve", "tiny-cpu", "--shape", "tiny", "--concurrency", "1,1"])
    assert code == 2 and not db.exists()


# ---------------------------------------------------------------- the record


def test_a_curve_records_its_points_and_the_newest_of_its_identity_is_resumed(tmp_path: Path) -> None:
    with Store(tmp_path / "state.db", clock=lambda: 1_000) as store:
        first = store.curves.create("a", "b", "tiny", [1, 2, 4], 2, None)
        points = store.curves.points(first.id)
        assert [(p.concurrency, p.position, p.state) for p in points] == [
            (1, 0, "pending"),
            (2, 1, "pending"),
            (4, 2, "pending"),
        ]
        assert store.curves.latest("a", "b", "tiny", [1, 2, 4], 2) == first
        assert store.curves.latest("a", "b", "tiny", [1, 2, 4], 1) is None  # repeat is part of the identity
        store.curves.start_point(first.id, 0)
        store.curves.interrupt_point(first.id, 0, "interrupted")
        assert store.curves.get(first.id).state == "interrupted"
        assert store.curves.points(first.id)[0].state == "pending"
        second = store.curves.create("a", "b", "tiny", [1, 2, 4], 2, None)  # --new
        store.curves.set_state(second.id, "done")
        found = store.curves.latest("a", "b", "tiny", [1, 2, 4], 2)
        assert (
            found is not None and found.id == second.id
        )  # the newest, done: the same command measures nothing
        view = curve(store, first.id)
        assert view.done == 0 and [p.concurrency for p in view.points] == [1, 2, 4]
        with pytest.raises(InputError):
            curve(store, 99)


# ---------------------------------------------------------------- end to end on the CPU vLLM

CURVE = ("curve", "tiny-cpu", "--box", "local", "--shape", "short", "--concurrency", "1,2,4,8")


async def _until(what: str, predicate: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.2)


@pytest.mark.vllm
@pytest.mark.timeout(900)
async def test_a_curve_on_the_cpu_vllm_is_stored_linked_and_resumed(
    vllm_env: VllmEnv, tmp_path: Path
) -> None:
    async with serving_tiny_cpu(vllm_env, tmp_path) as (db, store, service):
        # A fresh server's first requests are slow (allocation, first batches): warmed up before the curve, so
        # its C1 is decode at C1, not warm-up.
        await service.bench("tiny-cpu", "local", "short", 8, prompts=32, timeout_s=300)
        warm = store.scalar("SELECT count(*) FROM bench_runs")

        # (b) The whole curve through the operator's command: every point a stored repeat group, linked.
        started = time.monotonic()
        done = run_campaign(db, *CURVE, "--repeat", "2", "--prompts-per-slot", "4", "--json")
        assert done.returncode == 0, done.stderr
        took = time.monotonic() - started
        body = json.loads(done.stdout)
        assert body["curve"]["state"] == "done" and body["measured_now"] == [1, 2, 4, 8]
        points = {p["concurrency"]: p for p in body["points"]}
        assert list(points) == [1, 2, 4, 8]
        for c, p in points.items():
            assert p["state"] == "done" and len(p["bench_run_ids"]) == 2 and p["repeat_group"], p
            assert (
                p["out_tok_per_s"] > 0
                and p["out_tok_per_s_min"] <= p["out_tok_per_s"] <= p["out_tok_per_s_max"]
            )
            # 1000/TPOT needs tokens read apart: a client starved of its core on a busy machine reads a
            # short answer in one go (TPOT 0), so it may be missing; output tok/s / C never is.
            assert p["interactivity_tpot"] is None or p["interactivity_tpot"] > 0, p
            assert (p["interactivity_per_slot"] or 0) > 0, p
            assert p["gpus"] is None and p["out_tok_per_s_per_gpu"] is None  # CPU replicas: no GPUs
            rows = store.rows(
                "SELECT concurrency, prompts, repeat_group FROM bench_runs WHERE id IN (?, ?)",
                p["bench_run_ids"],
            )
            assert rows == [{"concurrency": c, "prompts": 4 * c, "repeat_group": p["repeat_group"]}] * 2
        # The point of a curve: each stream gets less as the batch grows (out tok/s / C falls from C1 to C8).
        assert points[8]["interactivity_per_slot"] < points[1]["interactivity_per_slot"], points
        assert "interactivity (1000/TPOT)" in body["definitions"]
        assert done.stderr.count("stored: out") == 4  # one progress line per point
        assert store.scalar("SELECT count(*) FROM bench_runs") == warm + 8
        print(
            f"curve of 4 points x 2 runs: {took:.0f} s, TPOT p50",
            {c: p["tpot_ms_p50"] for c, p in points.items()},
        )

        again = run_campaign(db, *CURVE, "--repeat", "2", "--prompts-per-slot", "4")
        assert again.returncode == 0, again.stderr
        assert "measured now: nothing" in again.stdout and "TOK/S/USER 1000/TPOT" in again.stdout
        assert "C8" in again.stdout  # the chart labels each point
        assert (
            store.scalar("SELECT count(*) FROM bench_runs") == warm + 8
        )  # the same command measured nothing

        # (c) Interrupted after its first point, the same curve again measures only the rest.
        plan = service.open_curve("tiny-cpu", "local", "tiny", [1, 2, 4], 1, 2)
        assert not plan.resumed  # --repeat 1: another identity
        walk = asyncio.create_task(service.walk_curve(plan, timeout_s=300))
        await _until(
            "the first point to be stored",
            lambda: store.curves.points(plan.curve.id)[0].state == "done",
            300,
        )
        walk.cancel()
        with pytest.raises(asyncio.CancelledError):
            await walk
        states = [p.state for p in store.curves.points(plan.curve.id)]
        assert (
            states == ["done", "pending", "pending"]
            and store.curves.get(plan.curve.id).state == "interrupted"
        )
        before = store.scalar("SELECT count(*) FROM bench_runs")
        resumed = run_campaign(
            db, "curve", "tiny-cpu", "--box", "local", "--shape", "tiny", "--ladder", "1:4:x2", "--json"
        )
        assert resumed.returncode == 0, resumed.stderr
        body = json.loads(resumed.stdout)
        assert body["curve"]["id"] == plan.curve.id and body["measured_now"] == [2, 4]
        assert "resuming curve" in resumed.stderr
        assert body["curve"]["prompts_per_slot"] == 2  # the resumed curve keeps its own
        assert [p["state"] for p in body["points"]] == ["done"] * 3
        first = store.curves.points(plan.curve.id)[0]
        assert store.scalar("SELECT count(*) FROM bench_runs") - before in (
            2,
            3,
        )  # C2, C4 (+ C2's cancelled run)
        assert [p["bench_run_ids"] for p in body["points"]][0] == list(first.bench_run_ids)
