"""The load generator run by hand: it takes ``--base-url`` the way the openai client and ``vllm bench serve``
users type it (with or without ``/v1``), and it leaves nothing in the directory it was started from.

The server is testbed/zero_server.py, a real process framing its answers as vLLM does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from agents.loadgen.run import PATH, target_of
from console.fleet.push import DEFAULT_HOME
from tests.support.listening import start_listening, stop

ROOT = Path(__file__).resolve().parent.parent
ZERO_SERVER = [sys.executable, str(ROOT / "testbed" / "zero_server.py"), "--port", "0"]

HOSTS = st.sampled_from(["127.0.0.1", "localhost", "box-a.example", "[::1]"])
SEGMENT = st.from_regex(r"[a-z0-9_.-]{1,8}", fullmatch=True).filter(lambda s: s not in ("v1", ".", ".."))


@given(
    host=HOSTS,
    port=st.integers(1, 65535),
    prefix=st.lists(SEGMENT, max_size=3),
    api=st.booleans(),
    slashes=st.integers(0, 2),
)
def test_every_form_of_a_base_url_names_the_same_server_root(
    host: str, port: int, prefix: list[str], api: bool, slashes: int
) -> None:
    """The root, the root with ``/v1`` (the openai client's base_url), each with trailing slashes: one root,
    and the completions path under it once."""
    from agents.loadgen.wire import server_root

    root = f"http://{host}:{port}" + "".join(f"/{s}" for s in prefix)
    typed = root + ("/v1" if api else "") + "/" * slashes
    assert server_root(typed) == root
    assert server_root(root) == root
    target = target_of(typed, "m", None)
    assert (target.port, target.path) == (port, "".join(f"/{s}" for s in prefix) + PATH)
    assert "/v1/v1" not in target.path


@given(st.text(max_size=60))
@example("http://127.0.0.1:8100/v1/v1/")
@example("http://127.0.0.1:99999/v1")
@example("https://127.0.0.1:8100/v1")
@example("http://127.0.0.1:8100/v1?x=1")
def test_the_normaliser_is_idempotent_or_refuses_in_one_line(text: str) -> None:
    """Whatever is typed: a root that normalises to itself and never ends in ``/`` or ``/v1``, or a one-line
    ValueError that quotes what was given."""
    from agents.loadgen.wire import server_root

    try:
        root = server_root(text)
    except ValueError as exc:
        message = str(exc)
        assert message.startswith("--base-url ") and "\n" not in message.replace(text, "")
        return
    assert root.startswith("http://")
    assert server_root(root) == root
    assert not root.endswith("/") and not root.endswith("/v1")


@pytest.fixture(scope="module")
def zero_server() -> Iterator[str]:
    proc, url = start_listening(ZERO_SERVER)
    yield url
    stop(proc)


def _loadgen(cwd: Path, home: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """``python -m agents.loadgen ARGV`` as an operator runs it by hand, from ``cwd`` with HOME ``home``."""
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "agents.loadgen", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


RUN = (
    *("--model", "zero", "--vocab-size", "500", "--input-len", "8", "--output-len", "4"),
    *("--concurrency", "2", "--prompts", "6", "--warmup", "0", "--json", "--quiet"),
)


@pytest.mark.parametrize("form", ["{}/v1", "{}/v1/", "{}/", "{}"])
def test_a_run_by_hand_takes_the_api_base_and_writes_nothing_into_the_cwd(
    zero_server: str, tmp_path: Path, form: str
) -> None:
    cwd, home = tmp_path / "checkout", tmp_path / "home"
    cwd.mkdir()
    home.mkdir()
    done = _loadgen(cwd, home, "--base-url", form.format(zero_server), *RUN)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["completed"] == 6 and out["failed"] == 0
    assert [u["base_url"] for u in out["per_url"]] == [zero_server]
    assert list(cwd.iterdir()) == []  # five loadgen-*.jsonl were once left in a checkout this way
    records = Path(out["records_path"])
    assert records.parent == home / ".campaign-agent" / "loadgen" and records.name.startswith("loadgen-")
    assert len(records.read_text().splitlines()) == 7  # the run's header and its six requests
    assert {p.stat().st_mode & 0o777 for p in (records.parent, records.parent.parent)} == {0o700}


def test_out_names_the_folder_and_records_with_out_is_refused(zero_server: str, tmp_path: Path) -> None:
    cwd, home, out_dir = tmp_path / "cwd", tmp_path / "home", tmp_path / "runs" / "today"
    cwd.mkdir()
    home.mkdir()
    done = _loadgen(cwd, home, "--base-url", zero_server, "--out", str(out_dir), *RUN)
    assert done.returncode == 0, done.stderr
    records = Path(json.loads(done.stdout)["records_path"])
    assert records.parent == out_dir and records.is_file()
    assert list(cwd.iterdir()) == [] and list(home.iterdir()) == []
    both = _loadgen(cwd, home, "--base-url", zero_server, "--out", str(out_dir), "--records", "r.jsonl", *RUN)
    assert both.returncode == 2
    [line] = both.stderr.strip().splitlines()
    assert "--records r.jsonl and --out" in line and "give one" in line


def test_the_default_agent_home_is_the_consoles() -> None:
    """The records folder sits in the home the console gives the agent when the box names none."""
    from agents.loadgen.cli import AGENT_HOME

    assert str(AGENT_HOME) == DEFAULT_HOME
