"""The fleet's CLI over a real sshd box: box trust / connect, launch's lint gate, kill's confirmation."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from console.cli import main
from console.service import Service
from console.store import Store
from testbed.fleet_fixtures import FAST, box_started, register, sshd_farm
from testbed.sshd import SshdFarm

pytestmark = [pytest.mark.sshd, pytest.mark.timeout(120)]
__all__ = ["sshd_farm"]


def test_trust_then_connect_then_lint_refusal_and_kill_confirmation(
    sshd_farm: SshdFarm, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "state.db")
    box = box_started("alpha")
    with Store(db) as store:
        register(store, box, pin=False)

    assert main(["--db", db, "box", "connect", "alpha"]) == 3  # a host-key problem: not safely reachable
    assert "campaign box trust alpha" in capsys.readouterr().err
    assert main(["--db", db, "box", "trust", "alpha", "--yes"]) == 0
    captured = capsys.readouterr()
    assert "presents ssh-ed25519 SHA256:" in captured.err and "trusted SHA256:" in captured.out
    assert main(["--db", db, "box", "connect", "alpha"]) == 0
    assert "new events ingested" in capsys.readouterr().out
    assert main(["--db", db, "box", "trust", "alpha", "--yes"]) == 0
    assert "already trusted" in capsys.readouterr().out

    with Store(db) as store:  # the box's measured GPUs drive the layout
        service = Service(store, settings=FAST)
        asyncio.run(_probe(service))
    assert main(["--db", db, "launch", "qwen3.8-27b-nvfp4-auto", "--box", "alpha"]) == 1
    captured = capsys.readouterr()
    assert "ERROR [R1-nvfp4-linear-backend]" in captured.err  # the plan is shown as prose, on stderr
    assert "refused by lint" in captured.err

    assert main(["--db", db, "launch", "tiny-cpu", "--box", "alpha", "--gpus", "0,x"]) == 2
    assert "--gpus '0,x'" in capsys.readouterr().err
    assert main(["--db", db, "kill", "no-such-arm", "--box", "alpha"]) == 2
    assert "nothing to kill" in capsys.readouterr().err


async def _probe(service: Service) -> None:
    try:
        await service.probe("alpha")
    finally:
        await service.close()


def test_kill_names_launch_and_box_and_needs_a_terminal_or_yes(
    sshd_farm: SshdFarm, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "state.db")
    with Store(db) as store:
        register(store, box_started("alpha"))
        store.launches.add(
            "tiny-cpu.abcd.r0", "alpha", "tiny-cpu", arm_id=None, replica=0, gpus=[0], port=8100, forced=False
        )
    assert main(["--db", db, "kill", "tiny-cpu", "--box", "alpha"]) == 2
    err = capsys.readouterr().err
    assert "kill tiny-cpu.abcd.r0 (arm tiny-cpu) on box alpha?" in err and "pass --yes" in err


def test_connect_to_a_changed_key_fails_loudly(
    sshd_farm: SshdFarm, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "state.db")
    box = box_started("cli-rekeyed", gpu_fixture=None)
    with Store(db) as store:
        register(store, box)
    sshd_farm.rekey("cli-rekeyed")
    assert main(["--db", db, "box", "connect", "cli-rekeyed"]) == 3
    assert "HOST KEY CHANGED" in capsys.readouterr().err
    with Store(db) as store:
        assert store.boxes.get("cli-rekeyed").status == "host-key-changed"


def test_local_box_is_the_embedded_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # the agent home defaults to ~/.campaign-agent
    db = str(tmp_path / "state.db")
    try:
        assert main(["--db", db, "box", "connect", "local"]) == 0
        assert "local: started; " in capsys.readouterr().out
        with Store(db) as store:
            box = store.boxes.get("local")
            assert (box.kind, box.status) == ("local", "up")
            assert (
                store.scalar("SELECT count(*) FROM journal WHERE box = 'local' AND kind = 'agent_started'")
                == 1
            )
    finally:
        pidfile = tmp_path / ".campaign-agent" / "agent.pid"
        if pidfile.exists():
            os.kill(int(pidfile.read_text().split()[0]), signal.SIGTERM)
