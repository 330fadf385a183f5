"""The demo's recorded history (ops/demo_history.py): series, checks, timers and sweeps built from the write-up's
figures, stored as rows of its import, and the tripwire verdicts the agent's own rule gives (blemish S3)."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents.tripwire.grade import MAX_DEGENERATE, MIN_OK, Thresholds, summarize
from console.readmodel import ReadModel, TripwireVerdict
from console.readmodel.queries import timers
from console.readmodel.sweeps import sweeps
from console.store import Store
from ops.demo import SEED_DIR, DemoDataError, build_demo, load_payload, tripwire_passed
from ops.demo_history import HistoryDataError, read
from tests.support.demo import copy_seed

AFTER = int(datetime(2026, 9, 6, 9, 0, tzinfo=UTC).timestamp() * 1000)
"""A clock the morning after the demo's record ends (ops/data/seed/history.toml)."""


def _utc(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp() * 1000)


def _series_digest(store: Store) -> str:
    h = hashlib.sha256()
    for table in ("gpu_samples", "server_samples"):
        for row in store.db.execute(f"SELECT * FROM {table} ORDER BY box, t_ms, 2").fetchall():
            h.update(repr(row).encode())
    return h.hexdigest()


def test_every_history_row_is_the_imports_and_nothing_reads_as_measured(demo: Path) -> None:
    with Store(demo) as store:
        import_id = store.scalar("SELECT id FROM imports")
        for table in ("gpu_samples", "server_samples", "check_verdicts", "timers", "sweeps"):
            assert store.scalar(f"SELECT count(*) FROM {table}") > 0, table
            assert store.scalar(f"SELECT count(*) FROM {table} WHERE import_id IS NOT ?", [import_id]) == 0
        assert not store.results.has_measured_data()
        # Every imported launch that served is placed on the timeline, its tripwire and benches inside it.
        assert (
            store.scalar(
                "SELECT count(*) FROM launches WHERE state = 'stopped' AND (start_ms IS NULL OR stop_ms IS NULL)"
            )
            == 0
        )
        assert (
            store.scalar(
                """SELECT count(*) FROM tripwire_runs t JOIN launches l ON l.id = t.launch_id
               WHERE NOT (t.t_ms > l.ready_ms AND t.t_ms < l.stop_ms)"""
            )
            == 0
        )
        # No imported bench row gets a window: energy and curve validity read the samples inside one, and
        # modelled samples must never become a measured figure.
        assert store.scalar("SELECT count(*) FROM bench_runs WHERE started_ms IS NOT NULL") == 0
        assert (
            store.scalar(
                """SELECT count(*) FROM sweep_benches s JOIN bench_runs b ON b.id = s.bench_run_id
               JOIN launches l ON l.id = b.launch_id WHERE NOT (s.t_ms > l.ready_ms AND s.t_ms < l.stop_ms)"""
            )
            == 0
        )


def test_the_same_data_gives_the_same_history_and_a_rebuild_replaces_it(tmp_path: Path, demo: Path) -> None:
    with Store(demo) as store:
        first = _series_digest(store)
        counts = store.scalar("SELECT count(*) FROM gpu_samples")
    data = copy_seed(tmp_path)
    with Store(tmp_path / "s.db") as store:
        build_demo(store, data_dir=data)
        assert _series_digest(store) == first
        assert build_demo(store, data_dir=data).state == "unchanged"
        tsv = data / "throughput.tsv"
        tsv.write_text(tsv.read_text().replace("\trouter\t1024\t5161", "\trouter\t1024\t5170"))
        assert build_demo(store, data_dir=data).state == "replaced"
        assert store.scalar("SELECT count(*) FROM gpu_samples") == counts  # replaced, not doubled
        assert store.scalar("SELECT count(*) FROM timers") == 2
        assert store.scalar("SELECT count(*) FROM sweeps") == 7


def test_series_follow_the_published_rates_and_limits(demo: Path) -> None:
    with Store(demo) as store:
        bench = store.rows(
            """SELECT s.launch_id, s.t_ms FROM sweep_benches s JOIN bench_runs b ON b.id = s.bench_run_id
               WHERE b.arm = 'qwen3.8-27b-nvfp4-b12x' AND b.box = 'seed-pro6000-600w' AND b.shape = 'router'
               AND b.concurrency = 1024"""
        )[0]
        bench_ms = int(read(SEED_DIR)["timeline"]["bench_s"] * 1000)  # a sweep's bench ends at its t_ms
        rates = [
            r["gen_tok_per_s"]
            for r in store.rows(
                "SELECT gen_tok_per_s FROM server_samples WHERE launch_id = ? AND t_ms > ? AND t_ms < ?",
                [bench["launch_id"], bench["t_ms"] - bench_ms, bench["t_ms"]],
            )
        ]
        assert len(rates) > 20
        assert all(abs(r / 5161 - 1) <= 0.02 for r in rates)
        assert abs(sum(rates) / len(rates) / 5161 - 1) < 0.01
        for box, limit, maximum in (
            ("seed-pro6000-600w", 600, 600),
            ("seed-pro6000-400w", 400, 600),
            ("seed-5090x8-400w", 400, 575),
        ):
            row = store.rows(
                """SELECT max(power_w) AS top, min(enforced_limit_w) AS lo, max(enforced_limit_w) AS hi,
                          min(max_limit_w) AS maximum, count(DISTINCT gpu) AS gpus FROM gpu_samples WHERE box = ?""",
                [box],
            )[0]
            assert row["lo"] == row["hi"] == limit and row["maximum"] == maximum
            assert limit * 0.9 < row["top"] <= limit
            assert row["gpus"] == (8 if "5090" in box else 4)


def test_power_checks_are_the_consoles_own_verdicts_on_the_published_limits(demo: Path) -> None:
    with Store(demo) as store:
        verdicts = {
            r["box"]: (r["verdict"], r["reason"])
            for r in store.rows("SELECT box, verdict, reason FROM check_verdicts WHERE check_name = 'power'")
        }
    assert verdicts["seed-pro6000-600w"][0] == verdicts["seed-pro6000-600w-b"][0] == "ok"
    assert verdicts["seed-pro6000-400w"][0] == "warn"  # rule 7's check grades a capped host WARN
    assert verdicts["seed-pro6000-400w"][1].startswith("GPU0-3 capped at 400 W of a 600 W maximum (-33%)")
    assert verdicts["seed-5090x8-400w"][0] == "warn"
    assert verdicts["seed-5090x8-400w"][1].startswith("GPU0-7 capped at 400 W of a 575 W maximum (-30%)")


def test_sweeps_end_each_arm_as_the_write_up_says(demo: Path) -> None:
    with Store(demo) as store:
        by_list = {s.list_name: s for s in sweeps(store, AFTER)}
    hour = by_list["glm_hour"]
    assert hour.state == "interrupted" and "not reached before the cut-off" in (hour.detail or "")
    assert [(a.arm, a.state) for a in hour.arms] == [
        ("glm-5.3-flash-dp2tp2-ep-eager-marlin", "served"),
        ("glm-5.3-flash-dp2-tp2-ep-marlin", "degenerate"),
        ("glm-5.3-flash-dp2tp2-ep-eager-triton", "served"),
        ("glm-5.3-flash-tp2x2-no-ep", "pending"),
    ]
    assert hour.arms[1].reason == "tripwire FAILED 9/20 ok, 11 degenerate, 0 wrong"
    assert [b.out_tok_per_s for b in hour.arms[2].benches] == [1460]
    ceiling = by_list["glm-5.3-flash-ceiling"]
    refused = next(a for a in ceiling.arms if a.state == "refused")
    assert refused.arm == "glm-5.3-flash-dp4-flashinfer-b12x-moe" and refused.reason
    assert by_list["glm_perf5"].state == "interrupted" and "00:27 UTC" in (by_list["glm_perf5"].detail or "")
    assert {a.state for a in by_list["5090"].arms} == {"served", "refused"}
    assert next(a for a in by_list["c6"].arms if a.arm == "qwen3.6-35b-a3b").state == "degenerate"


def test_timers_tell_the_hard_stop_incident(demo: Path) -> None:
    with Store(demo) as store:
        destroyed = timers(store, AFTER, "seed-pro6000-600w")
        fourth = timers(store, AFTER, "seed-pro6000-600w-b")
    assert [(t.action, t.state, t.deadline_ms) for t in destroyed] == [
        ("destroy", "cancelled", _utc("2026-09-05T01:27:00+00:00"))
    ]
    assert destroyed[0].box_tz == "Europe/London"
    assert [(t.state, t.warnings) for t in fourth] == [("fired", ("warn-30m", "warn-10m", "warn-1m"))]


def test_live_reads_an_imported_box_where_its_record_ends(demo: Path) -> None:
    with Store(demo, read_only=True) as store:
        view = ReadModel(store, clock=lambda: AFTER).live("seed-pro6000-400w", buckets=100)
        last = store.scalar("SELECT max(t_ms) FROM server_samples WHERE box = 'seed-pro6000-400w'")
    assert view is not None and view.at_ms == last
    assert view.out_tok_s.peak and view.out_tok_s.peak > 0
    assert [g.capped for g in view.gpus] == [True] * 4
    assert view.servers and view.tripwire


def test_a_sweep_outcome_that_disagrees_with_arms_tsv_is_refused(tmp_path: Path) -> None:
    data = copy_seed(tmp_path)
    toml = data / "history.toml"
    toml.write_text(
        toml.read_text().replace(
            '{ arm = "glm-5.3-flash-dp4-flashinfer-b12x-moe", outcome = "refused" }',
            '{ arm = "glm-5.3-flash-dp4-flashinfer-b12x-moe", outcome = "served" }',
        )
    )
    with Store(tmp_path / "s.db") as store, pytest.raises(HistoryDataError) as err:
        build_demo(store, data_dir=data)
    assert "history.toml" in str(err.value) and "glm-5.3-flash-dp4-flashinfer-b12x-moe" in str(err.value)
    assert "'refused' on seed-pro6000-600w" in str(err.value)


def test_a_naive_date_is_refused(tmp_path: Path) -> None:
    data = copy_seed(tmp_path)
    toml = data / "history.toml"
    toml.write_text(toml.read_text().replace("ends = 2026-09-03T23:40:00Z", "ends = 2026-09-03T23:40:00"))
    with Store(tmp_path / "s.db") as store, pytest.raises(HistoryDataError, match="with its offset"):
        build_demo(store, data_dir=data)


# -- S3: the tripwire verdict is the agent's rule's ---------------------------------------------------------
def test_qwen36_16_of_20_fails_and_its_rows_are_diagnostic_only(demo: Path) -> None:
    with Store(demo) as store:
        passed = store.scalar(
            "SELECT passed FROM tripwire_runs WHERE arm = 'qwen3.6-35b-a3b' AND box = 'seed-pro6000-400w'"
        )
        flags = {
            r["diagnostic_only"]
            for r in store.rows(
                "SELECT diagnostic_only FROM bench_runs WHERE arm = 'qwen3.6-35b-a3b' AND box = 'seed-pro6000-400w'"
            )
        }
        unknown = store.rows(
            "SELECT arm, provenance FROM tripwire_runs WHERE ok = 18 AND degenerate = 0 AND wrong = 0"
        )
    assert passed == 0 and flags == {1}
    assert {r["arm"] for r in unknown} == {"nemotron-3.5-lightning-30b", "glm-5.3-flash-tp4-256"}
    assert all("degenerate count unknown" in r["provenance"] for r in unknown)
    # ... and every view, export and report says it with the verdict (the read model's one wording).
    assert TripwireVerdict.of(18, 0, 0, 20, 1).text == "18/20 ok, degenerate count unknown"
    assert TripwireVerdict.of(16, 0, 0, 20, 0).text == "FAILED 16/20 ok, degenerate count unknown"
    assert TripwireVerdict.of(19, 0, 0, 20, 1).text == "19/20 ok"  # one item cannot fail the rule


def _set_qwen36(data: Path, passed: str, override: str = "") -> None:
    tsv = data / "arms.tsv"
    lines = tsv.read_text().splitlines()
    i = next(i for i, line in enumerate(lines) if line.startswith("qwen3.6-35b-a3b\tseed-pro6000-400w\t"))
    fields = lines[i].split("\t")
    fields[14] = passed  # tw_passed
    fields += [""] * (20 - len(fields))
    fields[19] = override  # tw_override
    lines[i] = "\t".join(fields)
    tsv.write_text("\n".join(lines) + "\n")


def test_a_tw_passed_against_the_rule_needs_an_override_reason(tmp_path: Path) -> None:
    data = copy_seed(tmp_path)
    _set_qwen36(data, "1")
    with pytest.raises(
        DemoDataError, match=r"arms.tsv:\d+: tw_passed is 1 but 16/20 ok fails the agent's rule"
    ):
        load_payload(data)
    _set_qwen36(data, "1", "the operator read the 4 misses and found them benign")
    tripwire = next(t for t in load_payload(data).tripwires.values() if t["arm"] == "qwen3.6-35b-a3b")
    assert tripwire["passed"] == 1 and "found them benign" in tripwire["provenance"]


@given(st.integers(0, 20), st.integers(0, 20), st.integers(0, 20))
def test_tripwire_passed_is_the_agents_verdict(ok: int, degenerate: int, wrong: int) -> None:
    """With the split known, the demo's verdict is grade.summarize's on such items; with only ok/total, it is
    given only when every split of the rest would give the same verdict."""
    items = [
        {"verdict": v, "reasoning_leak": None}
        for v, n in (("ok", ok), ("degenerate", degenerate), ("wrong", wrong))
        for _ in range(n)
    ]
    total = len(items)
    agent = summarize(items, Thresholds())["passed"]
    assert tripwire_passed(ok, degenerate, total) == agent
    unknown = tripwire_passed(ok, None, total)
    splits = {ok >= MIN_OK and d <= MAX_DEGENERATE for d in range(total - ok + 1)}
    assert unknown == (splits.pop() if len(splits) == 1 else None)
