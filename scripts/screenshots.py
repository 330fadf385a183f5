"""Regenerate the README's screenshots: every view of the console on a fresh `campaign demo` state.db.

    python scripts/screenshots.py [--out docs/screenshots] [--size 140x42]

The database is built exactly as a newcomer's is (``campaign demo``, ops/demo.py) in a temporary folder,
then the console is opened on it at the README's size and each view is saved with Textual's own SVG
screenshot (``App.export_screenshot``), one file per view named after it (fleet.svg, live.svg, ...). The
console's clock is fixed just after the demo's record, so the same data gives the same pictures.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a file from a checkout: the console is the checkout's
    sys.path.insert(0, str(ROOT))

from console.cli import main as campaign  # noqa: E402  (after the path above)
from console.tui.app import VIEWS, ConsoleApp  # noqa: E402

CLOCK_MS = int(datetime(2026, 9, 6, 9, 0, tzinfo=UTC).timestamp() * 1000)
"""The morning after the demo's last record (ops/data/seed/history.toml): a fixed 'now' for the top bar."""
BOX = "seed-pro6000-400w"
"""The box the views open on: capped at 400 W of 600 (its power check), tripwired arm by arm."""
KEYS = {"results": ("c",), "curves": ("i",)}
"""Keys pressed on a view before its picture: the Results chart, and the Curves chart by the per-slot rate
(the write-up's points carry no TPOT to chart 1000/TPOT by)."""
DEFAULT_OUT = ROOT / "docs" / "screenshots"


def size_of(text: str) -> tuple[int, int]:
    """``140x42`` as (columns, rows); anything else is a one-line error."""
    try:
        columns, rows = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--size {text!r}: give COLUMNSxROWS, e.g. 140x42") from None
    if columns < 80 or rows < 24:
        raise argparse.ArgumentTypeError(f"--size {text!r}: the console needs at least 80x24")
    return columns, rows


async def _shoot(db: Path, size: tuple[int, int], out: Path) -> list[Path]:
    app = ConsoleApp(
        db,
        clock=lambda: CLOCK_MS,
        local_tz=ZoneInfo("UTC"),
        keys_path=Path("/nonexistent/campaign-console/keys.toml"),  # the default keys, whatever the user set
        refresh_s=None,
        box=BOX,
    )
    written = []
    async with app.run_test(size=size) as pilot:
        for number, view in enumerate(VIEWS, 1):
            for key in (str(number), *KEYS.get(view, ())):
                await pilot.press(key)
                for _ in range(3):  # the view's load runs on a worker, then draws; a chart redraws once sized
                    await pilot.pause()
                    await app.workers.wait_for_complete()
                await pilot.pause()
            path = out / f"{view}.svg"
            path.write_text(app.export_screenshot(title=f"campaign: {view}"), encoding="utf-8")
            written.append(path)
    return written


def shoot(out: Path, size: tuple[int, int] = (140, 42)) -> list[Path]:
    """Build the demo in a temporary folder and write one SVG per view into ``out``; returns the files."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="campaign-screenshots-") as tmp:
        db = Path(tmp) / "state.db"
        with contextlib.redirect_stdout(sys.stderr):  # stdout lists the files written, nothing else
            built = campaign(["--db", str(db), "demo"])
        if built != 0:
            raise SystemExit(f"campaign demo into {db} failed; its error is above")
        return asyncio.run(_shoot(db, size, out))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help="folder for the SVGs (default docs/screenshots)"
    )
    parser.add_argument(
        "--size", type=size_of, default=(140, 42), help="terminal size, COLUMNSxROWS (default 140x42)"
    )
    args = parser.parse_args(argv)
    for path in shoot(args.out, args.size):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
