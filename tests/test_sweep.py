"""Sweeps without vLLM: the plan, and the walk through a real agent on the local box running a fake engine.

The fake engine (testbed/fake_engine.py) is a real process launched from the resolved argv; it
refuses a pinned MoE backend the way vLLM does, crashes, degenerates or serves as its arm's env says.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from console.recipes import load_catalog
from console.recipes.vllm_flags import flag_value
from console.service import Service
from console.service.sweep import (
    SweepError,
    SweepOptions,
    accepted_candidates,
    candidates,
)
from console.store import Store
from console.store.conditions import admitted_streams
from console.store.served import NOT_APPLICABLE
from console.store.sweeps import SweepArm
from testbed import box_python
from testbed.fake_engine import install, write_model
from testbed.fleet_fixtures import FAST, agent_ticking_fast
from testbed.ports import free_ports
from testbed.sweep_recipes import PROFILE, RECIPES

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def recipes(tmp_path: Path) -> Path:
    path = tmp_path / "recipes"
    path.mkdir()
    (path / "fake.toml").write_text(RECIPES)
    return path


# -- the plan, pure ----------------------------------------------------------------------------------
def test_plan_walks_the_list_then_the_kernel_pairs_on_the_base(recipes: Path) -> None:
    catalog = load_catalog([recipes])
    planned = candidates(catalog, "fake-test")
    assert [c["arm"] for c in planned] == [
        "fake-serve",
        "fake-refused",
        "fake-refused-quietly",
        "fake-crash",
        "fake-degenerate",
        "fake-serve@auto+marlin",
    ]
    assert planned[-1] == {
        "arm": "fake-serve@auto+marlin",
        "origin": "pair",
        "base": "fake-serve",
        "linear_backend": None,
        "moe_backend": "marlin",
    }
    with pytest.raises(ValueError, match="no sweep list named 'nope'.*known: fake-test"):
        candidates(catalog, "nope")


def test_engine_backend_names_become_flag_values_or_are_kept_unqueued(recipes: Path) -> None:
    catalog = load_catalog([recipes])
    assert flag_value("FlashInfer CUTLASS", "moe_backend") == "flashinfer_cutlass"
    assert flag_value("CPU", "moe_backend") is None  # vLLM names it, but no --kernel-config value selects it
    row = SweepArm(
        id=1,
        sweep_id=1,
        position=1,
        arm="fake-refused",
        base=None,
        linear_backend=None,
        moe_backend=None,
        origin="list",
        queued_by=None,
        state="running",
        attempts=1,
        reason=None,
        backends_accepted=[],
        backends_potential=[],
        launch_ids=[],
        gpu_mem_mib=None,
        kv_cache_tokens=None,
        max_concurrency=None,
        tripwire_run_id=None,
        started_ms=None,
        ended_ms=None,
    )
    reason = "ValueError: Unquantized MoE backend FlashInfer CUTLASS does not support ..."
    queued, unmapped = accepted_candidates(
        catalog, row, catalog.arms["fake-refused"], reason, ["Triton", "CPU", "FlashInfer CUTLASS"]
    )
    assert [q["arm"] for q in queued] == ["fake-refused@auto+triton"]  # the refused one is not re-queued
    assert queued[0]["queued_by"] == "fake-refused" and queued[0]["origin"] == "accepted"
    assert unmapped == ["CPU"]


R3 = "R3-moe-backend-unswept"


def _swept(
    store: Store,
    arm: str,
    state: str,
    pinned: str,
    reason: str | None = None,
    accepted: list[str] | None = None,
) -> None:
    """One arm a sweep launched with ``pinned`` as its MoE backend, ended as ``state``."""
    sweep = store.sweeps.create(
        "fake-test", ["local"], ["short"], [1], False, [{"arm": arm, "origin": "list"}], (1, "h")
    )
    [row] = store.sweeps.arms(sweep.id)
    argv = ["vllm", "serve", "fake-moe", "--kernel-config.moe_backend", pinned]
    arm_id = store.launches.add_arm(arm, "fake-moe", "local", f"h-{sweep.id}", argv, {}, [[]], 1, [])
    store.launches.add(f"l{sweep.id}", "local", arm, arm_id=arm_id, replica=0, gpus=[], port=1, forced=False)
    store.sweeps.finish_arm(row.id, state, reason, launch_ids=[f"l{sweep.id}"], backends_accepted=accepted)
    store.sweeps.stop(sweep.id, "done", None)


def test_a_pinned_moe_backend_needs_a_sweep_that_measured_it(recipes: Path, tmp_path: Path) -> None:
    """Campaign rule 3: on NVFP4 experts a pin nobody measured is an error, whatever sweep lists the arm; what a
    sweep in this state.db served, or heard the engine accept, may be pinned by hand."""
    bf16 = PROFILE.replace('"fake-moe"]', '"fake-bf16-moe"]').replace('"fake-moe".', '"fake-bf16-moe".')
    bf16 = bf16.replace(
        'quantization = "nvfp4"', 'quantization = "bf16"'
    )  # MXFP4, BF16... experts: a warning
    (recipes / "bf16.toml").write_text(
        bf16 + '[arms."fake-bf16-pin"]\nprofile = "fake-bf16-moe"\ndevice = "cpu"\nmoe_backend = "triton"\n'
    )
    with Store(tmp_path / "state.db") as store:
        store.boxes.ensure_local()
        store.boxes.update("local", serving_env="/opt/fake", model_root=str(tmp_path / "models"))
        service = Service(store, catalog=load_catalog([recipes]))

        def r3(arm: str, sweep: str | None = None) -> list[str]:
            return [
                f"{f.severity}: {f.reason}"
                for f in service.plan_launch(arm, "local", sweep=sweep).findings
                if f.rule_id == R3
            ]

        [finding] = r3("fake-pin-triton")
        assert finding.startswith("error: MoE backend 'triton' pinned on fake-moe (NVFP4 experts")
        assert "no sweep in this state.db served it" in finding and "add the arm to a sweep" in finding
        [finding] = r3("fake-refused")  # listed by a sweep that has not run: not measured
        assert "`campaign sweep run fake-test --box BOX`" in finding
        assert r3("fake-refused", sweep="fake-test") == []  # the sweep's own launch is the measurement
        [finding] = r3("fake-bf16-pin")
        assert finding.startswith("warn: MoE backend 'triton' pinned on fake-bf16-moe (a MoE model)")

        _swept(store, "fake-serve@auto+triton", "served", "triton")
        _swept(
            store,
            "fake-refused",
            "refused",
            "flashinfer_cutlass",
            "ValueError: moe_backend='flashinfer_cutlass' is not supported for unquantized MoE. Expected one of "
            "['Triton', 'Marlin'].",
            ["Triton", "Marlin"],
        )
        assert r3("fake-pin-triton") == []  # served in a sweep
        assert r3("fake-refused-quietly") == []  # marlin: the refusal named it as accepted
        [finding] = r3("fake-refused")
        assert finding.startswith("error:") and "a sweep in this state.db saw the engine refuse it" in finding
        assert r3("fake-bf16-pin") != []  # another model: what fake-moe's sweeps measured says nothing of it


def test_admitted_streams_is_the_sequence_cap_or_what_the_kv_cache_holds() -> None:
    assert admitted_streams(4096, 2, 20) == 2
    assert admitted_streams(4096, 256, 2048) == 2
    assert admitted_streams(None, None, 100) is None


# -- the walk, through a real agent ------------------------------------------------------------------
def _walk(db: Path, recipes: Path, **open_args: object) -> tuple[int, dict[str, SweepArm]]:

    async def go() -> int:
        with Store(db) as store:
            service = Service(store, catalog=load_catalog([recipes]), settings=FAST)
            sweep, _ = service.open_sweep("fake-test", "local", **open_args)  # type: ignore[arg-type]
            try:
                options = SweepOptions(kill_grace_s=2, prompts=4, base_port=free_ports(1))
                await service.run_sweep(sweep.id, options)
            finally:
                await service.close()
            return sweep.id

    sweep_id = asyncio.run(go())
    with Store(db) as store:
        return sweep_id, {a.arm: a for a in store.sweeps.arms(sweep_id)}


def test_every_arm_tried_ends_as_a_row_and_refusals_queue_what_the_engine_accepts(
    local_db: Path, recipes: Path
) -> None:
    sweep_id, arms = _walk(local_db, recipes, shapes=["short"], concurrency=[1, 4])
    assert {name: a.state for name, a in arms.items()} == {
        "fake-serve": "served",
        "fake-refused": "refused",
        "fake-refused-quietly": "refused",
        "fake-crash": "crashed",
        "fake-degenerate": "degenerate",
        "fake-serve@auto+marlin": "served",
        "fake-refused@auto+triton": "served",
    }
    served, refused, quiet = arms["fake-serve"], arms["fake-refused"], arms["fake-refused-quietly"]
    assert served.kv_cache_tokens == 4096 and served.max_concurrency == 2.0  # the engine's start-up budget
    assert served.backends_potential == ["Triton", "Marlin"]
    assert refused.reason is not None and refused.reason.startswith(
        "ValueError: moe_backend='flashinfer_cutlass' is not supported for unquantized MoE. Expected one of"
    )
    assert (
        refused.backends_accepted == ["Triton", "CPU"]
        and "no --kernel-config value selects: CPU" in refused.reason
    )
    # vLLM's "does not support the deployment configuration" names no set: recorded as none printed, not as [].
    assert quiet.backends_accepted is None and quiet.reason is not None
    assert (
        quiet.reason.endswith("(the engine printed no accepted set)")
        and "does not support the deployment" in quiet.reason
    )
    queued = arms["fake-refused@auto+triton"]
    assert (
        queued.origin == "accepted" and queued.queued_by == "fake-refused" and queued.moe_backend == "triton"
    )
    assert "exited with code -9" in (arms["fake-crash"].reason or "")
    assert "tripwire FAILED 0/20 ok, 20 degenerate" in (arms["fake-degenerate"].reason or "")
    with Store(local_db) as store:
        benches = store.sweeps.benches(served.id)
        # max_num_seqs 2: concurrency 4 cannot be admitted at once, so its row is flagged as queueing.
        assert {(b["concurrency"], b["admitted"], b["queueing"]) for b in benches} == {(1, 2, 0), (4, 2, 1)}
        assert all(b["out_tok_per_s"] and b["error"] is None for b in benches)
        assert store.sweeps.benches(arms["fake-degenerate"].id) == []  # no benches after a failed tripwire
        tw = store.rows(
            "SELECT passed FROM tripwire_runs WHERE id = ?", [arms["fake-degenerate"].tripwire_run_id]
        )
        assert tw == [{"passed": 0}]
        # Each row keeps what it was served with: the tripwire sent the profile's sampling, the bench none.
        served_with = store.rows(
            "SELECT reasoning_parser, thinking, sampling FROM tripwire_runs WHERE id = ?",
            [served.tripwire_run_id],
        )
        assert served_with == [
            {
                "reasoning_parser": None,
                "thinking": "model default: not stated",
                "sampling": '{"temperature":0.0}',
            }
        ]
        assert {
            (r["thinking"], r["sampling"]) for r in store.rows("SELECT thinking, sampling FROM bench_runs")
        } == {(NOT_APPLICABLE, "{}")}
        assert store.sweeps.get(sweep_id).state == "done"
        live = store.rows("SELECT id, state FROM launches WHERE state NOT IN ('failed', 'stopped')")
        assert live == []  # every server was killed
        released = store.rows(
            "SELECT count(*) AS n FROM launches WHERE pid IS NOT NULL AND gpu_mem_released IS NULL"
        )
        assert released == [{"n": 0}]  # and its release confirmed before the next arm


def _campaign(db: Path, recipes: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "CAMPAIGN_RECIPES": str(recipes), "PYTHONPATH": str(ROOT)}
    if args[:2] == ("sweep", "run"):
        args = (*args, "--base-port", str(free_ports(1)))
    return subprocess.Popen(
        [sys.executable, "-m", "console", "--db", str(db), *args],
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _arm_states(db: Path) -> dict[str, str]:
    with Store(db) as store:
        return {r["arm"]: r["state"] for r in store.rows("SELECT arm, state FROM sweep_arms")}


def test_a_killed_sweep_resumes_where_it_stopped_without_rerunning_finished_arms(
    local_db: Path, recipes: Path
) -> None:
    args = (
        "sweep",
        "run",
        "fake-test",
        "--box",
        "local",
        "--shapes",
        "short",
        "--concurrency",
        "1",
        "--prompts",
        "4",
        "--kill-grace",
        "2",
    )
    asyncio.run(agent_ticking_fast(local_db, "local"))  # the sweep's commands find it and keep its tick
    first = _campaign(local_db, recipes, *args)
    deadline = time.monotonic() + 120
    while (
        _arm_states(local_db).get("fake-crash") != "running"
    ):  # killed mid-walk: three arms done, one running
        assert first.poll() is None and time.monotonic() < deadline, first.communicate()
        time.sleep(0.1)
    first.send_signal(signal.SIGKILL)
    first.wait()
    assert _arm_states(local_db)["fake-serve"] == "served"
    with Store(local_db) as store:
        bench_rows = store.scalar("SELECT count(*) FROM bench_runs")
        assert bench_rows >= 1

    status = _campaign(local_db, recipes, "sweep", "status", "--json")
    out, _ = status.communicate(timeout=60)
    [sweep] = json.loads(out)
    assert sweep["state"] == "running" and not sweep["runner_alive"]  # killed: nobody recorded the end

    again = _campaign(
        local_db,
        recipes,
        "sweep",
        "run",
        "fake-test",
        "--box",
        "local",
        "--prompts",
        "4",
        "--kill-grace",
        "2",
    )  # no --shapes: a resumed sweep keeps its own
    out, err = again.communicate(timeout=200)
    assert again.returncode == 0, err
    assert "resuming sweep #1" in err and "sweep #1 [" in err  # the progress bar on stderr
    with Store(local_db) as store:
        arms = {a.arm: a for a in store.sweeps.arms(1)}
        assert arms["fake-serve"].attempts == 1 and arms["fake-refused"].attempts == 1  # never re-run
        assert arms["fake-crash"].attempts == 2 and arms["fake-crash"].state == "crashed"
        assert store.scalar("SELECT count(*) FROM bench_runs WHERE arm = 'fake-serve'") == bench_rows  # kept
        assert store.sweeps.get(1).state == "done"
        assert store.rows("SELECT id FROM launches WHERE state NOT IN ('failed', 'stopped')") == []
        # The served arm's points are one sweep curve, measured before the kill and kept by the resume:
        # its point links the one bench row, never a second measurement.
        curves = [c for c in store.curves.all() if c.arm == "fake-serve"]
        assert [(c.source, c.sweep_id, c.shape, c.concurrency, c.state) for c in curves] == [
            ("sweep", 1, "short", (1,), "done")
        ]
        [point] = store.curves.points(curves[0].id)
        serve_rows = store.rows("SELECT id FROM bench_runs WHERE arm = 'fake-serve' AND concurrency = 1")
        assert point.state == "done" and point.bench_run_ids == tuple(r["id"] for r in serve_rows)
        assert len(serve_rows) == 1
    assert "fake-refused@auto+triton" in out and "served" in out


def test_a_sweep_killed_between_curve_points_resumes_the_same_curve_point_by_point(
    local_db: Path, recipes: Path
) -> None:
    (recipes / "slow.toml").write_text(
        '[arms."slow-serve"]\nprofile = "fake-moe"\ndevice = "cpu"\nmax_model_len = 2048\nmax_num_seqs = 2\n'
        'env = { FAKE_ENGINE_ITL_MS = "30" }\n[sweeps."slow"]\narms = ["slow-serve"]\n'
    )
    args = ("sweep", "run", "slow", "--box", "local", "--shapes", "short", "--concurrency", "1,2")
    asyncio.run(agent_ticking_fast(local_db, "local"))
    first = _campaign(local_db, recipes, *args, "--prompts", "4", "--kill-grace", "2")

    def first_point_done() -> bool:
        with Store(local_db) as store:
            curves = store.curves.all()
            return bool(curves) and [p.state for p in store.curves.points(curves[0].id)][0] == "done"

    deadline = time.monotonic() + 120
    while not first_point_done():  # killed once C=1 is linked, while C=2 is pending or measuring
        assert first.poll() is None and time.monotonic() < deadline, first.communicate()
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)
    first.wait()
    with Store(local_db) as store:
        [curve] = store.curves.all()
        before = store.curves.points(curve.id)
        assert before[1].state != "done"  # the kill came before the second point was linked
        kept = before[0].bench_run_ids

    again = _campaign(local_db, recipes, "sweep", "run", "slow", "--box", "local", "--prompts", "4")
    _, err = again.communicate(timeout=200)
    assert again.returncode == 0, err
    with Store(local_db) as store:
        [resumed] = store.curves.all()  # the same curve, not a second one
        assert (resumed.id, resumed.source, resumed.sweep_id, resumed.state) == (curve.id, "sweep", 1, "done")
        points = store.curves.points(curve.id)
        assert [p.state for p in points] == ["done", "done"]
        assert points[0].bench_run_ids == kept  # C=1 was not measured again
        rows = store.rows("SELECT id, concurrency FROM bench_runs WHERE arm = 'slow-serve' ORDER BY id")
        assert [r["concurrency"] for r in rows].count(1) == 1
        assert {p.concurrency: p.bench_run_ids for p in points} == {
            r["concurrency"]: (r["id"],) for r in rows
        }


def test_a_terminated_sweep_records_the_running_arm_as_interrupted_and_stops_its_server(
    local_db: Path, recipes: Path
) -> None:
    slow = recipes / "slow.toml"
    slow.write_text(
        '[arms."fake-slow"]\nprofile = "fake-moe"\ndevice = "cpu"\nenv = { FAKE_ENGINE_STARTUP_S = "60" }\n'
        '[sweeps."slow-test"]\narms = ["fake-slow"]\n'
    )
    run = _campaign(
        local_db,
        recipes,
        "sweep",
        "run",
        "slow-test",
        "--box",
        "local",
        "--shapes",
        "short",
        "--kill-grace",
        "2",
    )
    deadline = time.monotonic() + 60
    while True:
        with Store(local_db) as store:
            if store.rows("SELECT id FROM launches WHERE state = 'starting'"):
                break
        assert run.poll() is None and time.monotonic() < deadline, run.communicate()
        time.sleep(0.1)
    run.send_signal(signal.SIGTERM)
    _, err = run.communicate(timeout=60)
    assert run.returncode == 130 and "run the same command again to resume it" in err
    with Store(local_db) as store:
        [arm] = store.sweeps.arms(1)
        assert arm.state == "interrupted" and "interrupted" in (arm.reason or "")
        assert store.sweeps.get(1).state == "interrupted"
        [launch] = store.rows("SELECT state FROM launches")
        assert launch["state"] in ("stopping", "stopped")  # the kill was sent before the console exited


@pytest.mark.sshd
def test_an_arm_that_fits_one_card_runs_one_replica_per_card_in_parallel(
    recipes: Path, tmp_path: Path
) -> None:
    """Over a real sshd box whose fake nvidia-smi shows four cards: four servers, each benched."""
    from testbed.fleet_fixtures import box_started, farm, register
    from testbed.sshd import SshdUnavailable

    try:
        farm()
    except SshdUnavailable as exc:
        pytest.skip(str(exc))
    box = box_started("sweep4", "pcie-4gpu")
    env_dir = install(box.root / "fake-env", str(box_python.ensure()))  # run by the box's own unix user
    write_model(box.root / "models" / "fake-moe")
    (recipes / "one.toml").write_text(
        '[arms."fake-card"]\nprofile = "fake-moe"\nmax_model_len = 2048\nmax_num_seqs = 2\n'
        '[sweeps."one"]\narms = ["fake-card"]\n'
    )  # a GPU arm: one replica per card
    base = free_ports(4)

    async def go() -> int:
        with Store(tmp_path / "state.db") as store:
            register(store, box)
            store.boxes.update(box.name, serving_env=str(env_dir), model_root=str(box.root / "models"))
            service = Service(store, catalog=load_catalog([recipes]), settings=FAST)
            try:
                await service.probe(box.name)
                sweep, _ = service.open_sweep("one", box.name, ["short"], [2, 6])
                options = SweepOptions(kill_grace_s=2, prompts=4, base_port=base)
                await service.run_sweep(sweep.id, options)
            finally:
                await service.close()
            return sweep.id

    try:
        sweep_id = asyncio.run(go())
    finally:
        box.kill_agent()
    with Store(tmp_path / "state.db") as store:
        [arm] = store.sweeps.arms(sweep_id)
        assert arm.state == "served" and len(arm.launch_ids) == 4, arm.reason
        launches = store.rows("SELECT gpus, port, start_ms, ready_ms, stop_ms FROM launches ORDER BY port")
        assert [json.loads(x["gpus"]) for x in launches] == [[0], [1], [2], [3]]
        assert [x["port"] for x in launches] == [base, base + 1, base + 2, base + 3]
        # In parallel: every replica was serving before the first one was stopped.
        assert max(x["ready_ms"] for x in launches) < min(x["stop_ms"] for x in launches)
        # One node run per shape and concurrency: every replica at once, each one's share as detail; a
        # concurrency below the replica count would leave replicas idle, so it is an error, not a row.
        idle, bench = store.sweeps.benches(arm.id)
        assert (
            idle["concurrency"] == 2
            and idle["bench_run_id"] is None
            and "below the 4 replicas" in idle["error"]
        )
        assert bench["launch_id"] == arm.launch_ids[0] and bench["out_tok_per_s"] and bench["queueing"] == 0
        [node] = store.rows(
            "SELECT replicas, concurrency FROM bench_runs WHERE id = ?", [bench["bench_run_id"]]
        )
        assert node == {"replicas": 4, "concurrency": 6}
        # Its curve keeps both points: the idle one failed with the same reason, the node row linked.
        [curve] = store.curves.all()
        low, high = store.curves.points(curve.id)
        assert (low.concurrency, low.state, low.bench_run_ids) == (2, "failed", ())
        assert "below the 4 replicas" in (low.reason or "") and curve.state == "done"
        assert (high.concurrency, high.state, high.bench_run_ids) == (6, "done", (bench["bench_run_id"],))
        detail = store.rows(
            "SELECT launch_id, streams FROM bench_replicas WHERE bench_run_id = ? ORDER BY replica",
            [bench["bench_run_id"]],
        )
        assert [d["launch_id"] for d in detail] == arm.launch_ids  # in port order, as the streams were dealt
        assert [d["streams"] for d in detail] == [2, 2, 1, 1]  # C6 round-robin over four replicas
        assert arm.gpu_mem_mib is not None and arm.gpu_mem_mib > 0  # the card's memory, from the probe


def test_a_sweep_walked_by_a_live_process_is_not_taken_over_and_a_resume_keeps_its_shapes(
    recipes: Path, tmp_path: Path
) -> None:
    other = subprocess.Popen(["sleep", "60"])  # stands for another console process walking the sweep
    try:
        with Store(tmp_path / "state.db") as store:
            service = Service(store, catalog=load_catalog([recipes]))
            sweep, resumed = service.open_sweep("fake-test", "local", ["short"], [1, 8])
            assert not resumed and sweep.shapes == ["short"] and sweep.concurrency == [1, 8]
            store.db.execute("UPDATE sweeps SET runner_pid = ? WHERE id = ?", [other.pid, sweep.id])
            store.db.conn.commit()
            with pytest.raises(SweepError, match=f"being walked by pid {other.pid}"):
                service.open_sweep("fake-test", "local")
            other.kill()
            other.wait()
            with pytest.raises(SweepError, match=r"started with concurrency \[1, 8\]; resume it without"):
                service.open_sweep("fake-test", "local", concurrency=[4])
            again, resumed = service.open_sweep("fake-test", "local")
            assert resumed and again.id == sweep.id and again.runner_pid == os.getpid()
            fresh, resumed = service.open_sweep("fake-test", "local", ["short"], new=True)
            assert not resumed and fresh.id != sweep.id and store.sweeps.get(sweep.id).state == "abandoned"
            with pytest.raises(SweepError, match="unknown shape"):
                service.open_sweep("fake-test", "local", ["nope"], new=True)
            with pytest.raises(
                SweepError, match="unknown shape.*router"
            ):  # the default, not in these recipes
                service.open_sweep("fake-test", "local", new=True)
            assert store.sweeps.get(fresh.id).state == "running"  # a refused --new abandons nothing
    finally:
        if other.poll() is None:
            other.kill()
            other.wait()


def test_a_box_that_cannot_start_servers_stops_the_sweep_instead_of_failing_every_arm(
    local_db: Path, recipes: Path
) -> None:
    (recipes / "one.toml").write_text('[sweeps."one"]\narms = ["fake-serve", "fake-degenerate"]\n')
    port = free_ports(1)
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", port))  # the port the sweep's servers are given
    blocker.listen()

    async def go() -> None:
        with Store(local_db) as store:
            service = Service(store, catalog=load_catalog([recipes]), settings=FAST)
            sweep, _ = service.open_sweep("one", "local", ["short"])
            try:
                await service.run_sweep(sweep.id, SweepOptions(kill_grace_s=2, base_port=port))
            finally:
                await service.close()

    try:
        with pytest.raises(SweepError, match=f"could not start fake-serve.*port {port} is already in use"):
            asyncio.run(go())
    finally:
        blocker.close()
    with Store(local_db) as store:
        assert store.sweeps.get(1).state == "interrupted"
        assert [(a.arm, a.state) for a in store.sweeps.arms(1)] == [
            ("fake-serve", "interrupted"),
            ("fake-degenerate", "pending"),
        ]
