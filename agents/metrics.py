"""A vLLM ``/metrics`` page turned into one server_sample: counters become rates, gauges are read.

Why a hand-written parser: the agent is standard library only, and only a handful of vLLM families
matter. Lines are pre-filtered by name before any parsing (a vLLM page is thousands of histogram lines),
which keeps scraping several servers at 1 Hz far below 1% of a core. Values are summed over label sets
(data-parallel engines report one series each). A family absent from the page is None, never 0
(metric names change across vLLM versions).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

# Our field -> the vLLM sample names that feed it, newest first (vLLM's metric names, docs/facts.md).
COUNTERS = {
    "gen_tokens_total": ("vllm:generation_tokens_total",),
    "prompt_tokens_total": ("vllm:prompt_tokens_total",),
    "prefix_queries_total": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
    "prefix_hits_total": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
}
GAUGES = {
    "running": ("vllm:num_requests_running",),
    "waiting": ("vllm:num_requests_waiting",),
    "kv_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
}
_WANTED = {name for names in (*COUNTERS.values(), *GAUGES.values()) for name in names}
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)(\s+-?\d+)?$")


class MetricsError(ValueError):
    """A page (or line) that is not Prometheus text."""


@dataclass
class Parsed:
    values: dict[str, float]
    problems: list[str] = field(default_factory=list)


def _wanted_lines(text: str) -> list[tuple[int, str]]:
    """(offset, line) of each line starting with a wanted name, found with str.find (C speed): the
    thousands of histogram lines on a vLLM page are never looked at in Python."""
    found = []
    for name in _WANTED:
        pos = 0 if text.startswith(name) else text.find("\n" + name) + 1
        if pos == 0 and not text.startswith(name):
            continue
        while True:
            end = text.find("\n", pos)
            end = len(text) if end < 0 else end
            if text[pos + len(name) : pos + len(name) + 1] in ("{", " ", "\t"):
                found.append((pos, text[pos:end]))
            nxt = text.find("\n" + name, end)
            if nxt < 0:
                break
            pos = nxt + 1
    found.sort()
    return found


def parse(text: str) -> Parsed:
    """Sum the wanted vLLM samples; malformed wanted lines are reported, not fatal."""
    sums: dict[str, float] = {}
    problems: list[str] = []
    for start, raw in _wanted_lines(text):
        m = _SAMPLE.match(raw.strip())
        name = m.group(1) if m else raw.split("{", 1)[0].split()[0]
        if not m or name not in _WANTED:
            lineno = text.count("\n", 0, start) + 1
            problems.append(f"line {lineno}: not a Prometheus sample: {raw[:120]!r}")
            continue
        try:
            value = float(m.group(3))
        except ValueError:
            value = math.nan
        if math.isnan(value) or math.isinf(value):
            lineno = text.count("\n", 0, start) + 1
            problems.append(f"line {lineno}: value {m.group(3)[:40]!r} of {name} is not a finite number")
            continue
        sums[name] = sums.get(name, 0.0) + value
    return Parsed(values=sums, problems=problems)


def _pick(values: dict[str, float], names: tuple[str, ...]) -> float | None:
    for name in names:
        if name in values:
            return values[name]
    return None


class RateTracker:
    """Turns successive scrapes of one server into rates (per second of the agent's monotonic clock)."""

    def __init__(self) -> None:
        self._prev: dict[str, float] | None = None
        self._prev_t: float | None = None

    def sample(self, text: str, t_mono: float) -> tuple[dict[str, float | int | None], list[str]]:
        """One server_sample's fields from one page, plus the problems found on it."""
        parsed = parse(text)
        now = {key: _pick(parsed.values, names) for key, names in COUNTERS.items()}
        out: dict[str, float | int | None] = {
            key: _pick(parsed.values, names) for key, names in GAUGES.items()
        }
        for key in ("running", "waiting"):
            if out[key] is not None:
                out[key] = int(out[key])  # type: ignore[arg-type]
        out["gen_tokens_total"] = now["gen_tokens_total"]
        out["prompt_tokens_total"] = now["prompt_tokens_total"]
        out["gen_tok_per_s"] = out["prompt_tok_per_s"] = out["prefix_hit_rate"] = None
        prev, prev_t = self._prev, self._prev_t
        if prev is not None and prev_t is not None and t_mono > prev_t:
            dt = t_mono - prev_t
            out["gen_tok_per_s"] = _rate(now["gen_tokens_total"], prev.get("gen_tokens_total"), dt)
            out["prompt_tok_per_s"] = _rate(now["prompt_tokens_total"], prev.get("prompt_tokens_total"), dt)
            dq = _delta(now["prefix_queries_total"], prev.get("prefix_queries_total"))
            dh = _delta(now["prefix_hits_total"], prev.get("prefix_hits_total"))
            if dq and dh is not None:
                out["prefix_hit_rate"] = dh / dq
        self._prev = {k: v for k, v in now.items() if v is not None}
        self._prev_t = t_mono
        return out, parsed.problems


def _delta(now: float | None, prev: float | None) -> float | None:
    if now is None or prev is None or now < prev:  # a counter going down means the server restarted
        return None
    return now - prev


def _rate(now: float | None, prev: float | None, dt: float) -> float | None:
    d = _delta(now, prev)
    return None if d is None else d / dt
