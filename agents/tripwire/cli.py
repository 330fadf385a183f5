"""``python -m agents.tripwire``: 20 fixed prompts through the chat endpoint, graded, one JSON object."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from agents.loadgen.preflight import PreflightError, served_model
from agents.tripwire.client import ClientError, chat, make_client
from agents.tripwire.grade import MAX_DEGENERATE, MIN_OK, Thresholds, grade_item, summarize
from agents.tripwire.items import ITEMS
from agents.tripwire.profile import ProfileError, load
from agents.tripwire.ready import NotServing, until_serving

PROMPT_ROOM = 256
"""Tokens left for the chat template and the longest prompt when max_tokens is capped to the model."""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m agents.tripwire",
        description="Corruption tripwire: 20 fixed chat prompts with expected answers and a repetition "
        "detector; per item ok / degenerate / wrong.",
    )
    p.add_argument("--base-url", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--profile", help="the vendor serving profile's name, as a label for --profile-json")
    p.add_argument("--profile-json", help="the resolved profile as JSON, or @FILE (what the agent is given)")
    p.add_argument(
        "--max-tokens",
        type=int,
        default=4096,
        help="room per answer (reasoning models need it); "
        "capped to the server's max_model_len minus room for the prompt",
    )
    p.add_argument("--concurrency", type=int, default=20)
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per request")
    p.add_argument("--min-ok", type=int, default=MIN_OK)
    p.add_argument("--max-degenerate", type=int, default=MAX_DEGENERATE)
    p.add_argument(
        "--wait-ready-s",
        type=float,
        default=None,
        help="the server is still loading: start now and wait up to this long for it to serve",
    )
    p.add_argument("--server-pid", type=int, help="with --wait-ready-s: give up once this process is gone")
    p.add_argument("--server-start-ticks", type=int, help="its kernel start time (a reused pid is not it)")
    p.add_argument("--api-key-env", default="OPENAI_API_KEY")
    p.add_argument("--json", action="store_true")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    api_key = os.environ.get(args.api_key_env) or None
    try:
        client = make_client(args.base_url, api_key, args.timeout)
        profile = load(args.profile, args.profile_json)
        if args.wait_ready_s is not None:
            until_serving(args.base_url, args.wait_ready_s, args.server_pid, args.server_start_ticks)
        served = served_model(args.base_url, args.model, api_key)
    except (
        ClientError,
        ProfileError,
        NotServing,
        PreflightError,
    ) as exc:  # one line, and the JSON result the agent reads
        print(f"tripwire: {exc}", file=sys.stderr)
        if args.json:
            print(json.dumps({"error": str(exc)}))
        return 2
    max_tokens = args.max_tokens
    if served.max_model_len:  # a small model (the CPU test model serves 2,048) cannot take the default room
        max_tokens = max(1, min(max_tokens, served.max_model_len - PROMPT_ROOM))
    started = time.time()
    done = 0

    def one(item_index: int) -> dict[str, Any]:
        nonlocal done
        item = ITEMS[item_index]
        graded = grade_item(item, chat(client, args.model, item.prompt, profile, max_tokens))
        done += 1
        if not args.quiet:
            print(f"tripwire {done}/{len(ITEMS)} {item.id}: {graded['verdict']}", file=sys.stderr, flush=True)
        return graded

    with ThreadPoolExecutor(max(1, args.concurrency)) as pool:
        items = list(pool.map(one, range(len(ITEMS))))
    summary = summarize(items, Thresholds(args.min_ok, args.max_degenerate))
    out = {
        "model": args.model,
        "base_url": args.base_url,
        "profile": profile.name,
        "reasoning_parser": profile.reasoning_parser,
        "request": profile.request,
        "extra_body": profile.extra_body,
        "max_tokens": max_tokens,
        "t_ms": int(started * 1000),
        "duration_s": round(time.time() - started, 3),
        **summary,
        "items": items,
    }
    if args.json:
        print(json.dumps(out))
    else:
        print(
            f"{out['verdict']}: {out['ok']} ok, {out['degenerate']} degenerate, {out['wrong']} wrong of "
            f"{out['total']}"
            + (f"; reasoning leaked in {out['reasoning_leak']}" if out["reasoning_leak"] else "")
        )
        for item in items:
            if item["verdict"] != "ok" or item["reasoning_leak"]:
                print(
                    f"  {item['id']}: {item['verdict']}: {'; '.join(item['reasons'] or [item['reasoning_leak']])}"
                )
    return 0 if any(i["finish_reason"] is not None for i in items) else 1
