"""The console's reply reader (console/fleet/replyjson.py) reads every line as ``json.loads`` does.

It hands a line to orjson unless it holds 19 digits in a row, and to ``json.loads`` when orjson refuses it. The
oracle is ``json.loads`` itself: over generated lines, hostile ones among them (integers past 64 bits, NaN and
infinities, lone surrogates, duplicate keys, invalid UTF-8, byte-order marks, long digit runs, deep nesting,
bytes changed at random), ``loads`` returns a value of the same repr (types, key order, -0.0, surrogates
included) or raises the same exception type.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from console.fleet.replyjson import loads

_TEXT = st.text(
    st.one_of(st.characters(), st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)), max_size=12
)
"""Any code point, lone surrogates included (they encode only as escapes, or as invalid UTF-8)."""
_SCALAR = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**64), 2**64),
    st.integers(),
    st.floats(),  # NaN and infinities included: Python writes them, orjson refuses them
    st.sampled_from([2**63 - 1, -(2**63), -(2**63) - 1, 2**64 - 1, 2**64, 10**19, 0.1, -0.0, 5e-324, 1e308]),
    _TEXT,
)
_VALUE = st.recursive(
    _SCALAR,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_TEXT, inner, max_size=4)),
    max_leaves=20,
)


def _outcome(line: bytes, read: Any) -> tuple[str, str]:
    try:
        return "value", repr(read(line))
    except Exception as exc:  # the type is the outcome: the fallback raises json's own
        return "raised", type(exc).__name__


def _same(line: bytes) -> None:
    assert _outcome(line, loads) == _outcome(line, json.loads), line[:200]


def _encoded(value: Any, ascii_only: bool, compact: bool) -> bytes:
    text = json.dumps(value, ensure_ascii=ascii_only, separators=(",", ":") if compact else None)
    return text.encode("utf-8", "surrogatepass")  # a lone surrogate written raw is invalid UTF-8


@settings(max_examples=400, deadline=None)
@given(value=_VALUE, ascii_only=st.booleans(), compact=st.booleans())
def test_a_value_python_writes_reads_back_as_json_loads_reads_it(
    value: Any, ascii_only: bool, compact: bool
) -> None:
    _same(_encoded(value, ascii_only, compact))


@settings(max_examples=300, deadline=None)
@given(
    value=_VALUE,
    at=st.integers(0, 10**6),
    edit=st.sampled_from(["insert", "replace", "delete", "cut"]),
    byte=st.binary(min_size=1, max_size=3),
)
def test_a_line_changed_at_random_reads_as_json_loads_reads_it(
    value: Any, at: int, edit: str, byte: bytes
) -> None:
    line = _encoded({"v": 1, "result": value}, True, True)
    i = at % (len(line) + 1)
    changed = {
        "insert": line[:i] + byte + line[i:],
        "replace": line[:i] + byte + line[i + len(byte) :],
        "delete": line[:i] + line[i + len(byte) :],
        "cut": line[:i],
    }[edit]
    _same(changed)


@settings(max_examples=300, deadline=None)
@given(
    number=st.from_regex(r"-?(0|[1-9][0-9]{0,24})(\.[0-9]{1,24})?([eE][+-]?[0-9]{1,4})?", fullmatch=True),
    pad=st.sampled_from(["", " ", "\n", "\r\n", "\t", "\x0c", "\ufeff"]),
)
def test_numbers_of_every_length_and_exponent_read_as_json_loads_reads_them(number: str, pad: str) -> None:
    """The digit runs around the 19-digit gate, exponents past a double's range, and padding JSON allows or not."""
    for line in (number, f"[{number}]", f'{{"a":{number},"a":{number}1}}', pad + number + pad):
        _same(line.encode("utf-8"))


@settings(max_examples=200, deadline=None)
@given(pairs=st.lists(st.tuples(st.sampled_from(["a", "b", "\\u0061"]), _SCALAR), max_size=6))
def test_duplicate_keys_keep_the_last_value_in_the_first_place_as_json_loads_does(
    pairs: list[tuple[str, Any]],
) -> None:
    body = ",".join(f'"{key}":{json.dumps(value)}' for key, value in pairs)
    _same(("{" + body + "}").encode())


@settings(max_examples=200, deadline=None)
@given(line=st.binary(max_size=64))
def test_any_bytes_read_as_json_loads_reads_them(line: bytes) -> None:
    _same(line)


def test_the_lines_either_reader_alone_would_get_wrong_are_read_as_json_loads_reads_them() -> None:
    """Each of these is read differently by orjson alone (a float for a big integer, a refusal for NaN, a lone
    surrogate, a byte-order mark) or sits at the edge of the 19-digit gate."""
    for line in (
        b'{"a":18446744073709551616}',
        b'{"a":-9223372036854775809}',
        b'{"a":-9223372036854775808}',
        b'{"a":18446744073709551615}',
        b'{"a":NaN,"b":-Infinity}',
        b'{"a":1e999}',
        b'"\\ud800"',
        b'"\xed\xa0\x80"',
        b"\xef\xbb\xbf{}",
        '{"a":1}'.encode("utf-16"),
        b"[" * 5000 + b"]" * 5000,
        b'{"t_ms":1788658020000,"energy_mj":123456789012345678}',
    ):
        _same(line)
    assert loads(b'{"a":18446744073709551616}') == {"a": 2**64}  # exact, as Python reads it
