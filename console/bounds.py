"""The range of every number an operator types, defined once for the CLI, the TUI and the service.

Python reads far more than a command means: ``int()`` takes ``99999999999999999999``, which passes every
check written as ``value < 1`` and then breaks the first SQLite statement that carries it (its integers
are 64-bit), after the box was already asked to act on it; ``float()`` takes ``nan``, ``inf`` and
``1e400`` (inf), and a nan timeout compares false with everything, so every ``<`` check lets it through.
So each kind of number has one bound here: the adapters parse what was typed with ``parse`` (the CLI as
argparse ``type=``, through ``console.cli.common``; the TUI's prompts directly) and the service refuses the
same out-of-range values with ``check``, so no adapter (or script) gets past them. An error is one line:
what was given, what the number must be, and what to do.

This module imports only ``console.errors``: the store, the service and the TUI may all import it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from console.errors import InputError

SQLITE_INT_MAX = 2**63 - 1
"""The largest integer SQLite stores; a seed or id above it cannot be recorded, so it is never accepted."""

_WHOLE = re.compile(r"[+-]?[0-9]+", re.ASCII)
_SHOWN = 40
"""How much of a refused value the message repeats (a pasted paragraph must not become the error)."""


class OutOfBounds(InputError, ValueError):
    """A typed number that is not one, or lies outside its range. A ``ValueError`` too, so a caller that reads
    a value as one of several forms (a duration, else an instant) can fall through to the next."""


def shown(text: str) -> str:
    """``text`` as an error repeats it: quoted and escaped (never a second line), cut when long."""
    return repr(text if len(text) <= _SHOWN else text[:_SHOWN] + "...")


def _number(value: float) -> str:
    """``30``, ``0.5``, ``604800``: a bound as the operator would type it (never ``6.048e+05``)."""
    return str(int(value)) if value == int(value) else repr(value)


@dataclass(frozen=True)
class IntBound:
    """A whole number from ``low`` to ``high`` inclusive: ``noun`` names it, ``todo`` says what to give instead."""

    noun: str
    low: int
    high: int
    todo: str

    @property
    def allowed(self) -> str:
        high = "2^63-1, SQLite's largest integer" if self.high == SQLITE_INT_MAX else str(self.high)
        return f"a whole number, {self.low} or more, and at most {high}"

    def parse(self, text: str) -> int:
        """The number ``text`` spells in ASCII digits (an optional sign, no spaces inside), within the bound."""
        word = text.strip()
        if not _WHOLE.fullmatch(word):
            raise OutOfBounds(
                f"{shown(text)} is not a whole number: {self.noun} must be {self.allowed}", self.todo
            )
        digits = word.lstrip("+-").lstrip("0")
        if len(digits) > len(str(SQLITE_INT_MAX)):  # too long to be in any bound; int() of it costs time
            raise self._outside(shown(text))
        return self._within(int(word), shown(text))

    def check(self, value: int, name: str) -> int:
        """``value`` as the service received it (``name`` is the option or field), refused outside the bound."""
        if isinstance(value, bool) or not isinstance(value, int):
            raise OutOfBounds(f"{name} {value!r}: {self.noun} must be {self.allowed}", self.todo)
        return self._within(value, f"{name} {value}")

    def _within(self, value: int, said: str) -> int:
        if not self.low <= value <= self.high:
            raise self._outside(said)
        return value

    def _outside(self, said: str) -> OutOfBounds:
        return OutOfBounds(f"{said} is out of range: {self.noun} must be {self.allowed}", self.todo)


@dataclass(frozen=True)
class FloatBound:
    """A finite number from ``low`` (excluded when ``above``) to ``high`` inclusive, in ``unit``."""

    noun: str
    low: float
    high: float
    unit: str
    todo: str
    above: bool = False
    """True: ``low`` itself is refused (a timeout of 0 s); False: it is allowed (a price of 0)."""

    @property
    def allowed(self) -> str:
        low = f" above {_number(self.low)}" if self.above else f", {_number(self.low)} or more,"
        return f"a finite number{low} and at most {_number(self.high)}{self.unit}"

    def parse(self, text: str) -> float:
        """The number ``text`` spells (``float()``'s forms), refused when nan, infinite or outside the bound."""
        try:
            value = float(text)
        except ValueError:
            raise OutOfBounds(
                f"{shown(text)} is not a number: {self.noun} must be {self.allowed}", self.todo
            ) from None
        return self._within(value, shown(text))

    def check(self, value: float, name: str) -> float:
        """``value`` as the service received it (``name`` is the option or field), refused outside the bound."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise OutOfBounds(f"{name} {value!r}: {self.noun} must be {self.allowed}", self.todo)
        return self._within(float(value), f"{name} {value}")

    def _within(self, value: float, said: str) -> float:
        if not math.isfinite(value):
            raise OutOfBounds(f"{said} is not a finite number: {self.noun} must be {self.allowed}", self.todo)
        if value < self.low or (self.above and value == self.low) or value > self.high:
            raise OutOfBounds(f"{said} is out of range: {self.noun} must be {self.allowed}", self.todo)
        return value + 0.0  # -0.0 reads as 0.0 from here on


# -- the bounds: one per kind of number an operator types -------------------------------------------------
SEED = IntBound(
    "a seed", 0, SQLITE_INT_MAX, "give one in that range (it is stored with the row), or none for a new seed"
)
ROW_ID = IntBound("an id", 1, SQLITE_INT_MAX, "give an id the matching list or status command shows")
CONCURRENCY = IntBound("a concurrency", 1, 16384, "give the streams in flight, e.g. 1, 8 or 64")
PROMPTS = IntBound("a prompt count", 1, 1_000_000, "give the measured requests, e.g. 256")
REPEAT = IntBound("a repeat count", 1, 100, "give the runs to store as one group, e.g. 3")
WORKLOAD_ITERS = IntBound("a level count", 1, 32, "give the levels between a curve's anchors, e.g. 4")
MAX_TOKENS = IntBound("a token cap", 1, 1_000_000, "give tokens per answer, or none for the default")
POSITIONS = IntBound("a position count", 1, 10_000_000, "give the positions to sample, or none for all")
TOP_K = IntBound("a top-k", 1, 1000, "give the log-probabilities per position the servers return, e.g. 20")
LOG_LINES = IntBound("a line count", 1, 100_000, "give the lines of the log to read, e.g. 40")
PORT = IntBound(
    "a server port", 1024, 65535, "give an unprivileged port, or none for the first free from 8100"
)
GPU_INDEX = IntBound("a GPU index", 0, 1023, "give the indexes nvidia-smi shows, e.g. 0,1")

WAIT_S = FloatBound("a timeout", 0.0, 7 * 86400.0, " seconds (7 days)", "give seconds, e.g. 900", above=True)
GRACE_S = FloatBound("a grace", 0.0, 3600.0, " seconds", "give seconds between SIGTERM and SIGKILL, e.g. 30")
INTERVAL_S = FloatBound("an interval", 0.0, 3600.0, " seconds", "give seconds, e.g. 1", above=True)
REQUEST_RATE = FloatBound(
    "a request rate", 0.01, 10_000.0, " requests/s", "give arrivals per second, e.g. 0.5 or 20"
)
"""``--rate``: open-loop arrivals (agents/loadgen/arrivals.py); below 1 request/s is a rate like any other."""
BURSTINESS = FloatBound(
    "a burstiness", 0.01, 100.0, "", "give the gamma shape of the arrivals: 1 is Poisson, below 1 burstier"
)
"""``--burstiness``: the gamma shape of the arrival intervals (their CV is 1/sqrt(K))."""
PRICE_PER_HOUR = FloatBound(
    "a price",
    0.0,
    10_000.0,
    " USD per hour",
    "give what the box costs per hour, e.g. 2.74 (0 for an owned box)",
)
POWER_LIMIT_W = FloatBound(
    "a power limit",
    0.0,
    5000.0,
    " W",
    "give the enforced limit per GPU the runs ran under, e.g. 600",
    above=True,
)
"""``--power-limit``: per GPU, as the console's own rows record it (the box's enforced limit)."""
INTERACTIVITY = FloatBound(
    "an interactivity",
    0.0,
    1_000_000.0,
    " tok/s/user",
    "give output tokens per second per user, e.g. 40",
    above=True,
)
"""``campaign compare --at-interactivity``: the operating point the curves are read at."""
AVG_POWER_W = FloatBound(
    "an average power",
    0.0,
    1_000_000.0,
    " W",
    "give the measured GPUs' average power together, e.g. 1200",
    above=True,
)
"""``campaign compare --at-power``: all the measured GPUs together, as a run's energy figure sums them."""
UTILISATION = FloatBound(
    "a utilisation", 0.0, 1.0, "", "give the share of paid hours worked, e.g. 0.7", above=True
)
