"""The suite and the benchmarks share one support package, ``testbed``: tests never import ``bench`` and the
benchmarks never import ``tests``. Every import counts: at the top, inside a function, under TYPE_CHECKING."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = {"tests": "bench", "bench": "tests", "testbed": ("tests", "bench")}
"""Each tree and what it may not import (the support package imports neither)."""


def imported(path: Path) -> list[tuple[int, str]]:
    """Every absolute module ``path`` imports, with its line (``from . import x`` stays inside its own tree)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.append((node.lineno, node.module))
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def crossings(root: Path = ROOT) -> list[str]:
    bad = []
    for tree, forbidden in FORBIDDEN.items():
        for path in sorted((root / tree).rglob("*.py")):
            for line, module in imported(path):
                if module.split(".")[0] in forbidden:
                    bad.append(f"{path.relative_to(root)}:{line} imports {module}")
    return bad


def test_tests_and_benchmarks_meet_only_in_testbed() -> None:
    assert (ROOT / "testbed" / "__init__.py").is_file()
    assert crossings() == []


def test_the_walk_sees_every_kind_of_import(tmp_path: Path) -> None:
    for tree in FORBIDDEN:
        (tmp_path / tree).mkdir()
    (tmp_path / "tests" / "test_x.py").write_text(
        "def f() -> None:\n    from bench.zero_server import main\n"
    )
    (tmp_path / "bench" / "x.py").write_text("import tests.support.listening\nfrom tests import support\n")
    (tmp_path / "testbed" / "y.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import bench\n"
    )
    (tmp_path / "testbed" / "ok.py").write_text("from . import y\nimport testbed.y\nimport console\n")
    assert crossings(tmp_path) == [
        "tests/test_x.py:2 imports bench.zero_server",
        "tests/test_x.py:2 imports bench.zero_server.main",
        "bench/x.py:1 imports tests.support.listening",
        "bench/x.py:2 imports tests",
        "bench/x.py:2 imports tests.support",
        "testbed/y.py:3 imports bench",
    ]
