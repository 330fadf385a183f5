"""Hostile and out-of-range values from a real box (sshd test boxes, real agents): one poisoned journal row
never stops a box's ingest, a hole in the sequence is asked for again and then recorded, and a detach while
the same state.db follows the box cannot leave a hole."""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import asyncssh
import pytest

from console.fleet import FleetManager
from console.fleet.link import Detached
from console.service import Service
from console.store import Store
from testbed import backlog
from testbed.fleet_fixtures import FAST, box_started, register, sshd_farm
from testbed.sshd import SshBox, SshdFarm

pytestmark = [pytest.mark.sshd, pytest.mark.timeout(240)]
__all__ = ["sshd_farm"]

REPO = Path(__file__).resolve().parent.parent


def _nested(depth: int) -> str:
    return "[" * depth + "1" + "]" * depth


POISON: list[tuple[str, Any]] = [  # (kind, body as stored on the box: text, or bytes that are not UTF-8)
    ("warning", b'{"where": "test", "message": "caf\xe9"}'),
    ("warning", '{"where": "test", "x": ' + _nested(1000) + "}"),
    (
        "bench_result",
        json.dumps({"bench_id": "B1", "launch_id": "L1", "result": {"seed": 99999999999999999999}}),
    ),
    ("warning", '{"where": "test", "message": "\\ud800"}'),
    ("gpu_sample", '{"gpus": [{"gpu": 0, "power_w": 1e999}]}'),
]

_RAW = """
import json, sqlite3, sys
with sqlite3.connect(sys.argv[1], timeout=30) as db:
    for t_ms, kind, body, is_hex in json.loads(sys.stdin.read()):
        value = bytes.fromhex(body) if is_hex else body
        db.execute("INSERT INTO events (t_ms, kind, body) VALUES (?, ?, CAST(? AS TEXT))", (t_ms, kind, value))
"""


def _write_poison(box: SshBox, rows: list[tuple[str, Any]]) -> None:
    """Rows straight into the box journal (as the box's user), bytes kept as they are: text that is not
    UTF-8 stored as TEXT, as a damaged disk or a foreign writer leaves it."""
    payload = [
        (backlog.T0, kind, body.hex() if isinstance(body, bytes) else body, isinstance(body, bytes))
        for kind, body in rows
    ]
    subprocess.run(
        ["/usr/bin/python3", "-c", _RAW, str(box.agent_home / "journal.db")],
        input=json.dumps(payload),
        text=True,
        user=box.uid,
        group=box.gid,
        env={},
        check=True,
        timeout=60,
    )


def _messages(db: Path, box: str) -> list[str]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30) as conn:
        rows = conn.execute(
            "SELECT payload FROM journal WHERE box = ? AND kind = 'warning'", [box]
        ).fetchall()
    return [json.loads(p).get("message", "") for (p,) in rows]


def _quarantine(db: Path, box: str) -> list[str]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30) as conn:
        return [r for (r,) in conn.execute("SELECT reason FROM quarantine WHERE box = ? ORDER BY seq", [box])]


def _wait(predicate: Any, what: str, follow: subprocess.Popen[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert follow.poll() is None, f"the follow exited {follow.returncode} before {what}"
        assert time.monotonic() < deadline, f"the follow never got to {what}"
        time.sleep(0.2)


def test_a_box_with_poisoned_rows_keeps_streaming_to_follow(sshd_farm: SshdFarm, tmp_path: Path) -> None:
    box = box_started("poisoned", gpu_fixture=None)
    db = tmp_path / "state.db"
    with Store(db) as store:
        register(store, box)
    cli = [sys.executable, "-m", "console", "--db", str(db)]
    once = subprocess.run(
        [*cli, "box", "connect", "poisoned"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert once.returncode == 0, once.stderr
    _write_poison(box, [*POISON, ("warning", '{"where": "test", "message": "after-the-poison"}')])

    follow = subprocess.Popen(
        [*cli, "box", "connect", "poisoned", "--follow"],
        cwd=REPO,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        _wait(lambda: "after-the-poison" in _messages(db, "poisoned"), "the row after the poison", follow)
        # More poison while it follows: it moves past that too.
        _write_poison(box, [POISON[0], ("warning", '{"where": "test", "message": "last"}')])
        _wait(lambda: "last" in _messages(db, "poisoned"), "the last row", follow)
    finally:
        follow.send_signal(signal.SIGTERM)
        out, err = follow.communicate(timeout=60)
    assert follow.returncode == 0 and "Traceback" not in err, err
    reasons = _quarantine(db, "poisoned")
    assert len(reasons) == len(POISON) + 1
    for expected in (
        "not valid UTF-8",
        "nested deeper than",
        "outside SQLite's 64 bits",
        "not valid UTF-8",
        "JSON cannot carry",
    ):
        assert any(expected in r for r in reasons), (expected, reasons)
    with Store(
        db
    ) as store:  # every seq is a journal row or a quarantined one: nothing skipped, nothing doubled
        held = store.scalar("SELECT count(*) FROM journal WHERE box = 'poisoned'")
        assert held + len(reasons) == store.ingest.cursor("poisoned")
    # Seen where the operator looks: box status, box list and the handover, with the first reason.
    said = (
        f"{len(reasons)} rows quarantined (first: the box journal row is unreadable: body is not valid UTF-8"
    )
    for args in (("box", "status", "poisoned"), ("box", "list"), ("report",)):
        shown = subprocess.run([*cli, *args], cwd=REPO, capture_output=True, text=True, timeout=120)
        assert shown.returncode == 0 and said in shown.stdout, (args, shown.stdout, shown.stderr)


async def test_a_hole_the_box_cannot_fill_is_asked_again_then_recorded_as_lost(
    sshd_farm: SshdFarm, tmp_path: Path
) -> None:
    box = box_started("holed", gpu_fixture=None)
    with Store(tmp_path / "state.db") as store:
        register(store, box)
        service = Service(store, settings=FAST)
        try:
            await service.connect("holed")
            first = backlog.write(
                box, [{"kind": "warning", "where": "test", "message": f"m{i}"} for i in range(10)]
            )
            # The box journal loses three rows this state.db never acked (as a release under the disk floor does).
            subprocess.run(
                [
                    "/usr/bin/python3",
                    "-c",
                    "import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute("
                    "'DELETE FROM events WHERE seq BETWEEN ? AND ?', (int(sys.argv[2]), int(sys.argv[3])))"
                    ".connection.commit()",
                    str(box.agent_home / "journal.db"),
                    str(first - 6),
                    str(first - 4),
                ],
                user=box.uid,
                group=box.gid,
                env={},
                check=True,
                timeout=60,
            )
            await service.connect("holed")
        finally:
            await service.close()
        [lost] = store.rows("SELECT first_seq, last_seq, reason FROM lost_events WHERE box = 'holed'")
        assert (lost["first_seq"], lost["last_seq"]) == (first - 6, first - 4)
        assert store.ingest.cursor("holed") == first  # the rows after the hole are ingested
        messages = [
            json.loads(r["payload"])["message"]
            for r in store.rows(
                "SELECT payload FROM journal WHERE box = 'holed' AND kind = 'warning' ORDER BY seq"
            )
        ]
        assert messages[-3:] == ["m7", "m8", "m9"] and "m3" not in messages
        from console.readmodel import queries

        [row] = queries.fleet(store, store.clock(), "holed")
        assert row.lost_events == 3 and f"seqs {first - 6}..{first - 4}" in row.ingest.line


async def test_a_detach_while_the_same_state_db_follows_leaves_no_hole(
    sshd_farm: SshdFarm, tmp_path: Path
) -> None:
    box = box_started("raced", gpu_fixture=None)
    db = tmp_path / "state.db"
    for attempt in range(3):
        with Store(db) as follower_store, Store(db) as detacher_store:
            if attempt == 0:
                register(follower_store, box)
            await Service(follower_store, settings=FAST).connect("raced")  # attached (again)
            fleet = FleetManager(follower_store, FAST)
            link = fleet.start("raced")
            writer = asyncio.create_task(
                asyncio.to_thread(
                    backlog.write,
                    box,
                    ({"kind": "warning", "where": "test", "message": f"{attempt}-{i}"} for i in range(3000)),
                )
            )
            await asyncio.sleep(0.3)
            service = Service(detacher_store, settings=FAST)
            try:
                assert await service.detach("raced") is True
            finally:
                await service.close()
            await writer
            deadline = time.monotonic() + 30
            while not isinstance(link.fatal, Detached) and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            await fleet.close()
            assert isinstance(link.fatal, Detached), link.fatal  # told, and it stopped pulling
            seqs = [
                r["seq"]
                for r in follower_store.rows("SELECT seq FROM journal WHERE box = 'raced' ORDER BY seq")
            ]
            assert seqs == list(range(seqs[0], seqs[-1] + 1)), f"attempt {attempt}: a hole below the cursor"
            assert follower_store.ingest.cursor("raced") == seqs[-1]
            assert follower_store.scalar("SELECT count(*) FROM lost_events") == 0


async def test_a_follow_that_cannot_reach_its_box_says_so_as_it_happens_and_every_interval(
    tmp_path: Path,
) -> None:
    """No sshd listens on the port: each failed attempt is one line with the retry, and the stall is repeated."""
    from console.store import Box
    from testbed.ports import free_port

    with Store(tmp_path / "state.db") as store:
        key = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().strip()
        store.boxes.add(
            Box(
                name="gone",
                ssh_user="nobody",
                host="127.0.0.1",
                port=free_port(),
                host_key=" ".join(key.split()[:2]),
                host_key_source="tofu",
            )
        )
        service = Service(store, settings=FAST)
        notices: list[str] = []
        stop = asyncio.Event()
        follow = asyncio.create_task(
            service.follow("gone", stop, on_notice=notices.append, stall_notice_s=1.5)
        )
        try:
            deadline = time.monotonic() + 60
            while not any("no progress for" in n for n in notices) and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
        finally:
            stop.set()
            await follow
            await service.close()
    assert any(n.startswith("gone: down: ") and "retry in" in n for n in notices), notices
    assert any("no progress for" in n and "still retrying" in n for n in notices), notices
    assert all("\n" not in n for n in notices)
