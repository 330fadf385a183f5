"""Benchmark: journal -> committed state.db rows over a real loopback SSH link, and command round trip.

Backlogs: the time a box was left alone, at 1 Hz: one ``gpu_sample`` event for all 8 GPUs (every field
NVML reads, ~1.5 kB an event) plus one ``server_sample`` per server (4), i.e. 18,000 events an hour.
Default: a one-hour and a twelve-hour backlog (216,000 events, 518,400 derived rows). Batches are bounded
in bytes (LinkSettings.batch_bytes): a batch of full 8-GPU samples bounded only by count was ~3 MiB and
never got through the SSH channel. The result names the load on the machine: the figures mean little
without it.

Setup, all real: an OpenSSH sshd test box on 127.0.0.1 (testbed/sshd.py; needs root), the agent
pushed over SFTP and started by the fleet layer, the backlog written into the box's journal with the
agent's own Journal class (testbed/backlog.py, as the suite does). The peer measured in the same
run is ``store.ingest.batch`` of the very same journal rows with no link at all, already read into events
and their texts (``row_event``), so the ratio shows what the wire costs: the agent reading its journal, SSH,
the reply decoded and each body parsed on arrival.

Command round trip: ``link.command("launches")`` (stored, sent on its own channel, answered, stored) against
the peer of a bare ``hello`` on an already-open channel (no store, no channel set-up).

    python bench/ingest.py [--hours 1 12] [--gpus 8] [--servers 4] [--round-trips 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agents.protocol import row_event  # noqa: E402
from console.fleet import BoxLink  # noqa: E402
from console.store import Store  # noqa: E402
from testbed import backlog  # noqa: E402
from testbed.fleet_fixtures import FAST, register  # noqa: E402
from testbed.sshd import SshBox, SshdFarm  # noqa: E402


def journal_rows(events: Iterable[dict[str, Any]], before: int) -> Iterator[list[Any]]:
    """The events as the box journal holds them and a ``rows`` reply carries them: [seq, t_ms, kind, body]."""
    for seq, event in enumerate(events, before + 1):
        body = {k: v for k, v in event.items() if k not in ("kind", "t_ms")}
        yield [seq, event["t_ms"], event["kind"], json.dumps(body, separators=(",", ":"))]


def wire_bytes(event: dict[str, Any]) -> int:
    """An event's size as the agent sends it (compact JSON with seq, t_ms and kind)."""
    return len(json.dumps({**event, "seq": 10**6}, separators=(",", ":")))


async def one_backlog(box: SshBox, work: Path, hours: float, gpus: int, servers: int) -> dict[str, Any]:
    seconds = int(hours * 3600)
    store = Store(work / f"state-{hours:g}h.db")
    register(store, box)
    link = BoxLink(store, box.name, FAST)
    await link.connect()
    await link.sync()  # what the box holds already, so the backlog is measured alone
    before = link.box_last_seq
    t = time.perf_counter()
    last = backlog.write(box, backlog.samples(seconds, gpus, servers))
    write_s = time.perf_counter() - t
    t = time.perf_counter()
    inserted = await link.sync()
    wire_s = time.perf_counter() - t
    await link.detach()  # the next backlog is held for its own database only
    await link.close()
    events = last - before
    assert inserted >= events, f"ingested {inserted} of {events}"
    rows = store.scalar("SELECT count(*) FROM gpu_samples") + store.scalar(
        "SELECT count(*) FROM server_samples"
    )
    store.close()

    # Peer: the same journal rows, read into events and texts before the clock starts (row_event, as the link
    # does on arrival), straight into a fresh store: no SSH, no agent, no reply to decode, no body to parse.
    peer = Store(work / f"peer-{hours:g}h.db")
    register(peer, box)
    read = [row_event(row) for row in journal_rows(backlog.samples(seconds, gpus, servers), before)]
    t = time.perf_counter()
    for start in range(0, len(read), FAST.batch):
        chunk = read[start : start + FAST.batch]
        peer.ingest.batch(box.name, [e for e, _ in chunk], texts=[text for _, text in chunk])
    peer_s = time.perf_counter() - t
    peer.close()
    del read
    return {
        "hours": hours,
        "events": events,
        "derived_rows": rows,
        "journal_write_s": round(write_s, 2),
        "wire_s": round(wire_s, 2),
        "events_per_s": round(events / wire_s),
        "peer_store_only_s": round(peer_s, 2),
        "wire_over_peer": round(wire_s / peer_s, 2),
    }


async def round_trips(box: SshBox, work: Path, n: int) -> dict[str, Any]:
    store = Store(work / "commands.db")
    register(store, box)
    link = BoxLink(store, box.name, FAST)
    await link.connect()
    rtts = []
    for _ in range(n):
        t = time.perf_counter()
        await link.command("launches", {})
        rtts.append((time.perf_counter() - t) * 1000)
    transport = link._transport
    assert transport is not None and link._home is not None
    channel = await transport.open_channel(link._home.socket)
    bare = []
    for _ in range(n):
        t = time.perf_counter()
        await channel.call("hello")
        bare.append((time.perf_counter() - t) * 1000)
    channel.close()
    await link.close()
    store.close()
    return {
        "command_rtt_ms_p50": round(statistics.median(rtts), 2),
        "command_rtt_ms_p99": round(sorted(rtts)[int(len(rtts) * 0.99) - 1], 2),
        "bare_hello_ms_p50": round(statistics.median(bare), 2),
        "command_over_bare": round(statistics.median(rtts) / statistics.median(bare), 2),
    }


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hours", type=float, nargs="+", default=[1.0, 12.0])
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--servers", type=int, default=4)
    ap.add_argument("--round-trips", type=int, default=200)
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-ingest-"))
    work.chmod(0o755)  # the box user must traverse to its home and authorized_keys
    farm = SshdFarm(work / "sshd")
    try:
        box = farm.start("bench", gpu_fixture=None)
        first = list(islice(backlog.samples(1, args.gpus, args.servers), 1 + args.servers))
        hour = list(backlog.samples(3600, args.gpus, args.servers))
        result: dict[str, Any] = {
            "load_avg_1m_at_start": round(os.getloadavg()[0], 2),
            "cpus": os.cpu_count(),
            "gpu_sample_bytes": wire_bytes(first[0]),
            "server_sample_bytes": wire_bytes(first[1]) if args.servers else None,
            "mean_event_bytes": round(sum(map(wire_bytes, hour)) / len(hour)),
            "batch_bytes": FAST.batch_bytes,
            "batch_events": FAST.batch,
        }
        del hour
        for hours in args.hours:
            print(f"{hours:g} h backlog ...", file=sys.stderr)
            result[f"backlog_{hours:g}h"] = await one_backlog(box, work, hours, args.gpus, args.servers)
        result.update(await round_trips(box, work, args.round_trips))
        result["load_avg_1m_at_end"] = round(os.getloadavg()[0], 2)
        print(json.dumps(result, indent=2))
        return 0
    finally:
        farm.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
