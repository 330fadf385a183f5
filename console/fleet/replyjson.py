"""How the console reads an agent's reply line: with orjson where it reads the line exactly as the standard
library does, with the standard library everywhere else.

Why: a backlog is hundreds of 256 KiB replies, and ``json.loads`` of one (2.7 ms) was most of what the link added
to the store's own work, all of it holding the interpreter lock the Live view's redraw waits on; orjson reads the
same reply in 0.6 ms. Where the two could disagree, the standard library decides:
- orjson refuses what Python's json accepts (NaN, Infinity, 1e999, a lone surrogate, a byte-order mark, UTF-16):
  any refusal is read again by ``json.loads``, which accepts or raises as it always did;
- orjson reads an integer outside 64 bits as a float, where Python keeps it exact: a line holding 19 digits in a
  row (any such integer has them) goes to ``json.loads`` whole, before orjson sees it.
tests/test_replyjson.py proves, over generated and mutated lines, that ``loads`` returns what ``json.loads``
returns, of the same types, or raises what it raises.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

_DIGITS_AS_ONES = bytes(0x31 if 0x30 <= i <= 0x39 else 0x30 for i in range(256))
"""Each ASCII digit as ``1`` and every other byte as ``0``: a run of digits becomes a run of ones (in C)."""
_LONG_RUN = b"1" * 19
"""19 digits in a row: the shortest integer outside orjson's exact range is -9223372036854775809, -(2**63 + 1)."""


def loads(line: bytes) -> Any:
    """``line`` as ``json.loads(line)`` reads it, or its exception."""
    if _LONG_RUN not in line.translate(_DIGITS_AS_ONES):
        try:
            return orjson.loads(line)
        except orjson.JSONDecodeError:
            pass  # perhaps JSON only Python reads (NaN, a lone surrogate): its own decoder says
    return json.loads(line)
