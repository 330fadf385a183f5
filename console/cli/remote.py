"""How a subcommand that reaches a box reports failure: one line, and an exit status scripts can tell apart.

Every command that talks to a box (launch, kill, bench, tripwire, sweep) maps the fleet's failures the
same way, so this is the one place that knows them: 1 the box or its agent refused what was asked,
2 the box is not one the console can drive (unknown, or imported figures), 3 the box could not be
reached safely (network, SSH, its host key, a journal that disagrees with state.db).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from console.cli.common import CliError
from console.fleet import AgentError, HostKeyProblem, JournalMismatch
from console.fleet.link import LINK_ERRORS
from console.service import ServiceError
from console.store import NoSuchBox

REFUSED = 1
NOT_DRIVABLE = 2
UNREACHABLE = 3


def describe(exc: BaseException) -> str:
    """The exception's message, or its name where it has none (a bare ``TimeoutError()``)."""
    return str(exc) or type(exc).__name__


@contextmanager
def reaching(box: str) -> Iterator[None]:
    """Turn what reaching ``box`` can raise into a CliError with its exit status; the rest propagates."""
    try:
        yield
    except (ServiceError, AgentError) as exc:
        raise CliError(str(exc), REFUSED) from exc
    except NoSuchBox as exc:  # BoxNotReachable too: its message names the box and why
        raise CliError(str(exc), NOT_DRIVABLE) from exc
    except (HostKeyProblem, JournalMismatch, *LINK_ERRORS) as exc:
        raise CliError(f"box {box}: {describe(exc)}", UNREACHABLE) from exc
