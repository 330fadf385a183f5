"""`campaign curve`: the concurrency list and ladder parsers and their refusals, and the curve's record
(migration, points, resume). End to end on the CPU vLLM (a curve at C 1,2,4,8 stored, linked and resumed):
tests/test_curves_vllm.py, which shares one server between the curve files."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from console.cli import main
from console.errors import InputError
from console.readmodel import curve
from console.service.curves import checked_levels, concurrency_list, ladder
from console.store import Store

# ---------------------------------------------------------------- parsing


def test_a_ladder_doubles_from_start_and_always_ends_at_end() -> None:
    assert ladder("1:8:x2") == [1, 2, 4, 8]
    assert ladder("1:64:x2") == [1, 2, 4, 8, 16, 32, 64]
    assert ladder("1:48:x2") == [1, 2, 4, 8, 16, 32, 48]  # END included though not a power
    assert ladder("3:100:x4") == [3, 12, 48, 100]
    assert ladder("8:8:x2") == [8]
    assert ladder(" 2:5:X3 ") == [2, 5]


@pytest.mark.parametrize(
    "text",
    [
        "8:1:x2",
        "0:8:x2",
        "1:8:x1",
        "1:8:x0",
        "1:8:2",
        "1:8",
        "a:8:x2",
        "1:99999:x2",
        "1:8:x2.5",
        "1:8:x-2",
        "",
    ],
)
def test_a_bad_ladder_is_refused_in_one_line(text: str) -> None:
    with pytest.raises(InputError) as refused:
        ladder(text)
    assert "\n" not in str(refused.value)


def test_a_concurrency_list_is_bounded_sorted_and_has_no_repeats() -> None:
    assert concurrency_list("8,1,4,2") == [1, 2, 4, 8]
    for bad in ("1,1", "0,2", "1,,2", "", "1,x", "16385", ",".join(str(i) for i in range(1, 70))):
        with pytest.raises(InputError):
            concurrency_list(bad)
    with pytest.raises(InputError):
        checked_levels([])


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789:xX,-+ .e", max_size=24) | st.text(max_size=24))
@example("1:16384:x2")
@example("1:9999999999999999999999999:x2")
def test_the_parsers_give_a_list_or_a_refusal_and_nothing_else(text: str) -> None:
    for parse in (ladder, concurrency_list):
        try:
            levels = parse(text)
        except (InputError, ValueError):
            continue
        assert isinstance(levels, list) and levels == sorted(set(levels))
        assert all(isinstance(c, int) and 1 <= c <= 16384 for c in levels)


def test_the_cli_refuses_a_bad_ladder_with_exit_2_and_stores_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "state.db"
    code = main(
        ["--db", str(db), "curve", "tiny-cpu", "--box", "local", "--shape", "tiny", "--ladder", "8:1:x2"]
    )
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "below START" in err
    assert not db.exists()
    code = main(["--db", str(db), "curve", "tiny-cpu", "--shape", "tiny", "--concurrency", "1,1"])
    assert code == 2 and not db.exists()


# ---------------------------------------------------------------- the record


def test_a_curve_records_its_points_and_the_newest_of_its_identity_is_resumed(tmp_path: Path) -> None:
    with Store(tmp_path / "state.db", clock=lambda: 1_000) as store:
        first = store.curves.create("a", "b", "tiny", [1, 2, 4], 2, None)
        points = store.curves.points(first.id)
        assert [(p.concurrency, p.position, p.state) for p in points] == [
            (1, 0, "pending"),
            (2, 1, "pending"),
            (4, 2, "pending"),
        ]
        assert store.curves.latest("a", "b", "tiny", [1, 2, 4], 2) == first
        assert store.curves.latest("a", "b", "tiny", [1, 2, 4], 1) is None  # repeat is part of the identity
        store.curves.start_point(first.id, 0)
        store.curves.interrupt_point(first.id, 0, "interrupted")
        assert store.curves.get(first.id).state == "interrupted"
        assert store.curves.points(first.id)[0].state == "pending"
        second = store.curves.create("a", "b", "tiny", [1, 2, 4], 2, None)  # --new
        store.curves.set_state(second.id, "done")
        found = store.curves.latest("a", "b", "tiny", [1, 2, 4], 2)
        assert (
            found is not None and found.id == second.id
        )  # the newest, done: the same command measures nothing
        view = curve(store, first.id)
        assert view.done == 0 and [p.concurrency for p in view.points] == [1, 2, 4]
        with pytest.raises(InputError):
            curve(store, 99)


# ---------------------------------------------------------------- end to end on the CPU vLLM
