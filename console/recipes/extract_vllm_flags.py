"""Regenerate ``vllm_flags.json``: every option ``vllm serve`` accepts, read from a real vLLM.

Run it with the serving environment's own Python (it imports vLLM, so it cannot run in the console's
environment)::

    <serving_env>/bin/python -m console.recipes.extract_vllm_flags > console/recipes/vllm_flags.json

WHY: lint refuses a flag the engine does not know. Guessing flag names from documentation is how a
recipe ends up with ``--moe-backnd`` and an arm that dies at start-up; the parser itself is the truth.
"""

from __future__ import annotations

import argparse
import json
import sys
import typing


def _choices(action: argparse.Action) -> list[str] | None:
    if action.choices is None:
        return None
    return sorted(str(c) for c in action.choices)


def extract() -> dict[str, object]:
    import vllm
    from vllm.config.kernel import KernelConfig
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.reasoning import ReasoningParserManager
    from vllm.tool_parsers import ToolParserManager
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
    flags: dict[str, dict[str, object]] = {}
    for action in parser._actions:
        takes_value = action.nargs != 0
        for option in action.option_strings:
            if option.startswith("--") and option != "--help":
                flags[option] = {"takes_value": takes_value, "choices": _choices(action)}
    hints = typing.get_type_hints(KernelConfig)
    kernel = {name: sorted(typing.get_args(hints[name])) for name in ("linear_backend", "moe_backend")}
    return {
        "vllm_version": vllm.__version__,
        "flags": dict(sorted(flags.items())),
        "kernel_backends": kernel,
        "reasoning_parsers": ReasoningParserManager.list_registered(),
        "tool_call_parsers": ToolParserManager.list_registered(),
    }


if __name__ == "__main__":
    json.dump(extract(), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
