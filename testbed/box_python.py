"""A Python for sshd test boxes that has the ``openai`` package, as a real box's serving environment does.

A box-side tool that does not need speed (the tripwire) runs under the serving environment's Python, where
vLLM installed ``openai``. A test box's unix user cannot run root's interpreters (``/root`` is private), so
the fake serving environments get this: a venv of the system ``/usr/bin/python3`` with ``openai`` installed,
in a world-readable cache outside ``/root``, built once per machine (a file lock keeps parallel runs from
building it twice).
"""

from __future__ import annotations

import fcntl
import os
import subprocess
from pathlib import Path

SYSTEM_PYTHON = "/usr/bin/python3"
CACHE = Path(os.environ.get("CAMPAIGN_BOX_PYTHON_CACHE", "/var/cache/campaign-console-tests"))
PREFIX = CACHE / "box-python"


def _ok() -> bool:
    python = PREFIX / "bin" / "python"
    return (
        python.exists()
        and subprocess.run([str(python), "-c", "import openai"], capture_output=True).returncode == 0
    )


def ensure() -> Path:
    """The box Python's interpreter path, built if missing."""
    CACHE.mkdir(parents=True, exist_ok=True)
    CACHE.chmod(0o755)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _ok():
            subprocess.run([SYSTEM_PYTHON, "-m", "venv", "--clear", str(PREFIX)], check=True)
            subprocess.run(
                [str(PREFIX / "bin" / "python"), "-m", "pip", "install", "-q", "openai"], check=True
            )
            subprocess.run(["chmod", "-R", "a+rX", str(PREFIX)], check=True)
    return PREFIX / "bin" / "python"


if __name__ == "__main__":
    print(ensure())
