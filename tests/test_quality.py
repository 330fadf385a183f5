"""The quality ledger: harness files read in their real formats, bound to launches, compared on common items.

The harness files are written by tests/support/harness_files.py in the formats lm-evaluation-harness and
Inspect AI write (the module says where each format comes from); nothing is downloaded. The statistics are
checked by hand and against the campaign write-up's own paired splits and noise-floor table.
"""

from __future__ import annotations

import json
import os
import struct
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from console.cli import main
from console.errors import InputError
from console.quality.harness import MAX_FILE_BYTES, HarnessFileError
from console.quality.read import read_harness_file
from console.quality.stats import A_AHEAD, B_AHEAD, TIE, UNKNOWN, Paired, decide, mcnemar_exact, noise_floor
from console.readmodel import compare_runs, economics_inputs, eval_runs, published_comparisons, quality_run
from console.service import Service
from console.service.quality import lm_eval_argv
from console.store import Box, Store
from tests.support.harness_files import (
    inspect_log,
    inspect_sample,
    write_inspect_eval,
    write_inspect_json,
    write_lm_eval,
)

T0 = 1_788_658_020_000
BASE = [1.0 if i % 2 == 0 else 0.0 for i in range(40)]


def _flip(scores: list[float], *at: int) -> list[float]:
    return [1.0 - s if i in at else s for i, s in enumerate(scores)]


# -- statistics ----------------------------------------------------------------------------------------


def test_mcnemar_exact_by_hand() -> None:
    assert mcnemar_exact(0, 5) == 2 / 32  # five discordant items all one way: 2 x (1/2)^5
    assert mcnemar_exact(19, 7) == pytest.approx(0.028959, abs=1e-6)  # binom.test(7, 26) two-sided
    assert mcnemar_exact(7, 19) == mcnemar_exact(19, 7)
    assert mcnemar_exact(3, 3) == 1.0 and mcnemar_exact(0, 0) == 1.0


def test_paired_interval_by_hand() -> None:
    p = Paired.of_scores([(1, 0), (0, 0), (1, 1), (0, 1), (1, 0)])
    assert (p.n, p.a_only, p.b_only, p.split, p.a_mean, p.b_mean) == (5, 2, 1, "2 to 1", 0.6, 0.4)
    # differences 1, 0, 0, -1, 1: mean 0.2, sample variance (3 - 5 x 0.04) / 4 = 0.7
    half = 1.959964 * (0.7 / 5) ** 0.5
    assert p.interval == pytest.approx((0.2 - half, 0.2 + half), abs=1e-6)
    assert p.swapped().split == "1 to 2" and p.swapped().diff == pytest.approx(-0.2)


def test_counts_and_items_agree_and_partial_credit_is_not_right() -> None:
    """A published split gives the same difference and interval as the items it summarises."""
    items = [(1.0, 0.0)] * 11 + [(0.0, 1.0)] * 20 + [(1.0, 1.0)] * 281 + [(0.0, 0.0)] * 91
    assert Paired.of_scores(items).interval == pytest.approx(Paired.of_counts(403, 11, 20).interval)
    partial = Paired.of_scores([(0.5, 0.0), (1.0, 0.5)])
    assert (partial.a_only, partial.b_only, partial.diff) == (1, 0, 0.5)
    with pytest.raises(ValueError, match="cannot come from"):
        Paired.of_counts(10, 8, 5)


def test_the_seed_floor_and_its_verdicts() -> None:
    """The write-up's four repeats give the 0.022 floor; its readings follow from it."""
    floor = noise_floor(
        [
            Paired.of_counts(403, 11, 20),
            Paired.of_counts(380, 6, 9),
            Paired.of_counts(373, 13, 9),
            Paired.of_counts(396, 28, 21),
        ]
    )
    assert floor == pytest.approx(9 / 403) and f"{floor:.3f}" == "0.022"
    assert decide(Paired.of_counts(403, 16, 15), floor) == TIE  # GLM DP4 + EP against TP4: identical
    assert decide(Paired.of_counts(403, 17, 11), floor) == TIE  # native FP8 against NVFP4: inside the floor
    assert decide(Paired.of_counts(388, 29, 14), floor) == A_AHEAD  # FP8 against PTQ: outside it
    assert decide(Paired.of_counts(403, 6, 30), floor) == B_AHEAD
    assert decide(Paired.of_counts(403, 16, 15), None) == UNKNOWN and noise_floor([]) is None


# -- the harness files ---------------------------------------------------------------------------------


def test_lm_eval_output_is_read_per_item(tmp_path: Path) -> None:
    results = write_lm_eval(
        tmp_path / "out",
        gsm8k=[1, 0, 1, 1],
        arc_easy=[1, 0],
        gen_kwargs="temperature=0,enable_thinking=False",
    )
    for given in (tmp_path / "out", results, next(results.parent.glob("samples_gsm8k_*.jsonl"))):
        run = read_harness_file(given)
        assert (run.harness, run.harness_version, run.model) == ("lm-eval", "0.4.12", "tiny")
        assert run.tasks == ("arc_easy", "gsm8k") and run.t_ms == 1788658020500
        assert (
            run.metric == "arc_easy: acc,none; gsm8k: exact_match,strict-match"
        )  # the first metric in results
        scores = {(i.task, i.item_id): i.score for i in run.items}
        assert scores == {
            ("arc_easy", "0"): 1,
            ("arc_easy", "1"): 0,
            ("gsm8k", "0"): 1,
            ("gsm8k", "1"): 0,
            ("gsm8k", "2"): 1,
            ("gsm8k", "3"): 1,
        }
        assert {(i.truncated, i.output_tokens) for i in run.items} == {(None, None)}  # lm-eval logs neither
        assert run.thinking == "enable_thinking=False"
        assert run.sampling["generation_kwargs"]["gsm8k"]["max_gen_toks"] == 256
        assert "base_url" not in json.dumps(run.sampling)  # model_args are not kept
    samples_only = read_harness_file(next(results.parent.glob("samples_gsm8k_*.jsonl")))
    assert samples_only.digest == read_harness_file(results).digest  # the same files, found from either end
    flexible = read_harness_file(results, "exact_match,flexible-extract")
    assert {i.score for i in flexible.items if i.task == "gsm8k"} == {1.0}


def test_lm_eval_files_that_cannot_be_read_say_so(tmp_path: Path) -> None:
    results = write_lm_eval(tmp_path / "one", gsm8k=[1, 0])
    with pytest.raises(HarnessFileError, match="under filters flexible-extract, strict-match"):
        read_harness_file(results, "exact_match")
    with pytest.raises(HarnessFileError, match="no task logs a metric 'bleu'; they log exact_match"):
        read_harness_file(results, "bleu")
    write_lm_eval(tmp_path / "one", gsm8k=[1], date_id="2026-09-06T00-00-00.000001")
    with pytest.raises(HarnessFileError, match="holds 2 lm-eval runs"):
        read_harness_file(tmp_path / "one")
    lonely = tmp_path / "lonely" / "results_2026-09-05T01-27-00.123456.json"
    lonely.parent.mkdir()
    lonely.write_text(results.read_text())
    with pytest.raises(HarnessFileError, match="--log_samples"):
        read_harness_file(lonely)
    samples = next(results.parent.glob("samples_gsm8k_2026-09-05*.jsonl"))
    samples.write_text(samples.read_text() + "{not json\n")
    with pytest.raises(HarnessFileError, match=rf"{samples.name}:5: not JSON"):
        read_harness_file(results)
    samples.write_text(json.dumps({"doc_id": 0, "filter": "none", "metrics": ["bleu"], "bleu": 23.4}) + "\n")
    with pytest.raises(HarnessFileError, match="score 23.4 is not a number from 0 to 1"):
        read_harness_file(samples)


def _inspect_samples() -> list[dict[str, object]]:
    return [
        inspect_sample(1, "C", output_tokens=120),
        inspect_sample(2, "I", output_tokens=512, stop_reason="max_tokens"),  # cut at the cap
        inspect_sample(3, "P", output_tokens=200, grader_tokens=900),  # a grader's tokens are not the model's
        inspect_sample(4, "C", output_tokens=90, limit={"type": "token", "limit": 4096}),
        inspect_sample(5, None),  # errored: listed, not scored
    ]


def test_inspect_logs_json_and_eval(tmp_path: Path) -> None:
    log = inspect_log(
        _inspect_samples(),
        generate={
            "max_tokens": 512,
            "temperature": 0.6,
            "reasoning_effort": "high",
            "extra_headers": {"Authorization": "Bearer sk-secret"},
        },
    )
    for path in (
        write_inspect_json(tmp_path / "gsm8k.json", log),
        write_inspect_eval(tmp_path / "gsm8k.eval", log),
    ):
        run = read_harness_file(path)
        assert (run.harness, run.harness_version, run.model, run.tasks, run.metric) == (
            "inspect",
            "0.3.260",
            "vllm/tiny",
            ("gsm8k",),
            "match",
        )
        assert run.t_ms == 1788571620000 and run.unscored == 1  # 2026-09-05T01:27:00Z
        assert [(i.item_id, i.score, i.truncated, i.output_tokens) for i in run.items] == [
            ("1", 1.0, False, 120),
            ("2", 0.0, True, 512),
            ("3", 0.5, False, 200),
            ("4", 1.0, True, 90),
        ]
        assert run.thinking == "reasoning_effort=high" and "extra_headers" not in run.sampling
        assert "sk-secret" not in json.dumps(run.sampling)
    with pytest.raises(HarnessFileError, match="no scorer 'f1'; it has match"):
        read_harness_file(tmp_path / "gsm8k.json", "f1")
    bad = inspect_log([inspect_sample(1, {"accuracy": 1, "f1": 0.5})])
    with pytest.raises(HarnessFileError, match="sample 1 \\(match\\): score"):
        read_harness_file(write_inspect_json(tmp_path / "dict.json", bad))
    naive = inspect_log(_inspect_samples())
    naive["eval"]["created"] = "2026-09-05T01:27:00"
    with pytest.raises(HarnessFileError, match="is not an instant with a UTC offset"):
        read_harness_file(write_inspect_json(tmp_path / "naive.json", naive))
    (tmp_path / "other.json").write_text(json.dumps({"hello": "world"}))
    with pytest.raises(HarnessFileError, match="neither an Inspect eval log"):
        read_harness_file(tmp_path / "other.json")


@pytest.mark.skipif(hasattr(zipfile, "ZIP_ZSTANDARD"), reason="this Python reads Zstandard zips")
def test_a_zstandard_eval_log_is_refused_with_the_way_round(tmp_path: Path) -> None:
    """Inspect 0.3.206 and later write Zstandard entries (zip method 93), which Python reads from 3.14."""
    path = write_inspect_eval(tmp_path / "new.eval", inspect_log(_inspect_samples()))
    data = bytearray(path.read_bytes())
    for signature, offset in ((b"PK\x03\x04", 8), (b"PK\x01\x02", 10)):  # local and central headers
        at = data.find(signature)
        while at != -1:
            struct.pack_into("<H", data, at + offset, 93)
            at = data.find(signature, at + 4)
    path.write_bytes(bytes(data))
    with pytest.raises(HarnessFileError, match=r"inspect log convert FILE --to json") as caught:
        read_harness_file(path)
    assert f"Python {sys.version_info.major}.{sys.version_info.minor}" in str(caught.value)


# -- bound to a launch -----------------------------------------------------------------------------------


def _ev(seq: int, kind: str, **fields: object) -> dict[str, Any]:
    return {"v": 1, "seq": seq, "t_ms": T0 + seq, "kind": kind, **fields}


@pytest.fixture
def campaign(tmp_path: Path) -> Path:
    """Two arms on one box: a DP2 + EP arm launched twice (repeats of one configuration), and a TP2 arm."""
    db = tmp_path / "state.db"
    with Store(db, clock=lambda: T0) as store:
        store.boxes.add(Box(name="pro-a", ssh_user="root", host="127.0.0.1", port=22))
        serve = ["vllm", "serve", "/models/tiny", "--served-model-name", "tiny"]
        dp = store.launches.add_arm(
            "tiny-dp2-ep",
            "tiny",
            "pro-a",
            "hash-dp2",
            [*serve, "--data-parallel-size", "2", "--enable-expert-parallel", "--reasoning-parser", "qwen3"],
            {},
            [[0, 1]],
            1,
            [],
        )
        tp = store.launches.add_arm(
            "tiny-tp2",
            "tiny",
            "pro-a",
            "hash-tp2",
            [*serve, "--tensor-parallel-size", "2"],
            {},
            [[0, 1]],
            2,
            [],
        )
        for launch_id, arm, arm_id in (
            ("L1", "tiny-dp2-ep", dp),
            ("L2", "tiny-dp2-ep", dp),
            ("L3", "tiny-tp2", tp),
        ):
            store.launches.add(
                launch_id, "pro-a", arm, arm_id=arm_id, replica=0, gpus=[0, 1], port=8100, forced=False
            )
        store.ingest.batch(
            "pro-a",
            [
                _ev(1, "kernel_line", launch_id="L1", category="moe", line="Using MarlinMoE"),
                _ev(2, "kernel_line", launch_id="L1", category="config", line="max_num_seqs=256"),
                _ev(
                    3,
                    "kernel_line",
                    launch_id="L1",
                    category="linear",
                    line="Using CutlassFP8ScaledMMLinearKernel",
                ),
            ],
        )
    return db


def _import(
    db: Path, path: Path, launch: str, capsys: pytest.CaptureFixture[str], *extra: str
) -> dict[str, Any]:
    assert main(["--db", str(db), "quality", "import", str(path), "--launch", launch, "--json", *extra]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def test_import_binds_the_run_to_the_exact_launch(
    campaign: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = write_lm_eval(tmp_path / "r1", gsm8k=BASE)
    done = _import(campaign, results, "L1", capsys)
    assert done["state"] == "imported" and isinstance(done["run_id"], int)
    with Store(campaign, read_only=True) as store:
        run = quality_run(store, done["run_id"])
        assert (run.launch_id, run.arm, run.box, run.layout, run.reasoning_parser) == (
            "L1",
            "tiny-dp2-ep",
            "pro-a",
            "TP1 x DP2 + EP",
            "qwen3",
        )
        assert (
            run.kernel_line == "Using MarlinMoE | Using CutlassFP8ScaledMMLinearKernel"
        )  # config lines left out
        assert (run.items, run.accuracy, run.truncation_rate, run.suite) == (40, 0.5, None, "lm-eval: gsm8k")
        assert run.t_ms == 1788658020500 and run.source == "measured"
        aggregate = next(e for e in eval_runs(store) if e.id == run.eval_run_id)
        assert (aggregate.box, aggregate.arm, aggregate.model, aggregate.items, aggregate.overall) == (
            "pro-a",
            "tiny-dp2-ep",
            "tiny",
            40,
            0.5,
        )
        assert dict(aggregate.families) == {"gsm8k": 0.5}
        assert any((e.box, e.arm) == ("pro-a", "tiny-dp2-ep") for e in economics_inputs(store).evals)
        assert store.results.has_measured_data()
    assert _import(campaign, results.parent, "L1", capsys)["state"] == "unchanged"  # same files, same launch
    assert main(["--db", str(campaign), "quality", "import", str(results), "--launch", "L1"]) == 0
    printed = capsys.readouterr()
    assert f"quality run {done['run_id']}" in printed.out and "already imported" in printed.err
    assert _import(campaign, results, "L2", capsys)["state"] == "imported"  # another launch: another run
    flexible = _import(campaign, results, "L1", capsys, "--metric", "exact_match,flexible-extract")
    assert (
        flexible["state"] == "imported" and flexible["run"]["accuracy"] == 1.0
    )  # another score: another run


def test_import_refusals_are_one_line(
    campaign: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other_model = write_lm_eval(tmp_path / "other", model="Qwen/Qwen3-8B", gsm8k=[1, 0])
    assert main(["--db", str(campaign), "quality", "import", str(other_model), "--launch", "L1"]) == 2
    err = capsys.readouterr().err
    assert (
        "produced against model 'Qwen/Qwen3-8B', but launch L1 serves 'tiny'" in err and err.count("\n") == 1
    )
    assert _import(campaign, other_model, "L1", capsys, "--force")["state"] == "imported"
    assert main(["--db", str(campaign), "quality", "import", str(other_model), "--launch", "nope"]) == 2
    assert "no launch 'nope'" in capsys.readouterr().err
    assert (
        main(["--db", str(campaign), "quality", "import", str(tmp_path / "missing.json"), "--launch", "L1"])
        == 2
    )
    assert "no such file" in capsys.readouterr().err
    with Store(campaign, read_only=True) as store, pytest.raises(InputError, match="no quality run 99"):
        quality_run(store, 99)


# -- files the operator names ---------------------------------------------------------------------------------


def _refused_in_one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("campaign: ") and "Traceback" not in err, err
    return err


@pytest.mark.timeout(
    60
)  # a FIFO opened for reading waits for a writer, /dev/zero never ends: a hang fails here
def test_import_reads_only_regular_files_within_the_bound(
    campaign: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Whatever names it (the argument, or a folder holding it), a harness file is a regular file of at most
    MAX_FILE_BYTES, or it is refused in one line before a byte is read (console/files.py)."""
    pipes = tmp_path / "pipes"
    pipes.mkdir()
    for name in ("results.json", "log.eval", "samples_gsm8k_2026-09-05T01-27-00.123456.jsonl"):
        os.mkfifo(pipes / name)
    huge = tmp_path / "huge.json"
    with huge.open("wb") as f:
        f.truncate(MAX_FILE_BYTES + 1)  # sparse: over the bound without filling the disk
    results = write_lm_eval(tmp_path / "run", gsm8k=[1, 0])
    swapped = next(results.parent.glob("samples_gsm8k_*.jsonl"))
    swapped.unlink()
    os.mkfifo(swapped)  # a folder import finds a FIFO among the samples files
    for path, says in (
        *((p, "is a FIFO (named pipe), not a regular file") for p in sorted(pipes.iterdir())),
        (Path("/dev/zero"), "is a character device, not a regular file"),
        (huge, f"is {MAX_FILE_BYTES + 1:,} bytes, over the 1,024 MiB this reads"),
        (results.parent, "is a FIFO (named pipe), not a regular file"),
    ):
        err = _refused_in_one_line(
            ["--db", str(campaign), "quality", "import", str(path), "--launch", "L1"], capsys
        )
        named = swapped if path == results.parent else path
        assert f"harness file {named} {says}" in err, err
    with Store(campaign, read_only=True) as store:
        assert store.scalar("SELECT count(*) FROM quality_runs") == 0  # nothing was imported


@pytest.mark.timeout(60)
def test_a_kldiff_contexts_file_is_read_the_same_way(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """kldiff --contexts is the other file the operator names: the same reader, the same one-line refusals."""
    fifo = tmp_path / "contexts.json"
    os.mkfifo(fifo)
    db = str(tmp_path / "s.db")
    for path, says in (
        (fifo, "is a FIFO (named pipe)"),
        (Path("/dev/zero"), "is a character device"),
        (tmp_path, "is a directory"),
    ):
        err = _refused_in_one_line(["--db", db, "kldiff", "L1", "L2", "--contexts", str(path)], capsys)
        assert f"--contexts {path} {says}, not a regular file" in err, err


def test_inspect_log_import_keeps_truncation_and_tokens(
    campaign: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_inspect_eval(tmp_path / "gsm8k.eval", inspect_log(_inspect_samples()))
    done = _import(campaign, path, "L3", capsys)
    run = done["run"]
    assert isinstance(run, dict)
    assert (
        run["items"],
        run["unscored"],
        run["accuracy"],
        run["truncation_rate"],
        run["mean_output_tokens"],
    ) == (4, 1, 0.625, 0.5, 230.5)
    assert (run["layout"], run["harness"], run["suite"]) == ("TP2", "inspect", "inspect: gsm8k")


def test_compare_pairs_items_against_the_measured_floor(
    campaign: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two launches of one arm are repeats: their gap is the floor the third arm is read against."""
    r1 = _import(campaign, write_lm_eval(tmp_path / "r1", gsm8k=BASE), "L1", capsys)["run_id"]
    r2 = _import(campaign, write_lm_eval(tmp_path / "r2", gsm8k=_flip(BASE, 0, 1, 2)), "L2", capsys)["run_id"]
    r3 = _import(campaign, write_lm_eval(tmp_path / "r3", gsm8k=_flip(BASE, 0, 1, 2, 4, 6, 8)), "L3", capsys)[
        "run_id"
    ]
    assert main(["--db", str(campaign), "quality", "compare", str(r1), str(r3), "--json"]) == 0
    c = json.loads(capsys.readouterr().out)
    assert (c["items"], c["split"], c["a_only"], c["b_only"], c["basis"]) == (40, "5 to 1", 5, 1, "items")
    assert c["difference"] == pytest.approx(0.1) and c["floor"] == pytest.approx(
        0.025
    )  # r1 against r2: 2 to 1
    assert c["p_value"] == pytest.approx(mcnemar_exact(5, 1))
    assert c["verdict"] == "A ahead by 0.100, outside the 0.025 floor, but its 95% interval includes 0"
    assert c["a"]["layout"] == "TP1 x DP2 + EP" and c["b"]["layout"] == "TP2"
    assert main(["--db", str(campaign), "quality", "compare", str(r3), str(r2)]) == 0
    text = capsys.readouterr().out
    assert "  split           0 to 3" in text
    assert "verdict: B ahead by 0.075, outside the 0.025 floor, but its 95% interval includes 0" in text
    assert "paired on the 40 items both scored (the stored items)" in text
    assert main(["--db", str(campaign), "quality", "compare", str(r1), str(r2)]) == 0
    assert "verdict: tie: inside the 0.025 floor" in capsys.readouterr().out
    # Another suite has no repeats yet: its floor is unknown, and says so.
    a = _import(campaign, write_lm_eval(tmp_path / "a1", arc_easy=[1, 1, 0, 0]), "L1", capsys)["run_id"]
    b = _import(campaign, write_lm_eval(tmp_path / "a3", arc_easy=[1, 0, 1, 0]), "L3", capsys)["run_id"]
    with Store(campaign, read_only=True) as store:
        unknown = compare_runs(store, a, b)
        assert unknown.decision == UNKNOWN and unknown.verdict.startswith("floor unknown")
        with pytest.raises(InputError, match="share no scored item"):
            compare_runs(store, r1, a)
    assert main(["--db", str(campaign), "quality", "compare", str(r1), str(r1)]) == 2
    assert main(["--db", str(campaign), "quality", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["floors"] == {"lm-eval: arc_easy": None, "lm-eval: gsm8k": pytest.approx(0.025)}


def test_run_refuses_without_the_harness(
    campaign: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing named lm_eval here
    assert main(["--db", str(campaign), "quality", "run", "L1", "--tasks", "gsm8k"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("campaign: lm-evaluation-harness is not installed here (no lm_eval on PATH)")
    argv = lm_eval_argv("/usr/bin/lm_eval", "tiny", 41234, ["gsm8k", "ifeval"], tmp_path, 50, 8)
    assert argv[:3] == ["/usr/bin/lm_eval", "--model", "local-chat-completions"]
    assert "model=tiny,base_url=http://127.0.0.1:41234/v1/chat/completions,num_concurrent=8" in argv[4]
    assert (
        argv[argv.index("--tasks") + 1] == "gsm8k,ifeval"
        and "--log_samples" in argv
        and argv[-2:] == ["--limit", "50"]
    )


def test_service_import_without_the_cli(campaign: Path, tmp_path: Path) -> None:
    with Store(campaign) as store:
        service = Service(store)
        done = service.import_quality(
            write_inspect_json(tmp_path / "log.json", inspect_log(_inspect_samples())), "L1"
        )
        assert done.state == "imported" and done.run.model == "vllm/tiny"
        assert (
            done.run.thinking == "model default: not stated"
        )  # the log sent no switch; no profile states it


def test_a_quality_row_says_whether_thinking_was_on(campaign: Path, tmp_path: Path) -> None:
    """The harness's switch when it sent one, else the server's template default, else the model's default as
    the arm's profile states it (Qwen: on): the write-up's house-default table compared modes unawares."""
    log = write_inspect_json(tmp_path / "log.json", inspect_log(_inspect_samples()))
    serve = ["vllm", "serve", "/models/tiny", "--served-model-name", "tiny", "--reasoning-parser", "qwen3"]
    with Store(campaign) as store:
        for launch_id, extra in (
            ("Q1", []),
            ("Q2", ["--default-chat-template-kwargs", '{"enable_thinking":false}']),
        ):
            arm_id = store.launches.add_arm(
                "qwen3.8-27b-nvfp4-b12x",
                "tiny",
                "pro-a",
                f"h-{launch_id}",
                [*serve, *extra],
                {},
                [[0]],
                1,
                [],
            )
            store.launches.add(
                launch_id,
                "pro-a",
                "qwen3.8-27b-nvfp4-b12x",
                arm_id=arm_id,
                replica=0,
                gpus=[0],
                port=8100,
                forced=False,
            )
        service = Service(store)
        on = service.import_quality(log, "Q1").run
        off = service.import_quality(log, "Q2").run
    assert (on.reasoning_parser, on.thinking) == ("qwen3", "model default: on")
    assert off.thinking == "enable_thinking=False (server default)"


# -- the write-up's published comparisons -----------------------------------------------------------------------


def test_the_demo_browses_the_seed_floor_and_pairs(demo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with Store(demo, read_only=True) as store:
        pairs = published_comparisons(store)
        assert sum(c.kind == "repeat" for c in pairs) == 4 and len(pairs) == 26
        assert {c.floor.text for c in pairs if c.floor} == {
            "0.022 from 4 repeat pairs (widest 11 to 20 on 403 items)"
        }
        by_split = {(c.a.label, c.b.label): c for c in pairs}
        dp4 = by_split[("GLM-5.3-Flash NVFP4 TP4", "GLM-5.3-Flash NVFP4 TP1 x DP4 + EP")]
        assert (dp4.paired.split, dp4.verdict) == ("16 to 15", "tie: inside the 0.022 floor")
        ptq = by_split[
            (
                "Qwen3.8-27B FP8 official, 600 W box, paired set",
                "Qwen3.8-27B NVFP4 community PTQ, 600 W box, paired set",
            )
        ]
        assert ptq.verdict == "A ahead by 0.039, outside the 0.022 floor" and ptq.a_truncation == 0.059
        a, b = dp4.a.id, dp4.b.id
    assert main(["--db", str(demo), "quality", "compare", str(b), str(a), "--json"]) == 0
    flipped = json.loads(capsys.readouterr().out)
    assert (flipped["split"], flipped["basis"], flipped["verdict"]) == (
        "15 to 16",
        "published",
        "tie: inside the 0.022 floor",
    )
    assert flipped["a_truncation"] is None and flipped["b_truncation"] == 0.079
    assert main(["--db", str(demo), "quality", "pairs"]) == 0
    table = capsys.readouterr().out
    assert "23 to 20" in table and "13 to 10" in table and "11 to 20" in table
    assert main(["--db", str(demo), "quality", "list"]) == 0
    assert "noise floor of seed 403-item suite: 0.022" in capsys.readouterr().out
    assert main(["--db", str(demo), "quality", "compare", "1", "9"]) == 0  # side by side, no verdict
    assert "no paired verdict" in capsys.readouterr().out
