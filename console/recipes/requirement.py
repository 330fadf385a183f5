"""Version requirements a serving env must meet (a recipe's ``requires_env``), judged against the probe.

WHY its own small parser instead of ``packaging``: the console does not depend on it, and a requirement here
is a few comparisons of PEP 440 versions (``>0.6.18``, ``>=0.32,<0.33``), nothing of markers or extras. The
ordering is PEP 440's: ``X.devN < X.aN < X.bN < X.rcN < X < X.postN``, trailing zeros do not count
(``0.6`` equals ``0.6.0``), and a local tag (``+cu130``) is ignored. Unlike pip, a pre-release or dev build
satisfies a requirement it orders above: a FlashInfer nightly that carries a merged change (PR #4802) is
exactly what an arm may need before a numbered release has it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from console.errors import InputError

_VERSION = re.compile(
    r"^v?(?P<release>[0-9]+(?:\.[0-9]+)*)"
    r"(?:[-_.]?(?P<pre>a|b|rc|alpha|beta|c|pre|preview)[-_.]?(?P<pre_n>[0-9]*))?"
    r"(?:[-_.]?(?:post|rev|r)[-_.]?(?P<post>[0-9]*))?"
    r"(?:[-_.]?dev[-_.]?(?P<dev>[0-9]*))?"
    r"(?:\+[A-Za-z0-9]+(?:[-_.][A-Za-z0-9]+)*)?$",
    re.IGNORECASE,
)
_PRE_RANK = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "rc": 2, "c": 2, "pre": 2, "preview": 2}
_OPS = (">=", "<=", "==", "!=", ">", "<")
REPORTED = ("vllm", "torch", "flashinfer-python", "flashinfer-jit-cache", "flashinfer-cubin")
"""The packages whose versions the probe reports (agents/probe.py) and a recipe's ``requires_env`` may name."""
_BIG = 1 << 62
"""Orders "no dev part" after every dev number, and a plain release after every pre-release."""

VersionKey = tuple[tuple[int, ...], tuple[int, ...], int, int]


def version_key(text: str) -> VersionKey:
    """A key that orders versions as PEP 440 does; ValueError for text that is not a version."""
    m = _VERSION.match(text.strip())
    if m is None:
        raise ValueError(f"{text!r} is not a version (PEP 440: like 0.6.18, 0.6.19rc1, 0.7.0.dev20260904)")
    release = tuple(int(p) for p in m.group("release").split("."))
    while len(release) > 1 and release[-1] == 0:
        release = release[:-1]
    pre, post, dev = m.group("pre"), m.group("post"), m.group("dev")
    if pre is not None:
        phase: tuple[int, ...] = (1, _PRE_RANK[pre.lower()], int(m.group("pre_n") or 0))
    elif dev is not None and post is None:
        phase = (0,)  # X.devN sorts before X's pre-releases
    else:
        phase = (2,)
    return (
        release,
        phase,
        int(post or 0) if post is not None else -1,
        int(dev or 0) if dev is not None else _BIG,
    )


@dataclass(frozen=True)
class Requirement:
    """``package`` must be installed at a version meeting every ``(operator, version)`` clause."""

    package: str
    clauses: tuple[tuple[str, str], ...]

    @property
    def text(self) -> str:
        return ",".join(op + v for op, v in self.clauses)

    def allows(self, version: str) -> bool:
        """Whether ``version`` meets every clause; ValueError when it is not a version."""
        have = version_key(version)
        for op, want_text in self.clauses:
            want = version_key(want_text)
            ok = {
                ">=": have >= want,
                "<=": have <= want,
                "==": have == want,
                "!=": have != want,
                ">": have > want,
                "<": have < want,
            }[op]
            if not ok:
                return False
        return True


def parse_requirement(package: str, text: str, where: str) -> Requirement:
    """``">0.6.18"`` or ``">=0.32, <0.33"`` for ``package``; an InputError naming ``where`` otherwise."""
    clauses: list[tuple[str, str]] = []
    for part in (p.strip() for p in text.split(",")):
        op = next((o for o in _OPS if part.startswith(o)), None)
        if op is None:
            raise InputError(
                f"{where}: {package} = {text!r}: {part!r} has no comparison",
                'write clauses like ">0.6.18" or ">=0.32,<0.33" (operators: ' + " ".join(_OPS) + ")",
            )
        version = part[len(op) :].strip()
        try:
            version_key(version)
        except ValueError as exc:
            raise InputError(f"{where}: {package} = {text!r}: {exc}", 'write e.g. ">0.6.18"') from exc
        clauses.append((op, version))
    return Requirement(package, tuple(clauses))
