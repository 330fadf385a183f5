"""The agent's home is private to its unix user: the directory 0700, every file in it 0600.

Why: on a box shared by several unix users, the journal holds every measurement, command and launch
argv, and the logs hold whatever the engines print; another user must not read them. The umask is set
before the first file is created, so nothing is ever world-readable, even for a moment: the journal and
its -wal/-shm, the socket, the pidfile, the launch logs and the run outputs are all created under it
(and the servers and runs the agent starts inherit it). A home left looser by an older agent or by hand
is tightened when the agent starts, but only the agent's own files: the home may be a user's HOME.

What the agent cannot tighten it refuses, before it opens anything: a home, or an agent file in it, that
another user owns (only root can take it back, and its owner, or anyone when it is 0666, could read or
rewrite the journal), and a symlink in place of an agent file (whoever planted it chooses where the
journal is written). The refusal is an ``UnsafeHome`` whose message is one line: what, where, the fix.
A parent directory that every user may write (no sticky bit) is refused too: anyone could swap the home
for one of theirs. Directories further up, and a parent writable by a group, are not judged.
"""

from __future__ import annotations

import os
import pwd
import shlex
import socket
import stat
from pathlib import Path

UMASK = 0o077
OWN_PREFIXES = ("agent.", "journal.db", "deadline.json")
"""agent.pyz, agent.log, agent.pid, agent.sock; journal.db and its -wal/-shm; the watchdog's state."""
OWN_DIRS = ("launches", "jobs")
"""Server logs (supervisor.py) and run outputs (jobs.py): everything in them is the agent's."""
REFUSED = "agent home refused"
"""How every refusal's message begins: the console (console/fleet/push.py) finds the reason by it in what
the agent printed when it would not start."""
ANOTHER_HOME = "or give the agent another home"


class UnsafeHome(RuntimeError):
    """The home, or an agent file in it, is another user's or a symlink: refused before anything is opened.

    A refusal and not a repair, because the agent cannot take back what another user owns, and using it
    would let that user read or rewrite the journal. ``python -m agents daemon`` prints the message (one
    line, kept short: the console reads the last 400 characters of what a failed start printed) and exits
    1; the console shows it as the box's error.
    """


def _who(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:  # a uid with no passwd entry (a deleted user, a container's id)
        return f"uid {uid}"


def _shown(path: str) -> str:
    """``path`` as the one-line message shows it: a name with a newline in it cannot break the line."""
    return path if path.isprintable() else repr(path)


def _quoted(path: str) -> str:
    """``path`` as a shell word in a fix the operator may paste."""
    return shlex.quote(path) if path.isprintable() else repr(path)


def _problem(home: Path, path: Path, st: os.stat_result, uid: int) -> str | None:
    """Why ``path`` (lstat'ed as ``st``; ``home`` itself or an agent file in it) is refused, or None when it
    is the user's own and no symlink. Files are named inside the home, and their fix runs there, so that
    the line stays short."""
    user, mode = _who(uid), stat.S_IMODE(st.st_mode)
    name = path.relative_to(home).as_posix() if path != home else ""
    what = f"{_shown(name)} in {_shown(str(home))}" if name else _shown(str(home))
    prefix = f"{REFUSED} on {socket.gethostname()}: {what}"
    if stat.S_ISLNK(st.st_mode):
        try:
            target = os.readlink(path)
        except OSError:
            target = "?"
        return (
            f"{prefix} is a symlink to {_shown(target)}, and the agent follows no link among its files: "
            f"remove it, {ANOTHER_HOME}"
        )
    if st.st_uid == uid:
        return None
    want = 0o700 if stat.S_ISDIR(st.st_mode) else 0o600
    if name:
        fix = f"cd {_quoted(str(home))} && chown {user} {_quoted(name)} && chmod {want:o} {_quoted(name)}"
    else:
        fix = f"chown {user} {_quoted(str(home))} && chmod {want:o} {_quoted(str(home))}"
    return (
        f"{prefix} is owned by {_who(st.st_uid)}, mode {mode:04o}, not by {user} who runs the agent: "
        f"remove it or `{fix}`, {ANOTHER_HOME}"
    )


def _judge_parent(home: Path) -> None:
    """A parent every user may write without the sticky bit lets anyone rename the home away and put theirs."""
    try:
        st = os.stat(home.parent)
    except FileNotFoundError:  # mkdir creates it, 0700 under the umask
        return
    if st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
        parent = str(home.parent)
        raise UnsafeHome(
            f"{REFUSED} on {socket.gethostname()}: {_shown(parent)}, the parent of the agent home, is writable by "
            f"every user (mode {stat.S_IMODE(st.st_mode):04o}, no sticky bit), so another user could swap the home "
            f"for theirs: `chmod o-w {_quoted(parent)}`, {ANOTHER_HOME}"
        )


def _own(home: Path, path: Path, uid: int, problems: list[str]) -> bool:
    """Judge one agent path (see ``_problem``): note why it is refused, or drop its group and other
    permissions. True when it is the user's own directory, whose entries can be judged next."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:  # a -shm file a running agent just removed
        return False
    problem = _problem(home, path, st, uid)
    if problem is not None:
        problems.append(problem)
        return False
    if st.st_mode & 0o077:
        os.chmod(path, stat.S_IMODE(st.st_mode) & ~0o077)
    return stat.S_ISDIR(st.st_mode)


def private_home(home: Path) -> None:
    """Set the private umask, create ``home`` if needed, refuse what is not the user's (``UnsafeHome``), and
    tighten what an earlier run left looser.

    A directory is tightened before what is in it is judged: once it is the user's and 0700, no other user
    can put or swap anything in it between the judging and the opening. ``home`` itself is followed if it
    is a symlink (the CLI resolves it anyway: it is the operator's choice); an agent file never is. Every
    agent file is judged before the refusal, which names the first and counts the others, so that one fix
    round is enough.
    """
    os.umask(UMASK)
    uid = os.getuid()
    _judge_parent(home)
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.stat(home)
    problem = _problem(home, home, st, uid)
    if problem is not None:
        raise UnsafeHome(problem)
    if st.st_mode & 0o077:
        os.chmod(home, stat.S_IMODE(st.st_mode) & ~0o077)
    problems: list[str] = []
    for name in sorted(os.listdir(home)):
        if name.startswith(OWN_PREFIXES):
            _own(home, home / name, uid, problems)
        elif name in OWN_DIRS and _own(home, home / name, uid, problems):
            for item in sorted(os.listdir(home / name)):
                _own(home, home / name / item, uid, problems)
    if problems:
        more = f"; {len(problems) - 1} more agent files there are refused too" if len(problems) > 1 else ""
        raise UnsafeHome(problems[0] + more)
