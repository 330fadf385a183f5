"""The console's read side over a real state.db: what each panel is given, live and at a replay cursor."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.charts import trace
from console.readmodel import ReadModel
from console.readmodel.queries import launch_state_at, throughput
from console.store import Store
from console.tui.render import gpu_label, tripwire_line
from testbed import tui_fixture as F


@pytest.fixture
def model(tmp_path: Path) -> ReadModel:
    fx = F.build(tmp_path / "state.db")
    store = Store(fx.path, read_only=True)
    return ReadModel(store, lambda: F.NOW)


def test_fleet_rows_carry_verdicts_capping_serving_arms_and_timer(model: ReadModel) -> None:
    rows = {r.name: r for r in model.fleet()}
    pro = rows["pro-a"]
    assert pro.worst_check == "fail" and pro.capped_gpus == 1
    assert pro.serving == (F.QWEN,)
    assert (
        pro.timer is not None
        and pro.timer.remaining_ms == 72 * 60_000
        and pro.timer.box_tz == "Europe/London"
    )
    assert rows["h200-b"].timer is None  # its timer was cancelled
    assert rows["local"].worst_check == "unchecked" and rows["local"].last_sample_ms is None


def test_power_marks_only_the_capped_gpu_and_stale_samples(model: ReadModel) -> None:
    view = model.live("pro-a", buckets=60)
    assert view is not None
    assert [g.gpu for g in view.gpus if g.capped] == [2]
    assert gpu_label(view.gpus[2]) == "GPU2  400/400 W CAPPED"
    assert gpu_label(view.gpus[0], clock=True) == f"GPU0 {view.gpus[0].power_w:4.0f}/600 W 2.9GHz"
    dead = model.live("h200-b", buckets=60)
    assert dead is not None and all(g.stale for g in dead.gpus)


def test_throughput_is_bucketed_in_sql_and_sums_replicas(model: ReadModel, tmp_path: Path) -> None:
    store = model.store
    out, inp = throughput(store, "pro-a", F.NOW - 60_000, F.NOW, buckets=6)
    assert len(out.values) == 6 and all(v is not None for v in out.values)
    raw = store.rows(
        "SELECT t_ms, gen_tok_per_s FROM server_samples WHERE t_ms > ? AND t_ms <= ? ORDER BY t_ms",
        [F.NOW - 60_000, F.NOW],
    )
    first = [r["gen_tok_per_s"] for r in raw if r["t_ms"] <= F.NOW - 50_000]
    assert out.values[0] == pytest.approx(sum(first) / len(first))
    assert out.last == pytest.approx(sum(r["gen_tok_per_s"] for r in raw[-2:]) / 2)
    # A gap stays a gap: nothing was sampled on the dead box in this window.
    empty, _ = throughput(store, "h200-b", F.NOW - 60_000, F.NOW, buckets=6)
    assert empty.values == (None,) * 6 and empty.peak is None


def test_a_second_replica_adds_to_the_total(tmp_path: Path) -> None:
    fx = F.build(tmp_path / "s.db")
    with Store(fx.path) as store:
        with store.atomic() as db:
            db.table("launches").insert(
                {
                    "id": "L-qwen-1",
                    "box": "pro-a",
                    "arm": F.QWEN,
                    "replica": 1,
                    "state": "serving",
                    "start_ms": F.START - 240_000,
                    "ready_ms": F.START - 60_000,
                }
            )
        F.insert_server_rows(
            store, F.server_rows("pro-a", "L-qwen-1", F.START, F.NOW, F.STEP_MS, peak=5200.0)
        )
        one_bucket, _ = throughput(store, "pro-a", F.NOW - 10_000, F.NOW, buckets=1)
        rows = store.rows(
            "SELECT gen_tok_per_s FROM server_samples WHERE t_ms > ? AND launch_id = 'L-qwen-0'",
            [F.NOW - 10_000],
        )
        assert one_bucket.values[0] == pytest.approx(2 * sum(r["gen_tok_per_s"] for r in rows) / len(rows))


def test_wide_windows_probe_each_bucket_instead_of_reading_every_sample(model: ReadModel) -> None:
    six_hours = 6 * 3600_000
    out, _ = throughput(model.store, "pro-a", F.NOW - six_hours, F.NOW, buckets=12)
    # Only the last 30-minute bucket holds samples; it averages its first PROBE_MS (20 s) of them.
    probe = model.store.rows(
        "SELECT gen_tok_per_s FROM server_samples WHERE t_ms > ? AND t_ms <= ?", [F.START, F.START + 20_000]
    )
    assert out.values[:11] == (None,) * 11
    assert len(probe) == 4 and out.values[11] == pytest.approx(sum(r["gen_tok_per_s"] for r in probe) / 4)


def test_launch_state_follows_the_cursor() -> None:
    row = {"start_ms": 100, "ready_ms": 200, "stop_ms": 300, "state": "failed"}
    assert [launch_state_at(row, t) for t in (50, 150, 250, 300)] == [None, "starting", "serving", "failed"]
    live = {"start_ms": 100, "ready_ms": None, "stop_ms": None, "state": "failed"}
    assert launch_state_at(live, 500) == "failed"  # ended without a stop instant: the state row is the record


def test_results_carry_verdict_limit_marks_and_filter_by_words(model: ReadModel) -> None:
    rows = model.results()
    by_arm = {(r.arm, r.concurrency): r for r in rows}
    degen = by_arm[(F.GLM_DEGEN, 256)]
    assert degen.tripwire.word == "DEGEN" and degen.marks == "DIAGNOSTIC-ONLY"
    assert degen.tripwire.text == "FAILED 11/20 ok, 8 degenerate, 1 wrong"
    assert (
        by_arm[(F.SMALL, 2048)].marks == "CLIENT-BOUND QUEUEING"
        and by_arm[(F.SMALL, 2048)].tripwire.word == "none"
        and by_arm[(F.SMALL, 2048)].tripwire.text == "not recorded"
    )
    assert by_arm[("seed-glm-4.6-fp8", 256)].marks == "imported"
    assert by_arm[(F.QWEN, 64)].kernel_line == "B12xNvFp4LinearKernel / FLASHINFER"
    assert [r.concurrency for r in model.results(text="qwen3.8 chat")] == [64, 256, 1024]
    assert [r.arm for r in model.results(sort="out tok/s")][0] == F.SMALL
    with pytest.raises(ValueError, match="unknown sort 'bogus'"):
        model.results(sort="bogus")


def test_replay_cursor_sees_only_the_past(model: ReadModel) -> None:
    replay = ReadModel(model.store, lambda: F.NOW + 10 * 3600_000, replay=True)
    assert replay.now() == F.NOW  # parked at the end of the record, not at the wall clock
    replay.step(-25 * 60_000)
    arms = {a.name: a for a in replay.arms()}
    latest = arms[F.QWEN].latest
    assert latest is not None and latest.state == "serving"
    # qwen's C64 run had finished at that instant; its C256 and C1024 runs had not.
    assert sorted(r.concurrency for r in replay.results() if r.arm == F.QWEN) == [64]
    replay.step(-10 * 3600_000)  # clamped to the first recorded instant
    assert replay.cursor.span is not None and replay.now() == replay.cursor.span[0]
    assert replay.fleet()[2].serving == ()
    replay.follow_live()
    assert replay.now() == F.NOW + 10 * 3600_000


def test_timer_state_is_read_from_its_log_at_the_cursor(model: ReadModel) -> None:
    from console.readmodel.queries import timers

    at_start = {t.box: t.state for t in timers(model.store, F.START + 1)}
    later = {t.box: t.state for t in timers(model.store, F.NOW)}
    assert at_start == {"pro-a": "armed", "h200-b": "armed"}
    assert later == {"pro-a": "armed", "h200-b": "cancelled"}


def test_trace_keeps_gaps_scale_and_level() -> None:
    assert (
        trace([10.0] * 4 + [None] * 4 + [10.0] * 4, width=6, height=2, top=10) == ["⣿⣿  ⣿⣿"] * 2
    )  # a gap stays one
    assert trace([5.0] * 8, width=4, height=2, top=10, level=[10.0] * 8) == [
        "────",
        "⣿⣿⣿⣿",
    ]  # half the scale, limit on top
    assert trace([5.0] * 8, width=4, height=2, top=10, level=[None] * 4 + [10.0] * 4) == [
        "  ──",
        "⣿⣿⣿⣿",
    ]  # no limit known
    assert (
        trace([20.0] * 4, width=2, height=2, top=10) == ["⣿⣿"] * 2
    )  # above the scale: clipped, never wrapped
    assert trace([], width=3, height=2, top=1) == ["   "] * 2


def test_tripwire_line_keeps_the_verdict_when_the_arm_name_is_long(model: ReadModel) -> None:
    view = model.live("pro-a", 10)
    assert view is not None
    lines = [tripwire_line(t, 30) for t in view.tripwire]
    assert lines[0].endswith("11/20 DEGEN 8d 1w") and len(lines[0]) <= 30
    assert lines[1].endswith("20/20 ok") and "…" in lines[1]
