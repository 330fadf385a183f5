"""The conditions a throughput number was measured under, from what the store holds of its launches.

A number means nothing without them (the write-up's lesson): the kernels the engine said it used against the
backends the arm asked for (campaign rule 1: a row on another kernel is ``kernel_fallback``), whether the
server cached prefixes (repeated prompts into a prefix cache flatter a run), and how many streams one
replica admits at once (a concurrency beyond it queues, and the queue shows up as TTFT). ``Results``
computes them once, when a row is written, for every bench row whatever asked for it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from agents import loglines
from console.store.launches import ArmRecord, Launches

KERNEL_SEPARATOR = " | "
_ENGINE_PREFIX_CACHING = re.compile(r"enable_prefix_caching=(True|False)\b")
_PREFIX_FLAGS = {"--enable-prefix-caching": True, "--no-enable-prefix-caching": False}


def join_kernel_lines(lines: Iterable[str]) -> str | None:
    """The kernel lines of a launch as one line, each once, in the order the engine printed them."""
    return KERNEL_SEPARATOR.join(dict.fromkeys(lines)) or None


def prefix_caching(argv: Sequence[str], config_lines: Iterable[str]) -> bool | None:
    """Whether the server cached prefixes: the engine's own config line (``enable_prefix_caching=True``)
    when it printed one, else the arm's last ``--[no-]enable-prefix-caching`` flag, else None (unknown)."""
    for line in config_lines:
        found = _ENGINE_PREFIX_CACHING.search(line)
        if found:
            return found.group(1) == "True"
    asked = [_PREFIX_FLAGS[word] for word in argv if word in _PREFIX_FLAGS]
    return asked[-1] if asked else None


def max_num_seqs(argv: Sequence[str]) -> int | None:
    """The arm's ``--max-num-seqs``, the engine's sequence cap (None: the engine's default)."""
    if "--max-num-seqs" in argv[:-1]:
        return int(argv[list(argv).index("--max-num-seqs") + 1])
    return None


def admitted_streams(
    kv_cache_tokens: int | None, max_num_seqs: int | None, request_tokens: int
) -> int | None:
    """How many requests of this size one server runs at once: its sequence cap and what its KV cache holds.

    A concurrency above it queues, and the queue shows up as TTFT (the write-up's footnote); None when the
    engine reported neither figure.
    """
    limits = []
    if max_num_seqs is not None:
        limits.append(max_num_seqs)
    if kv_cache_tokens is not None and request_tokens > 0:
        limits.append(kv_cache_tokens // request_tokens)
    return min(limits) if limits else None


def streams_per_replica(concurrency: int, replicas: int) -> int:
    """The most streams any replica gets when a node run deals its streams round-robin."""
    return math.ceil(concurrency / max(replicas, 1))


@dataclass(frozen=True)
class Conditions:
    kernel_line: str | None
    """The first replica's kernel-selection lines (log noise never counts: ``loglines.parse_kernel_line``)."""
    kernel_fallback: bool
    kernel_check: tuple[loglines.KernelCheck, ...]
    """Per layer kind: requested, status, used, other_than_requested."""
    prefix_caching: bool | None
    admitted: int | None
    """The fewest streams any replica admits at once for this request size."""


class HasLaunches(Protocol):
    """What the conditions read of the store: its launches (the Store, or a repository's view of it)."""

    @property
    def launches(self) -> Launches: ...


def selected_kernel_lines(store: HasLaunches, launch_id: str) -> list[str]:
    """The kernel-selection lines ``launch_id``'s engine printed, in order (log noise never counts)."""
    return [
        line
        for category, line in store.launches.kernel_lines(launch_id)
        if category != "config" and loglines.parse_kernel_line(line)
    ]


def conditions(store: HasLaunches, launch_ids: Sequence[str], request_tokens: int) -> Conditions:
    """The conditions of a run over ``launch_ids`` (every replica it measured) with requests of this size."""
    first_kernels: list[str] = []
    records: list[loglines.KernelRecord] = []
    config: list[str] = []
    admitted: list[int] = []
    arm: ArmRecord | None = None
    for i, launch_id in enumerate(launch_ids):
        config += [line for category, line in store.launches.kernel_lines(launch_id) if category == "config"]
        selected = selected_kernel_lines(store, launch_id)
        records += loglines.kernel_records(selected)
        if i == 0:
            first_kernels = selected
        launch = store.launches.get(launch_id)
        if launch is None:
            continue
        arm = arm or store.launches.arm_record(launch.arm_id)
        argv = arm.argv if arm else ()
        each = admitted_streams(launch.kv_cache_tokens, max_num_seqs(argv), request_tokens)
        if each is not None:
            admitted.append(each)
    checks = loglines.check_kernels(loglines.requested_backends(arm.argv, arm.env) if arm else {}, records)
    return Conditions(
        kernel_line=join_kernel_lines(first_kernels),
        kernel_fallback=loglines.kernel_fallback(checks),
        kernel_check=checks,
        prefix_caching=prefix_caching(arm.argv if arm else (), config),
        admitted=min(admitted) if admitted else None,
    )
