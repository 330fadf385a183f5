"""Line numbers for TOML keys, which ``tomllib`` does not report.

WHY: an error that says ``unknown key 'moe_backnd'`` without a line makes the operator grep; one that
says ``recipes/arms/glm.toml:14`` does not. This scans the text for table headers and ``key =`` lines
(skipping multi-line strings) and maps each full dotted key path to the line where it is written, and
each table that only exists because something below it is written (``[arms.a.env]`` makes ``arms`` and
``arms.a``) to the line where that happens. One pass, so a file of 100,000 arms costs 100,000 lookups.
"""

from __future__ import annotations

import re

KeyPath = tuple[str, ...]

_BARE = re.compile(r"[A-Za-z0-9_-]+")


def _parse_key(text: str, pos: int) -> tuple[list[str], int] | None:
    """Parse a (dotted, possibly quoted) key starting at ``pos``; return its parts and the end offset."""
    parts: list[str] = []
    while True:
        while pos < len(text) and text[pos] in " \t":
            pos += 1
        if pos >= len(text):
            return None
        quote = text[pos]
        if quote in "\"'":
            end = text.find(quote, pos + 1)
            if end < 0:
                return None
            parts.append(text[pos + 1 : end])
            pos = end + 1
        else:
            m = _BARE.match(text, pos)
            if not m:
                return None
            parts.append(m.group())
            pos = m.end()
        while pos < len(text) and text[pos] in " \t":
            pos += 1
        if pos < len(text) and text[pos] == ".":
            pos += 1
            continue
        return parts, pos


def _add(found: dict[KeyPath, int], path: KeyPath, number: int) -> None:
    """``path`` at ``number`` unless already placed, and each of its tables where it first appears."""
    for n in range(len(path), 0, -1):
        if path[:n] in found:
            break
        found[path[:n]] = number


def key_lines(text: str) -> dict[KeyPath, int]:
    """Map every table header and ``key = value`` line (and the tables they imply) to its 1-based line."""
    found: dict[KeyPath, int] = {}
    table: list[str] = []
    in_multiline: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if in_multiline:
            if line.count(in_multiline) % 2 == 1:
                in_multiline = None
            continue
        stripped = line.lstrip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("["):
            start = 2 if stripped.startswith("[[") else 1
            parsed = _parse_key(stripped, start)
            if parsed:
                table = parsed[0]
                _add(found, tuple(table), number)
            continue
        parsed = _parse_key(stripped, 0)
        if parsed and stripped[parsed[1] : parsed[1] + 1] == "=":
            _add(found, tuple(table + parsed[0]), number)
            rest = stripped[parsed[1] + 1 :]
            for delim in ('"""', "'''"):
                if rest.count(delim) % 2 == 1:
                    in_multiline = delim
    return found


def line_of(lines: dict[KeyPath, int], path: KeyPath) -> int | None:
    """The line of ``path``, else of its nearest ancestor (an inline table's key, a header)."""
    for n in range(len(path), 0, -1):
        if path[:n] in lines:
            return lines[path[:n]]
    return None


def by_record(lines: dict[KeyPath, int]) -> dict[KeyPath, dict[KeyPath, int]]:
    """The lines below each record (``(section, name)``), keyed relative to it; one pass over the file."""
    records: dict[KeyPath, dict[KeyPath, int]] = {}
    for path, number in lines.items():
        if len(path) > 2:
            records.setdefault(path[:2], {})[path[2:]] = number
    return records
