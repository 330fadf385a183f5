"""``campaign timer set|list|show|cancel``: guarded hard stops, typed unambiguously and echoed back.

``set`` shows the deadline in UTC, in this console's zone and in the box's zone, with the time left,
and asks before arming: the moment an hour's misreading would be caught is before it is stored.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
from dataclasses import asdict
from typing import Any

from console.cli.common import (
    confirm,
    duration_arg,
    interval_s_arg,
    open_store,
    print_json,
    print_table,
    row_id_arg,
    run,
    say,
    store_and_service,
)
from console.progress import ProgressLine
from console.readmodel import TimerEntry, database_path, now_ms, timer_entries, timer_entry, timer_log
from console.service import TIMER_ACTIONS, Timer, TimerChange
from console.timeutil import fmt_remaining, fmt_utc, fmt_zone, zone


def _set(args: argparse.Namespace) -> int:
    with store_and_service(args) as (store, service):
        plan = service.plan_timer(args.box, at=args.at, within=args.within, action=args.action)
        say(f"hard stop for box {plan.box}: {plan.action}")
        for label, text in plan.readings:
            say(f"  {label:<10} {text}")
        for other in plan.others:
            say(f"  note: timer {other.id} is also armed: {other.action} at {fmt_utc(other.deadline_ms)}")
        if not confirm(f"arm {plan.action} of box {plan.box} at {fmt_utc(plan.deadline_ms)}?", args.yes):
            say("not armed")
            return 1
        change = run(service, lambda: service.arm_timer(plan, on_box=not args.no_arm))
        print(
            f"timer {change.timer.id} armed in {database_path(store)}: {plan.action} of box {plan.box} at "
            f"{fmt_utc(plan.deadline_ms)}"
        )
    return _on_box(change, "arm")


def _on_box(change: TimerChange, step: str) -> int:
    """Say what the box's own watchdog did; exit 3 when it could not be reached (the console still holds it)."""
    timer, on_box = change.timer, change.on_box
    if on_box is None:
        say(f"box watchdog: not {step}ed yet (--no-arm); `campaign timer watch` or the console does it")
        return 0
    if on_box.done:
        remaining = (
            f", {fmt_remaining(int(on_box.remaining_s * 1000))} on its clock"
            if step == "arm" and on_box.remaining_s is not None
            else ""
        )
        say(
            f"box watchdog: {step}ed on {timer.box}{remaining}"
            if on_box.detail == "done"
            else f"box watchdog: {on_box.detail}"
        )
        return 0
    consequence = (
        "the console's own enforcer still holds the timer: keep `campaign timer watch` (or the console) running"
        if step == "arm"
        else "THE BOX WILL STILL ACT AT THE DEADLINE: run `campaign timer watch` to retry"
    )
    say(
        f"box watchdog: NOT {step}ed on {timer.box}: {on_box.detail}; {consequence} until the box is reachable"
    )
    return 3


def _record(timer: TimerEntry) -> dict[str, Any]:
    box_tz = timer.box_tz
    return {
        "id": timer.id,
        "box": timer.box,
        "deadline_ms": timer.deadline_ms,
        "deadline_utc": fmt_utc(timer.deadline_ms),
        "deadline_box": fmt_zone(timer.deadline_ms, zone(box_tz)) if box_tz else None,
        "box_tz": box_tz,
        "remaining_s": timer.remaining_ms / 1000,
        "action": timer.action,
        "state": timer.state,
        "input_text": timer.input_text,
    }


def _list(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        records = [_record(t) for t in timer_entries(store, args.box, active_only=not args.all)]
    if args.json:
        print_json(records)
        return 0
    rows = [
        r
        | {
            "remaining": fmt_remaining(int(r["remaining_s"] * 1000)) if r["state"] == "armed" else None,
            "box time": r["deadline_box"] or "box zone unknown",
        }
        for r in records
    ]
    print_table(rows, ["id", "box", "action", "state", "deadline_utc", "box time", "remaining"])
    return 0


def _show(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        timer = timer_entry(store, args.id)
        record = _record(timer)
        log = timer_log(store, timer.id)
    if args.json:
        print_json(record | {"log": [asdict(e) for e in log]})
        return 0
    print_table(
        [{"key": key, "value": value} for key, value in record.items()], ["key", "value"], header=False
    )
    print_table(
        [
            {
                "time": fmt_utc(e.t_ms),
                "event": e.event,
                "by": e.enforcer,
                "remaining_s": e.remaining_s,
                "tz": e.tz,
                "detail": e.detail,
            }
            for e in log
        ],
        ["time", "event", "by", "remaining_s", "tz", "detail"],
    )
    return 0


def _cancel(args: argparse.Namespace) -> int:
    with store_and_service(args) as (store, service):
        timer = timer_entry(store, args.id)
        if not confirm(
            f"cancel timer {timer.id} ({timer.action} of box {timer.box} at {fmt_utc(timer.deadline_ms)})?",
            args.yes,
        ):
            say("not cancelled")
            return 1
        change = run(service, lambda: service.cancel_timer(args.id, on_box=not args.no_arm))
    print(f"timer {timer.id} cancelled ({timer.action} of box {timer.box} at {fmt_utc(timer.deadline_ms)})")
    return _on_box(change, "disarm")


def _watch(args: argparse.Namespace) -> int:
    """Enforce every live timer from this console until none is left (Ctrl-C leaves them to the boxes)."""
    with store_and_service(args) as (store, service):
        if not timer_entries(store):
            print("no live timers")
            return 0

        line = ProgressLine()

        async def watch() -> list[Timer]:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
            return await service.watch_timers(
                stop,
                notify=lambda t, message: say(message),
                tick=lambda live: _progress(line, live, now_ms(store)),
                interval_s=args.interval,
            )

        try:
            ended = run(service, watch)
        finally:
            line.end()
    for t in ended:
        print(f"timer {t.id}: {t.action} of box {t.box} {t.state}")
    return 0


def _progress(line: ProgressLine, live: list[Timer], now: int) -> None:
    first = live[0]
    line.step(
        f"{len(live)} live timer(s); next: {first.action} of {first.box} at {fmt_utc(first.deadline_ms)}, "
        f"in {fmt_remaining(first.deadline_ms - now)}"
    )


def register(sub: argparse._SubParsersAction[Any], help_text: str) -> None:
    p = sub.add_parser("timer", help=help_text, description=help_text)
    tsub = p.add_subparsers(dest="timer_command", metavar="ACTION", required=True)

    s = tsub.add_parser(
        "set",
        help="arm a hard stop for a box",
        description="Arm a hard stop. TIME must name its zone: 2026-09-06T01:27Z, 2026-09-06T02:27+01:00 or "
        "'2026-09-06 01:27 Europe/London'; a bare 01:27 is refused. DURATION looks like 4h30m.",
    )
    s.add_argument("box")
    when = s.add_mutually_exclusive_group(required=True)
    when.add_argument("--at", metavar="TIME", help="an instant with Z, an offset or an IANA zone name")
    when.add_argument(
        "--in", dest="within", type=duration_arg, metavar="DURATION", help="from now, e.g. 4h30m, 90m"
    )
    s.add_argument(
        "--action",
        choices=TIMER_ACTIONS,
        default="stop-arms",
        help="stop-arms (default); shutdown (a provider box is stopped at the provider, an owned "
        "host powers off); destroy (through the provider, confirmed)",
    )
    s.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    s.add_argument(
        "--no-arm",
        action="store_true",
        help="store the timer only; do not reach the box to arm its watchdog now",
    )
    s.set_defaults(func=_set)

    ls = tsub.add_parser("list", help="live timers (all of them with --all)")
    ls.add_argument("--box", help="only this box's timers")
    ls.add_argument("--all", action="store_true", help="include fired, failed and cancelled timers")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=_list)

    sh = tsub.add_parser("show", help="one timer and its log: warnings, pulls, refusals, firing")
    sh.add_argument("id", type=row_id_arg)
    sh.add_argument("--json", action="store_true")
    sh.set_defaults(func=_show)

    c = tsub.add_parser("cancel", help="disarm a timer")
    c.add_argument("id", type=row_id_arg)
    c.add_argument("--no-arm", action="store_true", help="do not reach the box to disarm its watchdog now")
    c.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    c.set_defaults(func=_cancel)

    w = tsub.add_parser("watch", help="enforce the live timers from this console until they have fired")
    w.add_argument("--interval", type=interval_s_arg, default=1.0, metavar="SECONDS", help=argparse.SUPPRESS)
    w.set_defaults(func=_watch)
