"""Every number an operator types is checked before anything is stored or sent (console/bounds.py).

Each numeric option of every subcommand, given arbitrary integers, floats (nan, inf, -0.0, 1e400 as text)
and strings: a value outside its bound exits 2 with one line on stderr and no traceback, and the database
is as it was; a value inside it reaches the command as the number it spells. The service refuses the same
values with ``InputError``, since the TUI (and scripts) call it without the CLI's parsers.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import math
from collections.abc import Callable, Iterator
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from console import bounds
from console.bounds import (
    AVG_POWER_W,
    BURSTINESS,
    CONCURRENCY,
    GPU_INDEX,
    GRACE_S,
    INTERACTIVITY,
    INTERVAL_S,
    MAX_TOKENS,
    PORT,
    POSITIONS,
    POWER_LIMIT_W,
    PRICE_PER_HOUR,
    PROMPTS,
    REPEAT,
    REQUEST_RATE,
    ROW_ID,
    SEED,
    SQLITE_INT_MAX,
    TOP_K,
    UTILISATION,
    WAIT_S,
    WORKLOAD_ITERS,
    FloatBound,
    IntBound,
    OutOfBounds,
)
from console.cli import build_parser, main
from console.cli.common import csv_values
from console.cli.quality import LIMIT
from console.errors import InputError
from console.quality.suites.runner import parse_cap
from console.recipes import load_catalog
from console.service import KldiffOptions, Service
from console.service.sweep import SweepOptions
from console.store import Box, Store
from console.timeutil import MAX_DURATION_MS, deadline_words, from_ms, parse_duration, parse_instant_strict
from tests.support.fake_recipes import FAKE_NVFP4_PROFILE

COUNTED = ("commands", "launches", "timers", "boxes", "sweeps", "arms")
"""The tables a command that got past its numbers would write first."""

NUMBER_WORDS = [
    "nan",
    "NaN",
    "inf",
    "-inf",
    "Infinity",
    "-0.0",
    "-0",
    "0",
    "1e400",
    "-1e400",
    "1e3",
    "1.5",
    "-1",
    "",
    " ",
    "0x10",
    "1_000",
    "\u0663",
    "\u00b2",
    "9" * 30,
    "1,2",
    "4h",
    str(2**63),
    str(2**63 - 1),
]
"""The forms ``int()`` and ``float()`` read that a command does not mean, and the edges of the ranges."""

VALUES = st.one_of(
    st.integers().map(str),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.floats().map(repr),  # nan, inf, -0.0 and the rest, as Python spells them
    st.floats().map(lambda f: f"{f:.3e}"),
    st.sampled_from(NUMBER_WORDS),
    st.text(max_size=40),
)


@dataclass(frozen=True)
class Option:
    """One numeric option: the command line with ``{v}`` where the value goes, the attribute argparse
    stores it in, and how the shared parsers read it (``raw``: argparse keeps the text, the command reads it)."""

    argv: tuple[str, ...]
    dest: str
    read: Callable[[str], Any]
    raw: bool = False

    @property
    def name(self) -> str:
        return " ".join(a for a in self.argv if a.startswith(("-", "{")) or a.isalpha())[:60]


def _list(bound: IntBound, what: str) -> Callable[[str], Any]:
    return lambda text: csv_values(text, what, bound.parse)


BENCH = ("bench", "L-1", "--shape", "router")
CURVE = ("curve", "L-1", "--shape", "router")
SWEEP = ("sweep", "run", "fake-test", "--box", "local")
OPTIONS = [
    Option((*BENCH, "--concurrency={v}"), "concurrency", CONCURRENCY.parse),
    Option((*BENCH, "-c", "1", "--prompts={v}"), "prompts", PROMPTS.parse),
    Option((*BENCH, "-c", "1", "--seed={v}"), "seed", SEED.parse),
    Option((*BENCH, "-c", "1", "--repeat={v}"), "repeat", REPEAT.parse),
    Option((*BENCH, "-c", "1", "--timeout={v}"), "timeout", WAIT_S.parse),
    Option((*BENCH, "-c", "1", "--rate={v}"), "rate", REQUEST_RATE.parse),
    Option((*BENCH, "-c", "1", "--rate", "1", "--burstiness={v}"), "burstiness", BURSTINESS.parse),
    Option((*CURVE, "--concurrency={v}"), "concurrency", _list(CONCURRENCY, "concurrency"), raw=True),
    Option((*CURVE, "--concurrency", "1", "--repeat={v}"), "repeat", REPEAT.parse),
    Option((*CURVE, "--concurrency", "1", "--prompts-per-slot={v}"), "prompts_per_slot", PROMPTS.parse),
    Option((*CURVE, "--concurrency", "1", "--timeout={v}"), "timeout", WAIT_S.parse),
    Option((*CURVE, "--rate", "1", "--burstiness={v}"), "burstiness", BURSTINESS.parse),
    Option((*CURVE, "--workload-iters={v}"), "workload_iters", WORKLOAD_ITERS.parse),
    Option((*CURVE, "--slo", "ttft:1", "--max-concurrency={v}"), "max_concurrency", CONCURRENCY.parse),
    Option(("curves", "{v}"), "id", ROW_ID.parse),
    Option(
        ("box", "add", "pro-z", "--ssh", "root@203.0.113.9", "--price-per-hour={v}"),
        "price_per_hour",
        PRICE_PER_HOUR.parse,
    ),
    Option(("box", "set", "local", "--price-per-hour={v}"), "price_per_hour", PRICE_PER_HOUR.parse),
    Option(("compare", "a", "b", "--concurrency={v}"), "concurrency", CONCURRENCY.parse),
    Option(("compare", "a", "b", "--at-interactivity={v}"), "at_interactivity", INTERACTIVITY.parse),
    Option(("compare", "a", "b", "--at-power={v}"), "at_power", AVG_POWER_W.parse),
    Option(("kill", "L-1", "--box", "local", "--yes", "--grace={v}"), "grace", GRACE_S.parse),
    Option(("kldiff", "L-1", "L-2", "--positions={v}"), "positions", POSITIONS.parse),
    Option(("kldiff", "L-1", "L-2", "--top-k={v}"), "top_k", TOP_K.parse),
    Option(("kldiff", "L-1", "L-2", "--seed={v}"), "seed", SEED.parse),
    Option(("kldiff", "L-1", "L-2", "--timeout={v}"), "timeout", WAIT_S.parse),
    Option(("specdiff", "L-1", "L-2", "--max-tokens={v}"), "max_tokens", MAX_TOKENS.parse),
    Option(("specdiff", "L-1", "L-2", "--seed={v}"), "seed", SEED.parse),
    Option(("specdiff", "L-1", "L-2", "--min-control={v}"), "min_control", PROMPTS.parse),
    Option(("specdiff", "L-1", "L-2", "--timeout={v}"), "timeout", WAIT_S.parse),
    Option(("launch", "fake-serve", "--box", "local", "--ready-timeout={v}"), "ready_timeout", WAIT_S.parse),
    Option(
        ("launch", "fake-serve", "--box", "local", "--gpus={v}"), "gpus", _list(GPU_INDEX, "gpus"), raw=True
    ),
    Option((*SWEEP, "--ready-timeout={v}"), "ready_timeout", WAIT_S.parse),
    Option((*SWEEP, "--kill-grace={v}"), "kill_grace", GRACE_S.parse),
    Option((*SWEEP, "--base-port={v}"), "base_port", PORT.parse),
    Option((*SWEEP, "--prompts={v}"), "prompts", PROMPTS.parse),
    Option((*SWEEP, "--concurrency={v}"), "concurrency", _list(CONCURRENCY, "concurrency"), raw=True),
    Option(("sweep", "status", "--", "{v}"), "id", ROW_ID.parse),
    Option(("timer", "set", "local", "--yes", "--no-arm", "--in={v}"), "within", parse_duration, raw=True),
    Option(("timer", "show", "--", "{v}"), "id", ROW_ID.parse),
    Option(("timer", "cancel", "--yes", "--no-arm", "--", "{v}"), "id", ROW_ID.parse),
    Option(("timer", "watch", "--interval={v}"), "interval", INTERVAL_S.parse),
    Option(("tripwire", "L-1", "--max-tokens={v}"), "max_tokens", MAX_TOKENS.parse),
    Option(("tripwire", "L-1", "--timeout={v}"), "timeout", WAIT_S.parse),
    Option(("export", "economics", "--utilisation={v}"), "utilisation", UTILISATION.parse),
    Option(("report", "--utilisation={v}"), "utilisation", UTILISATION.parse),
    Option(("quality", "run", "L-1", "--tasks", "gsm8k", "--limit={v}"), "limit", LIMIT.parse),
    Option(
        ("quality", "run", "L-1", "--tasks", "gsm8k", "--concurrency={v}"), "concurrency", CONCURRENCY.parse
    ),
    Option(("quality", "run", "L-1", "--suite", "seed6", "--cap={v}"), "cap", lambda t: [parse_cap(t)]),
    Option(
        ("quality", "run", "L-1", "--suite", "seed6", "--request-timeout={v}"),
        "request_timeout",
        WAIT_S.parse,
    ),
    Option(("quality", "run", "--complete={v}"), "complete", ROW_ID.parse),
    Option((*SWEEP, "--mode", "eval", "--cap={v}"), "cap", lambda t: [parse_cap(t)]),
    Option((*SWEEP, "--request-timeout={v}"), "request_timeout", WAIT_S.parse),
    Option((*SWEEP, "--tripwire-max-tokens={v}"), "tripwire_max_tokens", MAX_TOKENS.parse),
    Option(("quality", "compare", "--", "{v}", "1"), "a", ROW_ID.parse),
    Option(("quality", "compare", "--", "1", "{v}"), "b", ROW_ID.parse),
    Option(
        ("import", "vllm-bench", "r.json", "--shape", "tiny", "--concurrency={v}"),
        "concurrency",
        CONCURRENCY.parse,
    ),
    Option(
        ("import", "vllm-bench", "r.json", "--shape", "tiny", "--power-limit={v}"),
        "power_limit",
        POWER_LIMIT_W.parse,
    ),
]


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A state.db with the local box (no demo import: only the counted tables matter)."""
    path = tmp_path_factory.mktemp("bounds") / "state.db"
    with Store(path) as store:
        store.boxes.ensure_local()
    return path


def stored(store: Store) -> dict[str, int]:
    return {table: int(store.scalar(f"SELECT count(*) FROM {table}")) for table in COUNTED}


def counts(db: Path) -> dict[str, int]:
    with Store(db, read_only=True) as store:
        return stored(store)


def campaign(db: Path, argv: list[str]) -> tuple[int, str]:
    """``campaign --db DB ARGV`` in this process: (exit status, stderr)."""
    err = io.StringIO()
    with redirect_stderr(err), redirect_stdout(io.StringIO()):
        status = main(["--db", str(db), *argv])
    return status, err.getvalue()


def refused(read: Callable[[str], Any], text: str) -> bool:
    try:
        read(text)
    except InputError:
        return True
    return False


@pytest.mark.parametrize("option", OPTIONS, ids=lambda o: o.name)
@settings(max_examples=60, deadline=None)
@given(value=VALUES)
@example(value="nan")
@example(value="inf")
@example(value="-0.0")
@example(value="1e400")
@example(value="99999999999999999999")
def test_every_numeric_option_refuses_in_one_line_and_stores_nothing(
    db: Path, option: Option, value: str
) -> None:
    argv = [a.replace("{v}", value) for a in option.argv]
    if not refused(option.read, value):
        # In range: the command gets the number it spells (parsed only: the command would reach a box).
        args = build_parser(argv).parse_args(argv)
        assert getattr(args, option.dest) == (value if option.raw else option.read(value))
        return
    before = counts(db)
    status, err = campaign(db, argv)
    assert status == 2, err
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1 and err.startswith("campaign: ") and err.endswith("\n"), err
    assert counts(db) == before


HUGE = "99999999999999999999"


@pytest.mark.parametrize(
    "argv",
    [
        ["timer", "show", HUGE],
        ["timer", "cancel", HUGE, "--yes"],
        ["sweep", "status", HUGE],
        ["kill", HUGE, "--box", "local", "--yes"],
        ["bench", HUGE, "-c", "1", "--shape", "router"],
        ["tripwire", HUGE],
        ["kldiff", HUGE, HUGE + "1"],
        ["specdiff", HUGE, HUGE + "1", "--control", HUGE, HUGE],
        ["compare", HUGE, HUGE],
        ["launch", HUGE, "--box", "local"],
        ["quality", "compare", HUGE, "1"],
        ["quality", "compare", "1", HUGE],
    ],
    ids=" ".join,
)
def test_an_id_past_sqlites_integers_is_refused_in_one_line(db: Path, argv: list[str]) -> None:
    """Row ids are numbers (refused by their bound); launch and run ids are names (looked up and not found)."""
    before = counts(db)
    status, err = campaign(db, argv)
    assert status == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert counts(db) == before


def test_the_table_names_every_numeric_option_of_every_subcommand() -> None:
    """A numeric option added later without a bound (``type=int``, ``type=float``) or without a row in
    ``OPTIONS`` fails here."""
    from console.cli import COMMANDS

    unbounded, typed = [], set()
    for name, _ in COMMANDS:
        for action in _actions(build_parser([name])):
            if action.type in (int, float):
                unbounded.append(f"{name} {'/'.join(action.option_strings) or action.dest}")
            elif action.type is not None:
                typed.add((name, action.dest))
    assert unbounded == []
    assert typed <= {(o.argv[0], o.dest) for o in OPTIONS}


def _actions(parser: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _actions(sub)
        else:
            yield action


# -- the bounds themselves ------------------------------------------------------------------------------
INT_BOUNDS = [
    SEED,
    ROW_ID,
    CONCURRENCY,
    PROMPTS,
    REPEAT,
    MAX_TOKENS,
    POSITIONS,
    TOP_K,
    PORT,
    GPU_INDEX,
    bounds.LOG_LINES,
]
FLOAT_BOUNDS = [WAIT_S, GRACE_S, INTERVAL_S, PRICE_PER_HOUR, UTILISATION]


@pytest.mark.parametrize("bound", INT_BOUNDS, ids=lambda b: b.noun)
@given(value=st.integers())
def test_a_whole_number_is_taken_exactly_when_in_range(bound: IntBound, value: int) -> None:
    inside = bound.low <= value <= bound.high
    checks: tuple[Callable[[], int], ...] = (
        lambda: bound.parse(str(value)),
        lambda: bound.check(value, "--x"),
    )
    for check in checks:
        if inside:
            assert check() == value
        else:
            with pytest.raises(OutOfBounds, match="out of range"):
                check()
    assert bound.high <= SQLITE_INT_MAX  # every whole number the console takes fits a SQLite integer


@pytest.mark.parametrize("bound", FLOAT_BOUNDS, ids=lambda b: b.noun)
@given(value=st.floats())
@example(value=-0.0)
@example(value=math.nan)
def test_a_number_is_taken_exactly_when_finite_and_in_range(bound: FloatBound, value: float) -> None:
    inside = (
        math.isfinite(value) and bound.low <= value <= bound.high and not (bound.above and value == bound.low)
    )
    checks: tuple[Callable[[], float], ...] = (
        lambda: bound.parse(repr(value)),
        lambda: bound.check(value, "--x"),
    )
    for check in checks:
        if inside:
            assert check() == value and math.copysign(1, check()) == 1  # -0.0 reads as 0.0
        else:
            with pytest.raises(OutOfBounds):
                check()
    with pytest.raises(OutOfBounds, match="not a finite number"):
        bound.parse("1e400")  # float() reads it as inf


@given(text=st.text(max_size=60))
def test_any_text_is_a_number_or_one_line_that_says_what_to_give(text: str) -> None:
    bounds: list[IntBound | FloatBound] = [*INT_BOUNDS, *FLOAT_BOUNDS]
    for bound in bounds:
        try:
            bound.parse(text)
        except OutOfBounds as exc:
            said = str(exc)
            assert len(said.splitlines()) == 1 and bound.noun in said and exc.hint
    for read in (parse_duration, lambda t: csv_values(t, "concurrency", CONCURRENCY.parse)):
        try:
            read(text)
        except InputError as exc:
            assert len(str(exc).splitlines()) == 1


def test_the_service_bounds_are_not_bypassed_by_bools_or_text() -> None:
    with pytest.raises(OutOfBounds):
        SEED.check(True, "--seed")
    with pytest.raises(OutOfBounds):
        WAIT_S.check("900", "--ready-timeout")  # type: ignore[arg-type]


# -- durations and instants --------------------------------------------------------------------------
@given(days=st.integers(min_value=0, max_value=10**30), hours=st.integers(min_value=0, max_value=10**6))
def test_a_duration_past_the_maximum_is_refused_as_a_duration(days: int, hours: int) -> None:
    text = f"{days}d{hours}h"
    ms = (days * 24 + hours) * 3_600_000
    assert deadline_words(text) == (None, text)  # read as --in however long: never misread as an instant
    if 0 < ms <= MAX_DURATION_MS:
        assert parse_duration(text) == ms
    else:
        with pytest.raises(OutOfBounds, match="zero|longer than 31d"):
            parse_duration(text)


def test_the_duration_maximum_is_the_timers_lead_maximum() -> None:
    """``--in`` and ``--at`` are held to one limit: a deadline a month away is refused whichever way typed."""
    from console.timers import parse_deadline

    now = 1_788_658_020_000  # a whole minute, so the deadlines below are typed exactly

    def at(ms: int) -> str:
        return from_ms(ms).strftime("%Y-%m-%dT%H:%MZ")

    assert parse_deadline(at(now + MAX_DURATION_MS), None, now_ms=now, box_tz=None) == now + MAX_DURATION_MS
    with pytest.raises(InputError, match="more than 31 days"):
        parse_deadline(at(now + MAX_DURATION_MS + 60_000), None, now_ms=now, box_tz=None)


@pytest.mark.parametrize(
    "at",
    [
        "9999-12-31T23:59-14:00",
        "0001-01-01T00:00+01:00",
        "1969-12-31T23:59Z",
        "9999-12-31 23:59 America/Adak",
    ],
)
def test_an_instant_no_zone_can_show_is_refused_not_a_traceback(db: Path, at: str) -> None:
    with pytest.raises(InputError, match="outside the years 1970 to 9998"):
        parse_instant_strict(at)
    before = counts(db)
    status, err = campaign(db, ["timer", "set", "local", "--at", at, "--yes", "--no-arm"])
    assert status == 2 and "Traceback" not in err and len(err.splitlines()) == 1, err
    assert counts(db) == before


# -- the service refuses the same values (the TUI and scripts call it without the CLI) ----------------
RECIPES = (
    FAKE_NVFP4_PROFILE
    + """
[arms."fake-serve"]
profile = "fake-nvfp4"
device = "cpu"
linear_backend = "b12x"  # what lint asks of an NVFP4 checkpoint: the launch is refused for its numbers alone
replicas = 2
max_model_len = 2048
"""
)


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "fake.toml").write_text(RECIPES)
    with Store(tmp_path / "state.db") as store:
        store.boxes.ensure_local()
        store.boxes.update("local", model_root=str(tmp_path / "models"))  # planned only: nothing is served
        yield Service(store, catalog=load_catalog([tmp_path / "recipes"]))


def test_the_service_refuses_what_the_cli_refuses_before_storing_anything(service: Service) -> None:
    before = stored(service.store)
    plan = service.plan_launch("fake-serve", "local", base_port=20100)
    for timeout in (math.nan, math.inf, -1.0, 0.0, 1e9):
        with pytest.raises(InputError, match="--ready-timeout"):
            asyncio.run(service.launch(plan, ready_timeout_s=timeout))
    for grace in (math.nan, -1.0, 1e9):
        with pytest.raises(InputError, match="--grace"):
            asyncio.run(service.stop_launches("local", ["L-1"], grace))
    with pytest.raises(InputError, match="lines"):
        asyncio.run(service.log_tail("L-1", 0))
    with pytest.raises(InputError, match="--base-port"):
        service.plan_launch("fake-serve", "local", base_port=80)
    with pytest.raises(InputError, match="65535..65536 are out of range"):
        service.plan_launch("fake-serve", "local", base_port=65535)  # two replicas: the resolver's own check
    with pytest.raises(InputError, match="--gpus"):
        service.plan_launch("fake-serve", "local", gpus=[-1])
    for price in (math.nan, math.inf, -0.5):
        with pytest.raises(InputError, match="--price-per-hour"):
            service.set_box("local", price_per_hour=price)
        with pytest.raises(InputError, match="--price-per-hour"):
            service.add_box(Box(name="pro-z", host="h", port=22, ssh_user="root", price_per_hour=price))
    with pytest.raises(InputError, match="timer id"):
        asyncio.run(service.cancel_timer(2**70))
    with pytest.raises(InputError, match="--interval"):
        asyncio.run(service.watch_timers(asyncio.Event(), interval_s=math.nan))
    with pytest.raises(InputError, match="in the past|longer than 31d"):
        service.plan_timer("local", at=None, within="99999999999999999999h")
    with pytest.raises(InputError, match="--concurrency"):
        service.open_sweep("fake-test", "local", concurrency=[1, 2**64])
    with pytest.raises(InputError, match="sweep id"):
        asyncio.run(service.run_sweep(2**70))
    with pytest.raises(InputError, match="--kill-grace"):
        asyncio.run(service.run_sweep(1, SweepOptions(kill_grace_s=math.inf)))
    with pytest.raises(InputError, match="--tripwire-max-tokens"):
        asyncio.run(service.run_sweep(1, SweepOptions(tripwire_max_tokens=0)))
    assert stored(service.store) == before
    asyncio.run(service.close())


@pytest.mark.parametrize(
    ("options", "timeout_s", "name"),
    [
        (KldiffOptions(positions=0), 900.0, "--positions"),
        (KldiffOptions(positions=2**70), 900.0, "--positions"),
        (KldiffOptions(top_k=1001), 900.0, "--top-k"),
        (KldiffOptions(seed=-1), 900.0, "--seed"),
        (KldiffOptions(seed=2**64), 900.0, "--seed"),
        (KldiffOptions(), math.nan, "--timeout"),
        (KldiffOptions(), 0.0, "--timeout"),
    ],
)
def test_the_kldiff_service_refuses_what_the_cli_refuses(
    service: Service, options: KldiffOptions, timeout_s: float, name: str
) -> None:
    """Checked before the launches are even looked up: nothing is stored and nothing reaches a box."""
    before = stored(service.store)
    with pytest.raises(InputError, match=name):
        asyncio.run(service.kldiff("L-1", "L-2", None, options, timeout_s))
    assert stored(service.store) == before
    asyncio.run(service.close())


# -- the TUI's prompts read numbers with the same parsers ------------------------------------------------
@pytest.mark.parametrize(
    "typed", ["router 0", "router 99999999999999999999", "router \u00b2", "router 1e3", "router nan"]
)
def test_the_bench_prompt_refuses_what_bench_c_refuses(typed: str) -> None:
    from console.tui.modals import BenchScreen

    answer, said = BenchScreen("arm", ("router",)).read(typed)
    assert answer is None and said.startswith("refused: ") and "a concurrency must be a whole number" in said
    assert BenchScreen("arm", ("router",)).read("router 64")[0] == ("router", 64)


def test_the_timer_prompt_refuses_a_too_long_duration_as_a_duration() -> None:
    from console.timeutil import zone
    from console.tui.modals import TimerScreen

    screen = TimerScreen("pro-a", None, zone("UTC"), 1_788_658_020_000)
    answer, said = screen.read("99999999999999999999h")
    assert answer is None and "longer than 31d" in said  # not "cannot read it as a time"
    assert screen.read("4h30m")[0] == "4h30m"
