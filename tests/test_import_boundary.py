"""The core imports without Textual, so the CLI, scripts and the agent never pay for (or need) the UI; no
two modules import each other, even only for their annotations; and every package imports on its own."""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("console", "agents", "ops")


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


# -- no circles -------------------------------------------------------------------------------------------
# Every import counts: at the top, inside a function, and under ``if TYPE_CHECKING`` (a type-only import still
# ties a lower module to a higher one). ``import a.b`` runs ``a/__init__.py`` too, but that is the package's
# face, not an arrow: the contracts in pyproject.toml read the graph the same way.

Edges = dict[str, dict[str, int]]
"""module -> {module it imports: the line of the first such import}."""


def _source_modules(root: Path, packages: tuple[str, ...]) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def import_graph(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> Edges:
    """The modules of ``packages`` under ``root`` and which of them each imports, read with ``ast``."""
    modules = _source_modules(root, packages)

    def known(name: str) -> str | None:
        """The module of this tree that ``name`` lands in (``a.b.Thing`` -> ``a.b``), or None (stdlib, PyPI)."""
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: Edges = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = graph.setdefault(name, {})
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # relative: from the package, one level up per dot after the first
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    source = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    source = node.module or ""
                # ``from a import b`` imports the module a.b where there is one, else a name of a
                targets = [
                    f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source
                    for alias in node.names
                ]
            else:
                continue
            for target in targets:
                module = known(target)
                if module is not None and module != name:
                    edges.setdefault(module, node.lineno)
    return graph


def cycles(graph: Edges) -> list[tuple[list[str], list[str]]]:
    """Each group of modules that reach one another (Tarjan), with one circle through it as [a, b, ..., a]."""
    return [(_shortest_circle(graph, group), sorted(group)) for group in _tangles(graph)]


def _tangles(graph: Edges) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm), in the order they
    close."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(module: str) -> None:  # the graph is a few hundred modules deep at most
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for other in sorted(graph.get(module, {})):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in on_stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:  # the root of a component: it and all above it on the stack
            at = stack.index(module)
            group = set(stack[at:])
            del stack[at:]
            on_stack.difference_update(group)
            if len(group) > 1:
                groups.append(group)

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return groups


def _shortest_circle(graph: Edges, group: set[str]) -> list[str]:
    """The shortest way from the group's first module back to itself, inside the group (breadth first)."""
    start = min(group)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for module in frontier:
            for other in sorted(graph[module]):
                if other not in group:
                    continue
                if other == start:
                    path = [module]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if other not in came_from:
                    came_from[other] = module
                    following.append(other)
        frontier = following
    raise AssertionError(f"no circle in {sorted(group)}")  # Tarjan only groups modules that reach each other


def _say(graph: Edges, circle: list[str], group: list[str]) -> str:
    said = (
        " -> ".join(f"{a} (l.{graph[a][b]})" for a, b in zip(circle, circle[1:], strict=False))
        + f" -> {circle[-1]}"
    )
    others = [m for m in group if m not in circle]
    return said + (f"\n    and tied into it as well: {', '.join(others)}" if others else "")


def test_no_module_imports_itself_back() -> None:
    graph = import_graph()
    assert "console.store.core" in graph and "agents.protocol" in graph and "ops.providers.vast" in graph
    found = [_say(graph, circle, group) for circle, group in cycles(graph)]
    assert not found, "import circles (each arrow: the importing module and the line):\n" + "\n".join(found)


def test_every_package_imports_first_in_a_fresh_interpreter() -> None:
    """The walk above reads ``import a.b`` as an arrow to ``a.b`` alone, but Python runs ``a/__init__.py``
    first: a package whose face imports a module that imports the package back fails only when it is the
    first thing imported (``import console.sweep`` did, when the sweep lived beside the service it builds
    on). So every package is imported first, each in its own interpreter."""
    packages = sorted(
        name
        for name, path in _source_modules(ROOT, PACKAGES).items()
        if path.name == "__init__.py" and not name.startswith("console.tui")
    )
    assert "console.service.sweep" in packages and "ops.providers" in packages
    failed = {}
    for name in packages:
        out = subprocess.run(
            [sys.executable, "-c", f"import {name}"], cwd=ROOT, capture_output=True, text=True
        )
        if out.returncode != 0:
            failed[name] = out.stderr.strip().splitlines()[-1]
    assert not failed, failed


def test_the_walk_sees_type_only_relative_and_late_imports(tmp_path: Path) -> None:
    """A circle closed only under TYPE_CHECKING, through a relative import, or inside a function is found."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from pkg.low import Low\n")
    (pkg / "low.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.high import High\n"
    )
    (pkg / "high.py").write_text("from . import low\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "a.py").write_text("def f():\n    from ..sub import b\n")
    (pkg / "sub" / "b.py").write_text("import pkg.sub.a\n")
    (pkg / "lone.py").write_text("import pkg\nimport os\n")
    graph = import_graph(tmp_path, ("pkg",))
    assert graph["pkg.high"] == {"pkg.low": 1} and graph["pkg.lone"] == {"pkg": 1}
    found = [_say(graph, circle, group) for circle, group in cycles(graph)]
    assert found == [
        "pkg.high (l.1) -> pkg.low (l.3) -> pkg.high",
        "pkg.sub.a (l.2) -> pkg.sub.b (l.1) -> pkg.sub.a",
    ]
