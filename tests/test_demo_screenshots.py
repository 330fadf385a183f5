"""scripts/screenshots.py regenerates the README's screenshots: one SVG per view of a fresh demo, and the README
shows each one it writes."""

from __future__ import annotations

import html
import re
import subprocess
import sys
from pathlib import Path

from console.tui.app import VIEWS

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "screenshots.py"


def test_the_script_writes_one_svg_per_view(tmp_path: Path) -> None:
    out = tmp_path / "shots"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(out), "--size", "120x36"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,  # run from elsewhere: the script finds the checkout itself
    )
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(f"{view}.svg" for view in VIEWS)
    for view in VIEWS:
        svg = (out / f"{view}.svg").read_text()
        assert svg.startswith("<svg") and f"campaign: {view}" in html.unescape(svg).replace("\xa0", " ")
    assert done.stdout.split() == [str(out / f"{view}.svg") for view in VIEWS]


def test_a_bad_size_is_one_line_saying_what_to_give(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(tmp_path), "--size", "huge"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "--size 'huge': give COLUMNSxROWS, e.g. 140x42" in done.stderr
    assert not list(tmp_path.iterdir())


def test_the_readme_shows_every_screenshot_the_script_writes() -> None:
    readme = (ROOT / "README.md").read_text()
    shown = re.findall(r"\(docs/screenshots/(\w+)\.svg\)", readme)
    assert shown == list(VIEWS)
    for view in shown:
        assert (ROOT / "docs" / "screenshots" / f"{view}.svg").is_file()
