"""The house suite seed6 (console/quality/suites/): its scoring rules, its items, and the cap/timeout policy
(seed-gaps F8, F20) against a fake chat server: a slow item ends unscored (left out, never wrong) and is run
again by ``--complete``; an answer stopped at its cap is flagged truncated; caps and timeout are stored and
compared. The real server (tiny CPU vLLM) is tests/test_quality_suite_vllm.py."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator, Mapping
from fractions import Fraction
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from console.cli import main
from console.economics import EconomicsRow
from console.errors import InputError
from console.quality.stats import wilson
from console.quality.suites import house, scoring
from console.quality.suites.checkers import CHECKERS, follows
from console.quality.suites.runner import Caps, Endpoint, parse_cap, run_items
from console.quality.suites.sandbox import run_tests
from console.readmodel.campaign import eval_runs
from console.readmodel.quality import compare_runs, quality_run
from console.service.quality import lm_eval_argv
from console.store import Box, Store

T0 = 1_780_000_000_000
ARM = "gemma-4-26b-a4b-bf16-think-on"  # a shipped arm whose profile sends sampling and chat_template_kwargs


# -- scoring, pure -------------------------------------------------------------------------------------
TIMEOUT_S = 5.0
"""The request timeout of the tests that need one item too slow and the rest in time: far above what an
immediate answer takes on a loaded machine, far below the slow item's delay."""
SLOW_S = 30.0


def test_maths_reads_the_last_boxed_answer_as_an_exact_number() -> None:
    assert scoring.score_maths("so \\boxed{1,170}", "1170") == 1.0
    assert scoring.score_maths("first \\boxed{3} then \\boxed{\\frac{99}{100}}", "99/100") == 1.0
    assert scoring.score_maths("The sum is 0.99.", "99/100") == 1.0  # no box: the last number
    assert scoring.score_maths("\\boxed{131}", "130") == 0.0
    assert (
        scoring.score_maths("<think>maybe 130</think>I cannot tell", "130") == 0.0
    )  # the thought is not scored
    assert scoring.score_maths("no number here", "130") == 0.0


def test_code_runs_after_the_items_prompt_against_its_tests_in_the_sandbox() -> None:
    item = next(i for i in house.fixed_items() if i.item_id == "code-humaneval-126")  # is_sorted(lst)
    tests, setup = item.key["tests"], item.key["setup"]
    good = "Here:\n```python\ndef is_sorted(lst):\n    return lst == sorted(lst) and all(lst.count(x) < 3 for x in lst)\n```"
    assert item.score(good) == 1.0
    assert scoring.score_code(good, tests, setup) == 1.0
    assert (
        item.score("```python\ndef is_sorted(lst):\n    return lst == sorted(lst)\n```") == 0.0
    )  # [1,2,2,2]
    assert not run_tests("import socket", "").passed  # no network
    spun = run_tests("while True:\n    pass", "", timeout_s=1.0)
    assert not spun.passed and spun.detail == "did not finish in 1 s"
    hog = run_tests("x = bytearray(4 * 1024 ** 3)", "")
    assert not hog.passed and "MemoryError" in hog.detail


def test_tool_calls_match_the_answer_set_as_bfcl_does() -> None:
    item = next(i for i in house.fixed_items() if i.item_id == "tools-parallel_4")  # two calculate_bmi calls
    both = (
        '[{"name": "calculate_bmi", "arguments": {"height": 5.6, "weight": 60}}, '
        '{"name": "calculate_bmi", "arguments": {"height": 6, "weight": 80.0}}]'
    )
    assert item.score(both) == 1.0  # any order; an integer where the answer has 6.0
    one = '[{"name": "calculate_bmi", "arguments": {"height": 6.0, "weight": 80}}]'
    assert item.score(one) == 0.0
    extra = both.replace('"weight": 60}', '"weight": 60, "unit": "metric"}')
    assert item.score(extra) == 0.0  # a parameter outside the set
    area = next(i for i in house.fixed_items() if i.item_id == "tools-simple_python_11")
    call = {"base": 10, "height": 5}
    assert area.score(json.dumps({"name": "calculate_triangle_area", "arguments": call})) == 1.0
    assert (
        area.score(json.dumps({"name": "calculate_triangle_area", "arguments": {**call, "base": "10"}}))
        == 0.0
    )
    served = [{"function": {"name": "calculate_triangle_area", "arguments": json.dumps(call)}}]
    assert area.score("", served) == 1.0  # the server's parsed tool_calls are read first
    named = next(i for i in house.fixed_items() if i.item_id == "tools-simple_python_159")
    act = {"act_name": "criminal law-amendment", "amendment_year": 2013}  # BFCL's string standardisation
    assert named.score(json.dumps([{"name": "get_act_details", "arguments": act}])) == 1.0


def test_knowledge_and_instructions() -> None:
    items = {i.item_id: i for i in house.fixed_items()}
    assert items["knowledge-mmlu-pro-227"].score("The premium difference is $90.\nAnswer: A") == 1.0
    assert items["knowledge-mmlu-pro-227"].score("Answer: (C)") == 0.0
    bowler = items["knowledge-simpleqa-3056"]  # SimpleQA: Wilfred Ferguson
    assert bowler.score("It was Wilfréd Ferguson, in 1948.") == 1.0  # accents and the question's year ignored
    assert bowler.score("Ferguson") == 0.0 and bowler.score("Wilfred Ferguson " + "or maybe " * 20) == 0.0
    balls = items["knowledge-simpleqa-2456"]  # a count: another number beside it is a second guess
    assert balls.score("He faced 5 balls on March 24, 2019.") == 1.0 and balls.score("5 or 6 balls") == 0.0
    two = items["instructions-ifeval-1098"]  # IFEval's two responses split by six asterisks
    assert two.score("Allah\n******\nYahweh") == 1.0
    assert two.score("Allah\n******\nAllah") == 0.0 and two.score("Allah\n******\n\n******\nGod") == 0.0
    postscript = items["instructions-ifeval-1537"]  # P.P.S as IFEval reads it: anywhere in a line
    assert postscript.score("Hark, felt balls.\n\nP.P.S. Yellow ones.") == 1.0
    assert postscript.score("Hark, felt balls. PS: yellow ones.") == 0.0
    assert items["instructions-ifeval-2359"].score("") == 0.0  # an empty answer follows nothing


@given(text=st.text(max_size=300))
def test_scorers_read_any_text_without_raising(text: str) -> None:
    kwargs = {
        "num_words": 3,
        "relation": "at least",
        "num_paragraphs": 2,
        "num_bullets": 2,
        "num_highlights": 1,
        "section_spliter": "SECTION",
        "num_sections": 2,
        "postscript_marker": "P.S.",
        "num_placeholders": 1,
        "end_phrase": "x",
        "keywords": ["a"],
        "forbidden_words": ["b"],
        "keyword": "c",
        "frequency": 2,
        "letter": "e",
        "let_relation": "less than",
        "let_frequency": 3,
        "prompt_to_repeat": "Say",
    }
    for name in CHECKERS:
        assert follows(text, [name], [kwargs]) in (True, False)
    scoring.calls_of(text, None)
    scoring.chosen_letter(text)
    assert scoring.score_maths(text, "130") in (0.0, 1.0)


@given(value=st.integers(-(10**6), 10**6), den=st.integers(1, 1000))
def test_numbers_read_exactly(value: int, den: int) -> None:
    assert scoring.number(f"{value}/{den}") == Fraction(value, den)
    assert scoring.number(f"{value:,}") == value


@given(family=st.sampled_from(house.FAMILIES), tokens=st.integers(1, 1_000_000))
def test_a_cap_reads_back_as_written(family: str, tokens: int) -> None:
    assert parse_cap(f"{family}={tokens}") == (family, tokens)
    assert parse_cap(str(tokens)) == (None, tokens)
    caps = Caps.of([(None, 32768), (family, tokens)])
    assert caps.cap(family) == tokens and Caps.from_json(caps.to_json()) == caps


@given(text=st.text(max_size=30))
def test_a_bad_cap_is_refused_in_one_line(text: str) -> None:
    try:
        family, tokens = parse_cap(text)
    except InputError as exc:
        message = str(exc)
        assert "\n" not in message and ("--cap" in message or "token cap" in message)
    else:
        assert (family is None or family in house.FAMILIES) and 1 <= tokens <= 1_000_000


# -- the items -----------------------------------------------------------------------------------------
def test_items_have_stable_unique_ids_in_six_families_and_fit_the_window() -> None:
    def count(messages: house.Messages) -> int:
        return sum(len(m["content"]) for m in messages) // 4

    a, b = house.items(8192, count), house.items(8192, count)
    assert [(i.item_id, i.messages) for i in a] == [(i.item_id, i.messages) for i in b]  # the seed fixes them
    ids = [i.item_id for i in a]
    assert len(ids) == len(set(ids)) >= 40
    assert {i.family for i in a} == set(house.FAMILIES)
    for item in a:
        if item.family == "long-context":
            share = next(s for i, s, _ in house.LONG_CONTEXT if i == item.item_id)
            assert 0.8 * share * 8192 <= count(item.messages) <= share * 8192
            assert item.key["value"] in item.messages[0]["content"]
    assert [i.item_id for i in house.items(None, count)] == [i for i in ids if not i.startswith("long")]


# -- a fake chat server: what the policy must do with slow and capped answers ---------------------------------
class FakeChat:
    """A real HTTP server answering chat completions per item (by the item's last message): ``answers`` maps an
    item id to (content, finish_reason, delay seconds); others get ``default`` (a wrong answer at once).
    ``/tokenize`` counts four characters a token and reports ``window``. Every request body is kept."""

    def __init__(self, window: int = 4096):
        self.window = window
        self.answers: dict[str, tuple[str, str, float]] = {}
        self.default = ("I do not know.", "stop", 0.0)
        self.requests: list[dict[str, Any]] = []
        by_prompt = {i.messages[-1]["content"]: i.item_id for i in house.fixed_items()}
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path == "/tokenize":
                    count = sum(len(m["content"]) for m in body["messages"]) // 4
                    return self._send({"count": count, "max_model_len": fake.window, "tokens": []})
                fake.requests.append(body)
                item = by_prompt.get(body["messages"][-1]["content"], "")
                content, finish, delay = fake.answers.get(item, fake.default)
                time.sleep(delay)
                return self._send(
                    {
                        "choices": [
                            {"message": {"role": "assistant", "content": content}, "finish_reason": finish}
                        ],
                        "usage": {"completion_tokens": len(content.split())},
                    }
                )

            def _send(self, payload: Mapping[str, Any]) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (its timeout)
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def chat() -> Iterator[FakeChat]:
    server = FakeChat()
    try:
        yield server
    finally:
        server.close()


def test_a_slow_item_is_unscored_and_a_capped_answer_truncated(chat: FakeChat) -> None:
    chat.answers["maths-math-algebra-297"] = ("\\boxed{1736}", "stop", SLOW_S)  # right, but too late
    chat.answers["maths-math-algebra-1282"] = (
        "Let me think about the bread crates and",
        "length",
        0.0,
    )  # cut at the cap
    chat.answers["maths-math-intermediate-algebra-1197"] = ("\\boxed{\\dfrac{3}{56}}", "stop", 0.0)
    items = [i for i in house.fixed_items() if i.family == "maths"]
    endpoint = Endpoint(chat.url, "tiny", {"temperature": 0.0}, timeout_s=TIMEOUT_S)
    results = {r.item_id: r for r in asyncio.run(run_items(endpoint, items, Caps(None, {"maths": 64}), 4096))}
    slow = results["maths-math-algebra-297"]
    assert slow.score is None and slow.reason == "timed out after 5 s"  # unscored, not wrong
    capped = results["maths-math-algebra-1282"]
    assert capped.truncated is True and capped.score == 0.0
    right = results["maths-math-intermediate-algebra-1197"]
    assert right.score == 1.0 and right.truncated is False
    sent = {b["messages"][-1]["content"]: b for b in chat.requests}
    body = sent[items[0].messages[-1]["content"]]
    assert body["max_tokens"] == 64 and body["temperature"] == 0.0
    # No cap: the window minus the prompt, as the server counts it.
    uncapped = asyncio.run(run_items(endpoint, items[:1], Caps(), 4096))
    prompt = len(items[0].messages[0]["content"]) // 4
    assert chat.requests[-1]["max_tokens"] == 4096 - prompt == uncapped[0].max_tokens


# -- through the service: stored with caps and timeout, listed as short, completed, compared ------------------
@pytest.fixture
def campaign(tmp_path: Path) -> Path:
    """A launch of a shipped arm serving on a box nothing connects to (the suite reaches it by --url)."""
    db = tmp_path / "state.db"
    with Store(db, clock=lambda: T0) as store:
        store.boxes.add(Box(name="pro-a", ssh_user="root", host="127.0.0.1", port=22))
        arm_id = store.launches.add_arm(
            ARM,
            "gemma",
            "pro-a",
            "hash",
            ["vllm", "serve", "/m", "--served-model-name", "tiny"],
            {},
            [[0]],
            1,
            [],
        )
        for launch_id in ("L1", "L2"):
            store.launches.add(
                launch_id, "pro-a", ARM, arm_id=arm_id, replica=0, gpus=[0], port=8100, forced=False
            )
        store.ingest.batch(
            "pro-a",
            [
                {
                    "v": 1,
                    "seq": n,
                    "t_ms": T0 + n,
                    "kind": "launch_state",
                    "launch_id": lid,
                    "state": "serving",
                }
                for n, lid in ((1, "L1"), (2, "L2"))
            ],
        )
    return db


def test_run_stores_caps_timeout_and_unscored_items_and_complete_merges_them(
    campaign: Path, chat: FakeChat, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chat.answers["maths-math-algebra-297"] = ("\\boxed{1736}", "stop", SLOW_S)
    chat.answers["maths-math-intermediate-algebra-1197"] = ("\\boxed{\\frac{3}{56}}", "stop", 0.0)
    chat.answers["knowledge-simpleqa-3056"] = ("Wilfred Ferguson", "stop", 0.0)
    argv = ["--db", str(campaign), "quality", "run", "L1", "--suite", "seed6", "--url", chat.url]
    assert (
        main([*argv, "--cap", "512", "--cap", "code=256", "--request-timeout", str(TIMEOUT_S), "--json"]) == 0
    )
    first = json.loads(capsys.readouterr().out)["run"]
    run_id = first["id"]
    assert first["unscored"] == 1 and first["unscored_items"] == {
        "maths/maths-math-algebra-297": "timed out after 5 s"
    }
    assert first["caps"] == {"*": 512, "code": 256} and first["request_timeout_s"] == TIMEOUT_S
    assert first["suite"] == "seed6 v3" and first["items"] == len(house.items(4096, lambda m: None)) - 1
    # The arm's vendor profile went with every request; the code family's own cap with its items.
    assert all(b["temperature"] == 0.0 and b["top_k"] == 64 for b in chat.requests)
    assert all(b["chat_template_kwargs"] == {"enable_thinking": True} for b in chat.requests)
    code = [b for b in chat.requests if "```python" in b["messages"][-1]["content"]]
    assert code and all(b["max_tokens"] == 256 for b in code)
    with Store(campaign, read_only=True) as store:
        run = quality_run(store, run_id)
        assert run.launch_id == "L1" and run.thinking is not None
        families = {f.family: f for f in run.families}
        assert set(families) == set(house.FAMILIES)
        assert (
            families["maths"].items == 9 and families["maths"].right == 1.0
        )  # maths-math-algebra-297 left out, not wrong
        assert families["knowledge"].text == f"{1 / 14:.3f} [0.013, 0.315]"
        aggregate = next(e for e in eval_runs(store) if e.id == run.eval_run_id)
        assert (
            aggregate.unscored == 1 and aggregate.note and "short: 1 unscored (flattered)" in aggregate.note
        )
        priced = _economics_row(aggregate.overall, aggregate.items, aggregate.unscored)
        assert "accuracy short: 1 unscored (flattered)" in priced.marks
        assert priced.accuracy_interval == wilson(aggregate.overall * aggregate.items, aggregate.items)
    assert main(["--db", str(campaign), "quality", "list"]) == 0
    listed = capsys.readouterr().out
    assert (
        "short: 1 unscored (flattered)" in listed
        and f"run {run_id} by family: code 0.000 [0.000, 0.324]" in listed
    )
    # --complete: only the unscored item, under the run's own caps and timeout, merged into the same run.
    chat.answers["maths-math-algebra-297"] = ("\\boxed{1736}", "stop", 0.0)
    before = len(chat.requests)
    complete = [
        "--db",
        str(campaign),
        "quality",
        "run",
        "--complete",
        str(run_id),
        "--url",
        chat.url,
        "--json",
    ]
    assert main(complete) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["state"] == "completed" and len(chat.requests) == before + 1
    assert chat.requests[-1]["max_tokens"] == 512
    merged = done["run"]
    assert merged["id"] == run_id and merged["unscored"] == 0 and merged["items"] == first["items"] + 1
    assert merged["accuracy"] > first["accuracy"] * first["items"] / merged["items"]
    with Store(campaign, read_only=True) as store:
        maths = {f.family: f for f in quality_run(store, run_id).families}["maths"]
        assert (maths.items, maths.right) == (10, 2.0)
        overall = store.rows("SELECT items, overall FROM eval_runs WHERE id = ?", [merged["eval_run_id"]])
        assert overall == [{"items": merged["items"], "overall": pytest.approx(merged["accuracy"])}]
        aggregate = next(e for e in eval_runs(store) if e.id == merged["eval_run_id"])
        assert aggregate.unscored == 0 and "short" not in (aggregate.note or "")
    # A second run under other caps pairs item by item, and compare says the caps differ.
    assert main([*argv[:4], "L2", "--suite", "seed6", "--url", chat.url, "--cap", "1024", "--json"]) == 0
    second = json.loads(capsys.readouterr().out)["run"]["id"]
    with Store(campaign, read_only=True) as store:
        c = compare_runs(store, run_id, second)
        assert c.paired.n == merged["items"]
        assert c.policy_warnings == (
            "caps differ: A every family 512, code 256, B every family 1024",
            "request timeouts differ: A 5 s, B 3600 s",
        )
    assert main(["--db", str(campaign), "quality", "compare", str(run_id), str(second)]) == 0
    shown = capsys.readouterr().out
    assert "warning: caps differ: A every family 512, code 256, B every family 1024" in shown
    assert "  maths" in shown and "[0.057, 0.510]" in shown  # 2 of 10 with its Wilson interval


def test_runs_of_two_versions_of_the_suite_never_pair(
    campaign: Path, chat: FakeChat, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A new version keeps the ids of the items it leaves alone (here every id: the older run is stored under
    the older version's name), and still the two runs do not pair: compare refuses them in one line."""
    argv = ["--db", str(campaign), "quality", "run", "L1", "--suite", "seed6", "--url", chat.url, "--json"]
    assert main(argv) == 0
    newer = json.loads(capsys.readouterr().out)["run"]
    monkeypatch.setattr(house, "VERSION", house.VERSION - 1)
    assert main([*argv[:4], "L2", *argv[5:]]) == 0
    older = json.loads(capsys.readouterr().out)["run"]
    assert (newer["suite"], older["suite"]) == ("seed6 v3", "seed6 v2") and newer["items"] == older["items"]
    with (
        Store(campaign, read_only=True) as store,
        pytest.raises(
            InputError, match="seed6 v3 and seed6 v2: items of two versions of a suite do not pair"
        ),
    ):
        compare_runs(store, newer["id"], older["id"])
    assert main(["--db", str(campaign), "quality", "compare", str(older["id"]), str(newer["id"])]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith(
        f"campaign: quality runs {older['id']} and {newer['id']} are seed6 v2 and seed6 v3"
    )


def test_complete_refuses_a_harness_run_and_a_run_with_nothing_scored_is_refused(
    campaign: Path, chat: FakeChat, capsys: pytest.CaptureFixture[str]
) -> None:
    chat.default = ("", "stop", 2.0)  # every item too slow
    argv = ["--db", str(campaign), "quality", "run", "L1", "--suite", "seed6", "--url", chat.url]
    assert main([*argv, "--request-timeout", "0.5"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(
        "campaign: no item of seed6 was scored against launch L1: timed out after 0.5 s"
    )
    assert main(["--db", str(campaign), "quality", "run", "--complete", "99"]) == 2
    assert main(["--db", str(campaign), "quality", "run", "L1", "--complete", "1"]) == 2  # not both


def _economics_row(accuracy: float, items: int, unscored: int) -> EconomicsRow:
    """A priced row carrying a house-suite run's accuracy (the rest as economics fills it, irrelevant here)."""
    return EconomicsRow(
        box="pro-a",
        arm=ARM,
        model="gemma",
        rows="router C1",
        node_usd_per_hour=1.0,
        node_per_mtok=1.0,
        accuracy=accuracy,
        accuracy_items=items,
        accuracy_box="pro-a",
        accuracy_basis="measured",
        accuracy_arm=ARM,
        api_provider=None,
        api_per_mtok=None,
        api_over_node=None,
        on_frontier=False,
        diagnostic_only=False,
        power_limit_w=None,
        max_power_w=None,
        source="measured",
        accuracy_unscored=unscored,
    )


def test_lm_eval_gets_the_cap_the_profile_sampling_and_the_timeout(tmp_path: Path) -> None:
    argv = lm_eval_argv(
        "lm_eval",
        "tiny",
        41234,
        ["gsm8k"],
        tmp_path,
        None,
        8,
        gen_kwargs={"temperature": 0.0, "top_k": 64, "max_gen_toks": 32768},
        request_timeout_s=3600.0,
    )
    assert argv[argv.index("--gen_kwargs") + 1] == "temperature=0.0,top_k=64,max_gen_toks=32768"
    assert argv[argv.index("--model_args") + 1].endswith(",timeout=3600")
