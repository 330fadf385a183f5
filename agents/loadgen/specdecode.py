"""vLLM's speculative-decoding counters over one bench: read from every measured server's ``/metrics``
before and after the run, the differences summed over servers and engines.

Why before/after and not the 1 Hz server_sample scrape: a bench row needs the counts of exactly its own
requests, and the sampler's last scrape can land seconds from the run's ends. The window includes the
workers' warm-up requests (a handful of the same prompts): the ratios below are per token, so they move
little, and the run's own token counts are never mixed with them.

The names are vLLM 0.32's (its SpecDecodingProm; a captured page: tests/fixtures/vllm_metrics_ngram_after.txt):
``*_total`` counters with one series per engine, and the per-position accepted counts labelled ``position``. A server without a
speculative config exports none of them: the run then has no spec-decode block (None), never zeros.
Standard library only, like the rest of the agent.
"""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from dataclasses import dataclass
from urllib.parse import urlsplit

DRAFTS = "vllm:spec_decode_num_drafts_total"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
_LINE = re.compile(r"^(vllm:spec_decode_num_[a-z_]+_total)(\{[^}]*\})?\s+(\S+)", re.MULTILINE)
_POSITION = re.compile(r'position="(\d+)"')


@dataclass(frozen=True)
class SpecCounts:
    """Cumulative (or, after ``minus``, per-run) spec-decode counts of one or more servers."""

    drafts: float
    draft_tokens: float
    accepted: float
    accepted_per_pos: tuple[float, ...]

    def minus(self, before: SpecCounts) -> SpecCounts | None:
        """The counts between two reads; None when a counter went down (the server restarted between)."""
        if (
            self.drafts < before.drafts
            or self.draft_tokens < before.draft_tokens
            or self.accepted < before.accepted
        ):
            return None
        width = max(len(self.accepted_per_pos), len(before.accepted_per_pos))
        now = self.accepted_per_pos + (0.0,) * (width - len(self.accepted_per_pos))
        was = before.accepted_per_pos + (0.0,) * (width - len(before.accepted_per_pos))
        return SpecCounts(
            self.drafts - before.drafts,
            self.draft_tokens - before.draft_tokens,
            self.accepted - before.accepted,
            tuple(a - b for a, b in zip(now, was, strict=True)),
        )

    def plus(self, other: SpecCounts) -> SpecCounts:
        width = max(len(self.accepted_per_pos), len(other.accepted_per_pos))
        mine = self.accepted_per_pos + (0.0,) * (width - len(self.accepted_per_pos))
        theirs = other.accepted_per_pos + (0.0,) * (width - len(other.accepted_per_pos))
        return SpecCounts(
            self.drafts + other.drafts,
            self.draft_tokens + other.draft_tokens,
            self.accepted + other.accepted,
            tuple(a + b for a, b in zip(mine, theirs, strict=True)),
        )

    def as_row(self) -> dict[str, object]:
        """The bench result's keys (bench_runs columns, console/store/schema.py V17)."""
        return {
            "spec_drafts": int(self.drafts),
            "spec_draft_tokens": int(self.draft_tokens),
            "spec_accepted": int(self.accepted),
            "spec_accepted_per_pos": [int(x) for x in self.accepted_per_pos] or None,
        }


def parse(text: str) -> SpecCounts | None:
    """The spec-decode counters on one ``/metrics`` page, summed over engines; None: the page has none."""
    sums: dict[str, float] = {}
    per_pos: dict[int, float] = {}
    for name, labels, value in _LINE.findall(text):
        try:
            number = float(value)
        except ValueError:
            continue  # a malformed sample counts as absent, as agents/metrics.py treats one
        if name == PER_POS:
            pos = _POSITION.search(labels or "")
            if pos is not None:
                per_pos[int(pos.group(1))] = per_pos.get(int(pos.group(1)), 0.0) + number
        else:
            sums[name] = sums.get(name, 0.0) + number
    if not all(k in sums for k in (DRAFTS, DRAFT_TOKENS, ACCEPTED)):
        return None
    width = max(per_pos, default=-1) + 1
    return SpecCounts(
        sums[DRAFTS],
        sums[DRAFT_TOKENS],
        sums[ACCEPTED],
        tuple(per_pos.get(i, 0.0) for i in range(width)),
    )


def metrics_url(base_url: str) -> str:
    url = urlsplit(base_url)
    return f"{url.scheme}://{url.netloc}/metrics"


def read(base_urls: tuple[str, ...], timeout_s: float = 10.0) -> list[SpecCounts | None]:
    """Each server's counters now (None where it exports none or does not answer)."""
    out: list[SpecCounts | None] = []
    for base in base_urls:
        try:
            with urllib.request.urlopen(metrics_url(base), timeout=timeout_s) as response:
                out.append(parse(response.read().decode("utf-8", "replace")))
        except (OSError, urllib.error.URLError):
            out.append(None)
    return out


def over_run(before: list[SpecCounts | None], after: list[SpecCounts | None]) -> SpecCounts | None:
    """The run's counts over every server; None unless every server exported them at both ends."""
    total: SpecCounts | None = None
    for b, a in zip(before, after, strict=True):
        if a is None or b is None:
            return None
        d = a.minus(b)
        if d is None:
            return None
        total = d if total is None else total.plus(d)
    return total
