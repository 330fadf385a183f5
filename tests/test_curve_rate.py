"""Request-rate curves: `campaign curve --rate R1,R2 [--burstiness K] [--concurrency C]` and `campaign bench --rate`.

The rate parser and the bounds refuse in one line (exit 2) and store nothing; a rate curve's record carries its
rates, burstiness and each point's (cap, rate), and its identity (what the same command resumes) includes them.
End to end on the CPU vLLM (a rate curve and a bursty bench): tests/test_curves_vllm.py.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from console.errors import InputError
from console.readmodel import curve
from console.service.curves import rate_list, rate_requests
from console.store import Store
from tests.support.cli import run_cli

# ---------------------------------------------------------------- parsing and bounds


def test_a_rate_list_is_floats_bounded_sorted_and_without_repeats() -> None:
    assert rate_list("1.5,0.5") == [0.5, 1.5]
    assert rate_list(" 0.01 , 10000 ") == [0.01, 10000.0]
    for bad in ("0.5,0.5", "0", "-1", "0.001", "10001", "nan", "inf", "1,,2", "", "1,x"):
        with pytest.raises(InputError) as refused:
            rate_list(bad)
        assert "\n" not in str(refused.value)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789,.-+eEinfa ", max_size=24) | st.text(max_size=24))
@example("0.5,1.5")
@example("1e400")
def test_the_rate_parser_gives_a_sorted_bounded_list_or_a_refusal(text: str) -> None:
    try:
        rates = rate_list(text)
    except InputError:
        return
    assert rates == sorted(set(rates)) and all(math.isfinite(r) and 0.01 <= r <= 10_000 for r in rates)


def test_a_rate_point_sends_k_requests_per_started_request_a_second() -> None:
    assert [rate_requests(None, r) for r in (0.5, 1.0, 1.5, 20.0)] == [8, 8, 16, 160]
    assert rate_requests(3, 0.5) == 3 and rate_requests(3, 1.5) == 6


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--rate", "0.5,0.5"], "given twice"),
        (["--rate", "0"], "out of range"),
        (["--rate", "0.5", "--ladder", "1:4:x2"], "--rate with --ladder"),
        (["--rate", "0.5", "--burstiness", "0"], "a burstiness must be"),
        (["--concurrency", "1,2", "--burstiness", "2"], "--burstiness without --rate"),
        ([], "a curve needs its points"),
    ],
)
def test_the_curve_command_refuses_bad_pacing_in_one_line_and_stores_nothing(
    tmp_path: Path, argv: list[str], said: str
) -> None:
    db = tmp_path / "state.db"
    code, out, err = run_cli(db, "curve", "tiny-cpu", "--box", "local", "--shape", "tiny", *argv)
    assert code == 2 and said in err and len(err.strip().splitlines()) == 1 and out == ""
    assert not db.exists()


def test_a_rate_curve_with_a_concurrency_list_is_refused_before_anything_is_stored(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    code, _, err = run_cli(
        db,
        "curve",
        "tiny-cpu",
        "--box",
        "local",
        "--shape",
        "tiny",
        "--rate",
        "0.5,1.5",
        "--concurrency",
        "1,2",
    )
    assert code == 2 and "is its cap" in err and len(err.strip().splitlines()) == 1
    with Store(db) as store:
        # a fresh state.db holds the demo's imported curves; the refused command added none of its own
        assert store.scalar("SELECT count(*) FROM curves WHERE source != 'imported'") == 0


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--rate", "0"], "a request rate must be"),
        (["--rate", "nan"], "not a finite number"),
        (["--rate", "1", "--burstiness", "101"], "a burstiness must be"),
    ],
)
def test_the_bench_command_refuses_a_bad_rate_or_burstiness_with_exit_2(
    tmp_path: Path, argv: list[str], said: str
) -> None:
    db = tmp_path / "state.db"
    code, _, err = run_cli(db, "bench", "tiny-cpu", "--box", "local", "--shape", "tiny", "-c", "1", *argv)
    assert code == 2 and said in err and len(err.strip().splitlines()) == 1 and not db.exists()


def test_a_burstiness_without_a_rate_is_refused_by_the_bench_and_nothing_is_sent(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    code, _, err = run_cli(
        db, "bench", "tiny-cpu", "--box", "local", "--shape", "tiny", "-c", "1", "--burstiness", "2"
    )
    assert code == 2 and "--burstiness 2.0 without --rate" in err
    with Store(db) as store:
        assert store.scalar("SELECT count(*) FROM commands") == 0


# ---------------------------------------------------------------- the record


def test_a_rate_curve_records_its_rates_and_they_are_part_of_its_identity(tmp_path: Path) -> None:
    with Store(tmp_path / "state.db", clock=lambda: 1_000) as store:
        closed = store.curves.create("a", "b", "tiny", [4], 1, None)
        paced = store.curves.create("a", "b", "tiny", [4], 1, 3, [0.5, 1.5], 1.0, [(4, 0.5), (4, 1.5)])
        assert (paced.rate, paced.burstiness, closed.rate, closed.burstiness) == ((0.5, 1.5), 1.0, None, None)
        points = store.curves.points(paced.id)
        assert [(p.concurrency, p.rate, p.state) for p in points] == [
            (4, 0.5, "pending"),
            (4, 1.5, "pending"),
        ]
        assert store.curves.latest("a", "b", "tiny", [4], 1, [0.5, 1.5], 1.0) == paced
        assert store.curves.latest("a", "b", "tiny", [4], 1) == closed  # a closed loop of C4: another curve
        assert store.curves.latest("a", "b", "tiny", [4], 1, [0.5, 1.5], 2.0) is None  # burstiness counts
        assert store.curves.latest("a", "b", "tiny", [4], 1, [0.5], 1.0) is None  # so do the rates
        view = curve(store, paced.id)
        assert view.rate == (0.5, 1.5) and [p.rate for p in view.points] == [0.5, 1.5]
        assert view.summary()["rate"] == [0.5, 1.5] and view.points[0].summary()["rate"] == 0.5


# ---------------------------------------------------------------- end to end on the CPU vLLM
