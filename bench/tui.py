"""Console redraw and browse start-up against a state.db holding millions of samples.

    python bench/tui.py [--boxes 2] [--gpus 8] [--days 30] [--hz 1] [--db PATH] [--keep]

Builds (or reuses, with --db) a campaign of --boxes x --gpus GPUs sampled at --hz for --days plus one serving
launch per box (default issue 34's 16 GPUs x 30 days at 1 Hz, ~41 M GPU samples), written with one
executemany an hour of ticks and the per-minute rollups (schema V27) computed in SQL after the bulk load,
on top of ``campaign demo`` (the write-up's arms, results, sweeps, curves, quality and economics, so every
view has its rows), then measures:

- redraw: the visible Live view reloading (queries + drawing, on the App's worker path) at 120x36,
  for each chart window (the zoom), then every other view, against a peer in the same run: the same
  throughput chart computed by fetching every raw sample of the window into Python (what downsampling in
  SQL avoids);
- ``campaign report`` of the whole campaign, against the CLI's own start-up (``campaign --version``);
- browse first screen: `campaign browse DB` in a fresh process until the Fleet table is drawn, against a
  peer in the same run: a fresh process that only imports the console and Textual and exits.

Numbers are printed as measured on this machine and as ratios against their peers (the suite has no timed
assertions in the test suite).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from console.readmodel import WINDOWS_MS  # noqa: E402
from console.store import Box, Store  # noqa: E402
from console.store.rollups import rebuild_gpu_rollup  # noqa: E402
from console.tui.keymap import SPECS  # noqa: E402
from testbed import tui_fixture as F  # noqa: E402
from testbed.tui_pilot import settle  # noqa: E402


def progress(done: int, total: int, what: str) -> None:
    width = 30
    filled = int(width * done / max(1, total))
    sys.stderr.write(f"\r{what} [{'#' * filled}{'.' * (width - filled)}] {done:,}/{total:,}")
    if done >= total:
        sys.stderr.write("\n")
    sys.stderr.flush()


BOXES, GPUS = 8, 8
STEP_MS = 1000
"""The shape bench/tui_ingest.py builds (``build``'s defaults)."""


def build(path: Path, samples: int, boxes: int = BOXES, gpus: int = GPUS, step_ms: int = STEP_MS) -> None:
    """``boxes`` x ``gpus`` sampled every ``step_ms`` until ``samples`` GPU samples exist, ending at the
    fixture's NOW; the rollups are computed in SQL after the bulk load."""
    ticks = samples // (boxes * gpus)
    start = F.NOW - (ticks - 1) * step_ms
    chunk = max(1, 3_600_000 // step_ms)  # one hour of ticks per transaction
    subprocess.run(
        [sys.executable, "-m", "console", "--db", str(path), "demo"],
        check=True,
        cwd=ROOT,
        capture_output=True,
    )
    with Store(path, clock=lambda: start) as store:
        for b in range(boxes):
            store.boxes.add(
                Box(
                    name=f"box-{b}",
                    status="up",
                    tz="UTC",
                    gpu_summary=f"{gpus}x H200 141GB",
                    price_per_hour=2.5 + b,
                )
            )
        with store.atomic() as db:
            db.table("launches").insert_all(
                [
                    {
                        "id": f"L-{b}",
                        "box": f"box-{b}",
                        "arm": F.QWEN,
                        "replica": 0,
                        "state": "serving",
                        "start_ms": start,
                        "ready_ms": start + 60_000,
                        "gpus": json.dumps(list(range(gpus))),
                        "port": 8100,
                    }
                    for b in range(boxes)
                ]
            )
        total = ticks * boxes
        done = 0
        for t0 in range(start, F.NOW + 1, chunk * step_ms):
            t1 = min(F.NOW, t0 + (chunk - 1) * step_ms)
            for b in range(boxes):
                F.insert_gpu_rows(
                    store,
                    F.gpu_rows(
                        f"box-{b}", gpus, t0, t1, step_ms, capped=[b % gpus], max_w=700.0, cap_w=450.0
                    ),
                )
                F.insert_server_rows(store, F.server_rows(f"box-{b}", f"L-{b}", t0, t1, step_ms, peak=5200.0))
                done += (t1 - t0) // step_ms + 1
            progress(done, total, "writing samples")
        with store.atomic() as db:
            rebuild_gpu_rollup(db.conn)
        store.db.execute("ANALYZE")


async def measure_redraw(path: Path, rounds: int) -> dict[str, list[float]]:
    from zoneinfo import ZoneInfo

    from console.tui.app import ConsoleApp

    app = ConsoleApp(
        path,
        clock=lambda: F.NOW,
        local_tz=ZoneInfo("UTC"),
        actions=F.FixedActions(),
        keys_path=Path("/nonexistent/keys.toml"),
        refresh_s=None,
        box="box-0",
    )
    out: dict[str, list[float]] = {}
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        await pilot.press("2")
        await settle(pilot)
        for window in WINDOWS_MS:
            while app.model.window_ms != window:
                app.model.cycle_window()
            times = []
            for _ in range(rounds):
                app.redraw_visible()
                await settle(pilot)
                times.append(app.redraw_s["live"])
            out[f"live {window // 60_000}m"] = times
        await pilot.press("1")
        await settle(pilot)
        times = []
        for _ in range(rounds):
            app.redraw_visible()
            await settle(pilot)
            times.append(app.redraw_s["fleet"])
        out["fleet"] = times
        for view, key in OTHER_VIEWS:
            await pilot.press(key)
            await settle(pilot)
            times = []
            for _ in range(rounds):
                app.redraw_visible()
                await settle(pilot)
                times.append(app.redraw_s[view])
            out[view] = times
    return out


OTHER_VIEWS = tuple(
    (s.id.removeprefix("view."), s.keys)
    for s in SPECS
    if s.id.startswith("view.") and s.id not in ("view.fleet", "view.live")
)
"""The views after Fleet and Live, with their number keys (console/tui/keymap.py)."""


def timed(command: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(command, check=True, cwd=ROOT, capture_output=True)
    return time.perf_counter() - t


def measure_report(db: Path, rounds: int) -> tuple[float, float]:
    """``campaign report`` of ``db`` to a file and the CLI's start-up, medians of ``rounds`` fresh processes."""
    out = db.with_name("RESUME.md")
    report = [
        timed([sys.executable, "-m", "console", "--db", str(db), "report", "-o", str(out)])
        for _ in range(rounds)
    ]
    start = [timed([sys.executable, "-m", "console", "--version"]) for _ in range(rounds)]
    out.unlink()
    return statistics.median(report), statistics.median(start)


def sql_chart(path: Path, window_ms: int, buckets: int) -> float:
    """The chart as the console computes it: buckets summed in SQL."""
    from console.readmodel.queries import throughput

    with Store(path, read_only=True) as store:
        t = time.perf_counter()
        throughput(store, "box-0", F.NOW - window_ms, F.NOW, buckets)
        return time.perf_counter() - t


def naive_chart(path: Path, window_ms: int, buckets: int) -> float:
    """The peer: every raw sample of the window fetched into Python and bucketed there."""
    with Store(path, read_only=True) as store:
        t = time.perf_counter()
        rows = store.db.execute(
            "SELECT launch_id, t_ms, gen_tok_per_s, prompt_tok_per_s FROM server_samples "
            "WHERE box = ? AND t_ms > ? AND t_ms <= ?",
            ["box-0", F.NOW - window_ms, F.NOW],
        ).fetchall()
        sums: dict[int, list[float]] = {}
        for _, t_ms, g, _p in rows:
            sums.setdefault((t_ms - F.NOW + window_ms) * buckets // window_ms, []).append(g)
        _ = [statistics.fmean(v) for v in sums.values()]
        return time.perf_counter() - t


def gpu_chart(path: Path, window_ms: int, buckets: int, *, raw: bool) -> float:
    """Every GPU's chart of box-0 as Live reads it (``gpu_history``: rollup rows for wide windows) or, with
    ``raw``, the peer: the same averages over every raw sample of the window."""
    from console.readmodel.queries import _bucketed, _fetch, gpu_history

    with Store(path, read_only=True) as store:
        gpus = [r[0] for r in store.db.execute("SELECT DISTINCT gpu FROM gpu_samples WHERE box = 'box-0'")]
        span = (F.NOW - window_ms, F.NOW, buckets)
        t = time.perf_counter()
        if not raw:
            gpu_history(store, "box-0", gpus, *span)
        for gpu in gpus if raw else ():
            columns = ("power_w", "enforced_limit_w", "sm_clock_mhz")
            _fetch(
                store,
                _bucketed(
                    "gpu_samples",
                    "box = :box AND gpu = :gpu",
                    {"box": "box-0", "gpu": gpu},
                    columns,
                    span,
                    window_ms,
                    1,
                ),
            )
        return time.perf_counter() - t


PEER_SCRIPT = "import console.tui.app; print('READY')"


def first_screen(command: list[str], marker: str, timeout: float = 60.0) -> float:
    """Seconds from spawning ``command`` in a fresh 120x36 tmux terminal until ``marker`` is on screen.

    The pane is kept open after a command that exits (the peers), so what it printed can be read.
    """
    name = f"bench-tui-{os.getpid()}-{time.monotonic_ns()}"
    env = {**os.environ, "CAMPAIGN_KEYS": "/nonexistent/keys.toml"}
    t = time.perf_counter()
    subprocess.run(
        [
            "tmux",
            "new-session",
            "-d",
            "-s",
            name,
            "-x",
            "120",
            "-y",
            "36",
            shlex.join(command) + "; sleep 60",
        ],
        check=True,
        cwd=ROOT,
        env=env,
    )
    try:
        while time.perf_counter() - t < timeout:
            screen = subprocess.run(
                ["tmux", "capture-pane", "-p", "-t", name], capture_output=True, text=True
            )
            if marker in screen.stdout:
                return time.perf_counter() - t
            time.sleep(0.01)
        raise RuntimeError(f"{marker!r} did not appear within {timeout} s")
    finally:
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)


def measure_first_screens(db: Path) -> tuple[list[float], list[float], list[float]]:
    browse = [
        first_screen([sys.executable, "-m", "console", "browse", str(db)], "Fleet | BROWSE") for _ in range(3)
    ]
    peer = [first_screen([sys.executable, "-c", PEER_SCRIPT], "READY") for _ in range(3)]
    cli = [first_screen([sys.executable, "-m", "console", "--version"], "campaign-console") for _ in range(3)]
    return browse, peer, cli


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--boxes", type=int, default=2, help="boxes in the built fleet (default 2)")
    parser.add_argument("--gpus", type=int, default=8, help="GPUs a box (default 8)")
    parser.add_argument("--days", type=float, default=30.0, help="days of samples (default 30)")
    parser.add_argument("--hz", type=float, default=1.0, help="samples a second per GPU (default 1)")
    parser.add_argument("--db", type=Path, help="reuse (or create) this state.db instead of a temporary one")
    parser.add_argument("--keep", action="store_true", help="keep the temporary state.db")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    tmp = None
    if args.db is None:
        tmp = Path(tempfile.mkdtemp(prefix="bench-tui-"))
        args.db = tmp / "state.db"
    if not args.db.exists():
        t = time.perf_counter()
        step_ms = max(1, round(1000 / args.hz))
        samples = int(args.days * 86_400_000 // step_ms) * args.boxes * args.gpus
        build(args.db, samples, args.boxes, args.gpus, step_ms)
        print(f"built {args.db} in {time.perf_counter() - t:.0f} s")
    with Store(args.db, read_only=True) as store:
        n = store.scalar("SELECT count(*) FROM gpu_samples")
        m = store.scalar("SELECT count(*) FROM server_samples")
    size = args.db.stat().st_size / 2**20
    print(
        f"state.db: {n:,} GPU samples, {m:,} server samples, {size:,.0f} MiB, "
        f"{args.db.stat().st_size / max(1, n + m):.0f} bytes a sample (rollups and indexes included)"
    )

    redraw = asyncio.run(measure_redraw(args.db, args.rounds))
    print(f"\nredraw of the visible view at 120x36 (worker load + draw), median of {args.rounds}:")
    for name, times in redraw.items():
        print(f"  {name:18} {statistics.median(times) * 1000:7.1f} ms")
    print("\nthroughput chart alone (236 buckets): SQL-bucketed vs the peer fetching raw samples into Python")
    for window in WINDOWS_MS:
        ours = statistics.median(sql_chart(args.db, window, 236) for _ in range(args.rounds))
        peer = statistics.median(naive_chart(args.db, window, 236) for _ in range(args.rounds))
        print(
            f"  window {window // 60_000:5}m  sql {ours * 1000:7.1f} ms  peer {peer * 1000:7.1f} ms  "
            f"peer/sql {peer / ours:5.1f}x"
        )

    print(
        "\nGPU charts alone (every GPU of box-0, 236 buckets): rollup/probe path vs the peer averaging raw rows"
    )
    for window in WINDOWS_MS:
        ours = statistics.median(gpu_chart(args.db, window, 236, raw=False) for _ in range(args.rounds))
        peer = statistics.median(gpu_chart(args.db, window, 236, raw=True) for _ in range(args.rounds))
        print(
            f"  window {window // 60_000:5}m  ours {ours * 1000:7.1f} ms  raw {peer * 1000:7.1f} ms  "
            f"raw/ours {peer / ours:5.1f}x"
        )

    report, start = measure_report(args.db, 3)
    print(f"\n`campaign report -o FILE` of the whole campaign: {report:.2f} s (median of 3)")
    print(
        f"  peer: `campaign --version` (the CLI's own start-up): {start:.2f} s; report / peer {report / start:.2f}x"
    )

    if shutil.which("tmux"):
        # A session held open for the whole measurement keeps one tmux server up between the runs.
        holder = f"bench-tui-holder-{os.getpid()}"
        subprocess.run(["tmux", "new-session", "-d", "-s", holder, "sleep 600"], check=True)
        try:
            browse, peers, clis = measure_first_screens(args.db)
        finally:
            subprocess.run(["tmux", "kill-session", "-t", holder], capture_output=True)
        b, p, c = statistics.median(browse), statistics.median(peers), statistics.median(clis)
        print(f"\n`campaign browse DB` in tmux until the Fleet table is on screen: {b:.2f} s (median of 3)")
        print(f"  peer 1: a fresh process importing Textual and the console, until it prints: {p:.2f} s")
        print(f"  peer 2: `campaign --version` (the CLI's own start-up, no subcommand imported): {c:.2f} s")
        print(
            f"  browse / peer 1 = {b / p:.2f}x; the screen itself costs about {max(0.0, b - max(p, c)):.2f} s"
        )
    else:
        print("\nbrowse first screen: not measured (tmux is not installed)")
    if tmp and not args.keep:
        for f in tmp.iterdir():
            f.unlink()
        tmp.rmdir()
    return 0


if __name__ == "__main__":
    sys.exit(main())
