#!/usr/bin/env bash
# Install everything the test suite needs on a fresh Debian machine, then run it all.
# The README's Quick start names this script; .ci/run reads it from there, so the two never drift.
set -euo pipefail
cd "$(dirname "$0")/.."

# System packages: OpenSSH for the sshd test boxes, tmux for the end-to-end console test.
need=()
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ssh-keygen >/dev/null || need+=(openssh-client)
command -v tmux >/dev/null || need+=(tmux)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

python3 -m pip install -q -e '.[test]'

# A real vLLM on CPU for the end-to-end tests, in its own cached venv (it pins its own torch).
if [ -f testbed/vllm_env.py ]; then
  python3 testbed/vllm_env.py ensure --trained
fi
# Ray's own parser for the multi-box arms' planned `ray start` argv, in its own cached venv.
python3 -m testbed.ray_env ensure
# The sshd test boxes' serving environments: the system Python with openai, as a real box's vLLM env has it.
python3 testbed/box_python.py

# The static checks: style (and naive datetimes), one format, strict types, and the layers' import contracts.
ruff check .
ruff format --check .
python3 -m mypy
lint-imports
# Test files side by side, one worker a core (at most four: each may start its own CPU vLLM and sshd boxes);
# a file stays on one worker, so its module-scoped boxes and servers are started once; files go out in the
# order tests/conftest.py gives them (those starting a CPU vLLM first), not xdist's most-tests-first.
python3 -m pytest -rs --durations=25 -n auto --maxprocesses=4 --dist loadfile --no-loadscope-reorder "$@"
