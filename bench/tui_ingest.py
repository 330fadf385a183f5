"""The console's redraw while a journal backlog arrives: ingest runs on the service's thread, not Textual's loop.

    python bench/tui_ingest.py [--hours 1] [--gpus 8] [--servers 4] [--samples 1000000] [--rounds 20]

Setup, all real: a state.db with ``--samples`` GPU samples (bench/tui.py's campaign), the ``local`` box whose
agent home holds a journal backlog written with the agent's own Journal class (testbed/backlog.py, the events
bench/ingest.py measures: one 8-GPU sample plus one sample per server each second), and the console App with its real ``ServiceActions``
supervising the fleet, so the backlog is pulled and committed exactly as in a live console. It measures the
Live view's redraw (worker load + draw, the figure bench/tui.py reports) while the backlog ingests, against the
peer measured in the same run: the same redraw with nothing arriving. Printed as medians and their ratio; no
timing is asserted anywhere in the suite.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.tui import build  # noqa: E402
from console.store import Store  # noqa: E402
from testbed import backlog  # noqa: E402
from testbed import tui_fixture as F  # noqa: E402
from testbed.agent_box import stop_agent  # noqa: E402
from testbed.tui_pilot import settle  # noqa: E402


def write_backlog(home: Path, hours: float, gpus: int, servers: int) -> int:
    """The box's journal holds ``hours`` of samples the console has not seen; returns how many events."""
    home.mkdir(parents=True, exist_ok=True)
    before = backlog.write_journal(home / "journal.db", [])
    return (
        backlog.write_journal(home / "journal.db", backlog.samples(int(hours * 3600), gpus, servers)) - before
    )


async def redraws(db: Path, rounds: int, until_ingested: int | None) -> tuple[list[float], int]:
    """Live-view redraw times; with ``until_ingested``, keep measuring until that many events are committed."""
    from zoneinfo import ZoneInfo

    from console.tui.app import ConsoleApp

    app = ConsoleApp(
        db,
        clock=lambda: F.NOW,
        local_tz=ZoneInfo("UTC"),
        keys_path=Path("/nonexistent/keys.toml"),
        refresh_s=None,
        box="box-3",
        supervise=until_ingested is not None,
    )
    times: list[float] = []
    ingested = 0
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        await pilot.press("2")
        await settle(pilot)
        deadline = time.monotonic() + 600
        while len(times) < rounds or (until_ingested is not None and ingested < until_ingested):
            app.redraw_visible()
            await settle(pilot)
            times.append(app.redraw_s["live"])
            if until_ingested is not None:
                with Store(db, read_only=True) as store:
                    ingested = int(store.scalar("SELECT count(*) FROM journal WHERE box = 'local'") or 0)
            if time.monotonic() > deadline:
                raise RuntimeError(f"the backlog did not ingest in 600 s ({ingested} of {until_ingested})")
    return times, ingested


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hours", type=float, default=1.0)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--servers", type=int, default=4)
    parser.add_argument("--samples", type=int, default=1_000_000, help="GPU samples already in the state.db")
    parser.add_argument("--rounds", type=int, default=20, help="redraws at least, in each phase")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-tui-ingest-"))
    db = work / "state.db"
    build(db, args.samples)
    home = work / "local-agent"
    with Store(db) as store:
        store.boxes.ensure_local()
        store.boxes.update("local", agent_home=str(home))
    try:
        idle, _ = asyncio.run(redraws(db, args.rounds, None))
        events = write_backlog(home, args.hours, args.gpus, args.servers)
        t = time.perf_counter()
        busy, ingested = asyncio.run(redraws(db, args.rounds, events))
        took = time.perf_counter() - t
    finally:
        stop_agent(home)
    idle_ms, busy_ms = statistics.median(idle) * 1000, statistics.median(busy) * 1000
    worst = max(busy) * 1000
    print(
        json.dumps(
            {
                "backlog_events": events,
                "ingested_events": ingested,
                "ingest_with_console_s": round(took, 1),
                "redraws_during_ingest": len(busy),
                "redraw_ms_idle_p50": round(idle_ms, 1),
                "redraw_ms_during_ingest_p50": round(busy_ms, 1),
                "redraw_ms_during_ingest_max": round(worst, 1),
                "during_over_idle": round(busy_ms / idle_ms, 2),
                "cpu_cores": os.cpu_count(),
                "load_avg_1m": round(os.getloadavg()[0], 2),
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
