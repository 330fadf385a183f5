"""``python -m agents.kldiff``: two servers, identical token contexts, one JSON object of figures.

The contexts are tokenized once by each server; the two must agree token for token (the same ids are
then scored by both), else the run is refused: servers whose tokenizers differ predict over different
vocabularies, and no per-token comparison of them means anything.
"""

from __future__ import annotations

import argparse
import os
import random
import time
from dataclasses import asdict
from typing import Any

from agents.kldiff.client import ServerError, Side
from agents.kldiff.contexts import Context, ContextError, load
from agents.kldiff.divergence import MISSING_TOKEN_METHOD, Listed, Position, compare, summarize
from agents.measure_main import run_measurement

DEFAULT_TOP_K = 20
"""vLLM's default ``--max-logprobs`` is 20 too: a server started without a larger one refuses more."""


class TokenizerMismatch(ValueError):
    """The two servers tokenize a context differently."""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m agents.kldiff",
        description="Logit-level divergence of two servers: identical token contexts scored by both, top-k "
        "log-probabilities per position, top-1 agreement and KL(a||b). Read it against a control pair.",
    )
    p.add_argument(
        "--a", required=True, metavar="URL", help="the reference server's base URL (with or without /v1)"
    )
    p.add_argument("--b", required=True, metavar="URL", help="the compared server's base URL")
    p.add_argument("--model", required=True, help="the model name server a serves (and b, unless --model-b)")
    p.add_argument("--model-b", help="the model name server b serves, when it differs")
    p.add_argument(
        "--contexts", metavar="FILE", help="JSON list of contexts (docs/kldiff.md); default: built in"
    )
    p.add_argument("--contexts-json", metavar="JSON", help="the same list inline (what the agent is given)")
    p.add_argument(
        "--positions", type=int, metavar="N", help="compare a seeded sample of N positions (default: all)"
    )
    p.add_argument(
        "--top-k",
        type=int,
        default=DEFAULT_TOP_K,
        help=f"log-probabilities per position (default {DEFAULT_TOP_K})",
    )
    p.add_argument(
        "--seed", type=int, default=0, help="which positions a --positions sample keeps (default 0)"
    )
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per request")
    p.add_argument("--api-key-env", default="OPENAI_API_KEY")
    p.add_argument("--json", action="store_true", help="print one JSON object (and nothing else) on stdout")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    return p


def _tokenized(a: Side, b: Side, contexts: list[Context]) -> list[tuple[list[int], int]]:
    """Each context's ids (as server a tokenizes it) and its first compared position; refuses a mismatch."""
    out = []
    for i, context in enumerate(contexts):
        ids_a, start = a.tokenize(context)
        ids_b, _ = b.tokenize(context)
        if ids_a != ids_b:
            at = next(
                (j for j, (x, y) in enumerate(zip(ids_a, ids_b, strict=False)) if x != y),
                min(len(ids_a), len(ids_b)),
            )
            raise TokenizerMismatch(
                f"the servers tokenize context {i} differently ({len(ids_a)} ids on a, {len(ids_b)} on b, first "
                f"difference at token {at}): their tokenizers differ, and next-token distributions over different "
                "vocabularies cannot be compared position by position; compare servers of one tokenizer"
            )
        if start >= len(ids_a):
            raise ContextError(f"context {i} tokenizes to {len(ids_a)} ids: nothing left to compare")
        out.append((ids_a, start))
    return out


def _sample(candidates: list[tuple[int, int]], n: int | None, seed: int) -> list[tuple[int, int]]:
    if n is None or n >= len(candidates):
        return candidates
    return sorted(random.Random(seed).sample(candidates, n))


def measure(args: argparse.Namespace, say: Any) -> dict[str, Any]:
    if args.top_k < 1:
        raise ContextError("--top-k must be 1 or more")
    if args.positions is not None and args.positions < 1:
        raise ContextError("--positions must be 1 or more")
    contexts = load(args.contexts, args.contexts_json)
    api_key = os.environ.get(args.api_key_env) or None
    a = Side.connect(args.a, args.model, api_key, args.timeout)
    b = Side.connect(args.b, args.model_b or args.model, api_key, args.timeout)
    a.served()
    b.served()
    started = time.time()
    tokenized = _tokenized(a, b, contexts)
    say(f"kldiff: {len(contexts)} contexts tokenized identically by both servers")
    prompts = [ids for ids, _ in tokenized]
    scored_a, scored_b = a.score(prompts, args.top_k), b.score(prompts, args.top_k)
    # Position j of a context predicts token j; its log-probabilities sit at index j - 1 of the scored list.
    candidates = [(c, j) for c, (ids, start) in enumerate(tokenized) for j in range(start, len(ids))]
    chosen = _sample(candidates, args.positions, args.seed)
    positions: list[Position] = [
        compare(Listed.of(scored_a[c][j - 1], args.top_k), Listed.of(scored_b[c][j - 1], args.top_k))
        for c, j in chosen
    ]
    summary = summarize(positions)
    say(
        f"kldiff: {summary.positions} positions, top-1 agreement {summary.top1_agreement:.4f}, "
        f"mean KL {summary.mean_kl:.5f}"
    )
    return {
        "a": a.url,
        "b": b.url,
        "model": a.model,
        "model_b": b.model,
        "contexts": len(contexts),
        "positions_available": len(candidates),
        **asdict(summary),
        "top_k": args.top_k,
        "seed": args.seed,
        "kl_direction": "KL(a||b), nats",
        "missing_token_method": MISSING_TOKEN_METHOD,
        "tokenizer_check": f"{len(contexts)} contexts, identical token ids on both servers",
        "t_ms": int(started * 1000),
        "duration_s": round(time.time() - started, 3),
    }


def _summary(out: dict[str, Any]) -> str:
    return (
        f"{out['positions']} positions: top-1 agreement {out['top1_agreement']:.4f}, top-5 overlap "
        f"{out['top5_overlap']:.4f}, mean KL {out['mean_kl']:.5f} (p50 {out['p50_kl']:.5f}, p99 "
        f"{out['p99_kl']:.5f}); read it against a control pair"
    )


def main(argv: list[str] | None = None) -> int:
    errors = (ContextError, ServerError, TokenizerMismatch)
    return run_measurement("kldiff", parser().parse_args(argv), measure, errors, _summary)
