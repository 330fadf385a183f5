"""The attention backends a serving env's vLLM offers, read from its source without importing vllm.

WHY: an arm whose flags name ``--attention-backend X`` dies at launch when the env's vLLM has no backend X
(recipes/arms/glm-5.3-flash.toml names FLASHINFER_MLA_SPARSE_SM120). Importing vllm to ask takes seconds and
may need a GPU, so the probe parses ``vllm/v1/attention/backends/registry.py`` with ``ast`` and collects the
members of ``AttentionBackendEnum``. This module is stdlib only: agents/probe.py sends its source into the
serving Python, where ``backends_of_env`` runs.
"""

from __future__ import annotations

import ast
import importlib.util
import os

REGISTRY = os.path.join("v1", "attention", "backends", "registry.py")
"""Where vLLM declares ``AttentionBackendEnum``, relative to the vllm package directory."""


def backend_names(source: str) -> list[str] | None:
    """The member names of ``AttentionBackendEnum`` in registry.py's text; None when the text does not parse
    or declares no such class (unknown, which a check warns about and never refuses on)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "AttentionBackendEnum":
            names = []
            for stmt in node.body:
                targets = stmt.targets if isinstance(stmt, ast.Assign) else []
                names += [t.id for t in targets if isinstance(t, ast.Name) and not t.id.startswith("_")]
            return names
    return None


def backends_of_env() -> list[str] | None:
    """The backends of the vllm this Python would import (found without importing it); None when unknown."""
    try:
        spec = importlib.util.find_spec("vllm")
        dirs = list(spec.submodule_search_locations or []) if spec else []
        for d in dirs:
            path = os.path.join(d, REGISTRY)
            if os.path.isfile(path):
                with open(path, encoding="utf-8", errors="replace") as f:
                    return backend_names(f.read())
    except (ImportError, OSError, ValueError):
        return None
    return None
