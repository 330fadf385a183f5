"""``campaign curve ARM|LAUNCH [--box NAME] --shape SHAPE (--concurrency 1,2,4,8 | --ladder 1:64:x2 |
--rate 0.5,1.5 [--burstiness K] [--concurrency C] | --workload-iters N | --slo LIMITS [--max-concurrency C]) [--repeat N] [--prompts-per-slot K] [--new | --rerun-invalid]
[--json]``: the arm's curve, measured point by point.

Each point is one ``campaign bench`` at that concurrency (a node row; with ``--repeat N`` a repeat group),
and the curve's record links them. Interrupted (Ctrl-C, a killed console, a failed point), the same command
again measures only the points not yet stored; ``--new`` starts another curve instead. Printed: one row per
point (out tok/s as the median of its repeats with their min-max, per GPU where the GPUs are known, both
interactivity definitions labelled, TTFT and TPOT p50, its state), then throughput against interactivity
(1000/TPOT), one point per concurrency. ``--json``: the curve, its points and the definitions of each figure.
Progress, one line per point, goes to stderr.

``--rate R1,R2,...`` makes a rate curve: one point per rate (ascending, floats, below 1 req/s too), its requests
released open-loop (Poisson; gamma of shape K with ``--burstiness K``), ``--concurrency C`` (one value) the
most in flight at every rate; without it a point is uncapped (its cap is its request count). A rate point
sends K x ceil(R) requests (``--prompts-per-slot K``, default 8). The table adds each point's rate; the chart
labels points by rate.

``--workload-iters N`` or ``--slo ttft:MS,tpot:MS,e2el:MS`` (instead of the points, bounded by
``--max-concurrency C``, default 256) choose the points as they are measured (console/service/curve_search.py):
C=1, the saturated anchor C, then N levels between; or the largest C whose pooled p99s meet every limit,
doubling then bisection, printed with the next probe that misses and each point's p99s (``slo`` in --json).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from console import bounds
from console.cli.common import (
    Column,
    argument,
    print_json,
    print_table,
    run,
    say,
    store_and_service,
)
from console.cli.measure import progress_line, ticker
from console.errors import InputError
from console.readmodel import CURVE_DEFINITIONS, CurvePointView, CurveView, curve
from console.readmodel.curves import MINIMUMS
from console.service import CurvePlan, CurveWalk, Service
from console.service.curves import SearchWalk, SloPoint, concurrency_list, ladder, rate_list
from console.tails import parse_slo

T = TypeVar("T")
CHART_WIDTH = 72
DEFAULT_TIMEOUT_S = 3600.0
CHART_HEIGHT = 18


def _num(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _out(p: CurvePointView) -> str:
    if p.out_tok_per_s is None:
        return "-"
    if len(p.runs) < 2:
        return _num(p.out_tok_per_s)
    return f"{_num(p.out_tok_per_s)} ({_num(p.out_low)}-{_num(p.out_high)})"


def _row(p: CurvePointView) -> dict[str, object]:
    return {
        "rate": "" if p.rate is None else f"{p.rate:g}",
        "c": p.concurrency,
        "out": _out(p),
        "gpu": _num(p.out_per_gpu) if p.out_per_gpu is not None else "",
        "itpot": _num(p.interactivity_tpot),
        "islot": _num(p.interactivity_per_slot),
        "ttft": _num(p.ttft_ms_p50),
        "tpot": _num(p.tpot_ms_p50),
        "reqs": "-" if p.requests is None else p.requests,
        "tails": p.tail_claim,
        "state": p.state_text,
    }


COLUMNS = [
    Column("c", "C", right=True),
    Column("out", "OUT TOK/S (MIN-MAX)", right=True),
    Column("gpu", "PER GPU", right=True),
    Column("itpot", "TOK/S/USER 1000/TPOT", right=True),
    Column("islot", "TOK/S/USER OUT/C", right=True),
    Column("ttft", "TTFT P50 MS", right=True),
    Column("tpot", "TPOT P50 MS", right=True),
    Column("reqs", "REQS", right=True),
    Column("tails", "TAILS"),
    Column("state", "STATE"),
]
RATE_COLUMN = Column("rate", "REQ/S", right=True)
"""A rate curve's first column: the rate each point's arrivals were paced at (its C is then the cap)."""


def _label(p: CurvePointView) -> str:
    return f"C{p.concurrency}" if p.rate is None else f"{p.rate:g}/s"


def chart(view: CurveView, width: int = CHART_WIDTH, height: int = CHART_HEIGHT) -> list[str]:
    """Throughput (per GPU when every plotted point knows its GPUs) against interactivity (1000/TPOT), one
    point per concurrency, labelled with it; no lines when fewer than two points have both figures."""
    shown = [p for p in view.points if p.out_tok_per_s is not None and p.interactivity_tpot is not None]
    if len(shown) < 2:
        return []
    per_gpu = all(p.out_per_gpu is not None for p in shown)
    ys = [(p.out_per_gpu if per_gpu else p.out_tok_per_s) or 0.0 for p in shown]
    xs = [p.interactivity_tpot or 0.0 for p in shown]
    import plotext

    plotext.terminal.limit(False, False)  # the size asked for, not the terminal's (as console/charts.py)
    f = plotext.figure
    f.clear()
    f.plot_size(width, height)
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(ys), max(ys)
    pad_x, pad_y = (x1 - x0) * 0.15 or 1.0, (y1 - y0) * 0.08 or 1.0
    f.ruler("x").lim(x0 - pad_x, x1 + pad_x)
    f.ruler("y").lim(y0 - pad_y, y1 + pad_y)
    for x, y, p in zip(xs, ys, shown, strict=True):  # the mark is the label's first (or last) cell
        right = x > (x0 + x1) / 2
        label = f"{_label(p)}*" if right else f"*{_label(p)}"
        f.draw(f.text(x, y, label, alignment="right" if right else "left"))
    f.label("interactivity: 1000 / median TPOT (tok/s/user)", "x")
    f.title(f"{'out tok/s per GPU' if per_gpu else 'out tok/s (node)'} against interactivity, * a point")
    rows = str(f.build().string(colorless=True)).rstrip("\n").split("\n")
    f.clear()
    return rows


def show(view: CurveView, walk: CurveWalk | None) -> None:
    if view.rate is None:
        points = f"C {','.join(map(str, view.concurrency))}"
    else:
        cap = f"cap C{view.concurrency[0]}" if view.concurrency else "no cap"
        points = (
            f"rate {','.join(f'{r:g}' for r in view.rate)} req/s (burstiness {view.burstiness or 1:g}), {cap}"
        )
    print(
        f"curve #{view.id}: {view.arm} {view.shape} on {view.box}, {points}, "
        f"{view.repeat} run(s) a point, {view.done}/{len(view.points)} stored ({view.state})"
    )
    if walk is not None:
        said = [f"{r:g} req/s" for r in walk.measured_rates] or [f"C{c}" for c in walk.measured]
        print(f"  measured now: {', '.join(said) or 'nothing (every point was stored)'}")
    columns = COLUMNS if view.rate is None else [RATE_COLUMN, *COLUMNS]
    print_table([_row(p) for p in view.points], columns, indent=2)
    print(f"  {MINIMUMS}")
    for line in chart(view):
        print(line)


async def _walk(service: Service, plan: CurvePlan, timeout_s: float, rerun_invalid: bool) -> CurveWalk:
    """The walk, with SIGTERM read as an operator's interrupt: the running point is recorded as interrupted."""
    return await _interruptible(
        lambda say: service.walk_curve(
            plan, timeout_s=timeout_s, tick=ticker("bench"), said=say, rerun_invalid=rerun_invalid
        )
    )


async def _interruptible(step: Callable[[Callable[[str], None]], Awaitable[T]]) -> T:
    """``step`` (given the progress line's say) with SIGTERM read as an operator's interrupt."""
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        with progress_line() as line:
            return await step(line.say)
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f} ms"


def _limits(limits: dict[str, float]) -> str:
    return ", ".join(f"{k} p99<={v:g} ms" for k, v in limits.items())


def _p99s(point: SloPoint, only_missed: bool = False) -> str:
    return ", ".join(f"{m.metric} p99 {_ms(m.p99_ms)}" for m in point.p99s if not (only_missed and m.meets))


def slo_lines(walk: SearchWalk) -> list[str]:
    """The answer of an SLO curve, then each stored point's pooled p99s beside LoadGen's estimate and verdict."""
    by_c = {p.concurrency: p for p in walk.points}
    limits = _limits(walk.limits or {})
    if walk.meeting is None:
        head = f"no C meets {limits}: C1 misses ({_p99s(by_c[1], True)})" if 1 in by_c else "nothing measured"
    else:
        head = f"largest C meeting {limits}: C{walk.meeting} ({_p99s(by_c[walk.meeting])}); "
        head += (
            f"C{walk.missing} misses ({_p99s(by_c[walk.missing], True)})"
            if walk.missing is not None
            else f"the search stopped at --max-concurrency {walk.maximum}"
        )
    lines = [head]
    for p in walk.points:
        figures = "; ".join(
            f"{m.metric} p99 {_ms(m.p99_ms)} (estimate {_ms(m.estimate_ms) if m.estimate_ms is not None else 'too few'}, "
            f"verdict {m.verdict}, {m.n} requests)"
            for m in p.p99s
        )
        lines.append(f"  C{p.concurrency} {'meets' if p.meets else 'misses'}: {figures}")
    return lines


def _slo_json(walk: SearchWalk) -> dict[str, object]:
    return {
        "limits": walk.limits,
        "largest_meeting_concurrency": walk.meeting,
        "next_probe_missing": walk.missing,
        "max_concurrency": walk.maximum,
        "points": [
            {
                "concurrency": p.concurrency,
                "meets": p.meets,
                "p99": [
                    {
                        "metric": m.metric,
                        "limit_ms": m.limit_ms,
                        "p99_ms": m.p99_ms,
                        "estimate_ms": m.estimate_ms,
                        "verdict": m.verdict,
                        "requests": m.n,
                    }
                    for m in p.p99s
                ],
            }
            for p in walk.points
        ],
    }


def _run_search(args: argparse.Namespace) -> int:
    """``--workload-iters N`` or ``--slo``: the points chosen as measured (Service.open_search_curve)."""
    for name, given in (
        ("--rate", args.rate),
        ("--burstiness", args.burstiness),
        ("--rerun-invalid", args.rerun_invalid),
    ):
        if given:
            raise InputError(
                f"{name} with --workload-iters/--slo: a planned curve chooses its concurrencies",
                f"drop {name}",
            )
    try:
        limits = None if args.slo is None else parse_slo(args.slo)
    except ValueError as exc:
        raise InputError(f"--slo {args.slo!r}: {exc}", "write it as ttft:300,tpot:50,e2el:2000 (ms)") from exc
    timeout_s = args.timeout or DEFAULT_TIMEOUT_S
    with store_and_service(args) as (store, service):
        plan = service.open_search_curve(
            args.target,
            args.box,
            args.shape,
            iters=args.workload_iters,
            limits=limits,
            maximum=args.max_concurrency,
            repeat=args.repeat or 1,
            prompts_per_slot=args.prompts_per_slot,
            new=args.new,
        )
        say(f"{'resuming' if plan.resumed else 'started'} curve #{plan.curve.id} ({plan.curve.plan})")
        try:
            walk = run(
                service,
                lambda: _interruptible(
                    lambda line: service.walk_search(
                        plan, timeout_s=timeout_s, tick=ticker("bench"), said=line
                    )
                ),
            )
        except (KeyboardInterrupt, asyncio.CancelledError):
            say(f"curve #{plan.curve.id} interrupted: run the same command again to resume it")
            return 130
        view = curve(store, plan.curve.id)
    if args.json:
        print_json(
            {
                "curve": view.summary(),
                "plan": plan.curve.plan,
                "measured_now": list(walk.measured),
                "points": [p.summary() for p in view.points],
                "slo": _slo_json(walk) if walk.mode == "slo" else None,
                "definitions": CURVE_DEFINITIONS,
            }
        )
        return 0
    show(view, CurveWalk(walk.curve_id, walk.measured))
    if walk.mode == "slo":
        for line in slo_lines(walk):
            print(line)
    return 0


def _levels(args: argparse.Namespace) -> list[int]:
    if (
        args.rate is not None
    ):  # a rate curve's --concurrency is its cap: one value (Service.open_curve checks)
        if args.ladder is not None:
            raise InputError(
                "--rate with --ladder: a rate curve's points are its rates",
                "give --concurrency C as the cap, or none",
            )
        return [] if args.concurrency is None else concurrency_list(args.concurrency)
    if args.burstiness is not None:
        raise InputError(
            "--burstiness without --rate: it shapes paced arrivals only", "give --rate R1,R2,... too"
        )
    if args.ladder is not None:
        return ladder(args.ladder)
    if args.concurrency is None:
        raise InputError(
            "a curve needs its points", "give --concurrency 1,2,4,8, --ladder 1:64:x2 or --rate 0.5,1.5"
        )
    return concurrency_list(args.concurrency)


def _run(args: argparse.Namespace) -> int:
    """Everything typed is read before the store opens: a refusal stores nothing (exit 2)."""
    if args.workload_iters is not None or args.slo is not None:
        return _run_search(args)
    if args.max_concurrency is not None:
        raise InputError("--max-concurrency bounds --workload-iters or --slo", "give one of them, or drop it")
    levels = _levels(args)
    rates = None if args.rate is None else rate_list(args.rate)
    repeat = args.repeat or 1
    per_slot = args.prompts_per_slot
    timeout_s = args.timeout or DEFAULT_TIMEOUT_S
    with store_and_service(args) as (store, service):
        plan = service.open_curve(
            args.target,
            args.box,
            args.shape,
            levels,
            repeat,
            per_slot,
            new=args.new,
            rate=rates,
            burstiness=args.burstiness,
        )
        word = "resuming" if plan.resumed else "started"
        say(f"{word} curve #{plan.curve.id} ({len(plan.curve.concurrency)} points)")
        try:
            walk = run(service, lambda: _walk(service, plan, timeout_s, args.rerun_invalid))
        except (KeyboardInterrupt, asyncio.CancelledError):
            say(f"curve #{plan.curve.id} interrupted: run the same command again to resume it")
            return 130
        view = curve(store, plan.curve.id)
    if args.json:
        print_json(
            {
                "curve": view.summary(),
                "measured_now": list(walk.measured),
                "points": [p.summary() for p in view.points],
                "definitions": CURVE_DEFINITIONS,
            }
        )
        return 0
    show(view, walk)
    return 0


def register(sub: argparse._SubParsersAction[Any], help_text: str) -> None:
    p = sub.add_parser(
        "curve", help=help_text, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("target", metavar="ARM_OR_LAUNCH", help="an arm (its live launch on --box) or a launch id")
    p.add_argument("--box", metavar="NAME", help="the box (required for an arm; a launch id names its own)")
    p.add_argument("--shape", required=True, help="a workload shape from recipes/shapes.toml")
    levels = p.add_mutually_exclusive_group()
    levels.add_argument(
        "--concurrency", metavar="C,C,...", help="the points, e.g. 1,2,4,8; with --rate, one value: the cap"
    )
    levels.add_argument(
        "--ladder",
        metavar="START:END:xF",
        help="START, START*F, ... up to END (END included), e.g. 1:64:x2",
    )
    levels.add_argument(
        "--workload-iters",
        type=argument(bounds.WORKLOAD_ITERS.parse),
        metavar="N",
        help="C=1, the saturated anchor (--max-concurrency), then N levels between them (serve_workload)",
    )
    levels.add_argument(
        "--slo",
        metavar="ttft:MS,tpot:MS,e2el:MS",
        help="find the largest C whose pooled p99s meet every limit: doubling from 1, then bisection",
    )
    p.add_argument(
        "--max-concurrency",
        type=argument(bounds.CONCURRENCY.parse),
        metavar="C",
        help="with --workload-iters: the saturated anchor; with --slo: the largest C probed (default 256)",
    )
    p.add_argument(
        "--rate",
        metavar="R,R,...",
        help="a rate curve: one point per request rate (req/s, e.g. 0.5,1.5), arrivals paced open-loop",
    )
    p.add_argument(
        "--burstiness",
        type=argument(bounds.BURSTINESS.parse),
        metavar="K",
        help="with --rate: the gamma shape of the arrival intervals (default 1, Poisson; below 1 burstier)",
    )
    p.add_argument(
        "--repeat",
        type=argument(bounds.REPEAT.parse),
        metavar="N",
        help="runs per point, stored as a repeat group (default 1)",
    )
    p.add_argument(
        "--prompts-per-slot",
        type=argument(bounds.PROMPTS.parse),
        metavar="K",
        help="measured requests per stream: K x C a point (default: the bench's 8 x C)",
    )
    again = p.add_mutually_exclusive_group()
    again.add_argument(
        "--new", action="store_true", help="start a new curve even if one of the same is unfinished"
    )
    again.add_argument(
        "--rerun-invalid",
        action="store_true",
        help="measure again the stored points judged invalid (their rows are kept, unlinked), then the rest",
    )
    p.add_argument(
        "--timeout",
        type=argument(bounds.WAIT_S.parse),
        metavar="S",
        help="how long to wait for each run's row (default 3600 s)",
    )
    p.add_argument("--json", action="store_true", help="print the curve as JSON (and nothing else) on stdout")
    p.set_defaults(func=_run)
