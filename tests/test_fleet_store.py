"""store.ingest and store.commands: exactly-once ingest with its cursor, derived rows in the same transaction, commands."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from console.readmodel import queries
from console.store import Box, BoxNotReachable, Store
from console.store.ingest import IngestError, SequenceGap

T0 = 1_788_658_020_000


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(tmp_path / "state.db", clock=lambda: T0)
    s.boxes.add(Box(name="pro-a", ssh_user="root", host="127.0.0.1", port=22))
    return s


def ev(seq: int, kind: str = "warning", **fields: object) -> dict[str, object]:
    body: dict[str, object] = {"v": 1, "seq": seq, "t_ms": T0 + seq, "kind": kind}
    body.update(fields or {"where": "test", "message": f"m{seq}"})
    return body


def test_batch_commits_rows_and_cursor_and_resend_is_skipped(store: Store) -> None:
    report = store.ingest.batch("pro-a", [ev(1), ev(2), ev(3)])
    assert (report.inserted, report.skipped, report.cursor) == (3, 0, 3)
    # The ack was lost: the box re-sends 2..4. Only 4 is new.
    report = store.ingest.batch("pro-a", [ev(2), ev(3), ev(4)])
    assert (report.inserted, report.skipped, report.cursor) == (1, 2, 4)
    seqs = [r["seq"] for r in store.rows("SELECT seq FROM journal WHERE box = 'pro-a' ORDER BY rowid")]
    assert seqs == [1, 2, 3, 4]
    assert store.ingest.cursor("pro-a") == 4
    assert json.loads(store.scalar("SELECT payload FROM journal WHERE seq = 4"))["message"] == "m4"


def test_out_of_order_batch_writes_nothing(store: Store) -> None:
    store.ingest.batch("pro-a", [ev(1)])
    with pytest.raises(IngestError, match="out of order"):
        store.ingest.batch("pro-a", [ev(2), ev(3), ev(3)])
    assert store.scalar("SELECT count(*) FROM journal") == 1
    assert store.ingest.cursor("pro-a") == 1


def test_a_gap_in_the_sequence_is_refused_then_recorded_as_lost_never_skipped(store: Store) -> None:
    store.ingest.batch("pro-a", [ev(1), ev(2)])
    for batch, missing in (([ev(5), ev(6)], (3, 5)), ([ev(3), ev(5)], (4, 5))):  # at the start, and inside
        with pytest.raises(SequenceGap, match=rf"seqs {missing[0]}\.\.{missing[1] - 1} are missing") as gap:
            store.ingest.batch("pro-a", batch)
        assert (gap.value.first_missing, gap.value.next_seen) == missing
        assert store.ingest.cursor("pro-a") == 2 and store.scalar("SELECT count(*) FROM journal") == 2
    # The box was asked again and no longer holds 3..4: they are recorded as lost with the events after them.
    report = store.ingest.batch("pro-a", [ev(5), ev(6)], accept_gap=True)
    assert (report.lost, report.cursor, report.inserted) == ((3, 4), 6, 2)
    [lost] = store.rows("SELECT first_seq, last_seq, reason FROM lost_events WHERE box = 'pro-a'")
    assert (lost["first_seq"], lost["last_seq"]) == (3, 4) and "disk floor" in lost["reason"]
    [row] = queries.fleet(store, T0 + 10, "pro-a")
    assert row.lost_events == 2
    # One gap per asking: a second one in the same batch is not accepted blindly.
    with pytest.raises(SequenceGap):
        store.ingest.batch("pro-a", [ev(8), ev(10)], accept_gap=True)


def test_a_new_campaign_may_start_where_the_box_journal_starts(store: Store) -> None:
    """Events released before this state.db registered were never owed to it: not a gap."""
    report = store.ingest.batch("pro-a", [ev(500), ev(501)])
    assert (report.cursor, report.lost) == (501, None)


def test_event_that_cannot_be_derived_keeps_its_journal_row_and_never_stalls_ingest(store: Store) -> None:
    odd = ev(3, "probe", probe={"tz": "UTC"})  # well-formed, but a probe the store cannot file (no t_ms)
    report = store.ingest.batch("pro-a", [ev(1), ev(2), odd, ev(4)])
    assert report.cursor == 4 and report.inserted == 4
    assert "has no integer t_ms" in report.journal_only["probe"]
    assert store.scalar("SELECT count(*) FROM journal") == 4
    assert store.scalar("SELECT count(*) FROM probes") == 0


def test_an_event_without_a_field_the_contract_requires_is_quarantined(store: Store) -> None:
    report = store.ingest.batch("pro-a", [ev(1), ev(2, "launch_state", launch_id="L1"), ev(3)])
    assert report.cursor == 3 and report.quarantined == {2: "the launch_state event has no state"}


def test_a_value_sqlite_refuses_is_quarantined_alone_and_its_neighbours_commit(store: Store) -> None:
    """Past the contract's checks, a value SQLite itself refuses (here a trigger stands for any constraint
    the store may add) fails the batch's executemany: the batch is written again event by event, and the one
    event refused is quarantined with SQLite's reason while its neighbours commit."""
    with store.atomic() as db:
        db.execute(
            "CREATE TRIGGER refuse_hot BEFORE INSERT ON gpu_samples WHEN NEW.power_w > 5000 "
            "BEGIN SELECT RAISE(ABORT, 'power beyond any GPU'); END"
        )
    gpu = {"gpu": 0, "power_w": 581.0}
    events = [
        ev(1, "gpu_sample", gpus=[gpu]),
        ev(2),
        ev(3, "gpu_sample", gpus=[{**gpu, "power_w": 9e9}]),
        ev(4, "gpu_sample", gpus=[gpu]),
    ]
    report = store.ingest.batch("pro-a", events)
    assert report.cursor == 4 and list(report.quarantined) == [3] and report.inserted == 3
    assert "state.db refused it: IntegrityError: power beyond any GPU" in report.quarantined[3]
    assert [r["seq"] for r in store.rows("SELECT seq FROM journal ORDER BY seq")] == [1, 2, 4]
    assert store.scalar("SELECT count(*) FROM gpu_samples") == 2


def test_non_integer_seq_is_refused(store: Store) -> None:
    with pytest.raises(IngestError, match="has no integer seq"):
        store.ingest.batch("pro-a", [{"seq": "1", "t_ms": T0, "kind": "warning"}])
    assert store.ingest.cursor("pro-a") == 0


def test_malformed_events_are_quarantined_and_the_rest_of_the_batch_commits(store: Store) -> None:
    gpu = {"gpu": 0, "power_w": 581.0, "mem_used_mib": 90000}
    events = [
        ev(1),
        {
            "seq": 2,
            "t_ms": T0,
            "kind": "gpu_sample",
            "malformed": "body is not JSON: Expecting value",
            "body": "{oops",
        },
        ev(3, "gpu_sample", gpus="GPU0 581 W"),
        ev(4, "gpu_sample", gpus=[gpu, {**gpu, "gpu": 1, "power_w": "581 W"}]),
        ev(5, "server_sample", launch_id="L1", gen_tok_per_s="fast"),
        ev(6, "warning", where="test", message="m6", extra=float("nan")),
        {"seq": 7, "t_ms": "yesterday", "kind": "warning", "where": "test", "message": "m7"},
        ev(8, "launch_state", launch_id="L1", state="serving", pid="42"),
        ev(9, "gpu_sample", gpus=[{**gpu, "gpu": 2**70}]),
        ev(10, "from_a_newer_agent", anything=["goes", 1.5]),  # an unknown kind is not malformed
        ev(11, "gpu_sample", gpus=[gpu]),
        ev(12),
    ]
    report = store.ingest.batch("pro-a", events)
    assert report.cursor == 12 and store.ingest.cursor("pro-a") == 12
    assert sorted(report.quarantined) == [2, 3, 4, 5, 6, 7, 8, 9]
    assert [r["seq"] for r in store.rows("SELECT seq FROM journal ORDER BY seq")] == [1, 10, 11, 12]
    assert store.scalar("SELECT count(*) FROM gpu_samples") == 1  # only seq 11's: nothing half-written
    rows = {
        r["seq"]: r
        for r in store.rows("SELECT seq, t_ms, kind, raw, reason FROM quarantine WHERE box = 'pro-a'")
    }
    assert rows[2]["raw"] == "{oops" and "body is not JSON" in rows[2]["reason"]
    assert "gpus is 'GPU0 581 W', not a list" in rows[3]["reason"]
    assert "gpus[1].power_w is '581 W', not a finite number" in rows[4]["reason"]
    assert (
        "gen_tok_per_s is 'fast'" in rows[5]["reason"]
        and json.loads(rows[5]["raw"])["gen_tok_per_s"] == "fast"
    )
    assert "JSON cannot carry" in rows[6]["reason"] and "NaN" in rows[6]["raw"]
    assert rows[7]["t_ms"] is None and "t_ms is 'yesterday', not an integer" in rows[7]["reason"]
    assert "pid is '42'" in rows[8]["reason"] and store.launches.get("L1") is None
    assert "gpus[0].gpu" in rows[9]["reason"]
    assert store.ingest.quarantined() == {"pro-a": 8}
    [row] = queries.fleet(store, T0, "pro-a")  # what the Fleet view shows beside the box's status
    assert row.quarantined == 8
    # Re-sent after a lost ack: skipped like any committed event, never quarantined twice.
    again = store.ingest.batch("pro-a", events[1:4])
    assert (again.skipped, again.quarantined) == (3, {})
    assert store.scalar("SELECT count(*) FROM quarantine") == 8


def test_each_state_db_has_one_campaign_id_made_once(tmp_path: Path) -> None:
    with Store(tmp_path / "a.db") as a, Store(tmp_path / "b.db") as b:
        first = a.ingest.consumer_id()
        assert len(first) == 32 and first != b.ingest.consumer_id()
    with Store(tmp_path / "a.db") as a:
        assert a.ingest.consumer_id() == first  # stored, not made again on open
    v1 = tmp_path / "old.db"
    conn = sqlite3.connect(v1)
    conn.executescript((Path(__file__).parent / "fixtures" / "state_v1.sql").read_text())
    conn.close()
    with Store(v1) as old:  # an upgraded campaign gets its id too
        assert len(old.ingest.consumer_id()) == 32


def test_derived_rows_land_with_their_events(store: Store) -> None:
    store.launches.add("L1", "pro-a", "qwen-b12x", arm_id=None, replica=0, gpus=[0], port=8100, forced=False)
    gpu = {
        "gpu": 0,
        "power_w": 581.0,
        "power_limit_w": 600.0,
        "enforced_limit_w": 600.0,
        "max_limit_w": 600.0,
        "sm_clock_mhz": 2900.0,
        "util_pct": 99.0,
        "mem_used_mib": 90000.0,
        "mem_total_mib": 97887.0,
        "temp_c": 70.0,
    }
    events = [
        ev(1, "launch_state", launch_id="L1", state="starting", pid=42, port=8100, gpus=[0]),
        ev(2, "kernel_line", launch_id="L1", category="linear", line="Using B12xNvFp4LinearKernel"),
        ev(3, "launch_budget", launch_id="L1", kv_cache_tokens=123456, max_concurrency=30.1),
        ev(
            4,
            "launch_state",
            launch_id="L1",
            state="serving",
            pid=42,
            port=8100,
            gpus=[0],
            backends_accepted=["b12x"],
        ),
        ev(5, "gpu_sample", gpus=[gpu, {**gpu, "gpu": 1, "power_w": None}]),
        ev(6, "server_sample", launch_id="L1", gen_tok_per_s=5161.0, running=812, waiting=212, kv_usage=0.71),
        ev(7, "launch_state", launch_id="L1", state="stopped", exit_code=0),
        ev(8, "gpu_released", launch_id="L1", released=True, gpus=[{"gpu": 0, "mem_used_mib": 0}]),
        ev(9, "agent_started", version="abc123", pid=7, restarted=True, adopted_launches=[]),
    ]
    store.ingest.batch("pro-a", events)
    launch = store.launches.get("L1")
    assert launch is not None
    assert (launch.state, launch.pid, launch.start_ms, launch.ready_ms, launch.stop_ms) == (
        "stopped",
        42,
        T0 + 1,
        T0 + 4,
        T0 + 7,
    )
    assert (launch.kv_cache_tokens, launch.max_concurrency, launch.gpu_mem_released) == (123456, 30.1, True)
    assert launch.backends_accepted == ("b12x",)
    assert (
        store.scalar("SELECT line FROM kernel_lines WHERE launch_id = 'L1'") == "Using B12xNvFp4LinearKernel"
    )
    rows = store.rows("SELECT gpu, power_w, enforced_limit_w FROM gpu_samples ORDER BY gpu")
    assert rows == [
        {"gpu": 0, "power_w": 581.0, "enforced_limit_w": 600.0},
        {"gpu": 1, "power_w": None, "enforced_limit_w": 600.0},
    ]
    assert store.scalar("SELECT gen_tok_per_s FROM server_samples WHERE launch_id = 'L1'") == 5161.0
    assert store.boxes.get("pro-a").agent_version == "abc123"


def test_launch_unknown_to_this_store_still_gets_a_row(store: Store) -> None:
    store.ingest.batch("pro-a", [ev(1, "launch_state", launch_id="X9", state="serving", pid=3)])
    launch = store.launches.get("X9")
    assert launch is not None and launch.state == "serving" and "unknown" in launch.arm


def test_unknown_launch_state_is_quarantined_and_makes_no_launch(store: Store) -> None:
    """The contract names the box's launch states: one outside them is refused before it could be misread."""
    report = store.ingest.batch("pro-a", [ev(1, "launch_state", launch_id="L", state="exploded")])
    assert report.cursor == 1 and "'exploded', not one of" in report.quarantined[1]
    assert store.launches.get("L") is None


def test_command_lifecycle_and_long_op_result_from_journal(store: Store) -> None:
    store.commands.add("bench-1", "pro-a", "bench", {"shape": "chat", "concurrency": 8})
    assert [c.id for c in store.commands.unfinished("pro-a")] == ["bench-1"]
    store.commands.mark_sent("bench-1")
    assert store.commands.get("bench-1").state == "sent"
    # The final result is journaled before the immediate answer is processed: the final result wins.
    store.ingest.batch(
        "pro-a", [ev(1, "command_done", command_id="bench-1", op="bench", ok=True, result={"requests": 10})]
    )
    store.commands.finish("bench-1", True, {"started": True})
    command = store.commands.get("bench-1")
    assert (command.state, command.result) == ("acked", {"requests": 10})
    assert store.commands.unfinished("pro-a") == []


def test_failed_command_keeps_its_error(store: Store) -> None:
    store.commands.add("kill-1", "pro-a", "kill", {"launch_id": "nope"})
    store.commands.finish("kill-1", False, error="no launch nope on this box")
    command = store.commands.get("kill-1")
    assert (command.state, command.error) == ("failed", "no launch nope on this box")


def test_probe_bench_and_tripwire_events_become_their_rows(store: Store) -> None:
    store.launches.add("L1", "pro-a", "qwen-b12x", arm_id=None, replica=0, gpus=[0], port=8100, forced=False)
    store.commands.add("bench-1", "pro-a", "bench", {"launch_id": "L1", "workload": "chat", "concurrency": 8})
    probe = {"t_ms": T0, "console_t_ms": T0 - 5, "hostname": "pro-a", "tz": "Europe/London", "gpus": []}
    events = [
        ev(1, "probe", probe=probe),
        ev(
            2,
            "tripwire_result",
            tripwire_id="tw-1",
            launch_id="L1",
            result={"ok": 11, "degenerate": 8, "wrong": 1, "total": 20, "passed": False},
        ),
        ev(
            3,
            "bench_result",
            bench_id="bench-1",
            launch_id="L1",
            result={
                "requests": 64,
                "failed": 0,
                "out_tok_per_s": 5161.0,
                "in_tok_per_s": 100.0,
                "shape": "custom",
                "concurrency": 8,
            },
        ),
    ]
    report = store.ingest.batch("pro-a", events)
    assert report.journal_only == {}
    assert store.scalar("SELECT console_t_ms FROM probes WHERE box = 'pro-a'") == T0 - 5
    assert store.boxes.get("pro-a").tz == "Europe/London"
    bench = store.rows("SELECT arm, shape, concurrency, out_tok_per_s, diagnostic_only FROM bench_runs")
    assert bench == [
        {"arm": "qwen-b12x", "shape": "chat", "concurrency": 8, "out_tok_per_s": 5161.0, "diagnostic_only": 1}
    ]


def test_bench_result_without_its_command_is_kept_and_reported(store: Store) -> None:
    report = store.ingest.batch("pro-a", [ev(1, "bench_result", bench_id="b-x", launch_id="L9", result={})])
    assert "bench result without 'arm'" in report.journal_only["bench_result"]
    assert store.scalar("SELECT count(*) FROM bench_runs") == 0


def test_bench_that_reported_an_error_is_a_failed_command_not_an_empty_row(store: Store) -> None:
    store.launches.add("L1", "pro-a", "tiny-cpu", arm_id=None, replica=0, gpus=[], port=8100, forced=False)
    store.commands.add("bench-2", "pro-a", "bench", {"launch_id": "L1", "shape": "tiny", "concurrency": 4})
    store.commands.finish("bench-2", True, {"started": True})
    store.ingest.batch(
        "pro-a",
        [
            ev(1, "bench_result", bench_id="bench-2", launch_id="L1", result={"error": "prompt too long"}),
            ev(2, "command_done", command_id="bench-2", op="bench", ok=True, result={"exit_code": 1}),
        ],
    )
    assert store.scalar("SELECT count(*) FROM bench_runs") == 0
    command = store.commands.get("bench-2")
    assert (command.state, command.error) == ("failed", "prompt too long")


def test_box_watchdog_deadline_events_reach_the_timer(store: Store) -> None:
    timer = store.timers.add("pro-a", T0 + 60_000, "stop-arms", "in 1m", now_ms=T0)
    store.ingest.batch(
        "pro-a",
        [
            ev(
                1,
                "deadline",
                timer_id=str(timer.id),
                state="firing",
                deadline_ms=T0 + 60_000,
                remaining_s=0.0,
                action="stop-arms",
                detail={"tz": "UTC"},
            ),
            ev(
                2,
                "deadline",
                timer_id=str(timer.id),
                state="fired",
                deadline_ms=T0 + 60_000,
                remaining_s=0.0,
                action="stop-arms",
                detail={},
            ),
        ],
    )
    assert store.timers.get(timer.id).state == "fired"
    assert {"agent-firing", "agent-fired"} <= {row["event"] for row in store.timers.log_for(timer.id)}


def test_a_box_gives_its_ssh_address_or_says_why_there_is_none() -> None:
    assert Box(name="a", kind="ssh", ssh_user="u", host="10.0.0.5", port=2222).ssh_address() == (
        "10.0.0.5",
        2222,
    )
    with pytest.raises(
        BoxNotReachable, match=r"box 'b' cannot be reached: it has no SSH host and port recorded"
    ):
        Box(name="b", kind="ssh", ssh_user="u", host="10.0.0.5").ssh_address()
    with pytest.raises(BoxNotReachable, match=r"box 'c' cannot be reached: it was destroyed") as destroyed:
        Box(name="c", kind="ssh", ssh_user="u", host="10.0.0.5", port=22, destroyed_ms=1).ssh_address()
    assert destroyed.value.hint and "campaign box add NAME --ssh USER@HOST" in destroyed.value.hint
