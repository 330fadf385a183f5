"""Reading a file the operator named: a regular file only, up to a stated size, and never blocking.

A path on the command line can name anything: a FIFO (``open`` waits for a writer for ever), ``/dev/zero``
(reads never end), a directory, or a file far larger than any harness output. Every read of an
operator-named input goes through ``read_regular``: it stats the path before opening it, opens it with
``O_NONBLOCK`` so a FIFO swapped in after the stat still cannot block the open, checks the opened
descriptor again with ``fstat`` (what is read is what was checked), and reads at most ``limit`` bytes,
refusing a file that is, or grows, larger. Each refusal is one ``InputError`` line: what, where, and what
to do.

This module imports nothing of the console but its errors, so any layer can use it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from console.errors import InputError

MiB = 1 << 20

TOO_BIG = "check that it is the file meant"
"""The default hint for a file over its bound."""

_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
)


def _size(n: int) -> str:
    return f"{n // MiB:,} MiB" if n and n % MiB == 0 else f"{n:,} bytes"


def _refuse_unless_regular(
    st: os.stat_result, path: Path, what: str, limit: int, error: type[InputError], too_big: str
) -> None:
    if not stat.S_ISREG(st.st_mode):
        kind = next((word for test, word in _KINDS if test(st.st_mode)), "not a regular file")
        raise error(
            f"{what} {path} is {kind}, not a regular file",
            "give the path of the file itself (copy a stream to a file first)",
        )
    if st.st_size > limit:
        raise error(f"{what} {path} is {_size(st.st_size)}, over the {_size(limit)} this reads", too_big)


def check_regular(
    path: Path, what: str, limit: int, error: type[InputError] = InputError, too_big: str = TOO_BIG
) -> None:
    """Refuse ``path`` unless it is a regular file of at most ``limit`` bytes (a stat; nothing is opened).

    ``what`` names the input (the argument or flag) and starts each refusal; ``error`` is the ``InputError``
    raised; ``too_big`` is its hint for a file over ``limit``."""
    try:
        st = os.stat(path)
    except FileNotFoundError as exc:
        raise error(f"{what} {path}: no such file", "check the path") from exc
    except OSError as exc:
        raise error(
            f"{what} {path} cannot be read ({exc.strerror})", "check the path and its permissions"
        ) from exc
    _refuse_unless_regular(st, path, what, limit, error, too_big)


def read_regular(
    path: Path, what: str, limit: int, error: type[InputError] = InputError, too_big: str = TOO_BIG
) -> bytes:
    """The bytes of ``path``, a regular file of at most ``limit`` bytes; anything else is refused as
    ``check_regular`` says."""
    check_regular(path, what, limit, error, too_big)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise error(
            f"{what} {path} cannot be read ({exc.strerror})", "check the path and its permissions"
        ) from exc
    try:
        _refuse_unless_regular(
            os.fstat(fd), path, what, limit, error, too_big
        )  # the file opened is the file checked
        chunks: list[bytes] = []
        left = limit + 1  # one byte more than allowed tells a file that grew past the bound
        while left > 0:
            chunk = os.read(fd, min(left, 4 * MiB))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise error(f"{what} {path} cannot be read ({exc.strerror})", "check the file") from exc
    finally:
        os.close(fd)
    if left <= 0:
        raise error(
            f"{what} {path} grew past the {_size(limit)} this reads while it was read",
            "wait until whatever writes it has finished, then run this again",
        )
    return b"".join(chunks)
