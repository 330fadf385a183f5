"""Provider adapters: how a box is stopped or destroyed at the company that rents it out.

The console marks a box destroyed only when its provider confirms (dstack #1551 marked boxes
terminated that went on billing). Adapters are synchronous and stdlib-only; callers on an event
loop run them in a thread.
"""

from __future__ import annotations

from ops.providers.base import Provider, ProviderError, ProviderResult


def for_box(provider: str | None) -> Provider:
    """The adapter for a box's ``provider`` column: 'vast', or none/'manual' for monthly hosts."""
    if provider == "vast":
        from ops.providers.vast import VastProvider

        return VastProvider()
    if provider in (None, "", "manual"):
        from ops.providers.manual import ManualProvider

        return ManualProvider()
    raise ProviderError(f"unknown provider {provider!r}: known providers are 'vast' and 'manual'")


__all__ = ["Provider", "ProviderError", "ProviderResult", "for_box"]
