"""The console's one error family: what went wrong, what to do, and the exit status it maps to.

Every error the operator can act on derives from ``ConsoleError``. The CLI prints it as one line and exits
with ``exit_code(exc)``; the TUI shows it in a notification. Anything else that escapes is a bug and is
allowed to surface as one (a traceback), never reworded into a message that hides it.

The categories are the exit statuses scripts rely on:

* 1 ``Refused``: the console, the box or its agent refused what was asked, or a check or tripwire failed
  (``campaign check`` and ``campaign tripwire`` exit 1 on a fail verdict).
* 2 ``InputError``: the input cannot be acted on as given (a malformed flag, an unknown box or arm, a file
  that is not a state.db).
* 3 ``Unreachable``: a box could not be reached safely (network, SSH, its host key, a journal that
  disagrees with state.db).
* 130 ``Interrupted``: the operator stopped it (Ctrl-C, SIGTERM); resumable work says how to resume.

This module imports nothing of the console, so every layer (store, fleet, service, providers) can use it.
"""

from __future__ import annotations


class ConsoleError(Exception):
    """An error the operator can act on. ``message`` says what and where; ``hint`` what to do about it."""

    exit_code = 2

    def __init__(self, message: str, hint: str = ""):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}; {self.hint}" if self.hint else self.message


class Refused(ConsoleError):
    """Policy, the box or its agent said no; or what ran reported a failure (a check, a tripwire)."""

    exit_code = 1


class InputError(ConsoleError):
    """The input cannot be acted on as given."""

    exit_code = 2


class Unreachable(ConsoleError):
    """A box could not be reached safely; nothing was done on it beyond what the message says."""

    exit_code = 3


class Interrupted(ConsoleError):
    """The operator interrupted the work."""

    exit_code = 130


def exit_code(exc: ConsoleError) -> int:
    """The process exit status for ``exc``: the one place that maps errors to statuses."""
    return exc.exit_code
