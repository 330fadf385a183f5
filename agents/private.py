"""The agent's home is private to its unix user: the directory 0700, every file in it 0600.

Why: on a box shared by several unix users, the journal holds every measurement, command and launch
argv, and the logs hold whatever the engines print; another user must not read them. The umask is set
before the first file is created, so nothing is ever world-readable, even for a moment: the journal and
its -wal/-shm, the socket, the pidfile, the launch logs and the run outputs are all created under it
(and the servers and runs the agent starts inherit it). A home left looser by an older agent or by hand
is tightened when the agent starts, but only the agent's own files: the home may be a user's HOME.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

UMASK = 0o077
OWN_PREFIXES = ("agent.", "journal.db", "deadline.json")
"""agent.pyz, agent.log, agent.pid, agent.sock; journal.db and its -wal/-shm; the watchdog's state."""
OWN_DIRS = ("launches", "jobs")
"""Server logs (supervisor.py) and run outputs (jobs.py): everything in them is the agent's."""


def _tighten(path: str, uid: int) -> None:
    """Drop group and other permissions from one path we own; a symlink or someone else's file is left."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:  # a -shm file a running agent just removed
        return
    if st.st_uid == uid and not stat.S_ISLNK(st.st_mode) and st.st_mode & 0o077:
        os.chmod(path, stat.S_IMODE(st.st_mode) & ~0o077)


def private_home(home: Path) -> None:
    """Set the private umask, create ``home`` if needed, and tighten what an earlier run left looser."""
    os.umask(UMASK)
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    uid = os.getuid()
    _tighten(str(home), uid)
    with os.scandir(home) as entries:
        for entry in entries:
            if entry.name.startswith(OWN_PREFIXES):
                _tighten(entry.path, uid)
            elif entry.name in OWN_DIRS and entry.is_dir(follow_symlinks=False):
                _tighten(entry.path, uid)
                with os.scandir(entry.path) as inner:
                    for item in inner:
                        _tighten(item.path, uid)
