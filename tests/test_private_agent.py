"""Nobody let in: the console's secrets never reach an agent or a server, and an agent's files are its
user's alone. Real agents (their environment read from /proc/PID/environ), real servers (the fake engine,
testbed/fake_engine.py, writes down the environment it was given) and the file system; the SSH
case runs against a real sshd box."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pwd
import shutil
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.environ import allowed_env
from agents.jobs import agent_env
from agents.package import build_zipapp
from agents.private import OWN_DIRS, OWN_PREFIXES, REFUSED
from console.recipes import load_catalog
from console.service import Service
from console.store import Box, Store
from testbed.agent_box import AgentBox
from testbed.fake_engine import install, write_model
from testbed.fleet_fixtures import FAST
from testbed.ports import free_port
from testbed.sshd import SshBox
from tests.conftest import stop_agent
from tests.test_agent_daemon import FAKE_SERVER, launch_args

pytestmark = pytest.mark.timeout(180)

SECRETS = {
    "VAST_API_KEY": "vast-canary-7f3a",
    "CAMPAIGN_DB_PASSWORD": "pw-canary-19c2",
    "HF_TOKEN": "hf-canary-55e1",
}
RECIPE = """
[profiles."fake"]
checkpoint = "fake"
local = true
architecture = "llama"
quantization = "bf16"
quantizer = "vendor"
weights_gb = 0.001

[profiles."fake".serving]
sampling = { temperature = 0.0 }

[arms."fake"]
profile = "fake"
device = "cpu"  # the fake engine on a box without GPUs
max_model_len = 2048
env = { FAKE_ENGINE_STARTUP_S = "0.1", ARM_OWN = "kept", FAKE_ENGINE_ENV_DUMP = "@DUMP@" }
"""


def recipe(dump: Path) -> str:
    """The fake arm, writing its server's environment to ``dump``."""
    return RECIPE.replace("@DUMP@", str(dump))


def environ_of(pid: int) -> dict[str, str]:
    data = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
    return dict(item.split("=", 1) for item in data.split("\0") if "=" in item)


def dumped_env(path: Path, timeout: float = 60.0) -> dict[str, str]:
    """The environment the fake engine wrote down at its start (FAKE_ENGINE_ENV_DUMP)."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"the server wrote no {path} within {timeout:g} s"
        time.sleep(0.05)
    return dict(json.loads(path.read_text()))


def launch_pid(agent_home: Path, launch_id: str) -> int:
    with sqlite3.connect(f"file:{agent_home / 'journal.db'}?mode=ro", uri=True) as db:
        return int(db.execute("SELECT pid FROM launches WHERE launch_id = ?", [launch_id]).fetchone()[0])


def assert_no_secret(env: dict[str, str], who: str) -> None:
    leaked = {k for k, v in env.items() if k in SECRETS or v in SECRETS.values()}
    assert not leaked, f"{who} sees {sorted(leaked)}"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def assert_private(home: Path) -> None:
    """The home 0700; the journal, socket, logs, pidfile and everything in launches/ and jobs/ 0600/0700."""
    assert mode(home) == 0o700, oct(mode(home))
    own = [p for p in home.iterdir() if p.name.startswith(("agent.", "journal.db"))]
    assert {p.name for p in own} >= {"journal.db", "agent.sock", "agent.log", "agent.pid"}
    for d in ("launches", "jobs"):
        own += [home / d, *(home / d).iterdir()]
    for p in own:
        want = 0o700 if p.is_dir() else 0o600
        assert mode(p) == want, f"{p}: {oct(mode(p))}"


def test_the_environment_children_get_is_an_allowlist(monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in {
        **SECRETS,
        "PATH": "/x/bin:/usr/bin",
        "LC_ALL": "C.UTF-8",
        "TZ": "Europe/London",
        "PYTHONPATH": "/elsewhere",
        "LD_PRELOAD": "/evil.so",
    }.items():
        monkeypatch.setenv(k, v)
    env = allowed_env()
    assert env["PATH"] == "/x/bin:/usr/bin" and env["LC_ALL"] == "C.UTF-8" and env["TZ"] == "Europe/London"
    assert not {"PYTHONPATH", "LD_PRELOAD", *SECRETS} & set(env)
    jobs = agent_env()  # a bench or tripwire run: the same allowlist, and this package importable
    assert_no_secret(jobs, "a run")
    assert jobs["PYTHONPATH"] == str(Path(__file__).resolve().parent.parent)


@pytest.fixture
def local_box(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(state.db, agent home) of a local box whose serving env is the fake engine; the agent is stopped after."""
    home = Path(tempfile.mkdtemp(prefix="pa-")) / "agent"  # a unix socket path must stay under 108 bytes
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "fake.toml").write_text(recipe(tmp_path / "server-env.json"))
    write_model(tmp_path / "models" / "fake")
    with Store(tmp_path / "state.db") as store:
        store.boxes.add(
            Box(
                name="local",
                kind="local",
                agent_home=str(home),
                serving_env=str(install(tmp_path / "env")),
                model_root=str(tmp_path / "models"),
            )
        )
    try:
        yield tmp_path, home
    finally:
        stop_agent(home)


async def _launch_fake(store: Store, box: str, recipes: Path) -> tuple[Service, str]:
    service = Service(store, catalog=load_catalog([recipes]), settings=FAST)
    plan = service.plan_launch("fake", box, base_port=free_port())
    outcome = await service.launch(plan, ready_timeout_s=60)
    assert outcome.serving, outcome.replicas
    return service, outcome.launch_ids[0]


async def test_the_local_agent_and_its_servers_never_see_the_console_secrets(
    local_box: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, home = local_box
    for k, v in SECRETS.items():
        monkeypatch.setenv(k, v)  # the console's own environment, as an operator's shell would have it
    with Store(root / "state.db") as store:
        service, launch_id = await _launch_fake(store, "local", root / "recipes")
        server = launch_pid(home, launch_id)
        try:
            agent = environ_of(int((home / "agent.pid").read_text().split()[0]))
            assert_no_secret(agent, "the local agent")
            assert agent["PATH"] == os.environ["PATH"] and agent["HOME"] == os.environ["HOME"]
            served = dumped_env(root / "server-env.json")
            assert_no_secret(served, "a server the local agent launched")
            assert served["ARM_OWN"] == "kept" and served["PATH"] == os.environ["PATH"]
            assert "PYTEST_CURRENT_TEST" not in served  # nothing outside the allowlist, not only secrets
            await service.stop_launches("local", [launch_id], grace_s=5)
        finally:
            await service.close()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server, signal.SIGKILL)


def test_a_box_shell_full_of_secrets_still_gives_servers_only_the_allowlist(tmp_path: Path) -> None:
    """The agent started from a shell that holds secrets (the box's own): its servers get none of them."""
    vllm = install(tmp_path / "env") / "bin" / "vllm"
    dump = tmp_path / "server-env.json"
    box = AgentBox(tmp_path / "home", path_prefix=[], env=SECRETS)
    box.start()
    try:
        port = free_port()
        box.ok(
            "launch",
            {
                "launch_id": "envcheck",
                "argv": [str(vllm), "serve", "m", "--port", str(port)],
                "port": port,
                "env": {"CUDA_VISIBLE_DEVICES": "0", "FAKE_ENGINE_ENV_DUMP": str(dump)},
                "gpus": [0],
            },
        )
        served = dumped_env(dump)
        assert_no_secret(served, "a server")
        assert served["CUDA_VISIBLE_DEVICES"] == "0" and "PYTHONPATH" not in served
    finally:
        box.stop()


def test_agent_files_are_private_even_in_a_home_left_open(tmp_path: Path) -> None:
    """A shared directory, a home an older agent left 0755 with a 0644 journal: all tightened, with a
    umask of 022 in the starting shell; a file of the user's own in the home is left alone."""
    shared = Path(tempfile.mkdtemp(prefix="shared-"))
    shared.chmod(0o755)  # like /srv: every user can walk it
    home = shared / "agent"
    (home / "launches").mkdir(parents=True)
    home.chmod(0o755)
    (home / "launches").chmod(0o755)
    for path in (home / "journal.db", home / "launches" / "old.log", home / "notes.txt"):
        path.write_bytes(b"")
        path.chmod(0o644)
    server_py = tmp_path / "fake_server.py"
    server_py.write_text(FAKE_SERVER)
    box = AgentBox(home, path_prefix=[])
    old = os.umask(0o022)
    try:
        box.start()
    finally:
        os.umask(old)
    try:
        port = free_port()
        box.ok("launch", launch_args(server_py, "priv", port))
        box.ok(
            "bench",
            {
                "bench_id": "b1",
                "launch_id": "priv",
                "base_url": "http://127.0.0.1:9",
                "model": "m",
                "vocab_size": 100,
                "input_len": 4,
                "output_len": 4,
                "concurrency": 1,
                "prompts": 1,
            },
            command_id="bench-b1",
        )
        box.wait_for(
            lambda e: e["kind"] == "command_done" and e.get("command_id") == "bench-b1", what="the run"
        )
        assert_private(home)
        assert mode(home / "notes.txt") == 0o644  # not the agent's: left as the user made it
        if os.geteuid() == 0:  # another unix user of the box cannot read the journal
            peek = subprocess.run(["cat", str(home / "journal.db")], user=65534, capture_output=True)
            assert peek.returncode != 0 and b"Permission denied" in peek.stderr
    finally:
        box.stop()
        subprocess.run(["rm", "-rf", str(shared)], check=False)


@pytest.mark.sshd
def test_nothing_of_the_console_crosses_ssh_and_the_box_files_are_private(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sshd box accepts any environment a client sends (AcceptEnv *): still none of the console's
    reaches its agent or a server, and the agent's home there is private to the box's user."""
    from testbed.fleet_fixtures import box_started, farm, register
    from testbed.sshd import SshdUnavailable

    try:
        farm()
    except SshdUnavailable as exc:
        pytest.skip(str(exc))
    box = box_started("private")
    env_dir = install(box.root / "fake-env", "/usr/bin/python3")  # run by the box's own unix user
    write_model(box.root / "models" / "fake")
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    dump = box.home / "server-env.json"  # where the box's user may write, and root may read
    dump.unlink(missing_ok=True)
    (recipes / "fake.toml").write_text(recipe(dump))
    for k, v in SECRETS.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("LC_CANARY", "lc-canary")  # what an OpenSSH client's SendEnv LC_* would carry

    async def go() -> None:
        with Store(tmp_path / "state.db") as store:
            register(store, box)
            store.boxes.update(box.name, serving_env=str(env_dir), model_root=str(box.root / "models"))
            service, launch_id = await _launch_fake(store, box.name, recipes)
            try:
                agent = environ_of(int((box.agent_home / "agent.pid").read_text().split()[0]))
                served = dumped_env(dump)
                for who, env in (("the box's agent", agent), ("a server on the box", served)):
                    assert_no_secret(env, who)
                    assert "LC_CANARY" not in env, who
                assert served["ARM_OWN"] == "kept"
                await service.stop_launches(box.name, [launch_id], grace_s=5)
            finally:
                await service.close()

    try:
        asyncio.run(go())
        assert_private(box.agent_home)  # the pushed agent.pyz among them
    finally:
        box.kill_agent()


def test_the_local_check_probe_runs_without_the_console_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`campaign check local` runs the agent's probe here, and the probe runs the serving Python: neither
    gets the console's secrets (the serving Python below writes down what it was given)."""
    from console.checks.run import local_probe

    seen = tmp_path / "seen-env"
    python = tmp_path / "serve" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f'#!/bin/sh\nenv > {seen}\nexec {sys.executable} "$@"\n')
    python.chmod(0o755)
    for k, v in SECRETS.items():
        monkeypatch.setenv(k, v)
    local_probe(Box(name="local", kind="local", serving_env=str(tmp_path / "serve")), 1)
    given = dict(line.split("=", 1) for line in seen.read_text().splitlines() if "=" in line)
    assert_no_secret(given, "the serving Python of the local probe")
    assert given["PATH"] == os.environ["PATH"]


# -- a home the agent refuses: what another user owns, or a symlink, is never opened ---------------------
# The agent runs as a separate unix user here: the sshd farm's box user (tests run as root, so the homes
# below can be made another user's with os.chown). Each case is started as the console starts it on a box:
# `python3 agent.pyz daemon --home DIR` as that user; the last one goes through the console over SSH.


@pytest.fixture(scope="module")
def homes_box() -> tuple[SshBox, Path]:
    """(a box whose unix user runs the agent, the agent zipapp it runs, readable by that user)."""
    from testbed.fleet_fixtures import box_started, farm
    from testbed.sshd import SshdUnavailable

    try:
        farm()
    except SshdUnavailable as exc:
        pytest.skip(str(exc))
    box = box_started("homes")
    pyz = box.root / "agent.pyz"  # outside every home under test
    pyz.write_bytes(build_zipapp())
    pyz.chmod(0o644)
    return box, pyz


@pytest.fixture
def place(homes_box: tuple[SshBox, Path]) -> Iterator[Path]:
    """A fresh directory of the box user's, in its HOME, for one case; any agent started in it is stopped."""
    box, _ = homes_box
    path = Path(tempfile.mkdtemp(prefix="c-", dir=box.home))
    os.chown(path, box.uid, box.gid)
    try:
        yield path
    finally:
        for pidfile in [path / "agent.pid", *path.glob("*/agent.pid"), *path.glob("*/*/agent.pid")]:
            stop_agent(pidfile.parent)
        shutil.rmtree(path, ignore_errors=True)


NOBODY = pwd.getpwnam("nobody").pw_uid


def start_as_box_user(homes_box: tuple[SshBox, Path], home: Path) -> subprocess.CompletedProcess[str]:
    """``python3 agent.pyz daemon --home HOME`` as the box's unix user, with the box's PATH and HOME."""
    box, pyz = homes_box
    env = {"PATH": f"{box.root / 'bin'}:/usr/bin:/bin", "HOME": str(box.home), "LANG": "C.UTF-8"}
    return subprocess.run(
        ["/usr/bin/python3", str(pyz), "daemon", "--home", str(home), "--interval", "0.25"],
        user=box.uid,
        group=box.gid,
        extra_groups=[],
        cwd=box.home,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def refusal(proc: subprocess.CompletedProcess[str], *parts: str) -> str:
    """The agent's refusal: exit 1, nothing on stdout, one line on stderr naming ``parts``; returns the line."""
    assert proc.returncode == 1, f"rc {proc.returncode}: {proc.stdout}{proc.stderr}"
    assert not proc.stdout and proc.stderr.endswith("\n") and proc.stderr.count("\n") == 1, proc.stderr
    line = proc.stderr.strip()
    assert line.startswith(f"{REFUSED} on {socket.gethostname()}: "), line
    for part in parts:
        assert part in line, f"{part!r} not in {line!r}"
    assert line.endswith("or give the agent another home") or "more agent files there are refused too" in line
    assert len(line) <= 400, (
        line
    )  # the console reads the last 400 characters of a failed start (transport.py)
    return line


def fix_in(line: str) -> str:
    """The shell command between backquotes in a refusal."""
    return line.split("`")[1]


def started(proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode == 0, f"rc {proc.returncode}: {proc.stdout}{proc.stderr}"


def assert_owned_by(home: Path, uid: int) -> None:
    """The home and every agent file in it belong to ``uid`` (the agent made them, or was made to own them)."""
    own = [home, *(p for p in home.iterdir() if p.name.startswith(OWN_PREFIXES) or p.name in OWN_DIRS)]
    for p in own:
        assert p.lstat().st_uid == uid, f"{p}: uid {p.lstat().st_uid}"


@pytest.mark.sshd
def test_a_home_root_owns_and_leaves_open_is_refused_before_anything_is_opened(
    homes_box: tuple[SshBox, Path], place: Path
) -> None:
    """A 0777 home root made (a provisioning script): any user could read or swap the journal in it. Refused,
    nothing created or changed there; the fix the line gives, run as root, makes the same start work."""
    box, _ = homes_box
    home = place / "agent"
    home.mkdir()
    home.chmod(0o777)
    line = refusal(
        start_as_box_user(homes_box, home),
        f"{home} is owned by root, mode 0777, not by {box.user}",
        f"`chown {box.user} {home} && chmod 700 {home}`",
    )
    assert list(home.iterdir()) == [] and mode(home) == 0o777 and home.stat().st_uid == 0
    subprocess.run(["sh", "-c", fix_in(line)], check=True)
    started(start_as_box_user(homes_box, home))
    assert_private(home)
    assert_owned_by(home, box.uid)


@pytest.mark.sshd
def test_a_journal_nobody_planted_with_its_wal_and_shm_is_refused_and_left_as_it_was(
    homes_box: tuple[SshBox, Path], place: Path
) -> None:
    """A 0666 journal.db, -wal and -shm of `nobody` in the user's own home (left when it was looser): nobody
    would read every measurement. Refused, naming the first and counting the others, none of them opened."""
    box, _ = homes_box
    home = place
    planted = ("journal.db", "journal.db-shm", "journal.db-wal")
    for name in planted:
        (home / name).write_bytes(b"planted")
        os.chown(home / name, NOBODY, NOBODY)
        (home / name).chmod(0o666)
    line = refusal(
        start_as_box_user(homes_box, home),
        f"journal.db in {home} is owned by nobody, mode 0666",
        f"not by {box.user} who runs the agent",
        "remove it or `cd ",
        "; 2 more agent files there",
    )
    assert fix_in(line) == f"cd {home} && chown {box.user} journal.db && chmod 600 journal.db"
    assert sorted(p.name for p in home.iterdir()) == list(planted)  # no pidfile, socket, log: nothing opened
    for name in planted:
        path = home / name
        assert (path.read_bytes(), mode(path), path.stat().st_uid) == (b"planted", 0o666, NOBODY), name
    for name in planted:  # the fix the line gives first: remove them
        (home / name).unlink()
    started(start_as_box_user(homes_box, home))
    assert_private(home)


@pytest.mark.sshd
def test_a_group_writable_journal_of_another_user_is_refused(
    homes_box: tuple[SshBox, Path], place: Path
) -> None:
    """The box user may write this journal through its group, but nobody owns it (and may read it, or chmod
    it open again): not the user's, so refused, though the agent could have used it."""
    box, _ = homes_box
    journal = place / "journal.db"
    journal.write_bytes(b"")
    os.chown(journal, NOBODY, box.gid)
    journal.chmod(0o660)
    refusal(start_as_box_user(homes_box, place), f"journal.db in {place} is owned by nobody, mode 0660")
    assert journal.stat().st_size == 0 and mode(journal) == 0o660 and not (place / "agent.pid").exists()


@pytest.mark.sshd
@pytest.mark.parametrize("name", ["journal.db", "agent.log"])
def test_a_symlink_in_place_of_an_agent_file_is_refused_and_not_followed(
    homes_box: tuple[SshBox, Path], place: Path, name: str
) -> None:
    """A link to a 0666 file of nobody's: followed, the journal (or the log) would be written where nobody
    reads it. Refused; the target is not touched."""
    target = place / "nobodys-file"
    target.write_bytes(b"")
    os.chown(target, NOBODY, NOBODY)
    target.chmod(0o666)
    (place / name).symlink_to(target)
    refusal(
        start_as_box_user(homes_box, place),
        f"{name} in {place} is a symlink to {target}",
        "the agent follows no link among its files: remove it",
    )
    assert target.stat().st_size == 0 and (place / name).is_symlink() and not (place / "agent.pid").exists()


@pytest.mark.sshd
def test_a_fresh_home_is_made_private_to_the_box_user(homes_box: tuple[SshBox, Path], place: Path) -> None:
    box, _ = homes_box
    home = place / "new" / "agent"  # neither exists yet
    started(start_as_box_user(homes_box, home))
    assert_private(home)
    assert_owned_by(home, box.uid)


@pytest.mark.sshd
def test_a_looser_home_of_the_users_own_is_tightened_and_its_other_files_left(
    homes_box: tuple[SshBox, Path], place: Path
) -> None:
    """The box user's HOME as agent home, 0755, with its own 0666 journal.db, -wal and -shm and an open
    launches/ an older agent left: all tightened. Files that are no agent's (another user's, a symlink)
    are neither judged nor changed."""
    box, _ = homes_box
    home = place
    (home / "launches").mkdir()
    (home / "launches" / "old.log").write_bytes(b"")
    for path in (home / "journal.db", home / "journal.db-wal", home / "journal.db-shm"):
        path.write_bytes(b"")
    for path in (
        home,
        home / "launches",
        home / "launches" / "old.log",
        home / "journal.db",
        home / "journal.db-wal",
        home / "journal.db-shm",
    ):
        os.chown(path, box.uid, box.gid)
        path.chmod(0o777 if path.is_dir() else 0o666)
    home.chmod(0o755)
    (home / "notes.txt").write_bytes(b"")
    os.chown(home / "notes.txt", NOBODY, NOBODY)
    (home / "notes.txt").chmod(0o666)
    (home / "data").symlink_to("/tmp")
    started(start_as_box_user(homes_box, home))
    assert_private(home)
    assert mode(home / "launches" / "old.log") == 0o600
    assert (mode(home / "notes.txt"), (home / "notes.txt").stat().st_uid) == (0o666, NOBODY)
    assert (home / "data").is_symlink()


@pytest.mark.sshd
def test_a_home_in_a_directory_every_user_may_write_is_refused_unless_it_is_sticky(
    homes_box: tuple[SshBox, Path], place: Path
) -> None:
    """Anyone could rename the home away and put theirs in its place; with the sticky bit (as /tmp) no one can."""
    parent = place / "open"
    parent.mkdir()
    parent.chmod(0o777)
    line = refusal(
        start_as_box_user(homes_box, parent / "agent"),
        f"{parent}, the parent of the agent home, is writable by every user (mode 0777, no sticky bit)",
    )
    assert fix_in(line) == f"chmod o-w {parent}" and not (parent / "agent").exists()
    parent.chmod(0o1777)
    started(start_as_box_user(homes_box, parent / "agent"))
    assert_private(parent / "agent")


@pytest.mark.sshd
async def test_the_console_says_in_one_line_why_the_box_refused_its_agent_home(
    homes_box: tuple[SshBox, Path], tmp_path: Path
) -> None:
    """End to end: a box whose ~/.campaign-agent root made 0777. The console pushes the agent (it can: the
    home is open), the agent refuses it, and the box's error, raised and in state.db, is the agent's one
    line, not an argv. Once the fix it gives is run, the same link starts the agent."""
    from console.fleet.link import BoxLink
    from console.fleet.push import AgentStartError
    from testbed.fleet_fixtures import register

    box, _ = homes_box
    home = box.agent_home
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir()
    home.chmod(0o777)
    try:
        with Store(tmp_path / "state.db") as store:
            register(store, box)
            link = BoxLink(store, box.name, FAST)
            with pytest.raises(AgentStartError) as refused:
                await link.connect()
            line = str(refused.value)
            assert line.startswith(
                f"{REFUSED} on {socket.gethostname()}: {home} is owned by root, mode 0777, "
                f"not by {box.user} who runs the agent: "
            )
            assert fix_in(line) == f"chown {box.user} {home} && chmod 700 {home}"
            assert line.endswith("or give the agent another home") and "\n" not in line
            row = store.boxes.get(box.name)
            assert (row.status, row.status_detail) == ("down", f"AgentStartError: {line}")
            assert sorted(p.name for p in home.iterdir()) == ["agent.pyz"]  # what the console pushed, no more
            subprocess.run(["sh", "-c", fix_in(line)], check=True)
            assert await link.connect() == "started"
            await link.close()
        assert_private(home)
        assert_owned_by(home, box.uid)
    finally:
        box.kill_agent()
        shutil.rmtree(home, ignore_errors=True)
