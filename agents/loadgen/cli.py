"""``python -m agents.loadgen``: argument parsing, preflight, one run, one JSON object on stdout."""

from __future__ import annotations

import argparse
import json
import math
import os
import secrets
import sys
import time
from pathlib import Path
from typing import Any

from agents.loadgen import memory, metrics, specdecode
from agents.loadgen.memory import PROMPTS_PER_STREAM, STREAMS_PER_PROCESS
from agents.loadgen.preflight import PreflightError, check_lengths, find_vocab, served_model
from agents.loadgen.prompts import PromptPlan, VocabError
from agents.loadgen.run import RunConfig, execute, result, usable_cores
from agents.loadgen.shapes import SHAPES
from agents.loadgen.wire import server_root

AGENT_HOME = Path("~/.campaign-agent")
"""The agent's home when the console is not told another (console/fleet/push.py ``DEFAULT_HOME``)."""
RECORDS_DIR = AGENT_HOME / "loadgen"
"""Where a run started by hand keeps its per-request records unless ``--out`` names another folder."""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m agents.loadgen",
        description="Streaming load at fixed concurrency (closed loop) or paced at a request rate against an "
        "OpenAI-compatible /v1/completions server (vLLM), with exact token lengths and vLLM's metric definitions.",
    )
    p.add_argument(
        "--base-url",
        required=True,
        action="append",
        metavar="URL",
        help="e.g. http://127.0.0.1:8100 (the API base, http://127.0.0.1:8100/v1, is taken too); repeat "
        "it for every replica of a node: the streams are assigned round-robin to the URLs and the result "
        "carries each URL's share (per_url)",
    )
    p.add_argument("--model", required=True, help="served model name")
    p.add_argument(
        "--tokenizer", metavar="DIR", help="model/tokenizer directory (vocabulary and special ids)"
    )
    p.add_argument("--vocab-size", type=int, help="use ids below N when no tokenizer directory is at hand")
    p.add_argument(
        "--shape",
        help=f"built-in shape ({', '.join(SHAPES)}); explicit lengths override it, and "
        "with explicit lengths any name is accepted as the run's label (a recipe's own shape)",
    )
    p.add_argument("--input-len", type=int, help="unique prompt tokens per request, after the shared prefix")
    p.add_argument("--output-len", type=int, help="generated tokens per request")
    p.add_argument("--prefix-len", type=int, help="tokens of the input shared by all requests of the run")
    p.add_argument(
        "--concurrency",
        type=int,
        required=True,
        help="requests in flight (closed loop); with --request-rate, the most in flight at once (the cap)",
    )
    p.add_argument(
        "--request-rate",
        type=float,
        metavar="R",
        help="release the measured requests at R per second (a float, below 1 too), at seeded gamma "
        "intervals (agents/loadgen/arrivals.py), instead of the closed loop",
    )
    p.add_argument(
        "--burstiness",
        type=float,
        metavar="K",
        help="gamma shape of the intervals with --request-rate (default 1: Poisson; below 1 burstier)",
    )
    p.add_argument(
        "--prompts", type=int, help=f"measured requests (default {PROMPTS_PER_STREAM} x concurrency)"
    )
    p.add_argument("--warmup", type=int, help="requests sent and drained before timing (default min(C, 16))")
    p.add_argument("--seed", type=int, help="prompt seed (default: random, recorded in the output)")
    p.add_argument(
        "--processes", type=int, help=f"worker processes (default: one per {STREAMS_PER_PROCESS} streams)"
    )
    p.add_argument(
        "--timeout", type=float, default=3600.0, help="seconds per request before it counts as failed"
    )
    p.add_argument(
        "--records",
        type=Path,
        metavar="FILE",
        help="per-request JSONL file (default: loadgen-<start>-<seed>.jsonl in --out DIR)",
    )
    p.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help=f"folder for the per-request records (default {RECORDS_DIR}, under the agent's home; "
        "never the current directory)",
    )
    p.add_argument(
        "--samples",
        type=Path,
        metavar="FILE",
        help="append one JSON line a second to FILE while the run goes: requests and tokens so far, rates",
    )
    p.add_argument(
        "--no-exact-output", action="store_true", help="do not send ignore_eos (the model may stop early)"
    )
    p.add_argument(
        "--mem-budget-bytes",
        type=int,
        metavar="N",
        help=f"refuse a run whose estimated memory exceeds N bytes, and cap the run's memory there "
        f"(default {memory.MEMORY_SHARE * 100:.0f}%% of MemAvailable)",
    )
    p.add_argument(
        "--api-key-env", default="OPENAI_API_KEY", help="environment variable holding a bearer token"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    return p


def config(args: argparse.Namespace) -> RunConfig:
    shape = SHAPES.get(args.shape) if args.shape else None
    if args.shape and shape is None and (args.input_len is None or args.output_len is None):
        raise ValueError(
            f"--shape {args.shape!r} is not built in ({', '.join(SHAPES)}); give --input-len/--output-len"
        )
    input_len = args.input_len if args.input_len is not None else shape.input_len if shape else None
    output_len = args.output_len if args.output_len is not None else shape.output_len if shape else None
    if input_len is None or output_len is None:
        raise ValueError("give --shape NAME or both --input-len and --output-len")
    prefix_len = args.prefix_len if args.prefix_len is not None else shape.prefix_len if shape else 0
    if args.concurrency < 1:
        raise ValueError(f"--concurrency {args.concurrency}: must be at least 1")
    rate, burstiness = pacing(args.request_rate, args.burstiness)
    prompts = args.prompts if args.prompts is not None else PROMPTS_PER_STREAM * args.concurrency
    if prompts < 1:
        raise ValueError(f"--prompts {prompts}: must be at least 1")
    processes = args.processes or memory.processes_for(args.concurrency, usable_cores())
    seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
    records = records_path(args.records, args.out, seed)
    return RunConfig(
        base_urls=tuple(server_root(url) for url in args.base_url),
        model=args.model,
        shape=args.shape or "custom",
        input_len=input_len,
        output_len=output_len,
        prefix_len=prefix_len,
        concurrency=args.concurrency,
        prompts=prompts,
        seed=seed,
        processes=processes,
        warmup=args.warmup if args.warmup is not None else min(args.concurrency, 16),
        timeout_s=args.timeout,
        records_path=records.resolve(),
        exact_output=not args.no_exact_output,
        api_key=os.environ.get(args.api_key_env) or None,
        progress=not args.quiet,
        samples_path=args.samples,
        mem_budget_bytes=budget(args)[0],
        request_rate=rate,
        burstiness=burstiness,
    )


def records_path(records: Path | None, out: Path | None, seed: int) -> Path:
    """Where the run's per-request records go: ``--records FILE``, else a new file in ``--out DIR``, else in
    RECORDS_DIR. Never the current directory: run by hand from a checkout, the load generator left its
    records there (the agent's own runs name a file in its jobs folder: agents/jobs.py)."""
    if records is not None:
        if out is not None:
            raise ValueError(f"--records {records} and --out {out}: give one (a file, or the folder for one)")
        return records
    folder = (out if out is not None else RECORDS_DIR).expanduser()
    what = f"--out {folder}" if out is not None else f"the records folder {folder}"
    try:
        if out is None:  # the agent's home first: private from the first byte, as the agent makes it
            AGENT_HOME.expanduser().mkdir(mode=0o700, exist_ok=True)
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(
            f"{what}: cannot create it ({exc}); name a folder you can write with --out DIR"
        ) from exc
    return folder / f"loadgen-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{seed}.jsonl"


def pacing(rate: float | None, burstiness: float | None) -> tuple[float | None, float | None]:
    """(rate, burstiness) of the run: both None for the closed loop; a rate's burstiness defaults to 1."""
    if rate is None:
        if burstiness is not None:
            raise ValueError(
                f"--burstiness {burstiness} without --request-rate: it shapes paced arrivals only"
            )
        return None, None
    for flag, value in (("--request-rate", rate), ("--burstiness", burstiness)):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise ValueError(f"{flag} {value}: must be a finite number above 0")
    return rate, 1.0 if burstiness is None else burstiness


def budget(args: argparse.Namespace) -> tuple[int, str]:
    """The run's memory budget in bytes and where it comes from (said in a refusal)."""
    if args.mem_budget_bytes is not None:
        if args.mem_budget_bytes < 1:
            raise ValueError(f"--mem-budget-bytes {args.mem_budget_bytes}: must be at least 1")
        return args.mem_budget_bytes, "--mem-budget-bytes"
    info = memory.meminfo()
    if info is None:
        return memory.FALLBACK_BUDGET_BYTES, "no MemAvailable in /proc/meminfo here: the fallback ceiling"
    available = info["available_bytes"]
    return memory.budget_of(available), (
        f"{memory.MEMORY_SHARE:.0%} of this box's MemAvailable of "
        f"{memory.size(available)}; --mem-budget-bytes N overrides"
    )


def load_of(cfg: RunConfig) -> memory.Load:
    return memory.Load(
        cfg.concurrency, cfg.prompts, cfg.prefix_len + cfg.input_len, cfg.output_len, cfg.processes
    )


def check_memory(cfg: RunConfig, args: argparse.Namespace) -> None:
    """Refuse, before anything is allocated or sent, a run whose estimated memory exceeds the budget."""
    limit, source = budget(args)
    per_stream = None if args.prompts is not None else PROMPTS_PER_STREAM
    cores = None if args.processes else usable_cores()  # an explicit worker count stays as given
    reason = memory.refusal(load_of(cfg), limit, source, per_stream, cores)
    if reason:
        raise ValueError(reason)


def table(out: dict[str, Any]) -> str:
    steady = out["steady"]
    rows = [f"{'':18}{'full run':>12}{'steady':>12}"]
    for key in metrics.RATE_KEYS + metrics.LATENCY_KEYS:
        cells = [out.get(key), steady.get(key)]
        rows.append(
            f"{key:18}"
            + "".join(f"{c:>12.1f}" if isinstance(c, (int, float)) else f"{'-':>12}" for c in cells)
        )
    flag = "  CLIENT-BOUND: these numbers are the client's ceiling" if out["client_bound"] else ""
    return "\n".join(
        [
            f"{out['requests']} requests ({out['failed']} failed) in {out['duration_s']:.1f} s at C{out['concurrency']}"
            + (
                f" paced at {out['request_rate']:g} req/s (burstiness {out['burstiness']:g}), "
                if out["request_rate"] is not None
                else ", "
            )
            + f"{out['prefix_len']}+{out['input_len']}/{out['output_len']} tokens, seed {out['seed']}",
            *rows,
            *(
                f"  {u['base_url']}: {u['streams']} streams, {u['requests']} requests ({u['failed']} failed), "
                f"out {u['out_tok_per_s'] or 0:.1f} tok/s"
                for u in out["per_url"]
                if len(out["per_url"]) > 1
            ),
            f"client: busiest worker {out['client_cpu']:.0%} of a core, {out['client']['processes']} process(es){flag}",
            f"records: {out['records_path']}",
        ]
    )


def fail(message: str, as_json: bool, code: int = 2) -> int:
    print(f"loadgen: {message}", file=sys.stderr)
    if as_json:
        print(json.dumps({"error": message}))
    return code


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        cfg = config(args)
        check_memory(cfg, args)
        served = [served_model(url, cfg.model, cfg.api_key) for url in cfg.base_urls]
        for each in served:
            check_lengths(each, cfg.prefix_len + cfg.input_len, cfg.output_len)
        vocab = find_vocab(args.tokenizer, served[0], args.vocab_size)
        plan = PromptPlan.build(vocab, cfg.seed, cfg.input_len, cfg.prefix_len)
    except (ValueError, PreflightError, VocabError) as exc:
        return fail(str(exc), args.json)
    assert cfg.mem_budget_bytes is not None
    try:
        with memory.capped(cfg.mem_budget_bytes) as cap:
            spec_before = specdecode.read(cfg.base_urls)
            results, wall0, perf0 = execute(cfg, plan)
            out = result(cfg, results, wall0, perf0)
            spec = specdecode.over_run(spec_before, specdecode.read(cfg.base_urls))
    except MemoryError:
        return fail(
            f"ran out of memory at its cap of {memory.size(cap or 0)} (RLIMIT_DATA: its use at start plus "
            f"the budget of {memory.size(cfg.mem_budget_bytes)}), more than the estimate of "
            f"{memory.size(memory.estimate_bytes(load_of(cfg)))}; lower --concurrency or --prompts",
            args.json,
            1,
        )
    except RuntimeError as exc:  # a worker process died: nothing measured can be trusted
        return fail(str(exc), args.json, 1)
    out["memory"] = {
        "budget_bytes": cfg.mem_budget_bytes,
        "estimate_bytes": memory.estimate_bytes(load_of(cfg)),
        "per_request_bytes": memory.per_request_bytes(load_of(cfg)),
        "cap_bytes": cap,
    }
    out["vocab_source"] = vocab.source
    if spec is not None:  # a drafter's servers: drafted and accepted tokens beside the throughput
        out.update(spec.as_row())
    print(json.dumps(out, allow_nan=False) if args.json else table(out))
    return 0 if out["completed"] else 1
