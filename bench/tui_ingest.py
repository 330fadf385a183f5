"""The console's redraw while a journal backlog arrives: ingest runs on the service's thread, not Textual's loop.

    python bench/tui_ingest.py [--hours 12] [--gpus 8] [--servers 4] [--samples 1000000] [--rounds 200]

Setup, all real: a state.db with ``--samples`` GPU samples (bench/tui.py's campaign of 8-GPU boxes; the box on
screen, box-3, serves ``--servers`` launches, each with its /metrics samples), the ``local`` box whose agent
home holds a journal backlog written with the agent's own Journal class (testbed/backlog.py, the events
bench/ingest.py measures: one ``--gpus`` sample plus one sample per server each second), and the console App
with its real ``ServiceActions`` supervising the fleet, so the backlog is pulled and committed exactly as in a
live console. It measures the Live view's redraw at 120x36 (worker load + draw, the figure bench/tui.py
reports) while the backlog ingests, against the peer measured in the same run: the same redraws with nothing
arriving. Redraws alternate between two kinds: the window moved one second since the last (every chart is
drawn again, as in a live console each second) and nothing moved (the panels' drawings are reused). Printed
as p50, p99 and max of each, with where a redraw's time goes (the read model's queries on the load worker,
the drawing, the wait for Textual's loop to take the result, the widgets' update), how late Textual's loop
ran a 1 ms sleep, and the garbage collector's pauses, idle and ingesting: one summary block for the README,
with the load average at the start and the end. No timing is asserted in the suite.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.tui import BOXES, GPUS, STEP_MS, build  # noqa: E402
from console.store import Store  # noqa: E402
from console.tui.app import ConsoleApp  # noqa: E402
from console.tui.views.live import LiveScreen  # noqa: E402
from testbed import backlog  # noqa: E402
from testbed import tui_fixture as F  # noqa: E402
from testbed.agent_box import stop_agent  # noqa: E402
from testbed.tui_pilot import text_of  # noqa: E402


def write_backlog(home: Path, hours: float, gpus: int, servers: int) -> tuple[int, int]:
    """The box's journal holds ``hours`` of samples the console has not seen; returns the seqs of the first and
    the last."""
    home.mkdir(parents=True, exist_ok=True)
    before = backlog.write_journal(home / "journal.db", [])
    last = backlog.write_journal(home / "journal.db", backlog.samples(int(hours * 3600), gpus, servers))
    return before + 1, last


SHOWN = "box-3"
"""The box on screen: 8 GPUs, serving ``--servers`` launches of bench/tui.py's campaign."""


def add_servers(db: Path, servers: int, samples: int) -> None:
    """Give the box on screen ``servers`` serving launches (bench/tui.py's build gives each box one), each
    sampled at 1 Hz over the same span as its GPUs."""
    start = F.NOW - (samples // (BOXES * GPUS) - 1) * STEP_MS
    with Store(db, clock=lambda: start) as store:
        with store.atomic() as conn:
            conn.table("launches").insert_all(
                [
                    {
                        "id": f"L-3-r{k}",
                        "box": SHOWN,
                        "arm": F.QWEN,
                        "replica": k,
                        "state": "serving",
                        "start_ms": start,
                        "ready_ms": start + 60_000,
                        "gpus": f"[{2 * k},{2 * k + 1}]",
                        "port": 8100 + k,
                    }
                    for k in range(1, servers)
                ]
            )
        for k in range(1, servers):
            F.insert_server_rows(store, F.server_rows(SHOWN, f"L-3-r{k}", start, F.NOW, STEP_MS, peak=5200.0))


PACE_S = 0.05
"""Between redraws: the screen is painted before the next begins (a live console redraws once a second)."""

Times = dict[str, list[float]]


class Spans:
    """Where each redraw's time goes: the view's load (queries, on the worker, under the read model's lock),
    prepare (charts drawn as text, on the worker) and show (widgets updated, on Textual's loop) are timed
    around the view's own methods; ``handoff`` is the rest of the redraw, mostly the wait between the worker's
    call_from_thread and Textual's loop running the show. Also: how late Textual's loop woke from each 1 ms
    sleep while the bench waited (``loop lag``), and every garbage-collector pause in the process (``gc``)."""

    def __init__(self) -> None:
        self.times: Times = defaultdict(list)
        self._this: dict[str, float] = {}
        self._gc_started = 0.0
        gc.callbacks.append(self._gc)

    def close(self) -> None:
        gc.callbacks.remove(self._gc)

    def _gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
        else:
            self.times[f"gc{info['generation']}"].append(time.perf_counter() - self._gc_started)

    def wrap(self, screen: LiveScreen) -> None:
        for name in ("load", "prepare", "show"):
            setattr(screen, name, self._timed(name, getattr(screen, name)))

    def _timed(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any) -> Any:
            t = time.perf_counter()
            try:
                return method(*args)
            finally:
                self._this[name] = time.perf_counter() - t

        return timed

    def start(self) -> None:
        self._this = {}

    def done(self, total: float) -> None:
        for name, seconds in self._this.items():
            self.times[name].append(seconds)
        self.times["handoff"].append(total - sum(self._this.values()))


async def redraw(app: ConsoleApp, spans: Spans) -> float:
    """One Live redraw as the view times it (worker load + draw), waited for alone: pilot.pause waits for the
    process's CPU to go idle too, which it never is while a backlog ingests beside it."""
    app.redraw_s.pop("live", None)
    spans.start()
    app.redraw_visible()
    while "live" not in app.redraw_s:
        t = time.perf_counter()
        await asyncio.sleep(0.001)
        spans.times["loop lag"].append(time.perf_counter() - t - 0.001)
    spans.done(app.redraw_s["live"])
    await asyncio.sleep(PACE_S)
    return app.redraw_s["live"]


async def redraws(
    db: Path, samples: int, rounds: int, backlog_seqs: tuple[int, int] | None
) -> tuple[Times, int]:
    """Live-view redraw times by kind (``moved``: the window moved a second; ``still``: nothing moved) and the
    spans of both (``Spans``); with ``backlog_seqs`` (first, last), measured from the first backlog event's
    commit to the last's (seqs found through the journal's (box, seq) key: a count of its rows took ~0.1 s a
    redraw; the link connects and starts the agent first, seconds in which nothing arrives), else
    for ``rounds`` of each kind and then, window moved each time, the view's two parts called alone: its
    read model ``queries`` and its ``drawing``."""
    from zoneinfo import ZoneInfo

    span_ms = samples // (BOXES * GPUS) * STEP_MS
    now = [F.NOW - min(3_600_000, span_ms // 2)]  # the window keeps samples up to its right edge as it moves
    app = ConsoleApp(
        db,
        clock=lambda: now[0],
        local_tz=ZoneInfo("UTC"),
        keys_path=Path("/nonexistent/keys.toml"),
        refresh_s=None,
        box=SHOWN,
        supervise=backlog_seqs is not None,
    )
    times: Times = {"moved": [], "still": []}
    spans = Spans()
    committed = ingested = 0
    first, last = backlog_seqs or (0, 0)
    async with app.run_test(size=(120, 36)) as pilot:
        # Not settle(): it waits for every worker, the link's connecting one too, while the backlog arrives.
        await pilot.pause()
        await pilot.press("2")
        while not (isinstance(app.screen, LiveScreen) and "live" in app.redraw_s):
            await asyncio.sleep(0.01)
        screen = app.screen
        spans.wrap(screen)
        deadline = time.monotonic() + 600
        with Store(db, read_only=True) as counter:
            while (committed < last) if backlog_seqs else len(times["still"]) < rounds:
                if backlog_seqs and committed < first:  # connecting: nothing arriving yet
                    spans.times.clear()
                    times = {"moved": [], "still": []}
                for kind in ("moved", "still"):
                    if kind == "moved":
                        now[0] += 1000
                    times[kind].append(await redraw(app, spans))
                if backlog_seqs:
                    committed = int(counter.scalar("SELECT max(seq) FROM journal WHERE box = 'local'") or 0)
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the backlog did not ingest in 600 s (seq {committed} of {last})")
            ingested = int(counter.scalar("SELECT count(*) FROM journal WHERE box = 'local'") or 0)
        spans.close()
        times.update(spans.times)
        for _ in range(0 if backlog_seqs else rounds):
            now[0] += 1000
            t = time.perf_counter()
            loaded = app.read(screen.load)
            t_read = time.perf_counter()
            screen.prepare(loaded)
            times.setdefault("queries", []).append(t_read - t)
            times.setdefault("drawing", []).append(time.perf_counter() - t_read)
        power, throughput = text_of(app, "#live-power"), text_of(app, "#live-throughput")
        if f"GPU{GPUS - 1} " not in power or "(+" not in throughput or "-10m" not in throughput:
            raise RuntimeError(f"the Live view did not chart {SHOWN}'s GPUs, servers and throughput")
    return times, ingested


def ms(times: list[float]) -> str:
    """``p50 / p99 / max ms (n)`` of redraw times in seconds."""
    if not times:
        return "     - /      - /      - ms (0)"
    p99 = statistics.quantiles(times, n=100, method="inclusive")[98] if len(times) > 1 else times[0]
    return f"{statistics.median(times) * 1000:6.1f} / {p99 * 1000:6.1f} / {max(times) * 1000:6.1f} ms ({len(times)})"


def loads() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hours", type=float, default=12.0)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--servers", type=int, default=4)
    parser.add_argument("--samples", type=int, default=1_000_000, help="GPU samples already in the state.db")
    parser.add_argument("--rounds", type=int, default=200, help="redraws of each kind with nothing arriving")
    parser.add_argument(
        "--keep", action="store_true", help="keep the state.db and the agent home (12 h: ~0.5 GB)"
    )
    args = parser.parse_args()
    load_start = loads()
    work = Path(tempfile.mkdtemp(prefix="bench-tui-ingest-"))
    db = work / "state.db"
    build(db, args.samples)
    add_servers(db, args.servers, args.samples)
    home = work / "local-agent"
    with Store(db) as store:
        store.boxes.ensure_local()
        store.boxes.update("local", agent_home=str(home))
    try:
        idle, _ = asyncio.run(redraws(db, args.samples, args.rounds, None))
        seqs = write_backlog(home, args.hours, args.gpus, args.servers)
        events = seqs[1] - seqs[0] + 1
        t = time.perf_counter()
        busy, ingested = asyncio.run(redraws(db, args.samples, args.rounds, seqs))
        took = time.perf_counter() - t
    finally:
        stop_agent(home)
        if not args.keep:
            shutil.rmtree(work)
    gc_ms = [sum(sum(run.get(f"gc{g}", [])) for g in range(3)) * 1000 for run in (idle, busy)]
    print(
        f"Live view redraw, {SHOWN} ({GPUS} GPUs, {args.servers} servers) at 120x36, {args.samples:,} GPU samples "
        f"in state.db; p50 / p99 / max (redraws)\n"
        f"  window moved 1 s, nothing arriving   {ms(idle['moved'])}\n"
        f"  window moved 1 s, backlog ingesting  {ms(busy['moved'])}\n"
        f"  nothing moved, nothing arriving      {ms(idle['still'])}\n"
        f"  nothing moved, backlog ingesting     {ms(busy['still'])}\n"
        f"  where a redraw's time goes, both kinds: idle | ingesting\n"
        + "".join(
            f"    {what:<34} {ms(idle.get(name, []))} | {ms(busy.get(name, []))}\n"
            for name, what in (
                ("load", "queries (load worker)"),
                ("prepare", "panels drawn as text (worker)"),
                ("handoff", "hand-off to Textual's loop"),
                ("show", "widgets updated (Textual's loop)"),
                ("loop lag", "Textual's loop, a 1 ms sleep late by"),
                ("gc0", "garbage collections, generation 0"),
                ("gc1", "generation 1"),
                ("gc2", "generation 2 (every object)"),
            )
        )
        + f"    garbage collection in all: {gc_ms[0]:.0f} ms idle, {gc_ms[1]:.0f} ms ingesting\n"
        f"  the view's two parts called alone (window moved, nothing arriving):\n"
        f"    read-model queries                 {ms(idle['queries'])}\n"
        f"    panels drawn as text               {ms(idle['drawing'])}\n"
        f"  ingesting / idle p50: moved {statistics.median(busy['moved']) / statistics.median(idle['moved']):.2f}x, "
        f"still {statistics.median(busy['still']) / statistics.median(idle['still']):.2f}x\n"
        f"backlog {args.hours:g} h of {args.gpus} GPUs + {args.servers} servers: {ingested:,} of {events:,} events "
        f"committed in {took:.1f} s beside the App\n"
        f"{os.cpu_count()} cores, load average {load_start} at the start, {loads()} at the end"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
