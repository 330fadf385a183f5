"""A serving env whose Python cannot run the tripwire's client: ``campaign check`` says so in one line, and a
sweep refuses the box before it launches anything (each arm used to load, serve, then end "crashed" at its
tripwire).

The box is this machine (the ``local`` box, its agent a real process); the serving env is the fake engine's
(testbed/fake_engine.py) with its ``bin/python`` started without site-packages, so ``openai`` is not there."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from console.recipes import load_catalog
from console.service import Service
from console.service.sweep import SweepError, SweepOptions
from console.store import Store
from testbed.fleet_fixtures import FAST
from testbed.ports import free_ports
from testbed.sweep_recipes import RECIPES
from tests.support.cli import run_cli

pytestmark = pytest.mark.timeout(240)


def _without_openai(env_dir: Path) -> Path:
    """Make the env's ``bin/python`` this interpreter without site-packages: no openai, as an env built
    without it."""
    python = env_dir / "bin" / "python"
    python.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    python.chmod(0o755)
    return python


def test_the_probe_asks_the_python_itself(tmp_path: Path) -> None:
    """The agent's side, unjudged: the same interpreter with and without its site-packages."""
    from agents.tripwire.runnable import tripwire_client

    good = tripwire_client(None)
    assert good["error"] is None and good["openai_version"], good
    assert good["python"] == sys.executable
    (tmp_path / "bin").mkdir()
    bad = tripwire_client(str(_without_openai(tmp_path)))
    assert bad["error"] is not None and "\n" not in bad["error"]
    assert bad["error"].startswith("ClientError: the openai package is not importable")
    missing = tripwire_client(str(tmp_path / "nope" / "python"))
    assert missing["error"] is not None and "could not run" in missing["error"]


def test_verdicts_from_probe_dicts() -> None:
    from console.checks.tripwire_client import check_tripwire_client

    assert check_tripwire_client({}) == []  # an agent that predates the check: nothing to judge
    client = {
        "python": "/env/bin/python",
        "python_version": "3.12.3",
        "openai_version": "1.99.0",
        "error": None,
    }
    [ok] = check_tripwire_client({"tripwire_client": client})  # type: ignore[typeddict-item]
    assert (
        ok.verdict == "ok" and "/env/bin/python (Python 3.12.3)" in ok.reason and "openai 1.99.0" in ok.reason
    )
    broken = {**client, "openai_version": None, "error": "ModuleNotFoundError: No module named 'openai'"}
    [fail] = check_tripwire_client({"tripwire_client": broken}, "pro-a")  # type: ignore[typeddict-item]
    assert fail.verdict == "fail" and "\n" not in fail.reason
    assert fail.reason.startswith("/env/bin/python cannot run the tripwire's client (ModuleNotFoundError")
    assert "`campaign box set pro-a --serving-env DIR`" in fail.reason


def _serving_env(db: Path) -> Path:
    with Store(db) as store:
        env = store.boxes.get("local").serving_env
    assert env is not None
    return Path(env)


def test_check_fails_the_box_in_one_line_and_the_sweep_launches_nothing(
    local_db: Path, tmp_path: Path
) -> None:
    python = _without_openai(_serving_env(local_db))
    code, out, err = run_cli(local_db, "check", "local", "--json")
    assert code == 1, err
    verdicts = {v["check"]: v for v in json.loads(out)["verdicts"]}
    verdict = verdicts["tripwire_client"]
    assert verdict["verdict"] == "fail" and "\n" not in verdict["reason"]
    assert verdict["reason"].startswith(
        f"{python} cannot run the tripwire's client (ClientError: the openai package is not importable"
    )
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "fake.toml").write_text(RECIPES)

    async def sweep(force: bool) -> None:
        with Store(local_db) as store:
            service = Service(store, catalog=load_catalog([recipes]), settings=FAST)
            try:
                opened, _ = service.open_sweep("fake-test", "local", ["short"])
                options = SweepOptions(kill_grace_s=2, prompts=4, base_port=free_ports(1), force=force)
                await service.run_sweep(opened.id, options)
            finally:
                await service.close()

    with pytest.raises(SweepError, match="failed its last check.*tripwire_client"):
        asyncio.run(sweep(force=False))
    # --force launches past a failed check; not past this one, which would fail every arm after its launch.
    with pytest.raises(
        SweepError, match=r"cannot run the tripwire's client \(ClientError: the openai package"
    ):
        asyncio.run(sweep(force=True))
    with Store(local_db) as store:
        assert store.rows("SELECT id FROM launches") == []
        states = {a.state for a in store.sweeps.arms(1)}
        assert states <= {"pending", "interrupted"} and "crashed" not in states


def test_a_serving_env_that_runs_the_client_passes_the_check(local_db: Path) -> None:
    code, out, err = run_cli(local_db, "check", "local", "--json")
    verdicts = {v["check"]: v for v in json.loads(out)["verdicts"]}
    assert verdicts["tripwire_client"]["verdict"] == "ok", (code, err)
