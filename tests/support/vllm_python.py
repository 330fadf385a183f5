"""Code run by the CPU vLLM environment's own Python, for tests that ask vLLM itself (its argument parser)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from testbed.vllm_env import VllmEnv

ROOT = Path(__file__).resolve().parents[2]


def run_in_vllm_env(vllm_env: VllmEnv, script: str, payload: Any) -> Any:
    """``script`` run by the vLLM environment's Python with this checkout importable, ``payload`` as JSON on its
    stdin; its stdout read as JSON (a failure shows the script's stderr)."""
    out = subprocess.run(
        [str(vllm_env.python), "-c", script],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)
