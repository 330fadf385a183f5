"""The environment the agent and everything it starts run with: a short allowlist, never the caller's.

Why an allowlist: the agent on the console's own machine used to inherit the console's whole
environment (``VAST_API_KEY`` included) and hand it to every server it launched, where any model code,
crash dump or log could read it. A denylist misses the next secret's name; an allowlist does not. A
server gets this plus exactly the env its recipe states (``Supervisor.launch``). Credentials a server
needs live on the box as files under HOME (``huggingface-cli login``), not in the environment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

ALLOWED = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TMPDIR",
        # Where the box keeps its toolkit and caches (often a big data disk on a rented box): not secrets.
        "CUDA_HOME",
        "CUDA_PATH",
        "HF_HOME",
        "HF_HUB_CACHE",
        "HF_HUB_OFFLINE",
        "XDG_CACHE_HOME",
    }
)
ALLOWED_PREFIXES = ("LC_",)


def allowed_env(source: Mapping[str, str] | None = None) -> dict[str, str]:
    """The allowlisted part of ``source`` (default: this process's environment)."""
    env = os.environ if source is None else source
    return {k: v for k, v in env.items() if k in ALLOWED or k.startswith(ALLOWED_PREFIXES)}


def restrict_own_env() -> None:
    """Drop everything but the allowlist from this process's environment, for every child it starts."""
    keep = allowed_env()
    os.environ.clear()
    os.environ.update(keep)
