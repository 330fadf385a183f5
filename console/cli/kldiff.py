"""``campaign kldiff LAUNCH_A LAUNCH_B [--control LAUNCH_C LAUNCH_D]``: logit-level divergence of two servers.

Both launches serve on one box; the agent scores identical token contexts on both (agents/kldiff) and
the row lands in state.db. With ``--control`` (the same configuration launched twice) the control pair
is measured first and the verdict is read against it, in the write-up's words: "below the floor", "just
above: excess KL +x", "N times the floor". Without one the figures are reported and no verdict is given.
Exit status: 0 measured (with or without a verdict), 1 refused or failed, 2 bad input, 3 unreachable.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

from agents.kldiff.contexts import ContextError, parse
from console.cli.common import (
    json_file_arg,
    positions_arg,
    print_json,
    run,
    say,
    seed_arg,
    service_for,
    top_k_arg,
    wait_s_arg,
)
from console.cli.measure import progress_line, ticker
from console.files import MiB
from console.readmodel import KldiffRun
from console.service import KldiffOptions, KldiffOutcome
from console.service.kldiff import DEFAULT_TIMEOUT_S

CONTEXTS_MAX_BYTES = 64 * MiB
"""The largest --contexts file read: token-id lists, a few MiB for thousands of long contexts."""


def _checked(value: Any, where: str) -> list[Any]:
    """The contexts as given, once they parse: the box-side tool parses them again from the same JSON."""
    parse(value, where)
    return list(value)


def _contexts(path: str | None) -> list[Any] | None:
    """The operator's contexts file, checked before anything runs on the box."""
    if path is None:
        return None
    return json_file_arg(path, "--contexts", CONTEXTS_MAX_BYTES, _checked, (ContextError,), "docs/kldiff.md")


def _num(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def figures(run: KldiffRun) -> str:
    return (
        f"top-1 agreement {_num(run.top1_agreement, 4)}, top-5 overlap {_num(run.top5_overlap, 4)}, mean KL "
        f"{_num(run.mean_kl, 5)} (p50 {_num(run.p50_kl, 5)}, p99 {_num(run.p99_kl, 5)}) over {run.positions} "
        "positions"
    )


def show(outcome: KldiffOutcome) -> None:
    pair, control = outcome.pair, outcome.control
    print(f"{pair.pair} on box {pair.box} ({pair.model}): {figures(pair)}")
    print(f"  kernels: a {pair.kernel_a or 'not recorded'} | b {pair.kernel_b or 'not recorded'}")
    if control is not None:
        print(f"control {control.pair}: {figures(control)}")
    print(f"verdict: {pair.verdict.text}")
    if control is None:
        say("measure a control pair with it: --control C D, the same arm launched twice")


def _run(args: argparse.Namespace) -> int:
    options = KldiffOptions(_contexts(args.contexts), args.positions, args.top_k, args.seed)
    control = tuple(args.control) if args.control else None
    with (
        service_for(args) as service,
        progress_line(),
    ):  # the line is ended, its last step written, on any exit
        outcome = run(
            service,
            lambda: service.kldiff(
                args.launch_a, args.launch_b, control, options, args.timeout, ticker("kldiff")
            ),
        )
    if args.json:
        verdict = outcome.pair.verdict
        print_json(
            {
                "pair": asdict(outcome.pair),
                "control": asdict(outcome.control) if outcome.control else None,
                "verdict": {
                    "kind": verdict.kind,
                    "word": verdict.word,
                    "text": verdict.text,
                    "excess_kl": verdict.excess,
                    "times_floor": verdict.times,
                },
            }
        )
    else:
        show(outcome)
    return 0


def register(sub: argparse._SubParsersAction[Any], help_text: str) -> None:
    p = sub.add_parser(
        "kldiff", help=help_text, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("launch_a", metavar="LAUNCH_A", help="the reference server (KL is KL(a||b))")
    p.add_argument("launch_b", metavar="LAUNCH_B", help="the compared server, on the same box")
    p.add_argument(
        "--control",
        nargs=2,
        metavar=("LAUNCH_C", "LAUNCH_D"),
        help="the control pair: one configuration launched twice; it fixes the noise floor",
    )
    p.add_argument(
        "--contexts", metavar="FILE", help="JSON list of contexts (docs/kldiff.md); default: built in"
    )
    p.add_argument(
        "--positions",
        type=positions_arg,
        metavar="N",
        help="compare a seeded sample of N positions (default all)",
    )
    p.add_argument("--top-k", type=top_k_arg, metavar="K", help="log-probabilities per position (default 20)")
    p.add_argument("--seed", type=seed_arg, metavar="S", help="which positions a --positions sample keeps")
    p.add_argument(
        "--timeout",
        type=wait_s_arg,
        default=DEFAULT_TIMEOUT_S,
        metavar="S",
        help=f"how long to wait for each pair's result (default {DEFAULT_TIMEOUT_S:.0f} s)",
    )
    p.add_argument(
        "--json", action="store_true", help="print the stored rows as JSON (and nothing else) on stdout"
    )
    p.set_defaults(func=_run)
