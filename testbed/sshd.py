"""Real OpenSSH ``sshd`` test boxes on 127.0.0.1, each a separate unix user with its own host key and GPUs.

Why real sshd and not asyncssh's in-process server: the fleet layer depends on what only a real box does
(direct-streamlocal to a unix socket, SFTP rename, a daemon that must outlive the SSH session, SetEnv'd
PATH). Each box gets: a unix user ``cc<farm tag>-<name>`` (created here, removed by ``stop``; tests run
as root), its own HOME, ed25519 host key, authorized_keys holding the session's client key, and a
``bin/`` first on PATH with a fake ``nvidia-smi`` answering from that box's GPU fixture
(tests/fixtures/gpus/*.json).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from testbed.agent_box import stop_agent
from testbed.ports import free_port

SSHD = Path("/usr/sbin/sshd")
FAKE_SMI = Path(__file__).with_name("fake_nvidia_smi.py")
GPU_FIXTURES = Path(__file__).parent.parent / "tests" / "fixtures" / "gpus"


class SshdUnavailable(RuntimeError):
    """This machine cannot run test boxes (no sshd, not root); the message says how to fix it."""


def _run(argv: list[str]) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def _ensure_user(user: str, home: Path) -> pwd.struct_passwd:
    """The box's unix user ('*' password, not '!': sshd without PAM refuses a locked account)."""
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        _run(["useradd", "-M", "-d", str(home), "-s", "/bin/sh", "-p", "*", user])
        return pwd.getpwnam(user)
    if entry.pw_dir != str(home):
        raise SshdUnavailable(f"user {user} exists with home {entry.pw_dir}, not {home}; a farm tag collided")
    return entry


@dataclass
class SshBox:
    name: str
    user: str
    port: int
    root: Path
    home: Path
    host_key_line: str
    client_key: Path
    fixture: Path | None
    uid: int
    gid: int
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def agent_home(self) -> Path:
        return self.home / ".campaign-agent"

    @property
    def target(self) -> str:
        return f"{self.user}@127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)
        self.process = None

    def power_off(self) -> None:
        """The box dies as a host does when its power goes: sshd stops, and every process of the box's unix user
        (its agent, its servers, the SSH sessions' own processes) is killed at once."""
        self.stop()
        for status in Path("/proc").glob("[0-9]*/status"):
            try:
                uid = next(
                    line.split()[1] for line in status.read_text().splitlines() if line.startswith("Uid:")
                )
            except (OSError, StopIteration):
                continue
            if int(uid) == self.uid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(status.parent.name), 9)

    def kill_agent(self, timeout: float = 10.0) -> None:
        """Stop the agent daemon of this box (its pidfile names it) and wait until it is gone."""
        stop_agent(self.agent_home, timeout)


class SshdFarm:
    """Start boxes once per session; ``stop()`` ends every sshd and agent it started."""

    def __init__(self, root: Path):
        if not SSHD.exists():
            raise SshdUnavailable("no /usr/sbin/sshd: apt-get install openssh-server (tests/run.sh does)")
        if os.geteuid() != 0:
            raise SshdUnavailable("sshd test boxes need root (a unix user per box); CI runs as root")
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        root.chmod(0o755)
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege-separation directory
        # Users are per farm (and removed by stop), so concurrent test sessions never share a box user.
        self.tag = secrets.token_hex(2)
        self.client_key = root / "client_ed25519"
        if not self.client_key.exists():
            _run(
                [
                    "ssh-keygen",
                    "-q",
                    "-t",
                    "ed25519",
                    "-N",
                    "",
                    "-C",
                    "campaign-tests",
                    "-f",
                    str(self.client_key),
                ]
            )
        self.boxes: dict[str, SshBox] = {}

    def start(
        self, name: str, gpu_fixture: str | None = "h200", port: int | None = None, key_type: str = "ed25519"
    ) -> SshBox:
        """A running box; ``gpu_fixture`` names tests/fixtures/gpus/<name>.json or is an absolute path to a fixture
        (None: no GPU tooling);
        ``key_type`` is its one host key's type (ed25519, ecdsa or rsa), as sshd offers nothing else."""
        base = self.root / name
        base.mkdir(mode=0o755, exist_ok=True)
        home, bin_dir = base / "home", base / "bin"
        home.mkdir(mode=0o700, exist_ok=True)
        bin_dir.mkdir(mode=0o755, exist_ok=True)
        user = f"cc{self.tag}-{name}"[:32]
        entry = _ensure_user(user, home)
        os.chown(home, entry.pw_uid, entry.pw_gid)
        host_key = base / f"ssh_host_{key_type}_key"
        if not host_key.exists():
            _run(["ssh-keygen", "-q", "-t", key_type, "-N", "", "-C", "", "-f", str(host_key)])
        authorized = base / "authorized_keys"
        shutil.copy(self.client_key.with_suffix(".pub"), authorized)
        authorized.chmod(0o644)
        env = [f"PATH={bin_dir}:/usr/local/bin:/usr/bin:/bin"]
        fixture = None
        if gpu_fixture is not None:
            fixture = (
                Path(gpu_fixture) if Path(gpu_fixture).is_absolute() else GPU_FIXTURES / f"{gpu_fixture}.json"
            )
            smi = bin_dir / "nvidia-smi"
            # The fixture is named in the wrapper, not in the session's environment: the agent keeps only
            # an allowlist of variables for itself and what it starts (agents/environ.py).
            smi.write_text(
                f'#!/bin/sh\nFAKE_NVIDIA_SMI_FIXTURE="${{FAKE_NVIDIA_SMI_FIXTURE:-{fixture}}}" '
                f'exec /usr/bin/python3 {FAKE_SMI} "$@"\n'
            )
            smi.chmod(0o755)
        port = port or free_port()
        config = base / "sshd_config"
        config.write_text(
            "\n".join(
                [
                    f"Port {port}",
                    "ListenAddress 127.0.0.1",
                    f"HostKey {host_key}",
                    f"PidFile {base / 'sshd.pid'}",
                    f"AuthorizedKeysFile {authorized}",
                    f"AllowUsers {user}",
                    "StrictModes no",
                    "UsePAM no",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "PubkeyAuthentication yes",
                    "AllowStreamLocalForwarding yes",
                    "AllowTcpForwarding yes",
                    "MaxSessions 64",
                    "MaxStartups 64:30:128",
                    "Subsystem sftp internal-sftp",
                    f"SetEnv {' '.join(env)}",
                    "AcceptEnv *",  # a client that sent its environment would be caught (test_private_agent.py)
                    "LogLevel ERROR",
                    "",
                ]
            )
        )
        log = (base / "sshd.log").open("ab")
        process = subprocess.Popen([str(SSHD), "-D", "-e", "-f", str(config)], stdout=log, stderr=log)
        _wait_banner(port, process, base / "sshd.log")
        box = SshBox(
            name=name,
            user=user,
            port=port,
            root=base,
            home=home,
            host_key_line=" ".join(host_key.with_suffix(".pub").read_text().split()[:2]),
            client_key=self.client_key,
            fixture=fixture,
            uid=entry.pw_uid,
            gid=entry.pw_gid,
            process=process,
        )
        self.boxes[name] = box
        return box

    def rekey(self, name: str, key_type: str = "ed25519") -> str:
        """Give a box a new host key (a rebuilt box, or someone in the middle), of ``key_type`` and nothing
        else; returns the new key line."""
        box = self.boxes[name]
        box.stop()
        for path in box.root.glob("ssh_host_*_key*"):
            path.unlink()
        fresh = self.start(name, str(box.fixture) if box.fixture else None, port=box.port, key_type=key_type)
        return fresh.host_key_line

    def stop(self) -> None:
        """End every sshd and agent of the farm and remove its directory (homes, keys, journals)."""
        for box in self.boxes.values():
            box.kill_agent()
            box.stop()
        users = {box.user for box in self.boxes.values()}
        deadline = time.monotonic() + 5
        while users and time.monotonic() < deadline:
            # userdel refuses while a process of the user lives (an sshd session child still closing);
            # a user a test leaked a process for is left behind, named in /etc/passwd for a human.
            users = {u for u in users if subprocess.run(["userdel", u], capture_output=True).returncode != 0}
            if users:
                time.sleep(0.2)
        shutil.rmtree(self.root, ignore_errors=True)


def _wait_banner(port: int, process: subprocess.Popen[bytes], log: Path, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SshdUnavailable(f"sshd exited with {process.returncode}: {log.read_text()[-800:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                if s.recv(64).startswith(b"SSH-"):
                    return
        except OSError:
            time.sleep(0.05)
    raise SshdUnavailable(
        f"sshd on 127.0.0.1:{port} gave no banner within {timeout:g} s: {log.read_text()[-800:]}"
    )
