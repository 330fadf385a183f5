"""The journal link over real sshd boxes and real agents: several campaigns on one box, malformed events,
backlogs of full 8-GPU samples, and a full disk under state.db."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agents.protocol import HelloResult
from console.fleet import BoxLink, FleetManager
from console.service import Service
from console.store import Store
from testbed import backlog
from testbed.fleet_fixtures import FAST, box_started, register, sshd_farm
from testbed.sshd import SshBox, SshdFarm
from tests.support import disks

pytestmark = [pytest.mark.sshd, pytest.mark.timeout(240)]
__all__ = ["sshd_farm"]

REPO = Path(__file__).resolve().parent.parent


def _seqs(store: Store, box: str) -> list[int]:
    return [r["seq"] for r in store.rows("SELECT seq FROM journal WHERE box = ? ORDER BY seq", [box])]


def _payloads(store: Store, box: str, kind: str) -> list[dict[str, Any]]:
    rows = store.rows("SELECT payload FROM journal WHERE box = ? AND kind = ? ORDER BY seq", [box, kind])
    return [json.loads(r["payload"]) for r in rows]


async def _hello(store: Store, box: str) -> HelloResult:
    link = BoxLink(store, box, FAST)
    try:
        await link.connect()
        assert link.last_hello is not None
        return link.last_hello
    finally:
        await link.close()


async def test_two_state_dbs_sharing_a_box_each_keep_every_event_of_their_own_commands(
    sshd_farm: SshdFarm, tmp_path: Path
) -> None:
    box = box_started("shared", gpu_fixture=None)
    stores = {name: Store(tmp_path / f"{name}.db") for name in ("a", "b")}
    probes: dict[str, list[int]] = {"a": [], "b": []}
    timers: dict[str, list[str]] = {"a": [], "b": []}
    try:
        for store in stores.values():
            register(store, box)
        for round_ in range(3):
            for me, other in (("a", "b"), ("b", "a")):
                link = BoxLink(stores[me], "shared", FAST)
                await link.connect()
                marker = time.time_ns() // 1000
                probes[me].append(marker)
                probe = asyncio.create_task(link.command("probe", {"console_t_ms": marker}, timeout=120))
                timer_id = f"{me}-{round_}"
                timers[me].append(timer_id)
                now = stores[me].clock()
                await link.command(
                    "set_deadline",
                    {
                        "timer_id": timer_id,
                        "deadline_ms": now + 3_600_000,
                        "action": "stop-arms",
                        "console_now_ms": now,
                    },
                )
                # The other campaign connects and ingests (and acks) while this one's commands run.
                other_link = BoxLink(stores[other], "shared", FAST)
                await other_link.sync()
                await other_link.close()
                await probe
                await link.command("cancel_deadline", {"timer_id": timer_id})
                await link.sync()
                await link.close()
        last: dict[str, int] = {}
        for me, store in stores.items():
            link = BoxLink(store, "shared", FAST)
            await link.sync()
            last[me] = link.box_last_seq
            await link.close()

        for me, store in stores.items():
            seqs = _seqs(store, "shared")
            assert seqs == list(range(seqs[0], last[me] + 1)), (
                f"{me}: events missing between its first and last"
            )
            markers = [p["probe"].get("console_t_ms") for p in _payloads(store, "shared", "probe")]
            for marker in probes[me]:
                assert markers.count(marker) == 1, f"{me}: its probe {marker} is missing or doubled"
            states = {(d["timer_id"], d["state"]) for d in _payloads(store, "shared", "deadline")}
            for timer_id in timers[me]:
                assert {(timer_id, "armed"), (timer_id, "cancelled")} <= states, (
                    f"{me}: timer {timer_id}'s events"
                )
        assert _seqs(stores["a"], "shared")[0] == 1  # the first campaign has the box's whole history

        # Detaching b: the box stops holding events for it, and its console no longer reconnects by itself.
        service = Service(stores["b"], settings=FAST)
        try:
            assert await service.detach("shared") is True
        finally:
            await service.close()
        assert stores["b"].boxes.get("shared").status == "detached"
        assert FleetManager(stores["b"], FAST).start_all() == []
        held = await _hello(stores["a"], "shared")
        assert [c["consumer"] for c in held["consumers"]] == [stores["a"].ingest.consumer_id()]
    finally:
        for store in stores.values():
            store.close()


def _cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "console", "--db", str(db), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


BAD_ROWS = [  # (kind, body): what the issue lists
    ("warning", "not JSON at all"),
    ("warning", "[1, 2, 3]"),
    ("gpu_sample", '{"gpus": [{"gpu": 0, "power_w": NaN}]}'),
    ("gpu_sample", '{"gpus": "GPU0 581 W"}'),
    ("server_sample", '{"launch_id": "L1", "gen_tok_per_s": "fast"}'),
]


async def test_malformed_events_are_quarantined_and_nothing_after_them_is_lost(
    sshd_farm: SshdFarm, tmp_path: Path
) -> None:
    box = box_started("malformed", gpu_fixture=None)
    db = tmp_path / "state.db"
    with Store(db) as store:
        register(store, box)
    assert _cli(db, "box", "connect", "malformed").returncode == 0  # the agent runs; its journal exists
    rows: list[tuple[Any, str, str]] = [
        (backlog.T0 + i, kind, body) for i, (kind, body) in enumerate(BAD_ROWS)
    ]
    rows.append((backlog.T0 + 9, "warning", json.dumps({"where": "test", "message": "after-the-bad-ones"})))
    backlog.write_raw(box, rows)

    done = _cli(db, "box", "connect", "malformed")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "5 rows quarantined (first: the box journal row is unreadable: body is not JSON" in done.stdout
    assert "5 rows quarantined (first: " in _cli(db, "box", "list").stdout
    with Store(db) as store:
        assert "after-the-bad-ones" in [p.get("message") for p in _payloads(store, "malformed", "warning")]
        raw = [
            r["raw"] for r in store.rows("SELECT raw FROM quarantine WHERE box = 'malformed' ORDER BY seq")
        ]
        assert raw[:2] == [body for _, body in BAD_ROWS[:2]] and json.loads(raw[3])["gpus"] == "GPU0 581 W"

        # The supervised link (`--follow`, the TUI) moves past a bad event too, and nothing after it is lost.
        fleet = FleetManager(store, FAST)
        link = fleet.start("malformed")
        try:
            backlog.write_raw(
                box,
                [
                    (backlog.T0 + 20, "gpu_sample", '{"gpus": [{"gpu": "zero"}]}'),
                    (backlog.T0 + 21, "warning", '{"where": "test", "message": "last"}'),
                ],
            )
            deadline = time.monotonic() + 30
            while "last" not in [p.get("message") for p in _payloads(store, "malformed", "warning")]:
                assert time.monotonic() < deadline and link.fatal is None, "the link stopped at a bad event"
                await asyncio.sleep(0.1)
        finally:
            await fleet.close()
        assert store.ingest.quarantined("malformed") == {"malformed": 6}
        assert store.scalar(
            "SELECT count(*) FROM journal WHERE box = 'malformed'"
        ) + 6 == store.ingest.cursor("malformed")  # every seq is either a journal row or quarantined


async def _ingest_backlog(box: SshBox, tmp_path: Path, events: list[dict[str, Any]]) -> tuple[Store, int]:
    """Connect once, let the box build ``events`` as a backlog, then ingest it over the real link."""
    store = Store(tmp_path / "state.db")
    register(store, box)
    link = BoxLink(store, box.name, FAST)
    try:
        await link.connect()
        await link.sync()
        last = backlog.write(box, events)
        await asyncio.wait_for(link.sync(), 180)
    finally:
        await link.close()
    return store, last


async def test_a_backlog_of_full_8_gpu_samples_ingests_in_batches_bounded_by_bytes(
    sshd_farm: SshdFarm, tmp_path: Path
) -> None:
    """37 minutes away from an 8-GPU box: 2,226 samples of ~1.5 kB. One batch of them (~3 MiB) was more than
    the SSH channel could take; every retry failed the same way and ingest never moved."""
    box = box_started("eight-gpus", gpu_fixture=None)
    events = list(backlog.samples(2226, gpus=8, servers=0))
    events.insert(
        1000, {"kind": "warning", "where": "test", "message": "w" * (3 * 1024 * 1024)}
    )  # one huge event
    store, last = await _ingest_backlog(box, tmp_path, events)
    with store:
        assert store.ingest.cursor(box.name) == last
        assert store.scalar("SELECT count(*) FROM gpu_samples WHERE box = ?", [box.name]) == 2226 * 8
        [huge] = [w for w in _payloads(store, box.name, "warning") if w["where"] == "test"]
        assert len(huge["message"]) == 3 * 1024 * 1024


async def test_an_hour_away_from_an_8_gpu_box_with_4_servers_ingests(
    sshd_farm: SshdFarm, tmp_path: Path
) -> None:
    box = box_started("hour-away", gpu_fixture=None)
    store, last = await _ingest_backlog(box, tmp_path, list(backlog.samples(3600, gpus=8, servers=4)))
    with store:
        assert store.ingest.cursor(box.name) == last
        assert store.scalar("SELECT count(*) FROM gpu_samples WHERE box = ?", [box.name]) == 3600 * 8
        assert store.scalar("SELECT count(*) FROM server_samples WHERE box = ?", [box.name]) == 3600 * 4


def _fill(path: Path) -> None:
    """Write ``path`` until the disk under it is full."""
    with path.open("wb") as f:
        try:
            while True:
                f.write(b"\0" * (256 * 1024))
                f.flush()
        except OSError:
            pass


def _ro(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)


def _cursor(db: Path, box: str) -> int:
    with _ro(db) as conn:
        row = conn.execute("SELECT seq FROM ingest_cursor WHERE box = ?", [box]).fetchone()
    return int(row[0]) if row else 0


def _box_acked(box: SshBox) -> list[int]:
    with sqlite3.connect(box.agent_home / "journal.db", timeout=30) as conn:
        return [r[0] for r in conn.execute("SELECT acked_seq FROM consumers")]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 24 MiB filesystem of its own for state.db (tmpfs, mounted by the test: it runs as root)."""
    with disks.tmpfs(tmp_path / "small-disk", "24m") as mnt:
        yield mnt


def _one_line_disk_full(done: subprocess.CompletedProcess[str], where: Path) -> None:
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    [line] = done.stderr.splitlines() or [""]
    assert (
        line.startswith("campaign: state.db disk full: ") and str(where) in line and "free space" in line
    ), done.stderr


def test_a_full_disk_under_state_db_stops_ingest_clearly_and_it_resumes_with_nothing_lost(
    sshd_farm: SshdFarm, small_disk: Path, tmp_path: Path
) -> None:
    box = box_started("full-disk", gpu_fixture=None)
    db = small_disk / "state.db"
    with Store(db) as store:
        register(store, box)
    assert _cli(db, "box", "connect", "full-disk").returncode == 0
    filler = small_disk / "filler"

    # --follow: says so once, acks nothing it has not committed (the box keeps it), resumes when space returns.
    log = tmp_path / "follow.log"
    follower = subprocess.Popen(
        [sys.executable, "-m", "console", "--db", str(db), "box", "connect", "full-disk", "--follow"],
        cwd=REPO,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 90
        while _cursor(db, "full-disk") < backlog.write(box, []) and time.monotonic() < deadline:
            time.sleep(0.1)  # the follower is up and caught up
        _fill(filler)
        last = backlog.write(box, backlog.samples(600, gpus=8, servers=4))
        while "state.db disk full" not in log.read_text(errors="replace"):
            assert time.monotonic() < deadline and follower.poll() is None, log.read_text(errors="replace")
            time.sleep(0.1)
        assert max(_box_acked(box)) <= _cursor(db, "full-disk") < last  # never acked beyond what is committed
        filler.unlink()
        while _cursor(db, "full-disk") < last or max(_box_acked(box)) < last:
            assert time.monotonic() < deadline and follower.poll() is None, log.read_text(errors="replace")
            time.sleep(0.1)
        assert "ingest resumed" in log.read_text(errors="replace")
    finally:
        follower.terminate()
        follower.wait(20)
        filler.unlink(missing_ok=True)

    # A one-shot connect fails in one line that says what, where and what to do: when the commit fails ...
    reader = _ro(db)
    reader.execute(
        "SELECT count(*) FROM journal"
    ).fetchone()  # an open connection keeps the -wal and -shm files
    try:
        _fill(filler)
        more = backlog.write(box, backlog.samples(10, gpus=8, servers=4, t0=backlog.T0 + 3_600_000))
        _one_line_disk_full(_cli(db, "box", "connect", "full-disk"), small_disk)
    finally:
        reader.close()
    # ... and when, with every connection closed, even opening state.db needs disk for its -wal and -shm.
    _one_line_disk_full(_cli(db, "box", "connect", "full-disk"), small_disk)
    filler.unlink()
    assert _cli(db, "box", "connect", "full-disk").returncode == 0
    with Store(db) as store:
        # Nothing lost, nothing doubled. The agent may have journaled a few events of its own after ``more`` (a
        # restart on a busy machine journals agent_started and its GPU warnings): those count, they are not lost.
        seqs = _seqs(store, "full-disk")
        assert seqs == list(range(1, seqs[-1] + 1)) and seqs[-1] >= more
        assert store.scalar("SELECT count(*) FROM gpu_samples WHERE box = 'full-disk'") == 610 * 8
