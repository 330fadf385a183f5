"""``python -m agents.specdiff``: four captures of the same prompts, greedy, and how they compare.

The speculative server (``--spec``), its base (``--base``: the same server without the speculative
config) and the control (``--control-a``, ``--control-b``: one server configuration captured twice, or the
same server given twice) each generate from every prompt, one request per prompt, in that order: spec,
base, control a, control b. Each is a capture of its own, even when two of them name the same server.
Per prompt: whether spec and base generated the same token ids, and where they first differ; the same for
the control. Judging is the console's (docs/specdiff.md): the tool reports.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from agents.kldiff.client import ServerError, Side
from agents.measure_main import run_measurement
from agents.specdiff.client import Generated, generate
from agents.specdiff.compare import Item
from agents.specdiff.prompts import PromptsError, load

DEFAULT_MAX_TOKENS = 32
DEFAULT_SEED = 0
SIDES = ("spec", "base", "control_a", "control_b")
"""The captures, in the order they are made."""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m agents.specdiff",
        description="Greedy generations of a speculative server, its base and a control captured twice, "
        "compared token for token per prompt. Read the pair against the control.",
    )
    p.add_argument("--spec", required=True, metavar="URL", help="the speculative server's base URL")
    p.add_argument("--base", required=True, metavar="URL", help="the same server without speculation")
    p.add_argument("--control-a", required=True, metavar="URL", help="the control's first capture")
    p.add_argument(
        "--control-b", required=True, metavar="URL", help="its second (the same URL: one server twice)"
    )
    p.add_argument("--model", required=True, help="the model name every server serves")
    p.add_argument(
        "--prompts", metavar="FILE", help="JSON list of prompts (docs/specdiff.md); default: built in"
    )
    p.add_argument("--prompts-json", metavar="JSON", help="the same list inline (what the agent is given)")
    p.add_argument(
        "--max-tokens",
        type=int,
        default=DEFAULT_MAX_TOKENS,
        help=f"tokens per generation (default {DEFAULT_MAX_TOKENS})",
    )
    p.add_argument(
        "--seed", type=int, default=DEFAULT_SEED, help=f"the request seed (default {DEFAULT_SEED})"
    )
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per request")
    p.add_argument("--api-key-env", default="OPENAI_API_KEY")
    p.add_argument("--json", action="store_true", help="print one JSON object (and nothing else) on stdout")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    return p


def measure(args: argparse.Namespace, say: Any) -> dict[str, Any]:
    if args.max_tokens < 1:
        raise PromptsError("--max-tokens must be 1 or more")
    prompts = load(args.prompts, args.prompts_json)
    api_key = os.environ.get(args.api_key_env) or None
    urls = {side: getattr(args, side) for side in SIDES}
    servers = {side: Side.connect(url, args.model, api_key, args.timeout) for side, url in urls.items()}
    for server in servers.values():
        server.served()
    started = time.time()
    captured: dict[str, list[Generated]] = {}
    for side in SIDES:
        captured[side] = [generate(servers[side], p, args.max_tokens, args.seed) for p in prompts]
        say(f"specdiff: {side} generated {len(prompts)} prompts")
    items = [
        Item(
            prompt,
            captured["spec"][i].token_ids,
            captured["base"][i].token_ids,
            captured["control_a"][i].token_ids,
            captured["control_b"][i].token_ids,
            captured["spec"][i].text,
            captured["base"][i].text,
        )
        for i, prompt in enumerate(prompts)
    ]
    pair = sum(item.pair_diverge_at is None for item in items)
    control = sum(item.control_diverge_at is None for item in items)
    say(f"specdiff: pair identical on {pair} of {len(items)}, control reproduced {control} of {len(items)}")
    return {
        **{side: servers[side].url for side in SIDES},
        "model": args.model,
        "prompt_count": len(items),
        "max_tokens": args.max_tokens,
        "seed": args.seed,
        "temperature": 0.0,
        "pair_matched": pair,
        "control_matched": control,
        "items": [item.to_json() for item in items],
        "t_ms": int(started * 1000),
        "duration_s": round(time.time() - started, 3),
    }


def _summary(out: dict[str, Any]) -> str:
    n = out["prompt_count"]
    return (
        f"pair identical on {out['pair_matched']} of {n} prompts; control reproduced "
        f"{out['control_matched']} of {n}; read the pair only if the control reproduces"
    )


def main(argv: list[str] | None = None) -> int:
    return run_measurement(
        "specdiff", parser().parse_args(argv), measure, (PromptsError, ServerError), _summary
    )
