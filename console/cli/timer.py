"""``campaign timer set|list|show|cancel``: guarded hard stops, typed unambiguously and echoed back.

``set`` shows the deadline in UTC, in this console's zone and in the box's zone, with the time left,
and asks before arming: the moment an hour's misreading would be caught is before it is stored.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from typing import Any

from console.cli.common import CliError, confirm, open_store, print_json, print_table
from console.fleet import FleetManager
from console.store import NoSuchBox, Store
from console.store.timers import ACTIONS, NoSuchTimer, Timer
from console.timers import Enforcer, FleetActions, TimerInputError, cancel, parse_deadline, readings
from console.timeutil import fmt_remaining, fmt_utc, fmt_zone, zone
from ops.providers import ProviderError, for_box


def _check_action(store: Store, box_name: str, action: str) -> None:
    box = store.boxes.get(box_name)
    if box.status == "destroyed":
        raise CliError(f"box {box_name} is already destroyed; nothing to stop")
    if not box.reachable:  # imported figures: there is no machine behind the name to stop
        raise CliError(f"box {box_name} cannot be reached ({box.status_detail or box.status}); nothing to stop")
    if action == "stop-arms":
        return
    try:
        provider = for_box(box.provider)  # a Vast box without an API key fails here, not at the deadline
    except ProviderError as exc:
        raise CliError(f"--action {action} on box {box_name}: {exc}") from exc
    if action == "shutdown":
        return
    if not provider.can_destroy:
        raise CliError(
            f"--action destroy on box {box_name}: it is a {provider.name} host and cannot be destroyed by the "
            "console; use --action shutdown (or stop-arms)"
        )
    if not box.instance_id:
        raise CliError(f"--action destroy on box {box_name}: the box has no provider instance id "
                       f"(`campaign box add ... --provider {box.provider} --instance ID`)")


def _set(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        try:
            _check_action(store, args.box, args.action)
        except NoSuchBox as exc:
            raise CliError(str(exc)) from exc
        box_tz = store.timers.box_tz(args.box)
        now = store.clock()
        try:
            deadline = parse_deadline(args.at, args.within, now_ms=now, box_tz=box_tz)
        except TimerInputError as exc:
            raise CliError(str(exc)) from exc
        shown = readings(deadline, now, box_tz)
        print(f"hard stop for box {args.box}: {args.action}")
        for label, text in shown:
            print(f"  {label:<10} {text}")
        for other in store.timers.every(args.box, active_only=True):
            print(f"  note: timer {other.id} is also armed: {other.action} at {fmt_utc(other.deadline_ms)}")
        if not confirm(f"arm {args.action} of box {args.box} at {fmt_utc(deadline)}?", args.yes):
            print("not armed")
            return 1
        timer = store.timers.add(
            args.box, deadline, args.action, args.at if args.at is not None else f"in {args.within}",
            now_ms=store.clock(), detail={"readings": dict(shown)},
        )
        print(f"timer {timer.id} armed in {store.path}: {args.action} of box {args.box} at {fmt_utc(deadline)}")
        if args.no_arm:
            print("box watchdog: not armed yet (--no-arm); `campaign timer watch` or the console arms it")
            return 0
        return _on_box(store, timer, "arm")


def _on_box(store: Store, timer: Timer, step: str) -> int:
    """Arm (or disarm) the box's own watchdog now, so the stop holds with this laptop closed."""

    async def run() -> Any:
        fleet = FleetManager(store)
        try:
            enforcer = Enforcer(store, FleetActions(fleet, store.clock), clock=store.clock)
            return await (enforcer.arm_box(timer) if step == "arm" else enforcer.disarm_box(timer))
        finally:
            await fleet.close()

    result = asyncio.run(run())
    if result is not None:
        remaining = f", {fmt_remaining(int(result['remaining_s'] * 1000))} on its clock" if step == "arm" else ""
        print(f"box watchdog: {'armed' if step == 'arm' else 'disarmed'} on {timer.box}{remaining}")
        return 0
    last = store.timers.log_for(timer.id)[-1]
    if last["event"] in ("armed-on-box", "cancelled-on-box") or (step == "disarm" and last["event"] == "cancelled"):
        return 0  # already done, or never armed there
    error = (last["detail"] or {}).get("error", last["event"])
    consequence = (
        "the console's own enforcer still holds the timer: keep `campaign timer watch` (or the console) running"
        if step == "arm" else "THE BOX WILL STILL ACT AT THE DEADLINE: run `campaign timer watch` to retry"
    )
    print(f"box watchdog: NOT {step}ed on {timer.box}: {error}; {consequence} until the box is reachable",
          file=sys.stderr)
    return 3


def _record(timer: Timer, now: int, box_tz: str | None) -> dict[str, Any]:
    return {
        "id": timer.id,
        "box": timer.box,
        "deadline_ms": timer.deadline_ms,
        "deadline_utc": fmt_utc(timer.deadline_ms),
        "deadline_box": fmt_zone(timer.deadline_ms, zone(box_tz)) if box_tz else None,
        "box_tz": box_tz,
        "remaining_s": (timer.deadline_ms - now) / 1000,
        "action": timer.action,
        "state": timer.state,
        "input_text": timer.input_text,
    }


def _list(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        if args.box is not None:
            try:
                store.boxes.get(args.box)  # a mistyped name must not read as "no timers: nothing will stop"
            except NoSuchBox as exc:
                raise CliError(str(exc)) from exc
        now = store.clock()
        timers = store.timers.every(args.box, active_only=not args.all)
        records = [_record(t, now, store.timers.box_tz(t.box)) for t in timers]
    if args.json:
        print_json(records)
        return 0
    rows = [
        r | {"remaining": fmt_remaining(int(r["remaining_s"] * 1000)) if r["state"] == "armed" else None,
             "box time": r["deadline_box"] or "box zone unknown"}
        for r in records
    ]
    print_table(rows, ["id", "box", "action", "state", "deadline_utc", "box time", "remaining"])
    return 0


def _show(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        try:
            timer = store.timers.get(args.id)
        except NoSuchTimer as exc:
            raise CliError(str(exc)) from exc
        record = _record(timer, store.clock(), store.timers.box_tz(timer.box))
        log = store.timers.log_for(timer.id)
    if args.json:
        print_json(record | {"log": log})
        return 0
    for key, value in record.items():
        print(f"{key:<13} {value}")
    print_table(
        [{"time": fmt_utc(e["t_ms"]), "event": e["event"], "by": e["enforcer"],
          "remaining_s": e["remaining_s"], "tz": e["tz"], "detail": e["detail"]} for e in log],
        ["time", "event", "by", "remaining_s", "tz", "detail"],
    )
    return 0


def _cancel(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        try:
            timer = cancel(store, args.id, now_ms=store.clock())
        except NoSuchTimer as exc:
            raise CliError(str(exc)) from exc
        except TimerInputError as exc:
            raise CliError(str(exc)) from exc
        print(f"timer {timer.id} cancelled ({timer.action} of box {timer.box} at {fmt_utc(timer.deadline_ms)})")
        return 0 if args.no_arm else _on_box(store, timer, "disarm")


def _watch(args: argparse.Namespace) -> int:
    """Enforce every live timer from this console until none is left (Ctrl-C leaves them to the boxes)."""
    with open_store(args) as store:
        watched = [t.id for t in store.timers.every(active_only=True)]
        if not watched:
            print("no live timers")
            return 0

        async def run() -> None:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
            fleet = FleetManager(store)
            enforcer = Enforcer(store, FleetActions(fleet, store.clock), clock=store.clock,
                                notify=lambda t, message: print(message, flush=True))
            try:
                while not stop.is_set() and (live := store.timers.every(active_only=True)):
                    await enforcer.tick()
                    _progress(live[0], store.clock(), len(live))
                    try:
                        await asyncio.wait_for(stop.wait(), args.interval)
                    except TimeoutError:
                        pass
            finally:
                await fleet.close()

        asyncio.run(run())
        ended = [store.timers.get(i) for i in watched]
    sys.stderr.write("\n" if sys.stderr.isatty() else "")
    for t in ended:
        print(f"timer {t.id}: {t.action} of box {t.box} {t.state}")
    return 0


def _progress(first: Timer, now: int, count: int) -> None:
    if sys.stderr.isatty():
        sys.stderr.write(f"\r{count} live timer(s); next: {first.action} of {first.box} at "
                         f"{fmt_utc(first.deadline_ms)}, in {fmt_remaining(first.deadline_ms - now)}   ")
        sys.stderr.flush()


def register(sub: argparse._SubParsersAction, help_text: str) -> None:
    p = sub.add_parser("timer", help=help_text, description=help_text)
    tsub = p.add_subparsers(dest="timer_command", metavar="ACTION", required=True)

    s = tsub.add_parser(
        "set", help="arm a hard stop for a box",
        description="Arm a hard stop. TIME must name its zone: 2026-09-06T01:27Z, 2026-09-06T02:27+01:00 or "
        "'2026-09-06 01:27 Europe/London'; a bare 01:27 is refused. DURATION looks like 4h30m.",
    )
    s.add_argument("box")
    when = s.add_mutually_exclusive_group(required=True)
    when.add_argument("--at", metavar="TIME", help="an instant with Z, an offset or an IANA zone name")
    when.add_argument("--in", dest="within", metavar="DURATION", help="from now, e.g. 4h30m, 90m")
    s.add_argument("--action", choices=ACTIONS, default="stop-arms",
                   help="stop-arms (default); shutdown (a provider box is stopped at the provider, an owned "
                   "host powers off); destroy (through the provider, confirmed)")
    s.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    s.add_argument("--no-arm", action="store_true",
                   help="store the timer only; do not reach the box to arm its watchdog now")
    s.set_defaults(func=_set)

    ls = tsub.add_parser("list", help="live timers (all of them with --all)")
    ls.add_argument("--box", help="only this box's timers")
    ls.add_argument("--all", action="store_true", help="include fired, failed and cancelled timers")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=_list)

    sh = tsub.add_parser("show", help="one timer and its log: warnings, pulls, refusals, firing")
    sh.add_argument("id", type=int)
    sh.add_argument("--json", action="store_true")
    sh.set_defaults(func=_show)

    c = tsub.add_parser("cancel", help="disarm a timer")
    c.add_argument("id", type=int)
    c.add_argument("--no-arm", action="store_true", help="do not reach the box to disarm its watchdog now")
    c.set_defaults(func=_cancel)

    w = tsub.add_parser("watch", help="enforce the live timers from this console until they have fired")
    w.add_argument("--interval", type=float, default=1.0, metavar="SECONDS", help=argparse.SUPPRESS)
    w.set_defaults(func=_watch)
