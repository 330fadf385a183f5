"""Monthly and owned hosts: the console can power them off over SSH but never destroy them.

Destroying such a host means ending a contract, which is a human's decision; a timer that asks for it
is refused with the alternative instead of pretending the host is gone.
"""

from __future__ import annotations

from ops.providers.base import ProviderError, ProviderResult


class ManualProvider:
    name = "manual"
    can_destroy = False

    def _refuse(self, what: str, instance_id: str) -> ProviderResult:
        raise ProviderError(
            f"{what} of {instance_id or 'this host'}: a manual (monthly) host has no provider API; "
            "use the 'shutdown' action to power it off, and end the contract with its provider yourself"
        )

    def stop(self, instance_id: str) -> ProviderResult:
        return self._refuse("stop", instance_id)

    def destroy(self, instance_id: str) -> ProviderResult:
        return self._refuse("destroy", instance_id)
