"""Benchmark: journal -> committed state.db rows over a real loopback SSH link, and command round trip.

Target (issue 5): a one-hour backlog of an 8-GPU box at 1 Hz (3,600 ``gpu_sample`` events of 8 GPUs, so
28,800 ``gpu_samples`` rows, plus one ``server_sample`` per second for 4 servers) ingested in under 2 s.
Setup, all real: an OpenSSH sshd test box on 127.0.0.1 (tests/support/sshd.py; needs root), the agent
pushed over SFTP and started by the fleet layer, the backlog written into the box's journal with the
agent's own Journal class. The peer measured in the same run is ``store.ingest.batch`` of the very same
events with no link at all, so the ratio shows what the wire (SSH + agent + JSON) costs.

Command round trip: ``link.command("launches")`` (stored, sent on its own channel, answered, stored) against
the peer of a bare ``hello`` on an already-open channel (no store, no channel set-up).

    python bench/ingest.py [--hours 1] [--gpus 8] [--servers 4] [--round-trips 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from console.fleet import BoxLink  # noqa: E402
from console.store import Store  # noqa: E402
from tests.support.fleet_fixtures import FAST, register  # noqa: E402
from tests.support.sshd import SshdFarm  # noqa: E402

T0 = 1_788_658_020_000
WRITER = """
import json, sys
from pathlib import Path
from agents.journal import Journal
j = Journal(Path(sys.argv[1]))
for line in sys.stdin:
    e = json.loads(line)
    kind = e.pop("kind")
    j.append(kind, **e)
"""


def backlog(hours: float, gpus: int, servers: int) -> list[dict]:
    """One sample per second: every GPU in one event, every server in its own event."""
    out = []
    for s in range(int(hours * 3600)):
        t = T0 + s * 1000
        out.append({"kind": "gpu_sample", "t_ms": t, "gpus": [
            {"gpu": g, "power_w": 580.0 + g, "power_limit_w": 600.0, "enforced_limit_w": 600.0, "max_limit_w": 600.0,
             "sm_clock_mhz": 2900.0, "util_pct": 99.0, "mem_used_mib": 90000.0, "mem_total_mib": 97887.0,
             "temp_c": 70.0} for g in range(gpus)]})  # fmt: skip
        for k in range(servers):
            out.append({"kind": "server_sample", "t_ms": t, "launch_id": f"bench-{k}", "gen_tok_per_s": 5161.0,
                        "prompt_tok_per_s": 100.0, "running": 812, "waiting": 212, "kv_usage": 0.71,
                        "prefix_hit_rate": 0.5, "gen_tokens_total": 1e6 + s, "prompt_tokens_total": 2e5 + s})  # fmt: skip
    return out


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hours", type=float, default=1.0)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--servers", type=int, default=4)
    ap.add_argument("--round-trips", type=int, default=200)
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-ingest-"))
    work.chmod(0o755)  # the box user must traverse to its home and authorized_keys
    farm = SshdFarm(work / "sshd")
    try:
        box = farm.start("bench", gpu_fixture=None)
        events = backlog(args.hours, args.gpus, args.servers)
        store = Store(work / "state.db")
        register(store, box)
        link = BoxLink(store, "bench", FAST)
        await link.connect()
        await link.sync()  # the agent's own start-up events, so the backlog is measured alone
        print(f"writing {len(events):,} events into the box journal ...", file=sys.stderr)
        writer = subprocess.run(
            ["/usr/bin/python3", "-c", WRITER, str(box.agent_home / "journal.db")],
            input="\n".join(json.dumps(e) for e in events), text=True, user=box.uid, group=box.gid,
            env={"PYTHONPATH": str(ROOT)}, check=True,
        )  # fmt: skip
        del writer
        before = store.ingest.cursor("bench")
        t = time.perf_counter()
        inserted = await link.sync()
        wire_s = time.perf_counter() - t
        rows = store.scalar("SELECT count(*) FROM gpu_samples") + store.scalar("SELECT count(*) FROM server_samples")
        assert inserted >= len(events), f"ingested {inserted} of {len(events)}"

        # Peer: the same events straight into a fresh store (no SSH, no agent, no JSON over the wire).
        peer_store = Store(work / "peer.db")
        register(peer_store, box)
        numbered = [{**e, "seq": before + i + 1, "v": 1} for i, e in enumerate(events)]
        t = time.perf_counter()
        for i in range(0, len(numbered), FAST.batch):
            peer_store.ingest.batch("bench", numbered[i : i + FAST.batch])
        peer_s = time.perf_counter() - t

        # Command round trip: stored command over its own channel vs a bare hello on an open channel.
        rtts = []
        for _ in range(args.round_trips):
            t = time.perf_counter()
            await link.command("launches", {})
            rtts.append((time.perf_counter() - t) * 1000)
        transport = link._transport
        assert transport is not None and link._home is not None
        channel = await transport.open_channel(link._home.socket)
        bare = []
        for _ in range(args.round_trips):
            t = time.perf_counter()
            await channel.call("hello")
            bare.append((time.perf_counter() - t) * 1000)
        channel.close()
        await link.close()

        result = {
            "events": len(events), "derived_rows": rows, "wire_s": round(wire_s, 3), "peer_store_only_s": round(peer_s, 3),
            "events_per_s": round(len(events) / wire_s), "wire_over_peer": round(wire_s / peer_s, 2),
            "target_s": 2.0, "meets_target": wire_s < 2.0,
            "command_rtt_ms_p50": round(statistics.median(rtts), 2),
            "command_rtt_ms_p99": round(sorted(rtts)[int(len(rtts) * 0.99) - 1], 2),
            "bare_hello_ms_p50": round(statistics.median(bare), 2),
            "command_over_bare": round(statistics.median(rtts) / statistics.median(bare), 2),
        }  # fmt: skip
        print(json.dumps(result, indent=2))
        return 0
    finally:
        farm.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
