"""specdiff without a server: the token comparison, the prompts file, the argv rule, the rows ingest writes
and the verdict's four branches, the refusals the service makes from the store alone, and the offline
--list / --show. The same command against real CPU vLLM servers is tests/test_specdiff_vllm.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents.jobs import tool_argv
from agents.specdiff.compare import first_divergence
from agents.specdiff.prompts import DEFAULT_PROMPTS, PromptsError, load, parse
from console.cli import main
from console.errors import InputError
from console.readmodel.specdiff import specdiff_run, specdiff_runs
from console.service import Service, SpecdiffOptions
from console.service.specdiff import argv_difference, argv_elements
from console.store import Box, Store
from console.store.specdiff import SpecdiffError

T0 = 1_788_658_020_000
SPEC_CONFIG = '{"method":"ngram","num_speculative_tokens":3}'


# -- the token comparison ------------------------------------------------------------------------------------
token_lists = st.lists(st.integers(0, 5), max_size=8)


@given(token_lists, token_lists)
def test_first_divergence_is_where_two_generations_part(a: list[int], b: list[int]) -> None:
    at = first_divergence(a, b)
    if at is None:
        assert a == b
        return
    assert a != b and a[:at] == b[:at]
    assert at == min(len(a), len(b)) or a[at] != b[at]


def test_first_divergence_cases() -> None:
    assert first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert first_divergence([1, 2, 3], [1, 9, 3]) == 1
    assert first_divergence([1, 2], [1, 2, 3]) == 2  # one stopped early: they part where it ended
    assert first_divergence([], []) is None


# -- the prompts file ----------------------------------------------------------------------------------------
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=12,
)


@given(json_values)
def test_a_prompts_value_is_either_a_list_of_prompts_or_one_refusal_naming_it(value: Any) -> None:
    try:
        prompts = parse(value, "p.json")
    except PromptsError as exc:
        assert str(exc).startswith("p.json") and "\n" not in str(exc)
        return
    assert prompts and all(isinstance(p, str) and p.strip() for p in prompts)


@given(st.lists(st.text(min_size=1).filter(str.strip), min_size=1, max_size=6), st.data())
def test_strings_and_prompt_objects_read_back_as_given(prompts: list[str], data: st.DataObject) -> None:
    wrapped = [data.draw(st.sampled_from([p, {"prompt": p}])) for p in prompts]
    assert parse(wrapped, "f") == prompts
    assert load(None, json.dumps(wrapped)) == prompts


def test_prompts_refusals_and_the_built_in_set(tmp_path: Path) -> None:
    assert load(None, None) == list(DEFAULT_PROMPTS) and len(DEFAULT_PROMPTS) == 12
    for value, why in (
        ([], "non-empty JSON list"),
        (["ok", ""], "entry 1: a prompt must be a non-empty string"),
        ([{"prompt": "x", "max_tokens": 3}], "entry 0: unknown key 'max_tokens'"),
        ({"prompt": "x"}, "non-empty JSON list"),
    ):
        with pytest.raises(PromptsError, match=why):
            parse(value, "f.json")
    broken = tmp_path / "p.json"
    broken.write_text("[1,")
    with pytest.raises(PromptsError, match=r"p.json: not JSON"):
        load(str(broken), None)
    with pytest.raises(PromptsError, match="--prompts"):
        load(str(tmp_path / "missing.json"), None)


def test_the_agent_starts_specdiff_with_its_flags_and_the_prompts_as_json() -> None:
    argv = tool_argv(
        "specdiff",
        {
            "specdiff_id": "s",
            "launch_id": "L1",
            "spec": "http://127.0.0.1:1",
            "base": "http://127.0.0.1:2",
            "control_a": "http://127.0.0.1:2",
            "control_b": "http://127.0.0.1:2",
            "model": "m",
            "prompts": ["hello"],
            "max_tokens": 8,
            "spec_arm": "not a flag",
            "python": "/x/python",
        },
    )
    assert argv == [
        "--spec",
        "http://127.0.0.1:1",
        "--base",
        "http://127.0.0.1:2",
        "--control-a",
        "http://127.0.0.1:2",
        "--control-b",
        "http://127.0.0.1:2",
        "--model",
        "m",
        "--prompts-json",
        '["hello"]',
        "--max-tokens",
        "8",
        "--json",
        "--quiet",
    ]


# -- the argv rule -------------------------------------------------------------------------------------------
HEAD = ["/env/bin/vllm", "serve", "/m/tiny", "--served-model-name", "tiny", "--host", "127.0.0.1"]


def _argv(port: int, *tail: str) -> list[str]:
    return [*HEAD, "--port", str(port), "--max-num-seqs", "16", "--enforce-eager", *tail]


def test_argv_elements_pair_flags_with_values_and_leave_out_the_port() -> None:
    assert argv_elements(_argv(8100, "--dtype=bfloat16")) == [
        "/env/bin/vllm",
        "serve",
        "/m/tiny",
        "--served-model-name tiny",
        "--host 127.0.0.1",
        "--max-num-seqs 16",
        "--enforce-eager",
        "--dtype bfloat16",
    ]
    assert argv_difference(_argv(8100), _argv(8101)) == []
    assert argv_difference(_argv(8100, "--max-num-seqs", "8"), _argv(8101)) == ["+--max-num-seqs 8"]
    assert argv_difference(_argv(1, "--speculative-config", SPEC_CONFIG), _argv(2)) == [
        f"+--speculative-config {SPEC_CONFIG}"
    ]


flag_elements = st.lists(
    st.tuples(st.sampled_from(["--a", "--b", "--c", "--d"]), st.sampled_from(["1", "2", "x"])),
    max_size=5,
    unique_by=lambda t: t[0],
)


@given(flag_elements, st.randoms(use_true_random=False))
def test_flag_order_is_no_difference_and_an_added_flag_is_named(
    flags: list[tuple[str, str]], rnd: Any
) -> None:
    argv = [*HEAD, *(w for pair in flags for w in pair)]
    shuffled = list(flags)
    rnd.shuffle(shuffled)
    assert argv_difference(argv, [*HEAD, *(w for pair in shuffled for w in pair)]) == []
    assert argv_difference([*argv, "--e", "7"], argv) == ["+--e 7"]
    assert argv_difference(argv, [*argv, "--e", "7"]) == ["---e 7"]  # "-" then the element "--e 7"


# -- rows, verdicts, refusals from the store alone -----------------------------------------------------------
def _batch(store: Store, box: str, events: list[dict[str, Any]]) -> dict[str, str]:
    first = store.ingest.cursor(box) + 1
    report = store.ingest.batch(
        box, [{"v": 1, "seq": first + i, "t_ms": T0 + i, **e} for i, e in enumerate(events)]
    )
    return report.journal_only


def _launch(store: Store, launch_id: str, arm: str, argv: list[str], box: str = "pro-a") -> None:
    arm_id = store.launches.add_arm(arm, "tiny", box, f"hash-{arm}-{argv}", argv, {}, [[0]], 1, [])
    store.launches.add(
        launch_id, box, arm, arm_id=arm_id, replica=0, gpus=[0], port=int(argv[8]), forced=False
    )
    _batch(store, box, [{"kind": "launch_state", "launch_id": launch_id, "arm": arm, "state": "serving"}])


def _item(spec: list[int], base: list[int], ca: list[int], cb: list[int]) -> dict[str, Any]:
    return {
        "prompt": "p",
        "spec": spec,
        "base": base,
        "control_a": ca,
        "control_b": cb,
        "spec_text": "s",
        "base_text": "b",
        "pair_diverge_at": first_divergence(spec, base),
        "control_diverge_at": first_divergence(ca, cb),
    }


def _result(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "prompt_count": len(items),
        "max_tokens": 4,
        "seed": 0,
        "pair_matched": sum(i["pair_diverge_at"] is None for i in items),
        "control_matched": sum(i["control_diverge_at"] is None for i in items),
        "items": items,
        "t_ms": T0,
        "duration_s": 1.5,
    }


IDENTITY = {
    "spec_launch": "S",
    "base_launch": "B",
    "control_launch_a": "B",
    "control_launch_b": "B",
    "spec_arm": "tiny-ngram",
    "base_arm": "tiny",
    "control_arm": "tiny",
    "speculative_config": SPEC_CONFIG,
}


def _ingest(store: Store, run_id: str, items: list[dict[str, Any]], **args: Any) -> dict[str, str]:
    store.commands.add(run_id, "pro-a", "specdiff", {"specdiff_id": run_id, **IDENTITY, **args})
    result = _result(items)
    result.update({k: v for k, v in args.items() if k in ("pair_matched", "control_matched")})
    return _batch(
        store,
        "pro-a",
        [{"kind": "specdiff_result", "specdiff_id": run_id, "launch_id": "S", "result": result}],
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "state.db", clock=lambda: T0)
    s.boxes.add(Box(name="pro-a", host="203.0.113.7", ssh_user="root"))
    yield s
    s.close()


SAME = _item([1, 2, 3], [1, 2, 3], [1, 2, 3], [1, 2, 3])
PAIR_PARTS = _item([1, 2, 3], [1, 5, 3], [1, 2, 3], [1, 2, 3])
CONTROL_PARTS = _item([1, 2, 3], [1, 2, 3], [1, 2, 3], [1, 2, 9])
BOTH_PART = _item([1, 2, 3], [4, 2, 3], [1, 2, 3], [7])


def test_ingest_stores_every_prompt_and_the_verdict_reads_the_control_first(store: Store) -> None:
    assert _ingest(store, "sd-same", [SAME] * 3) == {}
    run = specdiff_run(store, "sd-same")
    assert run is not None and (run.prompt_count, run.pair_matched, run.control_matched, run.min_control) == (
        3,
        3,
        3,
        3,
    )
    assert run.items[0].spec_tokens == (1, 2, 3) and run.items[0].pair_match and run.seed == 0
    assert run.verdict.kind == "identical" and run.control_kind == "launch B captured twice"

    _ingest(store, "sd-differs", [SAME, PAIR_PARTS, SAME])
    differs = specdiff_run(store, "sd-differs")
    assert differs is not None and differs.verdict.kind == "differs"
    assert "identical on 2 of 3 prompts, fewer than the control reproduced 3 of 3" in differs.verdict.text
    assert "earliest divergence at generated token 1" in differs.verdict.text

    # The write-up's control: 4 of 12 reproduced, so nothing is concluded, whatever the pair did.
    _ingest(store, "sd-none", [SAME] * 4 + [CONTROL_PARTS] * 8)
    none = specdiff_run(store, "sd-none")
    assert none is not None and none.verdict.kind == "no-conclusion" and not none.verdict.conclusive
    assert none.verdict.text.startswith("no conclusion: control reproduced 4 of 12")

    # A stated threshold: 3 of 4 is enough; the pair failing only where the control failed is within it.
    _ingest(store, "sd-within", [SAME, SAME, SAME, BOTH_PART], min_control=3)
    within = specdiff_run(store, "sd-within")
    assert within is not None and within.verdict.kind == "within-control" and within.min_control == 3
    _ingest(store, "sd-below", [SAME, SAME, CONTROL_PARTS, BOTH_PART], min_control=3)
    below = specdiff_run(store, "sd-below")
    assert (
        below is not None
        and below.verdict.text == "no conclusion: control reproduced 2 of 4 (a verdict needs at least 3)"
    )

    assert [r.run_id for r in specdiff_runs(store)][-1] == "sd-same"  # newest first (ties by id)
    assert specdiff_run(store, str(run.id)) == run


def test_a_corrupt_result_stays_in_the_journal_and_a_failed_one_is_a_failed_command(store: Store) -> None:
    # pair_matched disagreeing with the items: refused, nothing half-written, the event kept aside.
    journal_only = _ingest(store, "sd-bad", [SAME, PAIR_PARTS], pair_matched=2)
    assert "pair_matched 2 but 1 items without a divergence" in journal_only["specdiff_result"]
    assert specdiff_run(store, "sd-bad") is None
    assert store.scalar("SELECT count(*) FROM specdiff_items") == 0
    with pytest.raises(SpecdiffError, match="verdict needing 5 control reproductions out of 2"):
        store.specdiff.add_run({**IDENTITY, "run_id": "x", "min_control": 5, "raw": _result([SAME, SAME])})

    store.commands.add("sd-err", "pro-a", "specdiff", {"specdiff_id": "sd-err", **IDENTITY})
    _batch(
        store,
        "pro-a",
        [
            {
                "kind": "specdiff_result",
                "specdiff_id": "sd-err",
                "launch_id": "S",
                "result": {"error": "http://127.0.0.1:1 returned no token_ids"},
            }
        ],
    )
    failed = store.commands.get("sd-err")
    assert failed.state == "failed" and "token_ids" in (failed.error or "")


async def test_the_service_refuses_before_anything_is_sent(store: Store) -> None:
    store.boxes.add(Box(name="pro-b", host="203.0.113.8", ssh_user="root"))
    _launch(store, "S", "tiny-ngram", _argv(8100, "--speculative-config", SPEC_CONFIG))
    _launch(store, "B", "tiny", _argv(8101))
    _launch(store, "B2", "tiny", _argv(8102))
    _launch(store, "W", "tiny-wide", _argv(8103, "--max-num-seqs", "64"))
    _launch(store, "Far", "tiny", _argv(8104), box="pro-b")
    service = Service(store)
    control = ("B", "B")
    try:
        for spec, base, ctl, why in (
            ("B", "S", control, "SPEC launch B \\(tiny\\) has no --speculative-config"),
            ("S", "S", control, "as both SPEC and BASE"),
            ("S", "W", control, r"differs from SPEC S \(tiny-ngram\) in more than --speculative-config: -"),
            ("S", "B", None, "specdiff without --control"),
            ("S", "B", ("B", "W"), "control launches B and W run different configurations: -"),
            ("S", "B", ("W", "W"), "control W \\(tiny-wide\\) is neither SPEC's configuration nor BASE's"),
            ("S", "B", ("Far", "Far"), "serve the four on one box"),
        ):
            with pytest.raises(Exception, match=why):
                await service.specdiff(spec, base, ctl, SpecdiffOptions())
        with pytest.raises(Exception, match="--min-control 13 is more than the 12 prompts"):
            await service.specdiff("S", "B", control, SpecdiffOptions(min_control=13))
        with pytest.raises(Exception, match="--min-control 2 is more than the 1 prompts"):
            await service.specdiff("S", "B", control, SpecdiffOptions(prompts=["x"], min_control=2))
        for options, timeout_s, name in (  # the CLI's bounds, for the TUI and scripts that call the service
            (SpecdiffOptions(max_tokens=0), 900.0, "--max-tokens"),
            (SpecdiffOptions(seed=-1), 900.0, "--seed"),
            (SpecdiffOptions(min_control=0), 900.0, "--min-control"),
            (SpecdiffOptions(), float("nan"), "--timeout"),
        ):
            with pytest.raises(InputError, match=name):
                await service.specdiff("S", "B", control, options, timeout_s)
    finally:
        await service.close()
    assert store.scalar("SELECT count(*) FROM commands WHERE op = 'specdiff'") == 0
    assert argv_difference(_argv(1, "--max-num-seqs", "64"), _argv(2)) == ["+--max-num-seqs 64"]


def test_the_cli_refuses_in_one_line_and_lists_offline(
    store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _ingest(store, "sd-none", [SAME] * 4 + [CONTROL_PARTS] * 8)
    db = str(store.path)
    bad = tmp_path / "prompts.json"
    bad.write_text(json.dumps([""]))
    assert main(["--db", db, "specdiff", "S", "B", "--control", "B", "B", "--prompts", str(bad)]) == 2
    assert "entry 0: a prompt must be a non-empty string" in capsys.readouterr().err
    assert main(["--db", db, "specdiff", "S"]) == 2
    assert "needs SPEC_LAUNCH and BASE_LAUNCH" in capsys.readouterr().err

    assert main(["--db", db, "specdiff", "--list"]) == 0
    listed = capsys.readouterr().out
    assert "sd-none" in listed and "4/12" in listed and "no conclusion: control reproduced 4 of 12" in listed
    assert main(["--db", db, "specdiff", "--show", "sd-none"]) == 0
    shown = capsys.readouterr().out
    assert "verdict: no conclusion: control reproduced 4 of 12" in shown
    assert "`campaign quality compare`" in shown and "differs at token 2" in shown
    assert main(["--db", db, "specdiff", "--show", "sd-none", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["verdict"]["conclusive"] is False and len(data["items"]) == 12
    assert main(["--db", db, "specdiff", "--show", "nope"]) == 2
    assert "no specdiff run 'nope'" in capsys.readouterr().err
