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


def json_list_or_none(text: str | None) -> list[Any] | None:
    """A JSON list column where NULL means something else than empty (an engine that printed no set)."""
    return None if text is None else json_list(text)


def json_tuple_or_none(text: str | None) -> tuple[Any, ...] | None:
    """``json_list_or_none`` for frozen records."""
    found = json_list_or_none(text)
    return None if found is None else tuple(found)


def json_dict_or_none(text: str | None) -> dict[str, Any] | None:
    """A JSON object column read back; NULL (or anything that is not an object) reads as None."""
    if not text:
        return None
    value = json.loads(text)
    return value if isinstance(value, dict) else None
