"""``campaign sweep run LIST --box NAME`` walks a sweep list resumably; ``--box A --box B ...`` feeds it as one
queue to several boxes, arms side by side on their GPUs; ``campaign sweep status`` shows sweeps.

Exit status of ``run``: 0 the walk finished (whatever each arm's outcome, and although a box of a queue
failed when the others ran every arm), 1 it stopped part-way and can be resumed by running the same
command again, 2 bad input, 3 the box could not be reached, 130 interrupted by the operator (also
resumable).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import time
from dataclasses import asdict
from typing import Any

from console.bounds import CONCURRENCY
from console.cli.common import (
    argument,
    csv_values,
    grace_s_arg,
    max_tokens_arg,
    open_store,
    port_arg,
    print_json,
    print_table,
    prompts_arg,
    row_id_arg,
    say,
    store_and_service,
    wait_s_arg,
)
from console.errors import Interrupted
from console.progress import ProgressLine, bar
from console.quality.suites import SUITES, house
from console.quality.suites.runner import DEFAULT_TIMEOUT_S, Caps, parse_cap
from console.readmodel import SweepArmRow, SweepEntry, sweep_status, sweep_statuses
from console.service import DEFAULT_READY_TIMEOUT_S, SWEEP_FINISHED, Service, SweepArm, SweepRow
from console.service.runs import PROMPTS_PER_STREAM
from console.service.sweep import SweepError, SweepOptions, runner_alive
from console.service.sweep.walk import MODES


class ProgressBar:
    """One line on stderr: arms finished of arms known (the walk grows when an engine names candidates)."""

    def __init__(self, width: int = 24, line: ProgressLine | None = None):
        self.width = width
        self.line = line or ProgressLine()
        self.started = time.monotonic()

    def __call__(self, sweep: SweepRow, arms: list[SweepArm], what: str) -> None:
        done = sum(a.state in SWEEP_FINISHED for a in arms)
        frac = done / max(1, len(arms))
        counts = ", ".join(f"{n} {s}" for s in SWEEP_FINISHED if (n := sum(a.state == s for a in arms)))
        elapsed = int(time.monotonic() - self.started)
        self.line.step(
            f"sweep #{sweep.id} {bar(frac, self.width)} {done}/{len(arms)} arms"
            f"{f' ({counts})' if counts else ''} {elapsed // 60}m{elapsed % 60:02d}s | {what}"[:200]
        )

    def done(self) -> None:
        self.line.end()


async def _walk(service: Service, sweep_id: int, options: SweepOptions, bar: ProgressBar) -> SweepRow:
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, task.cancel)  # a polite kill is an operator interrupt
    try:
        return await service.run_sweep(sweep_id, options, bar)
    finally:
        loop.remove_signal_handler(signal.SIGTERM)
        await service.close()


def _run(args: argparse.Namespace) -> int:
    shapes = csv_values(args.shapes, "shapes", str)
    concurrency = csv_values(args.concurrency, "concurrency", CONCURRENCY.parse)
    options = SweepOptions(
        ready_timeout_s=args.ready_timeout,
        kill_grace_s=args.kill_grace,
        prompts=args.prompts,
        force=args.force,
        base_port=args.base_port,
        mode=args.mode,
        suite=args.suite,
        caps=Caps.of(args.cap or []),
        request_timeout_s=args.request_timeout,
        tripwire_max_tokens=args.tripwire_max_tokens,
    )
    with store_and_service(args) as (store, service):
        sweep, resumed = service.open_sweep(
            args.list, args.box, shapes, concurrency, bench_degenerate=args.bench_degenerate, new=args.new
        )
        status = sweep_status(store, sweep.id)
        left = [a for a in status.arms if a.state not in SWEEP_FINISHED]
        verb = "resuming" if resumed else "starting"
        say(
            f"{verb} sweep #{sweep.id}: {sweep.list_name} on {_where(status)}, {len(left)} of "
            f"{len(status.arms)} arms to walk, shapes {','.join(sweep.shapes)} x concurrency "
            f"{','.join(map(str, sweep.concurrency))}"
        )
        bar = ProgressBar()
        try:
            sweep = asyncio.run(_walk(service, sweep.id, options, bar))
        except (asyncio.CancelledError, KeyboardInterrupt) as exc:
            raise Interrupted(
                f"sweep #{sweep.id} interrupted", "run the same command again to resume it"
            ) from exc
        except SweepError as exc:
            raise SweepError(
                f"sweep #{sweep.id} stopped: {exc}", "run the same command again to resume it"
            ) from exc
        finally:
            bar.done()
        _show(sweep_status(store, sweep.id), args.json)
    return 0


def _where(sweep: SweepEntry) -> str:
    """``box a`` for a one-box sweep; the boxes a queue feeds, those out of it marked."""
    if sweep.layout == "node":
        return sweep.box
    return (
        ", ".join(b.box + ("" if b.state == "walking" else f" ({b.state})") for b in sweep.boxes)
        + " (one queue, each arm on its own GPUs)"
    )


def _sweep_json(sweep: SweepEntry) -> dict[str, Any]:
    return {**asdict(sweep), "runner_alive": runner_alive(sweep)}


def _place(arm: SweepArmRow) -> str:
    if arm.box is None:
        return "-"
    return str(arm.box) + (f":{','.join(map(str, arm.gpus))}" if arm.gpus else "")


def _show(sweep: SweepEntry, as_json: bool) -> None:
    if as_json:
        print_json(_sweep_json(sweep))
        return
    state = sweep.state
    if state == "running" and not runner_alive(sweep):
        state = f"stopped part-way (its console, pid {sweep.runner_pid}, is gone); `campaign sweep run` resumes it"
    print(
        f"sweep #{sweep.id} {sweep.list_name} on {_where(sweep)}: {state}"
        + (f" ({sweep.detail})" if sweep.detail else "")
    )
    packed = sweep.layout == "packed"
    if packed:
        for b in sweep.boxes:
            if b.detail:
                print(f"  box {b.box}: {b.state}: {b.detail}")
            for gpu, why in b.excluded:
                print(f"  box {b.box} GPU {gpu} not used: {why}")
    table = []
    for a in sweep.arms:
        good = [b for b in a.benches if b.out_tok_per_s is not None]
        best = max((b.out_tok_per_s for b in good if b.out_tok_per_s is not None), default=None)
        queued = sum(1 for b in good if b.queueing)
        table.append(
            {
                "arm": a.arm,
                "state": a.state,
                "where": _place(a),
                "tries": a.attempts,
                "kv_tokens": a.kv_cache_tokens,
                "max_conc": a.max_concurrency,
                "benches": f"{len(good)}" + (f" ({queued} queueing)" if queued else ""),
                "best_out_tok_s": None if best is None else f"{best:.1f}",
                "reason": (a.reason or "")[:100]
                + (f"; accepts {a.backends_accepted}" if a.backends_accepted else "")
                + (f"; named by {a.queued_by}" if a.queued_by else ""),
            }
        )
    columns = [
        "arm",
        "state",
        "where",
        "tries",
        "kv_tokens",
        "max_conc",
        "benches",
        "best_out_tok_s",
        "reason",
    ]
    print_table(table, [c for c in columns if packed or c != "where"])


def _status(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        sweeps = [sweep_status(store, args.id)] if args.id is not None else sweep_statuses(store, args.box)
    if args.json:
        print_json([_sweep_json(s) for s in sweeps])
        return 0
    if not sweeps:
        print("no sweeps yet; `campaign sweep run LIST --box NAME` starts one")
    for i, s in enumerate(sweeps):
        if i:
            print()
        _show(s, False)
    return 0


def register(sub: argparse._SubParsersAction[Any], help_text: str) -> None:
    p = sub.add_parser("sweep", help=help_text, description=help_text)
    verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True)

    run = verbs.add_parser(
        "run",
        help="walk a sweep list on a box, or feed it to several boxes as one queue "
        "(resumes an unfinished walk of the same list)",
    )
    run.add_argument("list", help="a sweep list of the recipes ([sweeps.NAME])")
    run.add_argument(
        "--box",
        required=True,
        metavar="NAME",
        action="append",
        help="one box: each arm on every card of it; repeated: one queue over all of them, each arm on "
        "the fewest GPUs its layout needs, arms side by side",
    )
    run.add_argument("--shapes", metavar="A,B", help="benchmark shapes (default: router; kept on resume)")
    run.add_argument(
        "--concurrency", metavar="1,8", help="concurrencies per shape (default: 1; kept on resume)"
    )
    run.add_argument(
        "--bench-degenerate",
        action="store_true",
        help="bench arms that failed the tripwire too (their rows are diagnostic-only)",
    )
    run.add_argument(
        "--new", action="store_true", help="abandon an unfinished sweep of this list and start again"
    )
    run.add_argument(
        "--force",
        action="store_true",
        help="launch although the box's last check failed (recorded with every launch)",
    )
    run.add_argument(
        "--ready-timeout",
        type=wait_s_arg,
        default=DEFAULT_READY_TIMEOUT_S,
        metavar="SECONDS",
        help="an arm not serving by then is failed by the agent",
    )
    run.add_argument(
        "--kill-grace",
        type=grace_s_arg,
        default=30.0,
        metavar="SECONDS",
        help="SIGTERM grace before SIGKILL when stopping an arm",
    )
    run.add_argument(
        "--base-port",
        type=port_arg,
        metavar="PORT",
        help="first replica's port on the box, pinned: a port taken there fails the launch (default: the "
        "first ports from 8100 no launch holds, and a port taken on the box moves to a free one above it)",
    )
    run.add_argument(
        "--prompts",
        type=prompts_arg,
        metavar="N",
        help=f"prompts per bench (default: {PROMPTS_PER_STREAM} x concurrency)",
    )
    run.add_argument(
        "--tripwire-max-tokens",
        type=max_tokens_arg,
        metavar="N",
        help="cap each tripwire answer (default: the tripwire's own room, which reasoning models need)",
    )
    run.add_argument(
        "--mode",
        choices=MODES,
        default="bench",
        help="after a passed tripwire: bench the shapes, eval (the quality suite on the same server, bound to "
        "its launch; an arm failing its tripwire gets none), or both (default bench)",
    )
    run.add_argument(
        "--suite", choices=SUITES, default=house.NAME, help="the suite an eval runs (default seed6)"
    )
    run.add_argument(
        "--cap",
        type=argument(parse_cap),
        action="append",
        metavar="[FAMILY=]N",
        help="an eval's generation cap, every family (32768) or one (code=20480) (default: window minus prompt)",
    )
    run.add_argument(
        "--request-timeout",
        type=wait_s_arg,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help="seconds one eval request may take; an item that runs out is unscored (default 3600)",
    )
    run.add_argument("--json", action="store_true", help="print the finished sweep as JSON")
    run.set_defaults(func=_run)

    status = verbs.add_parser("status", help="sweeps and every arm tried, with its outcome")
    status.add_argument("id", nargs="?", type=row_id_arg, help="one sweep (default: all)")
    status.add_argument("--box", metavar="NAME")
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=_status)
