"""Code items run against their tests in a sandbox: a separate Python process in a fresh temporary
directory, with a wall-clock timeout, CPU, memory, file-size and open-file limits, an empty environment,
isolated mode (no user site, no ``PYTHON*`` variables, the cwd not on ``sys.path``) and no network (the
``socket`` modules are made unimportable before the answer runs).

The write-up's suite ran "code executed against its tests in a sandbox"; this is the same contract on one
machine without containers. It is a guard against accidents (an answer that loops, allocates without end,
fills the disk or phones home), not a security boundary against a hostile model.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

TIMEOUT_S = 10.0
CPU_S = 10
MEMORY_BYTES = 1024 * 1024 * 1024
FILE_BYTES = 16 * 1024 * 1024
OPEN_FILES = 64

PREAMBLE = f"""\
import resource as _r
_r.setrlimit(_r.RLIMIT_CPU, ({CPU_S}, {CPU_S}))
_r.setrlimit(_r.RLIMIT_AS, ({MEMORY_BYTES}, {MEMORY_BYTES}))
_r.setrlimit(_r.RLIMIT_FSIZE, ({FILE_BYTES}, {FILE_BYTES}))
_r.setrlimit(_r.RLIMIT_NOFILE, ({OPEN_FILES}, {OPEN_FILES}))
import sys as _sys
for _name in ("socket", "_socket", "ssl", "_ssl"):
    _sys.modules[_name] = None  # import fails: the answer runs without a network
del _sys, _name, _r
"""
"""Run before the answer: hard limits (a process may lower them, never raise them), then no network. Set in
the child itself rather than through ``preexec_fn``, which is unsafe in a process running threads."""


@dataclass(frozen=True)
class Executed:
    passed: bool
    detail: str  # the last line of its output when it failed, or why it did not finish


def run_tests(code: str, tests: str, timeout_s: float = TIMEOUT_S) -> Executed:
    """Run ``code`` then ``tests`` (asserts) in the sandbox; passed when the process exits 0 in time."""
    with tempfile.TemporaryDirectory(prefix="seed6-code-") as tmp:
        program = Path(tmp) / "answer.py"
        program.write_text(PREAMBLE + "\n" + code + "\n\n" + tests + "\n", encoding="utf-8")
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", str(program)],
            cwd=tmp,
            env={"PATH": os.defpath, "HOME": tmp, "TMPDIR": tmp},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            out, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return Executed(False, f"did not finish in {timeout_s:.0f} s")
    if proc.returncode == 0:
        return Executed(True, "")
    last = (out.decode(errors="replace").strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
    return Executed(False, last[:200])
