"""The serving-environment lock (recipes/serving-env.lock): what ``campaign box setup`` installs on a box.

WHY a lock: the write-up's boxes ran one exact stack (vLLM, torch for CUDA 13.0, FlashInfer 0.6.18 with its
jit-cache, and the cubin package from FlashInfer's root index because the image's own did not match); a box
set up from names without versions drifts to whatever the index serves that day. Every version is pinned
(``==``), every value is a plain token (it becomes one argv element of ``uv``, never shell text), and the CUDA
named must be in console/checks/min_driver.py: the driver a CUDA needs has one table, that one.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any, NoReturn

from console.checks.min_driver import MIN_DRIVER
from console.errors import InputError

LOCK_NAME = "serving-env.lock"
CUBIN_OF = {"flashinfer-cubin": "flashinfer-python", "flashinfer-jit-cache": "flashinfer-python"}
"""Kernel-binary packages and the package whose version theirs must equal (a cubin built for another
FlashInfer is the write-up's mismatch)."""

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_VERSION = re.compile(
    r"^[0-9]+(\.[0-9]+)*((a|b|rc)[0-9]+)?(\.post[0-9]+)?(\.dev[0-9]+)?(\+[a-z0-9]+(\.[a-z0-9]+)*)?$"
)
"""A PEP 440 release, optionally pre/post/dev and a local tag (``2.13.0+cu130``): an exact pin, nothing else."""
_URL = re.compile(r"^(https?|file)://[A-Za-z0-9._~:/?#\[\]@!$&'()*+,;=%-]+$")
_TOP = {"cuda", "index_url", "extra_index_urls", "cubin_index_url", "packages", "extras", "cubin"}


@dataclass(frozen=True)
class ServingLock:
    """The pinned set: ``packages`` install together from the indexes, ``cubin`` after them with
    ``--no-deps`` from ``cubin_index_url`` (FlashInfer publishes the matching cubin only there)."""

    cuda: str
    index_url: str
    extra_index_urls: tuple[str, ...]
    cubin_index_url: str
    packages: tuple[tuple[str, str], ...]
    extras: tuple[tuple[str, tuple[str, ...]], ...]
    cubin: tuple[tuple[str, str], ...]
    source: str

    @property
    def pins(self) -> dict[str, str]:
        """Every locked package (normalised name) and its version: what the env must report."""
        return {normalise(n): v for n, v in (*self.packages, *self.cubin)}

    def specs(self, names: tuple[tuple[str, str], ...]) -> list[str]:
        extras = dict(self.extras)
        return [f"{n}[{','.join(extras[n])}]=={v}" if n in extras else f"{n}=={v}" for n, v in names]


def normalise(name: str) -> str:
    """PEP 503's name: what ``uv pip list`` may print differently (``flashinfer_python``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def shipped_lock() -> Path:
    return Path(str(files("recipes") / LOCK_NAME))


def load_lock(path: Path | None = None) -> ServingLock:
    """Read a lock file (default: the shipped one); a bad value is one InputError naming the file and key."""
    path = path or shipped_lock()
    try:
        text = path.read_text()
    except OSError as exc:
        raise InputError(
            f"{path}: cannot read the serving-env lock ({exc.strerror})", "give --lock FILE"
        ) from exc
    return parse_lock(text, str(path))


def parse_lock(text: str, source: str) -> ServingLock:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{source}: not TOML: {exc}", "fix the lock file") from exc
    unknown = set(data) - _TOP
    if unknown:
        _bad(source, sorted(unknown)[0], "unknown key", f"keys: {', '.join(sorted(_TOP))}")
    cuda = _str(data, "cuda", source)
    if cuda not in MIN_DRIVER:
        _bad(
            source, "cuda", f"{cuda!r} is not in the minimum-driver table", f"one of {', '.join(MIN_DRIVER)}"
        )
    urls = data.get("extra_index_urls", [])
    if not isinstance(urls, list):
        _bad(source, "extra_index_urls", "not a list", "give a list of index URLs")
    packages = _pins(data, "packages", source)
    cubin = _pins(data, "cubin", source)
    extras = _extras(data.get("extras", {}), {n for n, _ in packages}, source)
    return ServingLock(
        cuda=cuda,
        index_url=_url(_str(data, "index_url", source), "index_url", source),
        extra_index_urls=tuple(_url(u, "extra_index_urls", source) for u in urls),
        cubin_index_url=_url(_str(data, "cubin_index_url", source), "cubin_index_url", source),
        packages=packages,
        extras=extras,
        cubin=cubin,
        source=source,
    )


def _bad(source: str, key: str, what: str, fix: str) -> NoReturn:
    raise InputError(f"{source}: {key}: {what}", fix)


def _str(data: dict[str, Any], key: str, source: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        _bad(source, key, "missing or not text", f'give {key} = "..."')
    return str(value)


def _url(value: Any, key: str, source: str) -> str:
    if not isinstance(value, str) or not _URL.match(value):
        _bad(source, key, f"{value!r} is not an http(s):// or file:// URL", "give the index's URL")
    return str(value)


def check_url(value: str, where: str) -> str:
    """An index URL the operator gave (``--index``), held to the lock's rule."""
    if not _URL.match(value):
        raise InputError(f"{where} {value!r}: not an http(s):// or file:// URL", "give the index's URL")
    return value


def _pins(data: dict[str, Any], key: str, source: str) -> tuple[tuple[str, str], ...]:
    table = data.get(key)
    if not isinstance(table, dict) or not table:
        _bad(source, key, "missing or empty table", f'give [{key}] with name = "version" lines')
    pins: list[tuple[str, str]] = []
    for name, version in table.items():
        if not _NAME.match(name):
            _bad(source, f"{key}.{name}", "not a package name", "letters, digits, '.', '_' or '-'")
        if not isinstance(version, str) or not _VERSION.match(version):
            _bad(
                source,
                f"{key}.{name}",
                f"{version!r} is not one exact version",
                'pin it: a version like "0.6.18" (no ranges, no spaces)',
            )
        pins.append((name, version))
    return tuple(pins)


def _extras(table: Any, names: set[str], source: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if not isinstance(table, dict):
        _bad(source, "extras", "not a table", 'give [extras] with name = ["extra"] lines')
    out: list[tuple[str, tuple[str, ...]]] = []
    for name, items in table.items():
        if name not in names:
            _bad(source, f"extras.{name}", "not a package in [packages]", "name a locked package")
        if not isinstance(items, list) or not all(isinstance(i, str) and _NAME.match(i) for i in items):
            _bad(source, f"extras.{name}", f"{items!r} is not a list of extra names", 'give ["b12x"]')
        out.append((name, tuple(items)))
    return tuple(out)
