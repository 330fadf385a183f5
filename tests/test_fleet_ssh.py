"""The fleet over real OpenSSH sshd boxes: TOFU, changed keys, silent hosts, push, commands, forwards."""

from __future__ import annotations

import asyncio
import gc
import io
import json
import os
import signal
import socket
import time
import warnings
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from console.fleet import BoxLink, FleetManager, HostKeyChanged, HostKeyUnknown, LinkSettings
from console.fleet.push import AgentBuild, current_build
from console.fleet.transport import SshSettings
from console.service import HostKey, Service
from console.store import Box, Store
from testbed.fleet_fixtures import FAST, box_started, fleet_store, register, sshd_farm
from testbed.ports import free_port
from testbed.sshd import SshdFarm
from tests.support.tcp_proxy import TcpProxy

pytestmark = [pytest.mark.sshd, pytest.mark.timeout(120)]
__all__ = ["fleet_store", "sshd_farm"]


async def test_unknown_key_waits_for_the_operator_then_connects_and_ingests(
    sshd_farm: SshdFarm, fleet_store: Store
) -> None:
    box = box_started("alpha")
    register(fleet_store, box, pin=False)
    link = BoxLink(fleet_store, "alpha", FAST)
    with pytest.raises(HostKeyUnknown, match="campaign box trust alpha"):
        await link.connect()
    row = fleet_store.boxes.get("alpha")
    assert (row.status, row.host_key_source, row.host_key) == (
        "host-key-unknown",
        "pending",
        box.host_key_line,
    )
    service = Service(fleet_store, settings=FAST)
    key = await service.presented_key("alpha")
    assert key.line == box.host_key_line and key.fingerprint.startswith("SHA256:")
    service.trust("alpha", key)
    assert "new events ingested" in str(await service.connect("alpha"))
    row = fleet_store.boxes.get("alpha")
    assert row.status == "up" and row.agent_version == current_build().version
    # An agent already running (an earlier test's, every event acked) may hold nothing new yet: its next
    # GPU sample is what this campaign ingests then.
    deadline = time.monotonic() + 30
    while not fleet_store.scalar("SELECT count(*) FROM journal WHERE box = 'alpha'"):
        assert time.monotonic() < deadline, "nothing ingested from the box"
        await asyncio.sleep(0.1)
        await service.settle("alpha")
    journal = fleet_store.rows("SELECT seq, kind FROM journal WHERE box = 'alpha' ORDER BY seq")
    assert fleet_store.ingest.cursor("alpha") == journal[-1]["seq"]
    await service.close()


async def test_known_hosts_file_is_used_then_remembered(
    sshd_farm: SshdFarm, fleet_store: Store, tmp_path: Path
) -> None:
    box = box_started("alpha")
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{box.port} {box.host_key_line}\n")
    register(fleet_store, box, pin=False)
    link = BoxLink(fleet_store, "alpha", replace(FAST, known_hosts=known))
    await link.connect()
    row = fleet_store.boxes.get("alpha")
    assert (row.host_key_source, row.host_key, row.status) == ("known_hosts", box.host_key_line, "up")
    await link.close()


@pytest.mark.parametrize("new_type", ["ed25519", "ecdsa", "rsa"])
async def test_changed_host_key_is_refused_and_the_box_marked(
    sshd_farm: SshdFarm, fleet_store: Store, new_type: str
) -> None:
    """A new key of the same type, or of another (which sshd alone offers, so the handshake fails before any
    key is compared): either way a key the operator never trusted is a changed host key, not a dead link."""
    box = box_started(f"rekeyed-{new_type}", gpu_fixture=None)
    register(fleet_store, box)  # pinned: the operator trusted this ed25519 key
    new_line = sshd_farm.rekey(box.name, key_type=new_type)
    assert new_line.split()[0] != "ssh-ed25519" or new_type == "ed25519"
    link = BoxLink(fleet_store, box.name, FAST)
    with pytest.raises(HostKeyChanged, match="HOST KEY CHANGED") as info:
        await link.connect()
    row = fleet_store.boxes.get(box.name)
    assert row.status == "host-key-changed" and row.host_key == box.host_key_line
    assert info.value.presented is not None and info.value.presented in (row.status_detail or "")
    # The supervised loop stops instead of hammering the box, and trust without --replace is refused.
    await asyncio.wait_for(link.run(), 10)
    assert isinstance(link.fatal, HostKeyChanged)
    service = Service(fleet_store, settings=FAST)
    with pytest.raises(HostKeyChanged):
        service.trust(box.name, HostKey(new_line, "presented"))
    service.trust(box.name, HostKey(new_line, "presented"), replace=True)
    assert fleet_store.boxes.get(box.name).host_key == new_line
    again = BoxLink(fleet_store, box.name, FAST)  # trusted again: the key's own type is offered now
    await again.connect()
    assert fleet_store.boxes.get(box.name).status == "up"
    await again.close()
    box.kill_agent()


async def test_silent_box_times_out_clearly_and_does_not_block_the_others(
    sshd_farm: SshdFarm, fleet_store: Store
) -> None:
    box = box_started("alpha")
    register(fleet_store, box)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # accepts TCP (kernel backlog) and never says a word
        port = silent.getsockname()[1]
        fleet_store.boxes.add(
            Box(
                name="mute",
                ssh_user="root",
                host="127.0.0.1",
                port=port,
                host_key=box.host_key_line,
                host_key_source="tofu",
            )
        )
        settings = replace(FAST, ssh=SshSettings(connect_timeout=2.0))
        fleet = FleetManager(fleet_store, settings)
        started = time.monotonic()
        fleet.start_all()
        alpha_up = None
        while time.monotonic() - started < 15:
            await asyncio.sleep(0.05)
            if alpha_up is None and fleet_store.boxes.get("alpha").status == "up":
                alpha_up = time.monotonic() - started
            mute = fleet_store.boxes.get("mute")
            if alpha_up is not None and mute.status == "down":
                break
        await fleet.close()
    assert alpha_up is not None and alpha_up < 2.0, "a silent box delayed a healthy one"
    assert "no SSH handshake within 2 s" in (mute.status_detail or "")


def _retagged(build: AgentBuild, version: str) -> AgentBuild:
    """The same agent code announcing another version: what a console upgrade pushes."""
    src = zipfile.ZipFile(io.BytesIO(build.payload.split(b"\n", 1)[1]))
    out = io.BytesIO()
    out.write(b"#!/usr/bin/env python3\n")
    with zipfile.ZipFile(out, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            dst.writestr(item, f"{version}\n".encode() if item.filename == "agents/_build_version" else data)
    return AgentBuild(version, out.getvalue())


async def test_stale_agent_is_replaced_and_its_arm_keeps_running(
    sshd_farm: SshdFarm, fleet_store: Store
) -> None:
    box = box_started("bravo")
    register(fleet_store, box)
    link = BoxLink(fleet_store, "bravo", FAST)
    await link.connect()
    port = socket.socket()
    port.bind(("127.0.0.1", 0))
    free = port.getsockname()[1]
    port.close()
    launch_id = f"sleeper-{int(time.time() * 1000)}"
    started = await link.command(
        "launch",
        {
            "launch_id": launch_id,
            "argv": ["sleep", "300"],
            "env": {},
            "gpus": [],
            "port": free,
            "ready_timeout_s": 600,
        },
    )
    pid = started["pid"]
    assert link.last_hello is not None
    old_pid = link.last_hello["pid"]
    await link.close()

    link = BoxLink(fleet_store, "bravo", FAST, build=lambda: _retagged(current_build(), "next-version"))
    action = await link.connect()
    assert action.startswith("replaced stale agent")
    assert link.last_hello is not None
    assert link.last_hello["version"] == "next-version" and link.last_hello["pid"] != old_pid
    Path(f"/proc/{pid}").stat()  # the arm survived the agent's replacement
    listed = await link.command("launches", {})
    assert launch_id in [entry["launch_id"] for entry in listed["launches"]]
    await link.command("kill", {"launch_id": launch_id, "grace_s": 1})
    await link.close()
    # Back to the current agent for the other tests (and prove the skip path).
    link = BoxLink(fleet_store, "bravo", FAST)
    assert (await link.connect()).startswith("replaced stale agent next-version")
    assert await link.connect() == "already running"
    await link.close()


async def test_command_re_sent_with_its_id_runs_once(sshd_farm: SshdFarm, fleet_store: Store) -> None:
    box = box_started("alpha")
    register(fleet_store, box)
    link = BoxLink(fleet_store, "alpha", FAST)
    await link.connect()
    free = free_port()
    launch_id = f"once-{int(time.time() * 1000)}"
    args = {"launch_id": launch_id, "argv": ["sleep", "300"], "env": {}, "gpus": [], "port": free}
    first = await link.command("launch", args, command_id=f"launch-{launch_id}")
    # A console that crashed after sending but before storing the answer re-sends the same id.
    fleet_store.db.execute(
        "UPDATE commands SET state = 'sent', result = NULL WHERE id = ?", [f"launch-{launch_id}"]
    )
    fleet_store.db.conn.commit()
    assert [c.id for c in fleet_store.commands.unfinished("alpha")] == [f"launch-{launch_id}"]
    again = await link._deliver(f"launch-{launch_id}", "launch", args, 30, dict)
    assert again == first
    assert fleet_store.commands.get(f"launch-{launch_id}").state == "acked"
    listed = await link.command("launches", {})
    assert [e["launch_id"] for e in listed["launches"]].count(launch_id) == 1
    await link.command("kill", {"launch_id": launch_id, "grace_s": 1})
    await link.close()


async def test_forward_reaches_a_server_on_the_box_loopback(sshd_farm: SshdFarm, fleet_store: Store) -> None:
    box = box_started("alpha")
    register(fleet_store, box)
    server = await asyncio.start_server(_answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    link = BoxLink(fleet_store, "alpha", FAST)
    await link.connect()
    local = await link.forward(port)
    assert local != port
    reader, writer = await asyncio.open_connection("127.0.0.1", local)
    writer.write(b"ping\n")
    assert await reader.readline() == b"pong ping\n"
    writer.close()
    await link.close()
    server.close()


async def _answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write(b"pong " + await reader.readline())
    await writer.drain()
    writer.close()


async def test_local_box_uses_the_same_protocol_without_ssh_and_closes_every_socket(
    fleet_store: Store, tmp_path: Path
) -> None:
    home = tmp_path / "agent-home"
    fleet_store.boxes.add(Box(name="local", kind="local", agent_home=str(home)))
    gc.collect()  # what earlier tests left to the collector is theirs: only this service's leftovers count
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        service = Service(fleet_store, settings=FAST)
        try:
            assert (await service.connect("local")).action.startswith("started")
            for _ in range(3):  # a command channel each, and the journal drained on a pair of its own
                probe = await service.probe("local")
            assert probe["cpu_count"] >= 1
            assert fleet_store.checks.latest_probe("local") is not None  # arrived through the journal
            assert fleet_store.boxes.get("local").status == "up"
        finally:
            await service.close()
            os.kill(int((home / "agent.pid").read_text().split()[0]), signal.SIGTERM)
        gc.collect()
    # The TUI runs the service on a second event loop (console/tui/actions.py): a socket it left to the
    # garbage collector could be finalized on Textual's thread and unregister a reused descriptor.
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []


async def test_command_in_flight_when_the_link_drops_is_re_sent_and_runs_once(
    sshd_farm: SshdFarm, fleet_store: Store
) -> None:
    box = box_started("alpha")
    proxy = TcpProxy(box.port)
    register(fleet_store, box, port=proxy.port)
    fleet = FleetManager(fleet_store, FAST)
    link = fleet.start("alpha")
    marker = int(time.time() * 1000)
    try:
        command = asyncio.create_task(
            link.command("probe", {"console_t_ms": marker}, command_id=f"probe-{marker}")
        )
        while fleet_store.scalar("SELECT state FROM commands WHERE id = ?", [f"probe-{marker}"]) != "sent":
            await asyncio.sleep(0.01)
        assert proxy.drop() >= 1  # a probe takes a while on the box: its answer is lost with the link
        result = await asyncio.wait_for(command, 30)
        assert result["probe"]["console_t_ms"] == marker
        assert fleet_store.commands.get(f"probe-{marker}").state == "acked"

        def journaled() -> int:
            return sum(
                json.loads(r["payload"])["probe"].get("console_t_ms") == marker
                for r in fleet_store.rows(
                    "SELECT payload FROM journal WHERE box = 'alpha' AND kind = 'probe'"
                )
            )

        deadline = time.monotonic() + 10
        while journaled() == 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.0)  # a second run, if any, would be journaled by now
        assert journaled() == 1, "the re-sent probe ran twice on the box"
        assert fleet_store.boxes.get("alpha").status == "up"
    finally:
        await fleet.close()
        proxy.close()


async def test_a_slow_command_never_stalls_ingest(sshd_farm: SshdFarm, fleet_store: Store) -> None:
    box = box_started("alpha")
    slow = box.root / "slow-python"
    slow.write_text('#!/bin/sh\nsleep 4\nexec /usr/bin/python3 "$@"\n')  # a serving env that takes its time
    slow.chmod(0o755)
    register(fleet_store, box)
    fleet = FleetManager(fleet_store, FAST)
    link = fleet.start("alpha")
    try:
        while not link.connected:
            await asyncio.sleep(0.05)
        probe = asyncio.create_task(link.command("probe", {"console_t_ms": 2, "serving_python": str(slow)}))
        await asyncio.sleep(0.3)
        marker = f"during-probe-{time.time_ns()}"
        writer = await asyncio.create_subprocess_exec(
            "/usr/bin/python3",
            "-c",
            "import sys; from pathlib import Path; from agents.journal import Journal; "
            "Journal(Path(sys.argv[1])).append('warning', where='test', message=sys.argv[2])",
            str(box.agent_home / "journal.db"),
            marker,
            user=box.uid,
            group=box.gid,
            env={"PYTHONPATH": str(Path(__file__).parent.parent)},
        )
        assert await writer.wait() == 0
        deadline = time.monotonic() + 2.5
        while not fleet_store.scalar("SELECT count(*) FROM journal WHERE payload LIKE ?", [f"%{marker}%"]):
            assert time.monotonic() < deadline, "ingest waited behind a slow command"
            await asyncio.sleep(0.05)
        assert not probe.done(), "the probe was not slow: this test proves nothing"
        assert (await asyncio.wait_for(probe, 30))["probe"]["console_t_ms"] == 2
    finally:
        await fleet.close()


async def test_the_agent_a_link_starts_ticks_at_the_links_setting(
    sshd_farm: SshdFarm, fleet_store: Store
) -> None:
    """``LinkSettings.agent_tick_s`` reaches the daemon's argv (its sampling and supervision period); the
    operator's default is 1 s, the tests' 0.25 s."""
    box = box_started("ticking")
    register(fleet_store, box)
    link = BoxLink(fleet_store, "ticking", replace(FAST, agent_tick_s=0.5))
    await link.connect()
    try:
        hello = await link.command("hello", {})
        argv = Path(f"/proc/{hello['pid']}/cmdline").read_bytes().split(b"\0")
        assert argv[argv.index(b"--interval") + 1] == b"0.5", argv
    finally:
        await link.close()
    assert LinkSettings().agent_tick_s == 1.0
