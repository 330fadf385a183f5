"""Vast.ai REST client for the hard stop: stop and destroy an instance, confirmed by the provider.

Follows the Vast CLI's own conventions (docs/facts.md, The Vast.ai REST API): ``Authorization: Bearer <key>``,
``/api/v0/instances/{id}/``, retries on 429 and 5xx with backoff (``Retry-After`` honoured), and the
key looked up as ``VAST_API_KEY``, then ``$XDG_CONFIG_HOME/vastai/vast_api_key``, then the legacy
``~/.vast_api_key``. "No such instance" means the work is already done, which makes destroy idempotent
(dstack does the same). A destroy counts only when the instance is gone from the provider's own listing.

The key is held in one private attribute, sent only in the Authorization header, and never appears
in a message, a repr, the store or a log.
"""

from __future__ import annotations

import ipaddress
import json
import os
import random
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from console.backoff import Backoff
from ops.providers.base import ProviderError, ProviderResult

DEFAULT_URL = "https://console.vast.ai"
RETRY_STATUS = frozenset({429, 500, 502, 503, 504})


def _key_safe_url(url: str) -> str:
    """The API base, refused unless the key would travel encrypted or never leave this machine."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if parts.scheme == "https" or (parts.scheme == "http" and loopback):
        return url.rstrip("/")
    raise ProviderError(
        f"Vast API URL {url!r} (VAST_URL): the API key is only sent over https, or over http "
        "to this machine (127.0.0.1, ::1, localhost); fix or unset VAST_URL"
    )


def key_paths(env: Mapping[str, str], home: Path) -> list[Path]:
    xdg = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else home / ".config"
    return [xdg / "vastai" / "vast_api_key", home / ".vast_api_key"]


def load_api_key(env: Mapping[str, str] | None = None, home: Path | None = None) -> str:
    env = os.environ if env is None else env
    home = Path.home() if home is None else home
    if env.get("VAST_API_KEY", "").strip():
        return env["VAST_API_KEY"].strip()
    for path in key_paths(env, home):
        if path.is_file():
            key = path.read_text().strip()
            if key:
                return key
    tried = ", ".join(str(p) for p in key_paths(env, home))
    raise ProviderError(f"no Vast API key: set VAST_API_KEY or write the key to one of {tried}")


class VastProvider:
    name = "vast"
    can_destroy = True

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        tries: int = 5,
        backoff_s: float = 0.5,
        max_backoff_s: float = 30.0,
        timeout_s: float = 30.0,
        confirm_timeout_s: float = 300.0,
        poll_s: float = 5.0,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ):
        self.base_url = _key_safe_url(base_url or os.environ.get("VAST_URL") or DEFAULT_URL)
        self.__key = api_key or load_api_key()
        self.tries = tries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self._backoff = Backoff(backoff_s, max_backoff_s, rng)  # retry n waits U(0, min(max, base * 2**n))
        self.timeout_s = timeout_s
        self.confirm_timeout_s = confirm_timeout_s
        self.poll_s = poll_s
        self._sleep = sleep
        self._monotonic = monotonic
        self.requests = 0  # HTTP requests sent, retries included (reported in results)

    def __repr__(self) -> str:
        return f"VastProvider(base_url={self.base_url!r})"

    # -- HTTP with retries -----------------------------------------------------------------------
    def _delay(self, attempt: int, retry_after: str | None) -> float:
        if retry_after and retry_after.strip().isdigit():
            return min(float(retry_after), self.max_backoff_s)
        return self._backoff.delay(attempt - 1)

    def _request(
        self, method: str, path: str, body: dict[str, Any] | None = None
    ) -> tuple[int, dict[str, Any]]:
        data = None if body is None else json.dumps(body).encode()
        last = ""
        for attempt in range(1, self.tries + 1):
            self.requests += 1
            req = urllib.request.Request(
                self.base_url + path,
                data=data,
                method=method,
                headers={
                    "Authorization": f"Bearer {self.__key}",
                    "Accept": "application/json",
                    "Content-Type": "application/json",
                    "User-Agent": "campaign-console",
                },
            )
            try:
                with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                    return resp.status, _json(resp.read())
            except urllib.error.HTTPError as exc:
                status, payload = exc.code, _json(exc.read())
                if status in (401, 403):
                    raise ProviderError(
                        f"Vast refused the API key ({method} {path}: HTTP {status}); check VAST_API_KEY "
                        "or the key file"
                    ) from None
                if status not in RETRY_STATUS:
                    return status, payload
                last = f"HTTP {status} {_message(payload)}".strip()
                retry_after = exc.headers.get("Retry-After")
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                reason = getattr(exc, "reason", exc)
                last = f"cannot reach {self.base_url}: {reason}"
                retry_after = None
            if attempt < self.tries:
                self._sleep(self._delay(attempt, retry_after))
        raise ProviderError(
            f"{method} {path}: gave up after {self.tries} tries ({last}); the provider may "
            "still be billing: check the instance in the Vast console"
        )

    # -- operations ------------------------------------------------------------------------------
    def show(self, instance_id: str) -> dict[str, Any] | None:
        """The instance as Vast reports it, or None when Vast has no such instance."""
        path = f"/api/v0/instances/{_checked(instance_id)}/?owner=me"
        status, payload = self._request("GET", path)
        if _no_such_instance(status, payload):
            return None
        if status >= 400 or "instances" not in payload:
            raise ProviderError(f"GET {path}: HTTP {status} {_message(payload) or 'no instances field'}")
        instance = payload["instances"]
        if isinstance(instance, list):
            instance = instance[0] if instance else None
        return instance or None

    def destroy(self, instance_id: str) -> ProviderResult:
        start = self.requests
        path = f"/api/v0/instances/{_checked(instance_id)}/"
        status, payload = self._request("DELETE", path, {})
        if not _no_such_instance(status, payload) and (status >= 400 or payload.get("success") is False):
            raise ProviderError(f"DELETE {path}: HTTP {status} {_message(payload)}")
        return self._confirm(instance_id, start, want=None)

    def stop(self, instance_id: str) -> ProviderResult:
        start = self.requests
        path = f"/api/v0/instances/{_checked(instance_id)}/"
        status, payload = self._request("PUT", path, {"state": "stopped"})
        if not _no_such_instance(status, payload) and (status >= 400 or payload.get("success") is False):
            raise ProviderError(f"PUT {path} state=stopped: HTTP {status} {_message(payload)}")
        return self._confirm(instance_id, start, want="stopped")

    def _confirm(self, instance_id: str, start: int, want: str | None) -> ProviderResult:
        """Poll until Vast's own listing shows the instance gone (destroy) or stopped (stop)."""
        give_up = self._monotonic() + self.confirm_timeout_s
        while True:
            instance = self.show(instance_id)
            if instance is None:
                return ProviderResult(
                    True, "gone", f"instance {instance_id}: no such instance at Vast", self.requests - start
                )
            state = str(instance.get("actual_status") or instance.get("cur_state") or "unknown")
            if want is not None and state == want:
                return ProviderResult(
                    True,
                    state,
                    f"instance {instance_id}: Vast reports {state}",
                    self.requests - start,
                    instance,
                )
            if self._monotonic() >= give_up:
                return ProviderResult(
                    False,
                    state,
                    f"instance {instance_id}: still {state} after {self.confirm_timeout_s:.0f}s; not confirmed",
                    self.requests - start,
                    instance,
                )
            self._sleep(self.poll_s)


def _checked(instance_id: str) -> str:
    text = str(instance_id).strip()
    if not text.isdigit():
        raise ProviderError(f"Vast instance id {instance_id!r}: expected digits, e.g. 24871932")
    return text


def _json(raw: bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw or b"{}")
    except ValueError:
        return {"msg": raw[:200].decode(errors="replace")}
    return value if isinstance(value, dict) else {"value": value}


def _message(payload: dict[str, Any]) -> str:
    return str(payload.get("msg") or payload.get("error") or "")


def _no_such_instance(status: int, payload: dict[str, Any]) -> bool:
    """Vast's own "no such instance" answer. A bare 404 is not one: a wrong URL or a proxy must never
    be read as "destroyed" while the instance goes on billing."""
    return payload.get("error") == "no_such_instance"
