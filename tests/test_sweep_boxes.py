"""One sweep over several boxes: a queue of arms fed to every box, arms side by side on separate GPUs.

The boxes are real sshd test boxes whose fake nvidia-smi shows four RTX PRO 6000 cards with a foreign
process holding GPU 3 (tests/fixtures/gpus/pcie-4gpu.json); the servers are the fake engine
(testbed/fake_engine.py), which tells the box's fake nvidia-smi the memory it holds on its GPUs
while it lives, so the queue's before/after GPU memory check reads what really runs there.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from console.readmodel.sweeps import sweeps
from console.recipes import load_catalog
from console.service import Service
from console.service.sweep import SweepError, SweepOptions, SweepQueue
from console.service.sweep.queue import BoxSlots, fits_nowhere
from console.store import Box, Store
from console.store.checks import as_probe
from console.tui.views.sweeps import arm_detail, progress_line, queue_lines
from testbed import box_python
from testbed.fake_engine import install, write_model
from testbed.fleet_fixtures import agent_ticking_fast
from testbed.ports import free_ports
from tests import test_sweep
from tests.support.schema import database_at

ROOT = Path(__file__).resolve().parent.parent
recipes = test_sweep.recipes
"""The fixture: a user recipes layer with the fake engine's arms, as tests/test_sweep.py's tests get it."""
pytestmark = pytest.mark.timeout(420)

ONE_GPU = 'profile = "fake-moe"\nmax_model_len = 2048\nmax_num_seqs = 2\n'
HOLDS = 'env = { FAKE_ENGINE_GPU_MIB = "20000", FAKE_ENGINE_STARTUP_S = "%s" }\n'
"""A one-GPU arm whose server holds 20000 MiB on its card once loaded."""


def one_gpu_arms(names: list[str], startup_s: float = 0.5) -> str:
    return "".join(f'[arms."{n}"]\n{ONE_GPU}{HOLDS % startup_s}' for n in names)


# -- the queue's choices, without boxes ----------------------------------------------------------------
def _queue(tmp_path: Path, recipes: Path, arms: list[str]) -> tuple[SweepQueue, Store]:
    store = Store(tmp_path / "state.db")
    service = Service(store, catalog=load_catalog([recipes]))
    sweep = store.sweeps.create(
        "q",
        ["a", "b"],
        ["short"],
        [2],
        False,
        [{"arm": a, "origin": "list"} for a in arms],
        (os.getpid(), "here"),
        "packed",
    )
    return SweepQueue(service, sweep.id), store


def _taker(queue: SweepQueue, store: Store) -> Any:
    def take(box: BoxSlots, gpu: int | None) -> tuple[str, list[int] | None, str | None] | None:
        got = queue._take(box, gpu)
        if got is None:
            return None
        if got.refusal is None:  # the attempt claims it in the store, as the walk does
            store.sweeps.start_arm(got.arm.id, box.name, got.gpus, None)
        return got.arm.arm, got.gpus, got.refusal

    return take


def test_slots_take_arms_in_walk_order_on_their_own_free_gpus(tmp_path: Path, recipes: Path) -> None:
    (recipes / "q.toml").write_text(
        one_gpu_arms(["one-a", "one-b"])
        + f'[arms."pair"]\n{ONE_GPU}replicas = 2\n'
        + one_gpu_arms(["one-c"])
        + '[arms."cpu"]\nprofile = "fake-moe"\ndevice = "cpu"\n'
        + f'[arms."octet"]\n{ONE_GPU}replicas = 8\n'
    )
    queue, store = _queue(tmp_path, recipes, ["one-a", "one-b", "pair", "one-c", "cpu", "octet"])
    with store:
        a, b = BoxSlots("a", [0, 1, 2, 3], free={0, 1, 2, 3}), BoxSlots("b", [0, 1], free={0, 1})
        queue.boxes = {"a": a, "b": b}
        take = _taker(queue, store)
        assert take(a, 2) == ("one-a", [2], None)  # the slot's own GPU
        assert take(a, 2) is None  # which it holds now
        assert take(b, 1) == ("one-b", [1], None)
        assert take(a, 0) == ("pair", [0, 1], None)  # two GPUs: the slot's and the lowest other free one
        assert take(a, 3) == ("one-c", [3], None)
        assert take(b, 0) == (
            "cpu",
            None,
            'a CPU arm (device = "cpu") needs a box without GPUs; every box of the sweep has GPUs (a 4, b 2)',
        )
        assert take(b, 0) == (
            "octet",
            None,
            "does not fit any box of the sweep: it needs 8 GPUs, the boxes have a 4, b 2",
        )


def test_a_box_drains_for_a_big_arm_while_another_box_takes_the_smaller_ones(
    tmp_path: Path, recipes: Path
) -> None:
    (recipes / "q.toml").write_text(
        f'[arms."pair"]\n{ONE_GPU}replicas = 2\n' + one_gpu_arms(["one-a", "one-b"])
    )
    queue, store = _queue(tmp_path, recipes, ["pair", "one-a", "one-b"])
    with store:
        a = BoxSlots("a", [0, 1, 2, 3], free={2})  # 0, 1 and 3 busy
        b = BoxSlots("b", [0, 1], free={0})
        queue.boxes = {"a": a, "b": b}
        take = _taker(queue, store)
        pair = next(x.id for x in store.sweeps.arms(queue.sweep.id) if x.arm == "pair")
        assert take(a, 2) is None and queue.draining == {pair: "a"}  # no smaller arm starts on a meanwhile
        assert take(b, 0) == ("one-a", [0], None)  # b passes the pair by: a already drains for it
        a.free = {1, 2}
        assert take(a, 1) == ("pair", [1, 2], None) and queue.draining == {}
        assert take(a, 0) is None  # GPU 0 is still busy


def test_fits_nowhere_waits_for_boxes_whose_size_is_unknown() -> None:
    four = BoxSlots("a", [0, 1, 2, 3])
    assert fits_nowhere(4, [four]) is None
    assert fits_nowhere(5, [four]) is not None
    assert fits_nowhere(5, [four, BoxSlots("b", [], known=False)]) is None  # never probed: it may be bigger
    assert fits_nowhere(0, [four, BoxSlots("c", [])]) is None  # a box without GPUs takes CPU arms


# -- the store ---------------------------------------------------------------------------------------
def test_a_v9_sweep_gets_its_box_and_its_last_attempt(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    conn = database_at(path, 9)
    conn.execute(
        "INSERT INTO sweeps(id, list, box, shapes, concurrency, state, created_ms, updated_ms) "
        "VALUES (1, 'l', 'pro-a', '[]', '[]', 'interrupted', 10, 20)"
    )
    conn.execute(
        "INSERT INTO sweep_arms(sweep_id, position, arm, origin, state, attempts, reason, launch_ids, "
        "started_ms, ended_ms) VALUES (1, 0, 'x', 'list', 'crashed', 2, 'exited with code 1', '[\"x.r0\"]', "
        "11, 12), (1, 1, 'y', 'list', 'pending', 0, NULL, NULL, NULL, NULL)"
    )
    conn.commit()
    conn.close()
    with Store(path) as store:
        [sweep] = store.sweeps.every("pro-a")
        assert sweep.layout == "node" and [b.box for b in store.sweeps.boxes(1)] == ["pro-a"]
        x, y = store.sweeps.arms(1)
        assert (x.box, x.gpus, y.box) == ("pro-a", None, None)
        [attempt] = store.sweeps.attempts_of(x.id)
        assert (attempt.attempt, attempt.box, attempt.outcome, attempt.launch_ids) == (
            2,
            "pro-a",
            "crashed",
            ["x.r0"],
        )
        assert store.sweeps.attempts_of(y.id) == []


def test_a_sweep_over_boxes_resumes_on_any_of_them_and_keeps_its_layout(
    tmp_path: Path, recipes: Path
) -> None:
    with Store(tmp_path / "state.db") as store:
        for name in ("a", "b", "c"):
            store.boxes.add(Box(name=name, ssh_user="u", host="127.0.0.1", port=22))
        service = Service(store, catalog=load_catalog([recipes]))
        one, _ = service.open_sweep("fake-test", "a", ["short"])
        store.sweeps.stop(one.id, "interrupted", "test")
        with pytest.raises(
            SweepError,
            match=f"sweep #{one.id} of fake-test walks each arm on every card of box a; "
            "resume it with --box a alone",
        ):
            service.open_sweep("fake-test", ["a", "b"])
        queued, resumed = service.open_sweep("fake-test", ["b", "c"], ["short"])
        assert not resumed and queued.layout == "packed" and queued.box == "b"
        store.sweeps.stop(queued.id, "interrupted", "test")
        again, resumed = service.open_sweep("fake-test", ["c", "a"])  # c is one of its boxes: the same queue
        assert resumed and again.id == queued.id
        assert [(b.box, b.state) for b in store.sweeps.boxes(queued.id)] == [
            ("c", "walking"),
            ("a", "walking"),
            ("b", "left"),
        ]
        assert [s.id for s in store.sweeps.every("a")] == [one.id, queued.id]


def test_the_sweep_view_shows_each_box_and_gpu_what_waits_and_where_each_attempt_ran(tmp_path: Path) -> None:
    now = [1_000]
    with Store(tmp_path / "state.db", clock=lambda: now[0]) as store:
        for name, cards in (("a", 4), ("b", 2)):
            store.boxes.add(Box(name=name, ssh_user="u", host="127.0.0.1", port=22))
            store.checks.add_probe(
                name, as_probe({"t_ms": 500, "gpus": [{"index": i} for i in range(cards)]})
            )
        sweep = store.sweeps.create(
            "q",
            ["a", "b"],
            ["short"],
            [1],
            False,
            [{"arm": x, "origin": "list"} for x in ("x", "y", "z", "w")],
            (os.getpid(), "here"),
            "packed",
        )
        x, y, _, _ = store.sweeps.arms(sweep.id)
        now[0] = 2_000
        store.sweeps.start_arm(x.id, "a", [0], None)
        store.sweeps.record_memory(x.id, "before", {0: 0.0})
        store.sweeps.start_arm(y.id, "b", [1], None)
        now[0] = 3_000
        store.sweeps.box_out(sweep.id, "b", "box b: Connect call failed")
        store.sweeps.finish_arm(y.id, "interrupted", "box b: Connect call failed; given back to the queue")
        store.sweeps.exclude_gpu(
            sweep.id, "a", 3, "GPU 3 of box a held 18437 MiB before an arm of this sweep was put on it"
        )
        now[0] = 4_000
        store.sweeps.start_arm(y.id, "a", [1, 2], None)

        [entry] = sweeps(store, 5_000)
        assert progress_line(entry, 5_000).startswith("#1 q on a, b: running, 0/4 finished")
        lines = queue_lines(entry, 5_000)
        assert lines[0].startswith("  a: GPU0 x ") and " | GPU1 y " in lines[0] and " | GPU2 y " in lines[0]
        assert lines[0].endswith(
            "| GPU3 not used (GPU 3 of box a held 18437 MiB before an arm of this sweep was put on it)"
        )
        assert lines[1:] == ["  b: OUT (box b: Connect call failed)", "  queue: 2 waiting (z, w)"]
        detail = arm_detail(entry, entry.arms[1])
        assert "on a GPUs 1,2" in detail
        assert (
            "attempt 1 on b GPU 1: interrupted (box b: Connect call failed; given back to the queue)"
            in detail
        )
        assert "attempt 2 on a GPUs 1,2: running" in detail
        assert any(
            line.startswith("attempt 1 on a GPU 0: running; GPU memory before GPU0 0")
            for line in arm_detail(entry, entry.arms[0])
        )

        [earlier] = sweeps(store, 2_500)  # the replay cursor: before box b went out
        lines = queue_lines(earlier, 2_500)
        assert lines[0].startswith("  a: GPU0 x ") and lines[0].endswith(
            " | GPU1 idle | GPU2 idle | GPU3 idle"
        )
        assert lines[1].startswith("  b: GPU0 idle | GPU1 y ")
        assert [(a.place, a.state, a.attempts) for a in earlier.arms] == [
            ("a GPU 0", "running", 1),
            ("b GPU 1", "running", 1),
            ("-", "pending", 0),
            ("-", "pending", 0),
        ]


# -- real boxes ------------------------------------------------------------------------------------
def _boxes(*names: str) -> list[Any]:
    from testbed.fleet_fixtures import box_started, farm
    from testbed.sshd import SshdUnavailable

    try:
        farm()
    except SshdUnavailable as exc:
        pytest.skip(str(exc))
    boxes = [box_started(name, "pcie-4gpu") for name in names]
    for box in boxes:
        write_model(box.root / "models" / "fake-moe")
    return boxes


def _register(store: Store, boxes: list[Any]) -> None:
    from testbed.fleet_fixtures import register

    python = str(box_python.ensure())
    for box in boxes:
        register(store, box)
        env_dir = install(box.root / "fake-env", python)  # run by the box's own unix user
        store.boxes.update(box.name, serving_env=str(env_dir), model_root=str(box.root / "models"))


def _launches(store: Store) -> list[dict[str, Any]]:
    return [
        {**x, "gpus": json.loads(x["gpus"])}
        for x in store.rows("SELECT id, box, arm, gpus, start_ms, ready_ms, stop_ms, state FROM launches")
    ]


def _never_two_on_one_gpu(launches: list[dict[str, Any]]) -> None:
    """No two launches ever held one GPU of one box at once (a launch still up counts until now)."""
    now = int(time.time() * 1000)
    held: dict[tuple[str, int], list[tuple[int, int, str]]] = {}
    for x in launches:
        for gpu in x["gpus"]:
            held.setdefault((x["box"], gpu), []).append((x["start_ms"], x["stop_ms"] or now, x["id"]))
    for spans in held.values():
        spans.sort()
        for (_, end, first), (start, _, second) in zip(spans, spans[1:], strict=False):
            assert end <= start, f"{first} and {second} overlapped on one GPU"


@pytest.mark.sshd
def test_arms_run_side_by_side_on_separate_gpus_of_two_boxes(recipes: Path, tmp_path: Path) -> None:
    qa, qb = _boxes("qa", "qb")
    (recipes / "q.toml").write_text(
        one_gpu_arms([f"g{i}" for i in range(1, 6)])
        + f'[arms."nomem"]\n{ONE_GPU}'  # its server holds nothing on its GPU: not on the GPU it was given
        + f'[arms."pair"]\n{ONE_GPU}replicas = 2\nenv = {{ FAKE_ENGINE_GPU_MIB = "20000" }}\n'
        + '[arms."cpu"]\nprofile = "fake-moe"\ndevice = "cpu"\n'
        + f'[arms."quad"]\n{ONE_GPU}replicas = 4\n'  # four cards, but GPU 3 of each box is held by another process
        + '[sweeps."q"]\narms = ["g1", "g2", "g3", "g4", "g5", "nomem", "pair", "cpu", "quad"]\n'
    )

    async def go() -> None:
        from testbed.fleet_fixtures import FAST

        with Store(tmp_path / "state.db") as store:
            _register(store, [qa, qb])
            service = Service(store, catalog=load_catalog([recipes]), settings=FAST)
            try:
                sweep, _ = service.open_sweep("q", ["qa", "qb"], ["short"], [2])
                assert sweep.layout == "packed"
                with pytest.raises(
                    SweepError, match=r"1 arm\(s\) not run \(quad\): no box of the sweep can take"
                ):
                    await service.run_sweep(
                        sweep.id, SweepOptions(kill_grace_s=2, prompts=4, base_port=free_ports(8))
                    )
            finally:
                await service.close()

    try:
        asyncio.run(go())
    finally:
        qa.kill_agent()
        qb.kill_agent()
    with Store(tmp_path / "state.db") as store:
        arms = {a.arm: a for a in store.sweeps.arms(1)}
        assert {n: a.state for n, a in arms.items()} == {
            **{f"g{i}": "served" for i in range(1, 6)},
            "nomem": "crashed",
            "pair": "served",
            "cpu": "refused",
            "quad": "pending",
        }
        assert "needs a box without GPUs" in (arms["cpu"].reason or "")
        assert "shows no memory of it (0 MiB used before the launch, 0 MiB once it served)" in (
            arms["nomem"].reason or ""
        )
        # GPU 3 of each box holds another process's 18437 MiB: the first arm put there was taken back.
        for b in store.sweeps.boxes(1):
            assert b.state == "walking" and list(b.excluded) == [3] and "18437 MiB" in b.excluded[3]
            assert "pid 48213" in b.excluded[3]
        launches = _launches(store)
        assert all(3 not in x["gpus"] for x in launches)
        _never_two_on_one_gpu(launches)
        # The GPU memory was read on the box: free before each launch, the server's 20000 MiB once it served.
        for name in [f"g{i}" for i in range(1, 6)] + ["pair"]:
            [attempt] = store.sweeps.attempts_of(arms[name].id)
            assert attempt.gpus == arms[name].gpus and len(attempt.gpus or []) == (2 if name == "pair" else 1)
            assert attempt.mem_before == {g: 0.0 for g in attempt.gpus or []}
            assert attempt.mem_after == {g: 20000.0 for g in attempt.gpus or []}
        pair = [x for x in launches if x["arm"] == "pair"]
        assert (
            len(pair) == 2
            and len({x["box"] for x in pair}) == 1
            and sorted(x["gpus"][0] for x in pair) == sorted(arms["pair"].gpus or [])
        )
        # Side by side: on some box, two arms served at the same time.
        served = [x for x in launches if x["ready_ms"]]
        assert any(
            x["box"] == y["box"]
            and x["arm"] != y["arm"]
            and x["ready_ms"] < y["stop_ms"]
            and y["ready_ms"] < x["stop_ms"]
            for x in served
            for y in served
        )
        assert {x["box"] for x in served} == {"qa", "qb"}
        assert all(x["stop_ms"] for x in launches)  # every server was stopped
        # Each served arm's tripwire (nomem's too) went out with its launch, its client told to wait for the
        # server (these fake engines serve at once; tests/test_agent_daemon.py shows a client waiting out a load).
        sent = store.rows(
            "SELECT json_extract(args, '$.launch_id') AS launch_id, args FROM commands WHERE op = 'tripwire'"
        )
        early = [json.loads(t["args"]) for t in sent if t["launch_id"] in {x["id"] for x in served}]
        assert len(early) == 7 and all(t["wait_ready_s"] > 0 for t in early)
        # One sweep curve per served arm x shape, on the box it ran on, its point linked to the bench row there.
        curves = {c.arm: c for c in store.curves.all()}
        assert sorted(curves) == sorted([f"g{i}" for i in range(1, 6)] + ["pair"])
        assert {c.box for c in curves.values()} == {"qa", "qb"}
        for name, curve in curves.items():
            assert (curve.source, curve.sweep_id, curve.shape, curve.box, curve.state) == (
                "sweep",
                1,
                "short",
                arms[name].box,
                "done",
            )
            [point] = store.curves.points(curve.id)
            rows = store.rows(
                "SELECT id FROM bench_runs WHERE arm = ? AND box = ? AND shape = 'short' AND concurrency = 2",
                [name, curve.box],
            )
            assert (
                point.state == "done"
                and point.bench_run_ids == tuple(r["id"] for r in rows)
                and len(rows) == 1
            )
        sweep = store.sweeps.get(1)
        assert sweep.state == "interrupted" and "qa GPU 3 left out" in (sweep.detail or "")


def _campaign(db: Path, recipes: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "CAMPAIGN_RECIPES": str(recipes), "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "console", "--db", str(db), *args],
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _until(what: str, check: Any, process: subprocess.Popen[str], timeout: float = 180) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert process.poll() is None, f"waiting for {what}: {process.communicate()}"
        assert time.monotonic() < deadline, f"no {what} after {timeout:.0f} s"
        time.sleep(0.2)
    return found


@pytest.mark.sshd
def test_a_dead_box_gives_its_arms_back_and_a_restarted_console_runs_nothing_twice(
    recipes: Path, tmp_path: Path
) -> None:
    db = tmp_path / "state.db"
    qc, qd = _boxes("qc", "qd")
    names = [f"g{i}" for i in range(1, 9)]
    (recipes / "q.toml").write_text(
        one_gpu_arms(names, startup_s=3) + f'[sweeps."q"]\narms = {json.dumps(names)}\n'
    )
    with Store(db) as store:
        _register(store, [qc, qd])
    for box in ("qc", "qd"):  # the sweep's commands find them and keep their tick
        asyncio.run(agent_ticking_fast(db, box))
    args = (
        "sweep",
        "run",
        "q",
        "--box",
        "qc",
        "--box",
        "qd",
        "--shapes",
        "short",
        "--concurrency",
        "1",
        "--prompts",
        "4",
        "--kill-grace",
        "2",
        "--base-port",
        str(free_ports(8)),
    )

    def rows(sql: str) -> list[dict[str, Any]]:
        with Store(db) as store:
            return store.rows(sql)

    first = _campaign(db, recipes, *args)
    try:
        # Box qd dies while it serves an arm; qc takes what qd was running.
        _until(
            "an arm serving on qd",
            lambda: rows("SELECT id FROM launches WHERE box = 'qd' AND state = 'serving'"),
            first,
        )
        qd.power_off()
        given_back = _until(
            "an arm given back by qd",
            lambda: rows(
                "SELECT a.arm, t.reason FROM sweep_attempts t JOIN sweep_arms a ON a.id = t.sweep_arm_id "
                "WHERE t.box = 'qd' AND t.outcome = 'interrupted'"
            ),
            first,
        )
        # Then the console dies while qc runs arms, after some finished.
        _until(
            "arms running on qc after two finished",
            lambda: (
                len(rows("SELECT id FROM sweep_arms WHERE state = 'served'")) >= 2
                and rows("SELECT id FROM sweep_arms WHERE state = 'running' AND box = 'qc'")
            ),
            first,
        )
        first.send_signal(signal.SIGKILL)
        first.wait()
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    before = {r["arm"]: r for r in rows("SELECT arm, state, attempts FROM sweep_arms")}
    left_running = {a for a, r in before.items() if r["state"] == "running"}
    assert left_running and all(
        r["state"] in ("served", "running", "pending", "interrupted") for r in before.values()
    )

    again = _campaign(db, recipes, *args[:-1], str(free_ports(8)))
    try:
        out, err = again.communicate(timeout=300)
    finally:
        qc.kill_agent()
    assert again.returncode == 0, err
    assert "resuming sweep #1" in err
    with Store(db) as store:
        arms = {a.arm: a for a in store.sweeps.arms(1)}
        assert {a.state for a in arms.values()} == {"served"}
        for name, arm in arms.items():
            history = store.sweeps.attempts_of(arm.id)
            assert [t.outcome for t in history][-1] == "served" and history[-1].box == "qc"
            if before[name]["state"] == "served":
                assert arm.attempts == 1, name  # finished before the restart: never run again
            if name in left_running:  # stopped by the resumed sweep before its second attempt started
                assert history[-2].outcome == "interrupted" and "stopped while this arm was running" in (
                    history[-2].reason or ""
                )
        for row in given_back:
            assert "box qd" in row["reason"] and "given back to the queue" in row["reason"]
        [qd_row] = [b for b in store.sweeps.boxes(1) if b.box == "qd"]
        assert qd_row.state == "out" and "box qd" in (qd_row.detail or "")
        launches = _launches(store)
        qc_launches = [x for x in launches if x["box"] == "qc"]
        assert all(x["stop_ms"] for x in qc_launches)  # the dead console's servers too
        _never_two_on_one_gpu(qc_launches)
        for name in arms:  # never two servers of one arm at once
            spans = sorted((x["start_ms"], x["stop_ms"]) for x in qc_launches if x["arm"] == name)
            assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False)), name
        assert store.sweeps.get(1).state == "done"
    status = _campaign(db, recipes, "sweep", "status", "1")
    text, _ = status.communicate(timeout=60)
    assert "box qd: out: box qd" in text and "WHERE" in text and "qc:0" in text
