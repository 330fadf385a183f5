"""Backlogs a box builds while the console is away: real-sized samples written into the box's journal with
the agent's own Journal class, as the box user (so the running agent keeps owning its files).

Shared by the journal tests and bench/ingest.py, so the suite and the benchmark measure the same events.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from testbed.sshd import SshBox

ROOT = Path(__file__).resolve().parent.parent
T0 = 1_788_658_020_000
_WRITER = """
import json, sys
from pathlib import Path
from agents.journal import Journal
j = Journal(Path(sys.argv[1]))
lines = iter(sys.stdin)
while True:
    chunk = [json.loads(line) for _, line in zip(range(2000), lines)]
    if not chunk:
        break
    with j.atomic():
        for e in chunk:
            j.append(e.pop("kind"), **e)
print(j.last_seq())
"""


def gpu(index: int, second: int) -> dict[str, Any]:
    """One GPU of a busy 8-GPU box as NVML reads it (agents/gpu.py nvml_gpu): every field, two decimals."""
    wobble = (second * 7 + index * 13) % 100 / 100
    return {
        "gpu": index,
        "power_w": 581.37 + index + wobble,
        "power_limit_w": 600.0,
        "enforced_limit_w": 600.0,
        "max_limit_w": 600.0,
        "sm_clock_mhz": 2842.0 + wobble,
        "util_pct": 99.0,
        "mem_used_mib": 90211.44,
        "mem_total_mib": 97887.0,
        "temp_c": 71.0 + wobble,
    }


def samples(seconds: int, gpus: int = 8, servers: int = 4, t0: int = T0) -> Iterator[dict[str, Any]]:
    """One sample a second: all GPUs in one gpu_sample event, each server in its own server_sample."""
    for s in range(seconds):
        t = t0 + s * 1000
        yield {"kind": "gpu_sample", "t_ms": t, "gpus": [gpu(g, s) for g in range(gpus)]}
        for k in range(servers):
            yield {
                "kind": "server_sample",
                "t_ms": t,
                "launch_id": f"qwen3.8-27b-nvfp4-b12x.5e0c81f2.r{k}",
                "gen_tok_per_s": 5161.25 + s % 50,
                "prompt_tok_per_s": 100.5,
                "running": 812.0,
                "waiting": 212.0,
                "kv_usage": 0.7134,
                "prefix_hit_rate": 0.5012,
                "gen_tokens_total": 1.0e6 + s * 5161.25,
                "prompt_tokens_total": 2.0e5 + s * 100.5,
            }


def write(box: SshBox, events: Iterable[dict[str, Any]]) -> int:
    """Append ``events`` to ``box``'s journal (its agent may be running); returns the journal's last seq."""
    return write_journal(box.agent_home / "journal.db", events, box.uid, box.gid)


def write_journal(
    journal: Path, events: Iterable[dict[str, Any]], uid: int | None = None, gid: int | None = None
) -> int:
    """Append ``events`` to the journal file, as ``uid``/``gid`` when given; returns its last seq.

    Streamed, so a twelve-hour backlog never sits in memory at once.
    """
    proc = subprocess.Popen(
        ["/usr/bin/python3", "-c", _WRITER, str(journal)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        user=uid,
        group=gid,
        env={"PYTHONPATH": str(ROOT)},
    )
    assert proc.stdin is not None and proc.stdout is not None
    with proc.stdin:
        for event in events:
            proc.stdin.write(json.dumps(event) + "\n")
    out = proc.stdout.read()
    if proc.wait(600) != 0:
        raise RuntimeError(f"the journal writer exited {proc.returncode}")
    return int(out.split()[-1])


_RAW = """
import json, sqlite3, sys
with sqlite3.connect(sys.argv[1], timeout=30) as db:
    for t_ms, kind, body in json.loads(sys.stdin.read()):
        db.execute("INSERT INTO events (t_ms, kind, body) VALUES (?, ?, ?)", (t_ms, kind, body))
"""


def write_raw(box: SshBox, rows: list[tuple[Any, str, str]]) -> None:
    """Insert (t_ms, kind, body) rows straight into the journal's events table: a damaged or foreign row."""
    subprocess.run(
        ["/usr/bin/python3", "-c", _RAW, str(box.agent_home / "journal.db")],
        input=json.dumps(rows),
        text=True,
        user=box.uid,
        group=box.gid,
        env={},
        check=True,
        timeout=60,
    )
