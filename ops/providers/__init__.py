"""Provider adapters: how a box is stopped or destroyed at the company that rents it out.

The console marks a box destroyed only when its provider confirms (dstack #1551 marked boxes
terminated that went on billing). Adapters are synchronous and stdlib-only; callers on an event
loop run them in a thread.
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


def for_box(provider: str | None) -> Provider:
    """The adapter for a box's ``provider`` column: 'vast', or none/'manual' for monthly hosts."""
    if provider == "vast":
        from ops.providers.vast import VastProvider

        return VastProvider()
    if provider in (None, "", "manual"):
        from ops.providers.manual import ManualProvider

        return ManualProvider()
    raise ProviderError(f"unknown provider {provider!r}: known providers are 'vast' and 'manual'")
