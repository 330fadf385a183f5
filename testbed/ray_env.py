"""A Python with Ray, built once and cached, for the test that reads a multi-box arm's planned ``ray start``
argv with Ray's own parser (tests/test_multinode.py). The CPU vLLM environment installs no Ray, and the
console never imports it: only the plan's argv must be what Ray reads.

``python -m testbed.ray_env ensure`` (run by tests/run.sh) installs the pinned Ray into its own venv under
~/.cache/campaign-console/ (about 300 MB; a file lock keeps parallel test processes from building it twice).
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import sys
from pathlib import Path

from testbed.vllm_env import CACHE

RAY_VERSION = "2.60.0"
PREFIX = CACHE / f"ray-{RAY_VERSION}"
PYTHON = PREFIX / "bin" / "python"


def _venv_ok() -> bool:
    if not PYTHON.exists():
        return False
    check = subprocess.run(
        [str(PYTHON), "-c", "import ray, ray.scripts.scripts; print(ray.__version__)"],
        capture_output=True,
        text=True,
    )
    return check.returncode == 0 and check.stdout.strip() == RAY_VERSION


def ensure() -> Path:
    """The venv's Python, built if missing or broken."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _venv_ok():
            print(f"building a Ray {RAY_VERSION} environment (once)...", file=sys.stderr)
            shutil.rmtree(PREFIX, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", str(PREFIX)], check=True)
            subprocess.run([str(PYTHON), "-m", "pip", "install", "-q", f"ray=={RAY_VERSION}"], check=True)
            if not _venv_ok():
                raise RuntimeError(
                    f"{PREFIX}: Ray {RAY_VERSION} installed but `import ray.scripts.scripts` fails"
                )
    return PYTHON


if __name__ == "__main__":
    if sys.argv[1:] != ["ensure"]:
        sys.exit("usage: python -m testbed.ray_env ensure")
    print(f"Ray ready: {ensure()}")
