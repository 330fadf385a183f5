"""``campaign specdiff SPEC_LAUNCH BASE_LAUNCH --control C1 C2``: does speculation change the greedy output?

The same prompts are generated greedily (temperature 0, a fixed seed) on the speculative launch, on its base
(the same argv without --speculative-config) and twice on the control, by the agent on the box next to the
servers. Per prompt: exact match and the first divergent token, for the pair and for the control. A verdict
is given only when the control reproduced itself (every prompt, or --min-control N); otherwise "no
conclusion", and the question goes to task accuracy (`campaign quality compare`). The control is one
server configuration captured twice: the same launch given twice (the write-up's "the same server captured
twice") or two launches of SPEC's or BASE's arm. The run is stored; --list and --show read it offline.
Exit status: 0 measured (with a verdict or none), 1 refused or failed, 2 bad input, 3 unreachable.
"""

from __future__ import annotations

import argparse
from typing import Any

from agents.specdiff.cli import DEFAULT_MAX_TOKENS, DEFAULT_SEED
from agents.specdiff.prompts import PromptsError, parse
from console.cli.common import (
    Column,
    json_file_arg,
    max_tokens_arg,
    open_store,
    print_json,
    print_table,
    prompts_arg,
    run,
    seed_arg,
    service_for,
    wait_s_arg,
)
from console.cli.measure import progress_line, ticker
from console.errors import InputError
from console.files import MiB
from console.readmodel.specdiff import QUALITY_POINTER, SpecdiffRun, specdiff_run, specdiff_runs
from console.service import SpecdiffOptions
from console.service.specdiff import DEFAULT_TIMEOUT_S

PROMPTS_MAX_BYTES = 16 * MiB
"""The largest --prompts file read: thousands of prompts are a task benchmark's job, not this one's."""


def _prompts(path: str | None) -> list[str] | None:
    """The operator's prompts file, checked before anything runs on the box."""
    if path is None:
        return None
    return json_file_arg(path, "--prompts", PROMPTS_MAX_BYTES, parse, (PromptsError,), "docs/specdiff.md")


def _compared(diverge_at: int | None) -> str:
    return "identical" if diverge_at is None else f"differs at token {diverge_at}"


def _clip(text: str, width: int = 40) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 3] + "..."


def show(r: SpecdiffRun) -> None:
    """A run as the operator reads it: who, per prompt, the counts, the verdict (and where to go without one)."""
    print(
        f"{r.run_id} on box {r.box} ({r.model}): SPEC {r.spec_launch} ({r.spec_arm}) against BASE "
        f"{r.base_launch} ({r.base_arm}); greedy, seed {r.seed}, up to {r.max_tokens} tokens"
    )
    print(f"  speculative config: {r.speculative_config}")
    print(f"  control: {r.control_kind}")
    rows = [
        {
            "#": i.idx,
            "prompt": _clip(i.prompt),
            "pair": _compared(i.pair_diverge_at),
            "control": _compared(i.control_diverge_at),
        }
        for i in r.items
    ]
    print_table(rows, [Column("#", right=True), "prompt", "pair", "control"], indent=2)
    print(
        f"pair identical on {r.pair_matched} of {r.prompt_count}; control reproduced {r.control_matched} of "
        f"{r.prompt_count}"
    )
    verdict = r.verdict
    print(f"verdict: {verdict.text}")
    if not verdict.conclusive:
        print(QUALITY_POINTER)


def _list(args: argparse.Namespace) -> int:
    with open_store(args, read_only=True) as store:
        runs = specdiff_runs(store)
    if args.json:
        print_json([r.summary() for r in runs])
        return 0
    rows = [
        {
            "run": r.run_id,
            "spec": r.spec_arm,
            "base": r.base_arm,
            "pair": f"{r.pair_matched}/{r.prompt_count}",
            "control": f"{r.control_matched}/{r.prompt_count}",
            "verdict": r.verdict.text,
        }
        for r in runs
    ]
    print_table(
        rows, ["run", "spec", "base", Column("pair", right=True), Column("control", right=True), "verdict"]
    )
    return 0


def _show(args: argparse.Namespace) -> int:
    with open_store(args, read_only=True) as store:
        found = specdiff_run(store, args.show)
    if found is None:
        raise InputError(
            f"no specdiff run {args.show!r} in this state.db", "`campaign specdiff --list` lists them"
        )
    if args.json:
        print_json(found.summary())
    else:
        show(found)
    return 0


def _run(args: argparse.Namespace) -> int:
    if args.list:
        return _list(args)
    if args.show is not None:
        return _show(args)
    if args.spec is None or args.base is None:
        raise InputError(
            "specdiff needs SPEC_LAUNCH and BASE_LAUNCH (or --list / --show RUN)",
            "`campaign specdiff --help` shows the usage",
        )
    options = SpecdiffOptions(_prompts(args.prompts), args.max_tokens, args.seed, args.min_control)
    control = tuple(args.control) if args.control else None
    with service_for(args) as service, progress_line():
        result = run(
            service,
            lambda: service.specdiff(
                args.spec, args.base, control, options, args.timeout, ticker("specdiff")
            ),
        )
    if args.json:
        print_json(result.summary())
    else:
        show(result)
    return 0


def register(sub: argparse._SubParsersAction[Any], help_text: str) -> None:
    p = sub.add_parser(
        "specdiff", help=help_text, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "spec", nargs="?", metavar="SPEC_LAUNCH", help="the speculative launch (--speculative-config)"
    )
    p.add_argument("base", nargs="?", metavar="BASE_LAUNCH", help="the same server without speculation")
    p.add_argument(
        "--control",
        nargs=2,
        metavar=("C1", "C2"),
        help="one configuration captured twice: the same launch twice, or two launches of SPEC's or BASE's arm",
    )
    p.add_argument(
        "--prompts", metavar="FILE", help="JSON list of prompts (docs/specdiff.md); default: 12 built in"
    )
    p.add_argument(
        "--max-tokens",
        type=max_tokens_arg,
        metavar="N",
        help=f"tokens generated per prompt (default {DEFAULT_MAX_TOKENS})",
    )
    p.add_argument("--seed", type=seed_arg, metavar="S", help=f"the request seed (default {DEFAULT_SEED})")
    p.add_argument(
        "--min-control",
        type=prompts_arg,
        metavar="N",
        help="control reproductions a verdict needs (default: every prompt)",
    )
    p.add_argument(
        "--timeout",
        type=wait_s_arg,
        default=DEFAULT_TIMEOUT_S,
        metavar="S",
        help=f"how long to wait for the result (default {DEFAULT_TIMEOUT_S:.0f} s)",
    )
    p.add_argument("--list", action="store_true", help="list the stored runs, newest first (offline)")
    p.add_argument("--show", metavar="RUN", help="one stored run, per prompt (its id or specdiff-... name)")
    p.add_argument(
        "--json", action="store_true", help="print the run(s) as JSON (and nothing else) on stdout"
    )
    p.set_defaults(func=_run)
