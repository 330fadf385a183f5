"""Chaos: a box journals tens of thousands of events while the SSH link is cut again and again and the
console process itself is SIGKILLed mid-ingest; afterwards state.db holds every event exactly once, in order.

The link runs through a TCP proxy on loopback that the test aborts at random moments (RST both ways, like
a dead network). The console is the real CLI (`campaign box connect NAME --follow`) in a subprocess, so
the kill is a real crash between (or inside) ingest transactions.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from console.fleet import BoxLink
from console.store import Store
from testbed.fleet_fixtures import FAST, box_started, register, sshd_farm
from testbed.sshd import SshdFarm
from tests.support.tcp_proxy import TcpProxy

pytestmark = [pytest.mark.sshd, pytest.mark.timeout(240)]
__all__ = ["sshd_farm"]

REPO = Path(__file__).resolve().parent.parent
EVENTS = 20_000
WRITER = """
import sys, time
from pathlib import Path
from agents.journal import Journal
j = Journal(Path(sys.argv[1]))
for i in range(int(sys.argv[2])):
    j.append("warning", where="chaos", message=str(i))
    if i % 250 == 249:
        time.sleep(0.12)
"""


def _box_last_seq(journal: Path) -> int:
    with sqlite3.connect(journal, timeout=30) as db:
        row = db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'events'").fetchone()
    return int(row[0]) if row else 0


def _cursor(db: Path) -> int:
    with sqlite3.connect(db, timeout=30) as conn:
        row = conn.execute("SELECT seq FROM ingest_cursor WHERE box = 'chaos'").fetchone()
    return int(row[0]) if row else 0


def _kill_inside_a_transaction(follower: subprocess.Popen[bytes], db: Path, deadline: float) -> None:
    """SIGKILL the console while it holds state.db's write lock, i.e. inside an ingest transaction."""
    probe = sqlite3.connect(db, timeout=0, isolation_level=None)
    try:
        while time.monotonic() < deadline:
            try:
                probe.execute("BEGIN IMMEDIATE")
                probe.execute("ROLLBACK")
            except sqlite3.OperationalError as exc:
                if "locked" in str(exc):
                    follower.send_signal(signal.SIGKILL)
                    return
                raise
            time.sleep(0.002)
        raise AssertionError("the console never held state.db's write lock")
    finally:
        probe.close()


def _box_acked(journal: Path) -> int:
    """What the one consumer (this test's state.db) has acked on the box."""
    with sqlite3.connect(journal, timeout=30) as db:
        row = db.execute("SELECT max(acked_seq) FROM consumers").fetchone()
    return int(row[0] or 0)


def _follower(db: Path, log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "console", "--db", str(db), "box", "connect", "chaos", "--follow"],
        cwd=REPO,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )


async def test_every_event_exactly_once_in_order_through_cuts_and_a_console_crash(
    sshd_farm: SshdFarm, tmp_path: Path
) -> None:
    rng = random.Random(os.environ.get("CHAOS_SEED", "5"))  # cut timings; the crash waits for a transaction
    box = box_started("chaos", gpu_fixture=None)
    proxy = TcpProxy(box.port)
    db = tmp_path / "state.db"
    with Store(db) as store:
        register(store, box, port=proxy.port)
        link = BoxLink(store, "chaos", FAST)
        await link.connect()  # push and start the agent once, so the writer has a journal to append to
        await link.close()
    journal = box.agent_home / "journal.db"
    writer = subprocess.Popen(
        ["/usr/bin/python3", "-c", WRITER, str(journal), str(EVENTS)],
        user=box.uid,
        group=box.gid,
        env={"PYTHONPATH": str(REPO), "PATH": os.environ["PATH"]},
    )
    log = tmp_path / "follower.log"
    follower = _follower(db, log)
    cuts = crashed_at = 0
    try:
        # Let a backlog build so the console is busy inside transactions, then cut and crash it.
        deadline = time.monotonic() + 150
        while _cursor(db) < 2_000 and time.monotonic() < deadline:
            time.sleep(0.05)
        for _ in range(6):
            time.sleep(rng.uniform(0.05, 0.4))
            cuts += proxy.drop() > 0
        _kill_inside_a_transaction(follower, db, deadline)
        follower.wait(10)
        crashed_at = _cursor(db)
        follower = _follower(db, log)
        while (writer.poll() is None or cuts < 12) and time.monotonic() < deadline:
            time.sleep(rng.uniform(0.1, 0.6))
            cuts += proxy.drop() > 0
        assert writer.wait(60) == 0
        last = _box_last_seq(journal)
        while (_cursor(db) < last or _box_acked(journal) < last) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        follower.send_signal(signal.SIGTERM)
        follower.wait(20)
        if writer.poll() is None:
            writer.kill()
        proxy.close()
    tail = log.read_text(errors="replace")[-2000:]
    print(f"chaos: {cuts} live links cut, console SIGKILLed at seq {crashed_at} of {last}")
    assert cuts >= 12, f"the test cut only {cuts} live links; follower log:\n{tail}"
    assert 0 < crashed_at < last, f"the console was not killed mid-ingest (cursor {crashed_at} of {last})"
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        seqs = [r[0] for r in conn.execute("SELECT seq FROM journal WHERE box = 'chaos' ORDER BY rowid")]
        payloads = conn.execute(
            "SELECT payload FROM journal WHERE box = 'chaos' AND kind = 'warning' ORDER BY rowid"
        ).fetchall()
        cursor = _cursor(db)
    assert seqs == list(range(1, last + 1)), f"journal is not 1..{last} exactly once in order; log:\n{tail}"
    assert cursor == last and _box_acked(journal) == last  # committed, then acked: the box may forget them
    written = [m for m in (json.loads(p[0]) for p in payloads) if m.get("where") == "chaos"]
    assert [int(m["message"]) for m in written] == list(range(EVENTS))
