"""What every provider adapter shares: the answer it gives, the error it raises, and the shape of an adapter.

A leaf of ``ops.providers``: the adapters (vast.py, manual.py) import it, and the package's ``for_box``
imports them, so no adapter imports the package that picks it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from console.errors import ConsoleError


class ProviderError(ConsoleError):
    """The provider refused or could not be reached; the message says what and how to fix it."""


@dataclass
class ProviderResult:
    confirmed: bool  # the provider says the instance is in the asked-for state (or gone)
    state: str  # what the provider last reported: 'gone', 'stopped', 'running', ...
    detail: str
    attempts: int = 1  # HTTP requests it took, retries included
    raw: dict[str, Any] = field(default_factory=dict)


class Provider(Protocol):
    name: str
    can_destroy: bool  # False for hosts on a contract: a timer may not ask for destroy

    def stop(self, instance_id: str) -> ProviderResult: ...

    def destroy(self, instance_id: str) -> ProviderResult: ...
