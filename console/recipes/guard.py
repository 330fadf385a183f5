"""What a recipe may not put into a server's argv or environment: a way off loopback, or a secret.

WHY every element and not a list of refused flag names: vLLM reads far more than the exact names
(docs/facts.md, "vLLM's argument parser"): ``--ho 0.0.0.0`` after the console's ``--host 127.0.0.1``
rebinds the server, the last one winning; underscores before the first ``.`` become dashes (``--served_model_name``); ``--host.x v``
becomes ``--host '{"x": v}'``; a list value ``["a", "--host", "0.0.0.0"]`` is three argv elements, the
middle one a flag; a value starting with ``-`` is read as an option; and ``--config FILE`` pulls any
flag, ``--host`` included, from a YAML file. So the loader refuses flag names vLLM would read as a flag
the console owns and values vLLM would read as options, and resolve checks the whole argv it built
once more (``listen_problem``): the console's ``--host`` and ``--port`` are the only binding options.
Unicode lookalikes of ``-`` are inert to argparse (it only knows ASCII ``-``) and are refused as names.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from console.recipes.vllm_flags import known_flags

BINDING_FLAGS = {
    "--host": "resolve binds every server to 127.0.0.1 (reached through the SSH tunnel)",
    "--port": "resolve assigns ports (base_port + replica)",
    "--uds": "the server listens on the TCP port resolve assigns, where the agent and the tunnel reach it",
    "--config": "a YAML config can set any flag, --host and --port included: write its flags in the recipe",
    "--grpc-port": "it opens a second listener on a port the console does not assign",
    "--data-parallel-address": "data-parallel ranks of one server talk over the box's loopback",
    "--data-parallel-rpc-port": "data-parallel ranks of one server talk over the box's loopback",
    "--data-parallel-supervisor-port": "it opens a listener on a port the console does not assign",
    "--master-addr": "a server spans one box and talks over its loopback",
    "--master-port": "a server spans one box and talks over its loopback",
    "--kv-events-config": "its ZMQ publisher listens on tcp://*:5557 by default, off loopback",
    "--kv-transfer-config": "it opens KV-transfer listeners on addresses the console does not control",
    "--ec-transfer-config": "it opens transfer listeners on addresses the console does not control",
}
"""vLLM options that choose where a server (or one of its side channels) listens."""

_NUMBER = re.compile(r"-[0-9]+|-[0-9]*\.[0-9]+")
"""argparse reads an element that starts with '-' as an option unless it looks like a negative number."""
_BINDING_ENV = re.compile(r"(?:^|_)(?:HOST|HOSTNAME|IP|ADDR|ADDRESS|PORT)(?:_|$)")
"""VLLM_HOST_IP, VLLM_PORT, VLLM_DP_MASTER_IP, MASTER_ADDR, VLLM_NIXL_SIDE_CHANNEL_HOST...: where vLLM listens."""
_SECRET_ENV = re.compile(
    r"(?:^|_)(?:KEY|KEY_ID|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)$|(?:^|_)SECRET(?:_|$)"
)
"""HF_TOKEN, VLLM_API_KEY, S3_SECRET_ACCESS_KEY...; not VLLM_..._TOKEN_THRESHOLD, a tuning knob."""


def _options(head: str) -> list[str]:
    """The vLLM options a long-flag head is read as: itself if vLLM has it, else those it abbreviates."""
    flags = known_flags().flags
    if head in flags:
        return [head]
    return [f for f in flags if f.startswith(head)] or [head]


def _head(name: str) -> tuple[str, str]:
    """(option, sub-key) as vLLM reads ``--a_b.c_d``: dashes before the first '.', the rest verbatim."""
    head, _, sub = name.partition(".")
    return head.replace("_", "-"), sub


def flag_problem(name: str, owned: Mapping[str, str]) -> str | None:
    """Why a recipe may not write the flag ``name`` (one the console owns, however spelt), or None."""
    head, sub = _head(name)
    for option in _options(head):
        why = (
            BINDING_FLAGS.get(option) or owned.get(option) or (owned.get(f"{option}.{sub}") if sub else None)
        )
        if why is None:
            continue
        if name in BINDING_FLAGS or name in owned:
            return f"{name!r} may not be set as a free flag: {why}"
        return (
            f"{name!r} is read by vLLM as {option!r} (an abbreviation or _ spelling), which may not be "
            f"set: {why}"
        )
    return None


def value_problem(value: str) -> str | None:
    """Why ``value`` cannot be one argv element that vLLM reads as a value, or None."""
    if "\0" in value:
        return f"value {value!r} holds a NUL character, which no argv element can carry"
    if value.startswith("-") and not _NUMBER.fullmatch(value):
        return f"value {value!r} starts with '-': vLLM would read it as a flag, not as a value"
    return None


def env_problem(name: str) -> str | None:
    """Why a recipe may not set the environment variable ``name``, or None."""
    upper = name.upper()
    if _SECRET_ENV.search(upper):
        return (
            f"{name!r} looks like a secret, and a recipe's environment is stored in state.db with every "
            "launch; keep credentials on the box (huggingface-cli login writes the HF token under its HOME)"
        )
    if _BINDING_ENV.search(upper):
        return f"{name!r} chooses where vLLM listens or connects; every server stays on the box's loopback"
    return None


def listen_problem(args: list[str], owned: Mapping[str, str]) -> str | None:
    """Why a server argv (everything after ``serve``) could listen anywhere but ``owned`` (flag -> value)."""
    found: list[str] = []
    for i, element in enumerate(args):
        if not element.startswith("-") or _NUMBER.fullmatch(element):
            continue
        name, eq, _ = element.partition("=")
        if not name.startswith("--") or name == "--":
            return f"argv element {element!r} is neither a long flag nor a number: vLLM could read it as an option"
        head, _ = _head(name)
        if any(option in BINDING_FLAGS for option in _options(head)):
            found.append(element if eq else " ".join(args[i : i + 2]))
    expected = [f"{flag} {value}" for flag, value in owned.items()]
    if found != expected:
        extra = [f for f in found if f not in expected] or found
        return (
            f"the server would listen where the console did not put it ({'; '.join(extra)}): every server binds "
            f"{' '.join(expected)}; remove those from the recipe"
        )
    return None
