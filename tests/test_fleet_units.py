"""Fleet pieces without a network: backoff, host-key policy, journal agreement, the wire channel."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import asyncssh
import pytest

import console.fleet.link as link_module
from agents.protocol import HelloResult
from console.backoff import Backoff
from console.cli.launch import parse_gpus
from console.errors import InputError
from console.fleet import BoxLink, HostKeyChanged, JournalMismatch
from console.fleet.hostkeys import check_trust, policy_for
from console.fleet.wire import AgentChannel, AgentError, ChannelClosed
from console.store import Box, Store


def test_backoff_grows_with_full_jitter_under_its_cap_and_resets() -> None:
    """The link's reconnect waits through console/backoff.py (tests/test_backoff.py tests it in full)."""
    assert vars(link_module)["Backoff"] is Backoff
    b = Backoff(0.5, 8.0, random.Random(1))
    delays = [b.next() for _ in range(10)]
    assert all(0.0 <= d <= min(8.0, 0.5 * 2**n) for n, d in enumerate(delays))
    assert max(delays[:2]) <= 1.0 and max(delays[5:]) > 2.0  # grows...
    assert len({round(d, 6) for d in delays[5:]}) == 5  # ...with jitter, never in lockstep
    b.reset()
    assert b.next() <= 0.5


def _key() -> str:
    key = asyncssh.generate_private_key("ssh-ed25519")
    return " ".join(key.export_public_key("openssh").decode().split()[:2])


def test_pinned_key_beats_known_hosts_and_unknown_needs_the_operator(tmp_path: Path) -> None:
    pinned, listed = _key(), _key()
    known = tmp_path / "known_hosts"
    known.write_text(f"[203.0.113.7]:22022 {listed}\n")
    box = Box(name="pro-a", host="203.0.113.7", port=22022, ssh_user="root")
    policy = policy_for(box, known)
    assert policy is not None and policy.source == "known_hosts_file"
    assert policy_for(Box(name="b", host="203.0.113.8", port=22, ssh_user="root"), known) is None
    box.host_key, box.host_key_source = pinned, "tofu"
    policy = policy_for(box, known)
    assert policy is not None and policy.source == "tofu"
    assert policy.trusted == [asyncssh.import_public_key(pinned).get_fingerprint()]
    box.host_key_source = "pending"  # seen, not confirmed: never used to connect
    assert policy_for(box, None) is None


def test_trust_refuses_to_replace_a_pinned_key_silently() -> None:
    old, new = _key(), _key()
    box = Box(name="pro-a", host="h", port=22, host_key=old, host_key_source="tofu")
    with pytest.raises(HostKeyChanged, match="pro-a --replace"):
        check_trust(box, new, replace=False)
    check_trust(box, new, replace=True)
    check_trust(Box(name="b", host="h", port=22, host_key=old, host_key_source="pending"), new, replace=False)


def test_journal_behind_state_db_is_refused_not_ingested(tmp_path: Path) -> None:
    store = Store(tmp_path / "state.db")
    store.boxes.add(Box(name="pro-a", host="h", port=22, ssh_user="root"))
    store.ingest.batch("pro-a", [{"seq": s, "t_ms": 1, "kind": "warning"} for s in range(1, 11)])
    link = BoxLink(store, "pro-a")
    with pytest.raises(JournalMismatch, match="ends at seq 3 but state.db committed up to seq 10"):
        link._check_journal(3)
    assert store.boxes.get("pro-a").status == "journal-mismatch"
    link._check_journal(12)  # a box ahead of us is the normal case


def test_parse_gpus() -> None:
    assert parse_gpus("0,1, 3") == [0, 1, 3] and parse_gpus(None) is None
    for bad in ("0,0", "-1", "a", ","):
        with pytest.raises(InputError):
            parse_gpus(bad)


async def test_channel_matches_ids_and_reports_refusals_and_closed_streams() -> None:
    async def agent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        import json

        line = json.loads(await reader.readline())
        writer.write(b'{"v":1,"id":"stale","ok":true,"result":{}}\n')  # an answer to someone else: skipped
        writer.write(json.dumps({"v": 1, "id": line["id"], "ok": True, "result": {"n": 1}}).encode() + b"\n")
        line = json.loads(await reader.readline())
        writer.write(
            json.dumps({"v": 1, "id": line["id"], "ok": False, "error": "no launch x"}).encode() + b"\n"
        )
        await reader.readline()
        writer.close()

    server = await asyncio.start_server(agent, "127.0.0.1", 0)
    reader, writer = await asyncio.open_connection("127.0.0.1", server.sockets[0].getsockname()[1])
    channel = AgentChannel(reader, writer)
    assert await channel.call("hello") == {"n": 1}
    with pytest.raises(AgentError, match="agent refused kill: no launch x"):
        await channel.call("kill", {"launch_id": "x"})
    with pytest.raises(TypeError, match="declares AckResult as the result of ack, not HelloResult"):
        await channel.call("ack", {"seq": 1}, answer=HelloResult)  # refused before anything is sent
    with pytest.raises(ChannelClosed):
        await channel.call("hello")
    channel.close()
    server.close()
