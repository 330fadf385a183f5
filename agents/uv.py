"""The ``uv`` op: the console builds a box's serving environment by running ``uv`` on the box.

WHY only uv, and as an argv list: the op runs the one installer the serving-env lock names
(console/recipes/serving_lock.py), never a shell, so no lock value or path can become a command. The
console sends one step at a time (``uv venv``, ``uv pip install``, ``uv pip list``) and reports each as it
starts; every step converges (an installed pin is left as it is), so a step re-sent after a reconnect is safe.
"""

from __future__ import annotations

import os
import shutil
import subprocess

from agents.environ import allowed_env
from agents.protocol import UvArgs, UvResult

TAIL_CHARS = 32_000
"""What comes back of each stream: ``uv pip list --format json`` fits; an install's log keeps its end."""
DEFAULT_TIMEOUT_S = 1800.0


def run_uv(args: UvArgs) -> UvResult:
    env = allowed_env(os.environ)
    uv = shutil.which("uv", path=env.get("PATH"))
    if uv is None:
        raise ValueError(
            f"uv is not on the box's PATH ({env.get('PATH')}); install it there (pip install uv) and retry"
        )
    try:
        done = subprocess.run(
            [uv, *args["args"]],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=args.get("timeout_s") or DEFAULT_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise ValueError(
            f"uv {' '.join(args['args'][:2])} ran past {exc.timeout:.0f} s and was stopped"
        ) from exc
    return {"rc": done.returncode, "stdout": done.stdout[-TAIL_CHARS:], "stderr": done.stderr[-TAIL_CHARS:]}
