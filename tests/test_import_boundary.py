"""The core imports without Textual, so the CLI, scripts and the agent never pay for (or need) the UI."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _modules(package: str) -> list[str]:
    names = [package]
    for info in pkgutil.walk_packages([str(ROOT / package)], prefix=f"{package}."):
        if info.name == "console.tui" or info.name.startswith("console.tui."):
            continue
        if info.name.endswith("__main__"):
            continue
        names.append(info.name)
    return names


def test_core_imports_without_textual() -> None:
    modules = _modules("console") + _modules("agents") + _modules("ops")
    assert "console.store" in modules and "console.cli" in modules
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "bad = sorted(m for m in sys.modules if m == 'textual' or m.startswith('textual.'))\n"
        "assert not bad, bad\n"
        "print('ok', len(%r))\n" % (modules,)
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ok")
