"""The corruption tripwire: detectors, grading, profiles, and whole runs against a real local chat server
(testbed/fake_chat_server.py) and the real tiny vLLM on CPU (random weights must not pass)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import venv
from pathlib import Path
from typing import Any

import pytest

from agents.jobs import Jobs
from agents.journal import Journal
from agents.tripwire import main
from agents.tripwire.client import ChatResult
from agents.tripwire.detect import matches, read_answer, repetition
from agents.tripwire.grade import grade_item
from agents.tripwire.items import ITEMS, Item
from agents.tripwire.profile import ProfileError, load
from agents.tripwire.ready import NotServing, until_serving
from testbed.fake_chat_server import FakeChatServer
from testbed.ports import free_port
from testbed.vllm_env import VllmEnv
from testbed.vllm_server import TinyServer

ROOT = Path(__file__).resolve().parents[1]
PROSE = (
    "The Pacific Ocean is the largest and deepest of Earth's five oceanic divisions. It extends from the "
    "Arctic Ocean in the north to the Southern Ocean in the south, and is bounded by Asia and Australia in "
    "the west and the Americas in the east. Its area is about 165 million square kilometres, which is more "
    "than all of the land on the planet combined. The ocean contains roughly 25,000 islands, more than the "
    "rest of the world's oceans together, and its deepest point, the Challenger Deep, lies near 11,000 metres."
)


def run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, dict[str, Any]]:
    rc = main([*argv, "--json", "--quiet"])
    return rc, json.loads(capsys.readouterr().out)


# ---------------------------------------------------------------- detectors


def test_items_are_twenty_with_distinct_ids() -> None:
    assert len(ITEMS) == 20 and len({i.id for i in ITEMS}) == 20


@pytest.mark.parametrize(
    "text",
    [
        PROSE,
        "| model | tok/s |\n|---------------|---------------|\n| a | 1,000,000 |\n\n==========\n" + PROSE,
        "17 x 23 = 391. Check: 391 / 23 = 17. So the answer is 391.",
        "Paris",
    ],
)
def test_normal_text_is_not_degenerate(text: str) -> None:
    assert repetition(text) == []


COUNT_TO_42 = " ".join(str(n) for n in range(1, 43))


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("The answer is the answer is the answer. " * 20, "repeated 6-grams"),
        ("yes no " * 40 + "maybe " * 40, "distinct-token ratio"),
        (
            "111 222 333 444",
            "structured repeat",
        ),  # the write-up's GLM output, which passed its first tripwire
        ("111 222 333", "structured repeat"),
        ("Paris 111 222 333", "structured repeat"),  # the right answer does not excuse the rest
        ("Paris. 111, 222, 333.", "structured repeat"),
        ("The answer: 1111 2222 3333 4444 5555 6666", "structured repeat"),
        ("aaa bbb ccc ddd", "structured repeat"),
        (COUNT_TO_42, "counting"),  # the write-up's counting loop: every token distinct, no 6-gram repeats
        ("32 " + COUNT_TO_42, "counting"),
        ("1, 2, 3, 4, 5, 6, 7, 8, 9, 10", "counting"),
        ("10 - 20 - 30 - 40 - 50 - 60 - 70 - 80", "counting"),
        ("The next number is 32, 64, 128, 256, 512, 1024, 2048, 4096", "counting"),
        ("0 0 0 0 0 0 0 0 0", "counting"),
        ("Paris Paris Paris Paris", "token loop"),
        ("Jupiter. Jupiter. Jupiter. Jupiter.", "token loop"),
        ("The answer is 391. The answer is 391. The answer is 391.", "token loop"),
        (
            PROSE + " " + "Let me check the arithmetic once more before I answer the question. " * 3 + PROSE,
            "token loop",
        ),
        ("1a 2b 3c 4d 5e 6f", "shape loop"),
        ("v1 v2 v3 v4 v5 v6 v7", "shape loop"),
        ("x1: y, x2: y, x3: y, x4: y, x5: y, x6: y, x7: y", "shape loop"),
        ("Answer!!!!!!!!!!!!!!!!!!!!!", "character loop"),
        ("abcabcabcabcabcabcabcabcabcabcabc", "character loop"),
    ],
)
def test_degenerate_output_is_caught_by_the_right_detector(text: str, why: str) -> None:
    assert any(reason.startswith(why) for reason in repetition(text)), repetition(text)


@pytest.mark.parametrize(
    "text",
    [
        "ha ha ha, very funny",  # three copies of a short unit is speech
        "No, no, no: the capital of France is Paris.",
        "a-n-a-n-a-b",
        "b, a, n, a, n, a reversed is a, n, a, n, a, b",
        "b(1), a(2), n(3), a(4), n(5), a(6)",
        "2, 4, 8, 16, 32",
        "1, 2, 3, 4, 5, 6, 7",  # below a count's length
        "The population is 1 000 000 000.",
        "1,000,000",
        "000 000 000",
        "1 + 2 + 3 = 6",
        "60 + 60 + 60 = 180",
        "1a 2b 3c 4d 5e",
        "| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |",
    ],
)
def test_structure_that_is_not_a_loop_is_not_degenerate(text: str) -> None:
    assert repetition(text) == []


# A right answer to every item, bare, in a sentence, and worked the way a model works it (with its
# working in reasoning_content for the "parsed" case): none may read as degenerate.
WORKED = {
    "capital-france": ("Paris", "The user asks for the capital of France. That is Paris. One word."),
    "multiply": (
        "17 × 23 = 17 × 20 + 17 × 3 = 340 + 51 = 391",
        "17 * 23: 17 * 20 = 340, 17 * 3 = 51, 340 + 51 = 391.",
    ),
    "largest-planet": (
        "Jupiter",
        "Planets by size: Jupiter, Saturn, Uranus, Neptune, Earth, Venus, Mars, Mercury.",
    ),
    "gold-symbol": ("Au", "Gold is aurum in Latin, so its symbol is Au."),
    "minutes": ("3 hours × 60 minutes = **180** minutes", "1 hour = 60 minutes; 60 + 60 + 60 = 180."),
    "ww2-end": ("1945", "The war in Europe ended in May 1945 and in the Pacific in September 1945."),
    "sqrt": ("12, since 12 × 12 = 144", "11 * 11 = 121, 12 * 12 = 144, 13 * 13 = 169, so 12."),
    "reverse": ("ananab", "banana is b-a-n-a-n-a; letter by letter reversed: a-n-a-n-a-b, so ananab."),
    "author": ("William Shakespeare", "Romeo and Juliet was written by William Shakespeare around 1595."),
    "boiling": ("100 °C", "At 1 atm, water boils at 100 degrees Celsius (212 °F)."),
    "photosynthesis": (
        "Carbon dioxide (CO₂)",
        "Plants take in CO2 and release O2; the gas taken in is carbon dioxide.",
    ),
    "train": ("60 km/h × 2.5 h = 150 km", "Distance = speed × time = 60 × 2.5 = 150 kilometres."),
    "sequence": (
        "Each number doubles: 2, 4, 8, 16, 32. The next number is 32.",
        "2 × 2 = 4, 4 × 2 = 8, 8 × 2 = 16, so 16 × 2 = 32.",
    ),
    "french": ("chat", "Cat in French is le chat (a female cat is la chatte)."),
    "ocean": ("The Pacific Ocean", "Oceans by area: Pacific, Atlantic, Indian, Southern, Arctic. Pacific."),
    "alphabetical": ("apple (apple, mango, orange, pear)", "a < m < o < p, so apple comes first."),
    "subtract": ("1000 − 387 = 613", "1000 - 387: 1000 - 300 = 700, 700 - 87 = 613."),
    "leap-year": ("366", "A common year has 365 days; a leap year adds February 29, so 366."),
    "atomic-one": ("Hydrogen", "Atomic number 1 is hydrogen, symbol H."),
    "instruction": ("TRIPWIRE", "The user wants exactly TRIPWIRE in capitals, nothing else."),
}


@pytest.mark.parametrize("item", ITEMS, ids=[i.id for i in ITEMS])
def test_every_items_right_answer_is_clean(item: Item) -> None:
    answer, working = WORKED[item.id]
    expected = item.expect[0] if not item.case else item.expect[0]
    for content, reasoning in [
        (expected, None),
        (f"The answer is {expected}.", None),
        (answer, None),
        (answer, working),
        (f"{working}\n</think>\n\n{answer}", "x"),
    ]:
        graded = grade_item(
            item, ChatResult(content=content, reasoning_content=reasoning, finish_reason="stop")
        )
        assert (graded["verdict"], graded["reasons"]) == ("ok", []), (content, reasoning)


@pytest.mark.parametrize("item", ITEMS, ids=[i.id for i in ITEMS])
def test_a_right_answer_followed_by_structure_is_degenerate(item: Item) -> None:
    answer = WORKED[item.id][0]
    for tail in ("111 222 333", COUNT_TO_42, f"{answer} {answer} {answer} {answer}"):
        graded = grade_item(item, ChatResult(content=f"{answer} {tail}", finish_reason="length"))
        assert graded["verdict"] == "degenerate", (tail, graded)
    in_reasoning = grade_item(
        item, ChatResult(content=answer, reasoning_content="1 2 3 4 5 6 7 8 9 10 11", finish_reason="stop")
    )
    assert in_reasoning["verdict"] == "degenerate" and in_reasoning["reasons"][0].startswith(
        "in reasoning: counting"
    )


def test_the_answer_is_graded_not_the_chain_of_thought() -> None:
    tagged = read_answer("We need the capital. Maybe Lyon? No.\n</think>\nParis", None)
    assert tagged.answer == "Paris" and "</think>" in (tagged.reasoning_leak or "")
    parsed = read_answer("Paris", "Lyon is wrong, Paris is right")
    assert parsed.answer == "Paris" and parsed.reasoning_leak is None
    unfinished = read_answer("<think>\nLet me think about Paris", None)
    assert unfinished.answer == "" and unfinished.unfinished_thinking
    prose = read_answer("We need to answer user's request. Think of 17*23...\n\nAnswer: 391", None)
    assert prose.reasoning_leak and prose.answer.endswith("391")
    # the thinking mentions the expected answer, the conclusion does not: wrong
    assert not matches(read_answer("Paris? No, I doubt it.\n</think>\nLyon", None).answer, ("paris",), False)


def test_matching_is_word_bounded_and_honours_case() -> None:
    assert matches("The answer is **391**.", ("391",), False)
    assert not matches("3910 or 1391", ("391",), False)
    assert not matches("tripwire", ("TRIPWIRE",), True)
    assert matches("TRIPWIRE", ("TRIPWIRE",), True)
    long_answer = "Paris is mentioned first.\n" + PROSE.replace(". ", ".\n") + "\nSo: Lyon."
    assert not matches(long_answer, ("paris",), False)  # a long answer is graded on its last lines


# ---------------------------------------------------------------- whole runs against a local chat server


@pytest.mark.parametrize(
    ("mode", "verdict", "counts", "leaks"),
    [
        ("correct", "clean", (20, 0, 0), 0),
        ("parsed", "clean", (20, 0, 0), 0),
        ("wrong", "wrong", (0, 0, 20), 0),
        ("degenerate", "degenerate", (0, 20, 0), 0),
        ("digits", "degenerate", (0, 20, 0), 0),
        ("right-then-digits", "degenerate", (0, 20, 0), 0),
        ("counting", "degenerate", (0, 20, 0), 0),
        ("bang", "degenerate", (0, 20, 0), 0),
        ("leak-tags", "reasoning-leak", (20, 0, 0), 20),
        ("leak-prose", "reasoning-leak", (20, 0, 0), 20),
        ("truncated", "reasoning-leak", (0, 0, 20), 20),
    ],
)
def test_verdicts_against_a_local_server(
    capsys: pytest.CaptureFixture[str], mode: str, verdict: str, counts: tuple[int, int, int], leaks: int
) -> None:
    with FakeChatServer(mode) as server:
        rc, out = run(capsys, ["--base-url", server.base_url, "--model", "fake"])
    assert rc == 0
    assert (out["verdict"], (out["ok"], out["degenerate"], out["wrong"]), out["reasoning_leak"]) == (
        verdict,
        counts,
        leaks,
    )
    assert out["total"] == 20 and out["passed"] is (verdict == "clean")
    assert out["score"] == f"{counts[0]}/20" and len(out["items"]) == 20


def test_seed_readings_clean_at_19_1_0_and_rejected_at_11_8_1(capsys: pytest.CaptureFixture[str]) -> None:
    with FakeChatServer("correct", {"multiply": "digits"}) as server:
        _, out = run(capsys, ["--base-url", server.base_url, "--model", "fake"])
    assert (out["ok"], out["degenerate"], out["wrong"], out["verdict"]) == (19, 1, 0, "clean")
    item = next(i for i in out["items"] if i["id"] == "multiply")
    assert item["verdict"] == "degenerate" and "structured repeat" in item["reasons"][0]
    ids = [i.id for i in ITEMS]
    modes = {**dict.fromkeys(ids[:8], "degenerate"), ids[8]: "wrong"}
    with FakeChatServer("correct", modes) as server:
        _, out = run(capsys, ["--base-url", server.base_url, "--model", "fake"])
    assert (out["ok"], out["degenerate"], out["wrong"], out["passed"]) == (11, 8, 1, False)


def test_failed_requests_count_as_wrong_with_the_reason(capsys: pytest.CaptureFixture[str]) -> None:
    with FakeChatServer("http-500") as server:
        rc, out = run(capsys, ["--base-url", server.base_url, "--model", "fake"])
    assert rc == 1 and out["wrong"] == 20 and "HTTP 500" in out["items"][0]["reasons"][0]


def test_vendor_sampling_goes_through_extra_body(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    profile = {
        "reasoning_parser": "qwen3",
        "sampling": {"temperature": 0.6, "top_p": 0.95, "top_k": 20, "min_p": 0.0},
        "chat_template_kwargs": {"enable_thinking": False},
    }
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(profile))
    with FakeChatServer("correct") as server:
        _, out = run(
            capsys,
            [
                "--base-url",
                server.base_url,
                "--model",
                "fake",
                "--profile",
                "qwen-test",
                "--profile-json",
                f"@{path}",
                "--max-tokens",
                "512",
            ],
        )
        sent = server.requests[0]
    assert out["request"] == {"temperature": 0.6, "top_p": 0.95}
    assert out["extra_body"] == {
        "top_k": 20,
        "min_p": 0.0,
        "chat_template_kwargs": {"enable_thinking": False},
    }
    assert (out["profile"], out["reasoning_parser"]) == ("qwen-test", "qwen3")
    assert (
        sent["top_k"] == 20
        and sent["min_p"] == 0.0
        and sent["chat_template_kwargs"] == {"enable_thinking": False}
    )
    assert sent["temperature"] == 0.6 and sent["max_tokens"] == 512


def test_unserved_model_is_refused_and_max_tokens_fits_the_model(capsys: pytest.CaptureFixture[str]) -> None:
    with FakeChatServer("correct", max_model_len=2048) as server:
        rc, out = run(capsys, ["--base-url", server.base_url, "--model", "other"])
        assert rc == 2 and "does not serve model 'other'" in out["error"]
        rc, out = run(capsys, ["--base-url", server.base_url, "--model", "fake"])
        assert rc == 0 and out["max_tokens"] == 2048 - 256
        assert {r["max_tokens"] for r in server.requests} == {2048 - 256}


def test_a_client_started_before_its_server_waits_for_it_and_never_past_its_wait(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with FakeChatServer("correct") as server:
        rc, out = run(capsys, ["--base-url", server.base_url, "--model", "fake", "--wait-ready-s", "30"])
        assert rc == 0 and out["verdict"] == "clean" and len(server.requests) == 20
    t = [0.0]

    def sleep(seconds: float) -> None:  # an injected clock: the wait's end is exact, and nothing sleeps
        t[0] += seconds

    with pytest.raises(NotServing, match=r"did not serve within 1\.5 s; no request was sent"):
        until_serving(f"http://127.0.0.1:{free_port()}", 1.5, None, None, clock=lambda: t[0], sleep=sleep)
    assert t[0] == pytest.approx(1.5)


def test_the_profile_the_console_resolves_is_what_the_box_applies() -> None:
    """The box never reads recipes: the console sends the resolved profile, and a name is only its label."""
    from console.recipes import load_catalog

    sent = json.dumps(load_catalog().profiles["qwen3.8-27b-bf16"].serving.to_dict())
    profile = load("qwen3.8-27b-bf16", sent)
    assert profile.extra_body.get("top_k") == 20 and profile.reasoning_parser == "qwen3"
    assert load("qwen3.8-27b-bf16", None).request == {}  # a bare name carries no settings of its own
    with pytest.raises(ProfileError, match="not valid JSON"):
        load(None, "{nope")


def test_module_entry_point(tmp_path: Path) -> None:
    with FakeChatServer("correct") as server:
        done = subprocess.run(
            [sys.executable, "-m", "agents.tripwire", "--base-url", server.base_url, "--model", "fake"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("clean: 20 ok, 0 degenerate, 0 wrong of 20")
    assert "tripwire 20/20" in done.stderr


# ---------------------------------------------------------------- the interpreter it runs under


@pytest.fixture(scope="module")
def python_without_openai(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real interpreter that cannot import openai: a fresh virtual environment, like a box's system python."""
    env = tmp_path_factory.mktemp("no-openai") / "venv"
    venv.create(env, with_pip=False)
    python = env / "bin" / "python"
    probe = subprocess.run([python, "-c", "import openai"], capture_output=True, text=True, timeout=60)
    assert probe.returncode != 0, "the fresh environment unexpectedly imports openai"
    return python


def test_without_openai_the_tripwire_names_its_python_and_the_fix(python_without_openai: Path) -> None:
    with FakeChatServer("correct") as server:
        done = subprocess.run(
            [
                python_without_openai,
                "-m",
                "agents.tripwire",
                "--base-url",
                server.base_url,
                "--model",
                "fake",
                "--json",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert server.requests == []  # refused before a single request
    assert done.returncode == 2
    error = json.loads(done.stdout)["error"]
    assert f"not importable by {python_without_openai}" in error and "pip install openai" in error
    assert done.stderr.strip().count("\n") == 0 and done.stderr.startswith("tripwire: the openai package")


def _run_job(tmp_path: Path, args: dict[str, Any]) -> list[dict[str, Any]]:
    """A tripwire started the way the agent starts one (agents/jobs.py), to its journaled end."""
    tmp_path.mkdir()
    journal = Journal(tmp_path / "journal.db")
    jobs = Jobs(tmp_path, journal)
    jobs.start("tripwire", {"tripwire_id": "w1", "launch_id": "L1", **args}, "trip-1")
    deadline = time.monotonic() + 120
    while jobs.running:
        assert time.monotonic() < deadline, "the tripwire job did not end"
        jobs.tick()
        time.sleep(0.1)
    return journal.events_after(0, 100)


def test_the_tripwire_job_runs_under_the_python_its_command_names(
    tmp_path: Path, python_without_openai: Path
) -> None:
    with FakeChatServer("correct") as server:
        args = {"base_url": server.base_url, "model": "fake"}
        [result, done] = _run_job(tmp_path / "own", args)  # no python named: the agent's own interpreter
        assert result["result"]["verdict"] == "clean" and done["ok"] is True
        [result, _] = _run_job(tmp_path / "named", {**args, "python": str(python_without_openai)})
    assert str(python_without_openai) in result["result"]["error"]  # it ran there, and said why it stopped
    with pytest.raises(ValueError, match="not an executable file on this box"):
        _run_job(tmp_path / "missing", {**args, "python": str(tmp_path / "no-such-env" / "bin" / "python")})


@pytest.mark.vllm
def test_the_serving_environments_python_runs_the_tripwire(vllm_env: VllmEnv, tmp_path: Path) -> None:
    """The CPU vLLM environment stands for a box's serving env: vLLM brought openai into it."""
    with FakeChatServer("correct") as server:
        args = {"base_url": server.base_url, "model": "fake", "python": str(vllm_env.python)}
        [result, done] = _run_job(tmp_path / "job", args)
    assert done["ok"] is True and result["result"]["verdict"] == "clean", result


# ---------------------------------------------------------------- end to end: the real tiny vLLM on CPU


@pytest.mark.vllm
def test_random_weights_do_not_pass(tiny_server: TinyServer, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out = run(
        capsys,
        [
            "--base-url",
            tiny_server.base_url,
            "--model",
            tiny_server.model,
            "--max-tokens",
            "64",
            "--concurrency",
            "4",
            "--timeout",
            "300",
        ],
    )
    assert rc == 0
    assert out["passed"] is False and out["ok"] < 18
    assert all(item["finish_reason"] is not None for item in out["items"])
