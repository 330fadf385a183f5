"""What the pinned vLLM accepts: its serve flags, kernel backends and parser names, kept as data.

``vllm_flags.json`` is extracted from a real vLLM by ``extract_vllm_flags.py`` (see there). Lint checks
every flag an arm would pass against it, so a misspelt or retired flag is refused on the laptop instead
of killing a server on a rented box.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

DATA = resources.files("console.recipes") / "vllm_flags.json"  # package data: read the same from a wheel


@dataclass(frozen=True)
class VllmFlags:
    version: str
    flags: dict[str, dict[str, Any]]
    kernel_backends: dict[str, list[str]]
    reasoning_parsers: list[str]
    tool_call_parsers: list[str]

    def problem(self, flag: str, value: str | None) -> str | None:
        """Why ``flag`` (with ``value``, None for a bare switch) is not valid for this vLLM, or None."""
        head, dot, sub = flag.partition(".")
        spec = self.flags.get(head)
        if spec is None:
            return f"unknown vLLM {self.version} flag {flag!r}"
        if dot:
            if not spec["takes_value"]:
                return f"{head!r} takes no sub-keys"
            choices = self.kernel_backends.get(sub) if head == "--kernel-config" else None
        else:
            choices = spec["choices"]
            if spec["takes_value"] and value is None:
                return f"{flag!r} needs a value"
            if not spec["takes_value"] and value is not None:
                return f"{flag!r} is a switch and takes no value (got {value!r}); write true"
        if head == "--reasoning-parser" and value not in self.reasoning_parsers:
            return f"unknown reasoning parser {value!r} (vLLM {self.version} registers: {', '.join(self.reasoning_parsers)})"
        if head == "--tool-call-parser" and value not in self.tool_call_parsers:
            return f"unknown tool-call parser {value!r} (vLLM {self.version} registers: {', '.join(self.tool_call_parsers)})"
        if choices and value is not None and value not in choices:
            return f"{flag!r} does not accept {value!r} (choices: {', '.join(choices)})"
        return None


def flag_value(engine_name: str, slot: str) -> str | None:
    """The ``--kernel-config.<slot>`` value for a backend as the engine names it ("FlashInfer CUTLASS"
    -> ``flashinfer_cutlass``), or None when the pinned vLLM has no such choice (e.g. 'CPU')."""
    value = engine_name.strip().lower().replace("-", "_").replace(" ", "_")
    return value if value in known_flags().kernel_backends.get(slot, []) else None


@cache
def known_flags() -> VllmFlags:
    data = json.loads(DATA.read_text())
    return VllmFlags(
        version=data["vllm_version"],
        flags=data["flags"],
        kernel_backends=data["kernel_backends"],
        reasoning_parsers=data["reasoning_parsers"],
        tool_call_parsers=data["tool_call_parsers"],
    )
