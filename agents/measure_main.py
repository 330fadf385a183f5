"""The ``main`` of a box-side measuring tool (``python -m agents kldiff``, ``... specdiff``): progress on stderr
unless ``--quiet``, the result as one JSON object with ``--json`` (what the agent reads) or one summary line,
and a failure the tool expects as one line on stderr, ``{"error": ...}`` with ``--json``, and exit 2."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

Measure = Callable[[argparse.Namespace, Callable[[str], None]], dict[str, Any]]


def run_measurement(
    tool: str,
    args: argparse.Namespace,
    measure: Measure,
    errors: tuple[type[Exception], ...],
    summary: Callable[[dict[str, Any]], str],
) -> int:
    """Run ``measure(args, say)`` and report it as the agent and an operator at a shell both read it."""

    def say(text: str) -> None:
        if not args.quiet:
            print(text, file=sys.stderr, flush=True)

    try:
        out = measure(args, say)
    except errors as exc:
        print(f"{tool}: {exc}", file=sys.stderr)
        if args.json:
            print(json.dumps({"error": str(exc)}))
        return 2
    print(json.dumps(out) if args.json else summary(out))
    return 0
