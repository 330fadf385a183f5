"""JSON as the store keeps it: a leaf module every repository imports, so the store has no import cycle."""

from __future__ import annotations

import json
from typing import Any


def dumps(value: Any) -> str:
    """JSON for a store column: compact and key-sorted so equal values store equal text."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def json_list(text: str | None) -> list[Any]:
    """A JSON list column read back; NULL (or anything that is not a list) reads as empty."""
    if not text:
        return []
    value = json.loads(text)
    return value if isinstance(value, list) else []
