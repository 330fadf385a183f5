"""Provider adapters against a local fake of the Vast REST API (http.server on 127.0.0.1).

Retries on 429/5xx (``Retry-After`` honoured), "no such instance" counts as done, a destroy or stop is
confirmed only by the provider's own listing, and the API key never shows in a message or a log.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from console.backoff import Backoff
from ops.providers import ProviderError
from ops.providers.manual import ManualProvider
from ops.providers.vast import VastProvider, load_api_key
from testbed.ports import free_port
from tests.support.fake_vast import FakeVast, FakeVastServer
from tests.test_timers import process_tz  # noqa: F401 - the timer suite runs under every TZ

KEY = "vk-" + "7" * 40
IID = "24871932"


@pytest.fixture
def fake() -> Iterator[tuple[FakeVast, str]]:
    f = FakeVast(api_key=KEY)
    f.add(IID)
    with FakeVastServer(f) as url:
        yield f, url


def client(url: str, sleeps: list[float] | None = None, **kw: Any) -> VastProvider:
    sink = sleeps if sleeps is not None else []
    return VastProvider(KEY, url, sleep=sink.append, **({"backoff_s": 0.5, "poll_s": 0.01} | kw))


def test_destroy_retries_429_and_5xx_then_confirms_gone(fake: tuple[FakeVast, str]) -> None:
    f, url = fake
    f.fail("DELETE", [429, 502, 503], retry_after="7")
    f.fail("GET", [504])
    sleeps: list[float] = []
    result = client(url, sleeps).destroy(IID)
    assert result.confirmed and result.state == "gone"
    assert f.count("DELETE") == 4 and IID not in f.instances
    assert sleeps[:3] == [7.0, 7.0, 7.0]  # Retry-After honoured
    assert all(auth for _, _, auth in f.requests)


def test_backoff_grows_without_retry_after(fake: tuple[FakeVast, str]) -> None:
    """Without Retry-After, retry n waits console/backoff.py's full-jitter draw under min(max, 0.5 * 2**n)."""
    f, url = fake
    f.fail("DELETE", [500, 503, 429])
    sleeps: list[float] = []
    VastProvider(KEY, url, sleep=sleeps.append, backoff_s=0.5, poll_s=0.01, rng=random.Random(5)).destroy(IID)
    same = Backoff(0.5, 30.0, random.Random(5))
    assert sleeps[:3] == [same.delay(0), same.delay(1), same.delay(2)]
    assert all(0.0 <= d <= top for d, top in zip(sleeps[:3], [0.5, 1.0, 2.0], strict=True))


def test_gives_up_after_its_tries_with_a_clear_error(fake: tuple[FakeVast, str]) -> None:
    f, url = fake
    f.fail("DELETE", [503] * 10)
    with pytest.raises(
        ProviderError, match=r"gave up after 3 tries \(HTTP 503 scripted 503\).*still be billing"
    ):
        client(url, tries=3).destroy(IID)
    assert IID in f.instances


def test_no_such_instance_counts_as_done(fake: tuple[FakeVast, str]) -> None:
    f, url = fake
    result = client(url).destroy("99999")
    assert result.confirmed and result.state == "gone" and f.count("DELETE") == 1


def test_a_bare_404_is_never_read_as_destroyed(fake: tuple[FakeVast, str]) -> None:
    _, url = fake
    with pytest.raises(ProviderError, match="HTTP 404"):
        client(url + "/not-vast").destroy(IID)


def test_not_confirmed_when_the_instance_stays(fake: tuple[FakeVast, str]) -> None:
    f, url = fake
    f.settle_polls = 10_000
    ticks = iter(range(1000))
    p = VastProvider(
        KEY, url, sleep=lambda s: None, poll_s=1, confirm_timeout_s=5, monotonic=lambda: next(ticks)
    )
    result = p.destroy(IID)
    assert not result.confirmed and result.state == "running" and "not confirmed" in result.detail


def test_stop_is_confirmed_when_vast_reports_stopped(fake: tuple[FakeVast, str]) -> None:
    f, url = fake
    f.settle_polls = 2
    result = client(url).stop(IID)
    assert result.confirmed and result.state == "stopped"
    assert f.instances[IID]["actual_status"] == "stopped"


def test_a_refused_key_is_not_retried_and_not_shown(
    fake: tuple[FakeVast, str], caplog: pytest.LogCaptureFixture
) -> None:
    f, url = fake
    caplog.set_level(logging.DEBUG)
    wrong = "vk-wrong-" + "1" * 30
    with pytest.raises(ProviderError, match="refused the API key") as err:
        VastProvider(wrong, url, sleep=lambda s: None).destroy(IID)
    assert wrong not in str(err.value) and wrong not in caplog.text
    assert f.count("DELETE") == 1 and IID in f.instances
    assert KEY not in repr(VastProvider(KEY, url))


def test_unreachable_api_is_retried_then_reported() -> None:
    port = free_port()  # nobody listens on it
    sleeps: list[float] = []
    with pytest.raises(ProviderError, match="cannot reach http://127.0.0.1"):
        client(f"http://127.0.0.1:{port}", sleeps, tries=3).destroy(IID)
    assert len(sleeps) == 2


def test_instance_ids_are_checked_before_any_request(fake: tuple[FakeVast, str]) -> None:
    f, url = fake
    with pytest.raises(ProviderError, match="expected digits"):
        client(url).destroy("1/../../users")
    assert f.requests == []


def test_api_key_lookup_order(tmp_path: Path) -> None:
    home = tmp_path / "home"
    legacy = home / ".vast_api_key"
    legacy.parent.mkdir()
    legacy.write_text("legacy-key\n")
    assert load_api_key({}, home) == "legacy-key"
    xdg = tmp_path / "xdg" / "vastai" / "vast_api_key"
    xdg.parent.mkdir(parents=True)
    xdg.write_text("xdg-key")
    assert load_api_key({"XDG_CONFIG_HOME": str(tmp_path / "xdg")}, home) == "xdg-key"
    assert (
        load_api_key({"VAST_API_KEY": "env-key", "XDG_CONFIG_HOME": str(tmp_path / "xdg")}, home) == "env-key"
    )
    with pytest.raises(ProviderError, match=r"set VAST_API_KEY or write the key to one of .*vast_api_key"):
        load_api_key({}, tmp_path / "empty")


def test_manual_hosts_cannot_be_destroyed() -> None:
    with pytest.raises(ProviderError, match="use the 'shutdown' action"):
        ManualProvider().destroy("pro-a")


@pytest.mark.parametrize("url", ["http://console.vast.ai", "http://203.0.113.9:8080", "ftp://127.0.0.1/"])
def test_the_key_never_travels_in_clear_text(url: str) -> None:
    """VAST_URL pointing at plain http elsewhere than this machine would send the key readable en route."""
    with pytest.raises(ProviderError, match="only sent over https") as err:
        VastProvider(KEY, url)
    assert KEY not in str(err.value)


@pytest.mark.parametrize(
    "url", ["https://console.vast.ai/", "http://127.0.0.1:9", "http://[::1]:9", "http://localhost:9"]
)
def test_https_or_this_machine_is_accepted(url: str) -> None:
    assert VastProvider(KEY, url).base_url == url.rstrip("/")
