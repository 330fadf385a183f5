"""Reading a serving engine's log: kernel/backend lines, the KV budget, and why a launch died.

Why from the log: the engine's own "Using ... / Selected ... / KernelConfig(...)" lines are the only
record of which kernels a number was measured with (seed rule 1), and a failed launch is only useful
with the traceback's innermost frame and the backend set the engine says it accepts (seed rule 3:
eleven arms died on a refused MoE backend). Pure functions over text, so they are tested on real lines.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

MAX_LINE_CHARS = 2000

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_KERNEL = re.compile(r"\b(Using|Selected) \S|KernelConfig\(|kernel_config=")
_KV_SIZE = re.compile(r"KV cache size: ([\d,]+) tokens")
_MAX_CONC = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")
_BACKEND_SETS = (
    re.compile(r"out of potential backends: (\[.*?\]|\(.*?\))"),
    re.compile(r"Expected one of (\[.*?\])"),
    re.compile(r"[Aa]ccepted backends?: (\[.*?\])"),
)
_TRACEBACK = "Traceback (most recent call last):"
_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (.+)$')
_WRAPPER_HINTS = ("See root cause above", "initialization failed", "EngineDeadError")


def clean(line: str, limit: int = MAX_LINE_CHARS) -> str:
    """A log line without ANSI escapes or trailing whitespace, bounded in length."""
    return _ANSI.sub("", line).rstrip()[:limit]


def config_excerpt(line: str) -> str:
    """The ``KernelConfig(...)`` part of an engine config line (which runs to thousands of characters),
    plus the flashinfer autotune flag that seed rule 5 is about, when the line carries it."""
    start = line.find("KernelConfig(")
    if start < 0:
        return line[:MAX_LINE_CHARS]
    depth = 0
    end = len(line)
    for i in range(start + len("KernelConfig"), len(line)):
        depth += {"(": 1, ")": -1}.get(line[i], 0)
        if depth == 0:
            end = i + 1
            break
    excerpt = line[start:end]
    if line[:start].endswith("kernel_config="):
        excerpt = "kernel_config=" + excerpt
    autotune = re.search(r"enable_flashinfer_autotune=\w+", line)
    if autotune and autotune.group(0) not in excerpt:
        excerpt += " " + autotune.group(0)
    return excerpt[:MAX_LINE_CHARS]


def kernel_category(line: str) -> str | None:
    """The category of a kernel/backend/config line, or None when the line is not one."""
    if not _KERNEL.search(line):
        return None
    if "KernelConfig(" in line or "kernel_config=" in line:
        return "config"
    lowered = line.lower()
    if " moe" in lowered or "experts" in lowered:
        return "moe"
    if "attention" in lowered or "attn" in lowered or " mla " in lowered:
        return "attention"
    if "gemm" in lowered or "linear" in lowered or "scaled_mm" in lowered or re.search(r"\bSelected \S+ for ", line):
        return "linear"
    return "other"


@dataclass(frozen=True)
class KvBudget:
    kv_cache_tokens: int | None
    max_concurrency: float | None


def kv_budget(line: str) -> KvBudget | None:
    """The engine's "KV cache size: N tokens, Maximum concurrency ...: X x" line (one or both halves)."""
    size = _KV_SIZE.search(line)
    conc = _MAX_CONC.search(line)
    if not size and not conc:
        return None
    return KvBudget(
        kv_cache_tokens=int(size.group(1).replace(",", "")) if size else None,
        max_concurrency=float(conc.group(2)) if conc else None,
    )


def backend_set(line: str) -> list[str] | None:
    """The backend list an engine prints when it picks or refuses one ("Expected one of [...]")."""
    for pattern in _BACKEND_SETS:
        m = pattern.search(line)
        if m:
            try:
                value = ast.literal_eval(m.group(1))
            except (ValueError, SyntaxError):
                return [s.strip(" '\"") for s in m.group(1).strip("[]()").split(",") if s.strip()]
            return [str(v) for v in value]
    return None


@dataclass(frozen=True)
class Failure:
    reason: str
    backends_accepted: list[str]


def failure_reason(lines: list[str], exit_code: int | None) -> Failure:
    """Why a server died, from the tail of its log: the innermost frame and the final exception line.

    Engines wrap the real error ("Engine core initialization failed. See root cause above"); the
    traceback whose exception is not such a wrapper is the root cause, so it is preferred.
    """
    tracebacks = _tracebacks([clean(x) for x in lines])
    chosen = None
    for tb in reversed(tracebacks):
        if not any(h in tb[1] for h in _WRAPPER_HINTS):
            chosen = tb
            break
    if chosen is None and tracebacks:
        chosen = tracebacks[-1]
    accepted: list[str] = []
    for line in lines:
        if "Expected one of" in line or "ccepted backend" in line:
            accepted = backend_set(line) or accepted
    if chosen is not None:
        frame, exc = chosen
        reason = f"{exc} (at {frame})" if frame else exc
    else:
        last = next((clean(x) for x in reversed(lines) if clean(x)), "")
        reason = f"exited with code {exit_code} before serving"
        if last:
            reason += f"; last log line: {last}"
    return Failure(reason=reason[:MAX_LINE_CHARS], backends_accepted=accepted)


def _tracebacks(lines: list[str]) -> list[tuple[str | None, str]]:
    """(innermost frame "file:line in func", exception line) for each traceback in the lines.

    Each line may carry a logger/process prefix ("(EngineCore pid=7) ERROR ... [core.py:1] "): the
    prefix before "Traceback" is stripped from the lines that follow it.
    """
    found: list[tuple[str | None, str]] = []
    i = 0
    while i < len(lines):
        pos = lines[i].find(_TRACEBACK)
        if pos < 0:
            i += 1
            continue
        prefix = lines[i][:pos]
        frame: str | None = None
        exc = ""
        i += 1
        while i < len(lines):
            body = lines[i][len(prefix):] if prefix and lines[i].startswith(prefix) else lines[i]
            m = _FRAME.match(body)
            if m:
                frame = f"{m.group(1)}:{m.group(2)} in {m.group(3)}"
            elif body.startswith((" ", "\t")) or not body.strip() or set(body.strip()) <= set("^~ "):
                pass
            else:
                exc = body.strip()
                break
            i += 1
        if exc:
            found.append((frame, exc))
        i += 1
    return found
