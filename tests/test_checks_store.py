"""store.checks: probes and check runs in a real state.db; what `campaign launch` asks before launching."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.checks import Verdict, evaluate
from console.checks.run import judge
from console.store import Box, ReadOnlyStore, Store
from console.store.checks import gpu_summary
from tests.test_checks import T0, h200_probe, multi_gpu_probe, rtx5090_probe


class Clock:
    def __init__(self, now: int):
        self.now = now

    def __call__(self) -> int:
        self.now += 1
        return self.now


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(tmp_path / "state.db", clock=Clock(T0))
    s.boxes.add(Box(name="pro-a", host="203.0.113.7", ssh_user="root"))
    return s


def test_probe_round_trip_and_box_row_updated(store: Store) -> None:
    probe = multi_gpu_probe(
        4, "NODE", name="NVIDIA RTX PRO 6000 Blackwell Workstation Edition", enforced_limit_w=400.0
    )
    probe["tz"] = "Europe/London"
    pid = store.checks.add_probe("pro-a", probe)
    got = store.checks.latest_probe("pro-a")
    assert got is not None and got.id == pid and got.data == probe
    assert got.t_ms == probe["t_ms"] and got.console_t_ms == probe["console_t_ms"]
    box = store.boxes.get("pro-a")
    assert box.tz == "Europe/London"
    assert box.gpu_summary == "4x NVIDIA RTX PRO 6000 Blackwell Workstation Edition, 400 W"


def test_same_probe_twice_is_one_row(store: Store) -> None:
    """The op's result and the ingested journal event carry the same probe."""
    probe = h200_probe()
    assert store.checks.add_probe("pro-a", probe) == store.checks.add_probe("pro-a", probe.copy())
    assert store.scalar("SELECT count(*) FROM probes") == 1
    later = h200_probe(t_ms=T0 + 5000)
    assert store.checks.add_probe("pro-a", later) != store.checks.add_probe("pro-a", probe)


def test_bad_probe_times_are_refused_with_what_and_where(store: Store) -> None:
    with pytest.raises(ValueError, match="box 'pro-a' has no integer t_ms"):
        store.checks.add_probe("pro-a", h200_probe(t_ms="2026-12-02T09:54:24"))
    with pytest.raises(ValueError, match="console_t_ms must be integer"):
        store.checks.add_probe("pro-a", h200_probe(console_t_ms=1.5))
    assert store.scalar("SELECT count(*) FROM probes") == 0


def test_last_verdicts_is_the_newest_run_and_last_failed_its_fails(store: Store) -> None:
    assert store.checks.last_verdicts("pro-a") == [] and store.checks.last_failed("pro-a") == []
    bad = rtx5090_probe()
    bad_id = store.checks.add_probe("pro-a", bad)
    store.checks.add_verdicts("pro-a", bad_id, evaluate(bad), t_ms=T0 + 10)
    failed = store.checks.last_failed("pro-a")
    assert failed and {v.check for v in failed} == {"driver"}
    assert any("804" in v.reason for v in failed)
    assert failed[0].numbers["driver"] == "575.57.08"

    good = h200_probe(t_ms=T0 + 60_000, console_t_ms=T0 + 60_000)
    good_id = store.checks.add_probe("pro-a", good)
    store.checks.add_verdicts("pro-a", good_id, evaluate(good), t_ms=T0 + 60_010)
    last = store.checks.last_verdicts("pro-a")
    assert [v.check for v in last] == [
        "power",
        "driver",
        "topology",
        "clock",
        "capacity",
        "capacity",
        "serving_env",
        "tripwire_client",
    ]
    assert {v.probe_id for v in last} == {good_id}
    assert store.checks.last_failed("pro-a") == []
    # Both runs stay on record.
    assert store.scalar("SELECT count(*) FROM check_verdicts WHERE probe_id = ?", [bad_id]) == len(
        evaluate(bad)
    )


def test_rerun_of_same_probe_at_same_instant_replaces(store: Store) -> None:
    pid = store.checks.add_probe("pro-a", h200_probe())
    store.checks.add_verdicts("pro-a", pid, [Verdict("clock", "fail", "first")], t_ms=T0 + 1)
    store.checks.add_verdicts("pro-a", pid, [Verdict("clock", "ok", "second")], t_ms=T0 + 1)
    assert [(v.verdict, v.reason) for v in store.checks.last_verdicts("pro-a")] == [("ok", "second")]


def test_empty_run_is_refused(store: Store) -> None:
    with pytest.raises(ValueError, match="checked nothing"):
        store.checks.add_verdicts("pro-a", None, [], t_ms=T0)


def test_add_probe_nests_inside_an_open_transaction(store: Store) -> None:
    """The fleet's ingest calls add_probe inside its own transaction; a rollback takes the probe too."""
    with pytest.raises(RuntimeError, match="ingest failed"), store.atomic():
        store.checks.add_probe("pro-a", h200_probe())
        raise RuntimeError("ingest failed")
    assert store.scalar("SELECT count(*) FROM probes") == 0
    with store.atomic():
        pid = store.checks.add_probe("pro-a", h200_probe())
    latest = store.checks.latest_probe("pro-a")
    assert latest is not None and latest.id == pid


def test_read_only_store_reads_but_refuses_writes(store: Store, tmp_path: Path) -> None:
    pid = store.checks.add_probe("pro-a", h200_probe())
    store.checks.add_verdicts("pro-a", pid, evaluate(h200_probe()), t_ms=T0 + 3)
    store.close()
    with Store(tmp_path / "state.db", read_only=True) as ro:
        assert len(ro.checks.last_verdicts("pro-a")) == 8
        with pytest.raises(ReadOnlyStore):
            ro.checks.add_probe("pro-a", h200_probe(t_ms=T0 + 9))


def test_a_check_remembers_the_gpus_a_box_listed_until_the_box_is_added_again(store: Store) -> None:
    """The driver gone after an upgrade: every later check fails, not only the first one after it."""
    asked = store.clock()  # the console's clock when it asked: after the box was added
    cpu_like = h200_probe(
        gpus=[], source=None, driver_version=None, t_ms=asked + 60_000, console_t_ms=asked + 60_000
    )
    first = judge(store, "pro-a", multi_gpu_probe(2, "NV18") | {"t_ms": asked, "console_t_ms": asked})
    assert first.verdict == "ok" and store.boxes.get("pro-a").gpu_summary == "2x NVIDIA H200, 700 W"
    for later in (cpu_like, cpu_like | {"t_ms": T0 - 3_600_000}):  # the box clock jumped back an hour
        run = judge(store, "pro-a", later)
        (driver,) = [v for v in run.verdicts if v.check == "driver"]
        assert driver.verdict == "fail" and f"yet probe {first.probe_id} (" in driver.reason
        assert "listed 2x NVIDIA H200, 700 W" in driver.reason
    again = judge(store, "pro-a", None)  # the stored probe judged again: the same answer
    assert [v.verdict for v in again.verdicts if v.check == "driver"] == ["fail"]
    store.boxes.remove("pro-a")
    store.boxes.add(Box(name="pro-a", host="203.0.113.7", ssh_user="root"))
    fresh = judge(store, "pro-a", cpu_like | {"console_t_ms": store.clock() + 1})
    assert [v.verdict for v in fresh.verdicts if v.check == "driver"] == ["ok"]


def test_gpu_summary_without_gpus() -> None:
    assert gpu_summary({"gpus": []}) is None
    assert gpu_summary(h200_probe()) == "1x NVIDIA H200, 700 W"
