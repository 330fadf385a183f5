"""Can the serving environment's Python run the tripwire's client? Asked by the probe, before any launch.

Why: the agent starts the tripwire under the serving env's ``python`` (agents/jobs.py), because the client
needs ``openai`` (agents/tripwire/client.py). An env whose Python cannot import it, or cannot import the
agent's own code (too old a Python), was found only after a sweep had launched every arm, each then ending
"crashed" at its tripwire. Here that Python imports exactly what the tripwire imports and makes the client
it makes, without sending a request, and says in one line what failed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import agents
from agents.protocol import TripwireClient

TIMEOUT_S = 60.0
"""Importing openai (pydantic, httpx) takes a second or two; a hung interpreter must not hold the probe."""

_SCRIPT = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
out = {"python": sys.executable, "python_version": "%d.%d.%d" % tuple(sys.version_info[:3]),
       "openai_version": None, "error": None}
try:
    import agents.tripwire.cli
    from agents.tripwire.client import make_client
    make_client("http://127.0.0.1:9", None, 1.0)
    import openai
    out["openai_version"] = str(getattr(openai, "__version__", "") or "") or None
except BaseException as exc:
    out["error"] = ("%s: %s" % (type(exc).__name__, exc)).splitlines()[0][:400]
print(json.dumps(out))
"""
"""Run by the serving Python with the agent's own code (its zipapp or checkout) first on its path."""


def agent_root() -> str:
    """What puts this agent's code on a path: the zipapp it runs from, or the folder above ``agents``."""
    return os.path.dirname(os.path.dirname(os.path.abspath(agents.__file__)))


def tripwire_client(python: str | None, env: dict[str, str] | None = None) -> TripwireClient:
    """Whether ``python`` (None: this agent's interpreter, which runs the tripwire when the box names no
    serving env) imports the tripwire and makes its client; ``error`` is one line when it cannot."""
    exe = python or sys.executable
    result: TripwireClient = {"python": exe, "python_version": None, "openai_version": None, "error": None}
    try:
        proc = subprocess.run(
            [exe, "-c", _SCRIPT, agent_root()],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            env={**os.environ, **(env or {})},
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        result["error"] = f"could not run {exe}: {exc}"
        return result
    try:
        got = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        tail = " ".join((proc.stderr or proc.stdout).split())[-300:]
        result["error"] = f"{exe} exited {proc.returncode} without an answer: {tail}"
        return result
    if not isinstance(got, dict):
        result["error"] = f"{exe} answered {type(got).__name__}, not the check's object"
        return result
    result["python_version"] = _text(got.get("python_version"))
    result["openai_version"] = _text(got.get("openai_version"))
    result["error"] = _text(got.get("error"))
    return result


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None
