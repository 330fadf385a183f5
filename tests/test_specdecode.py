"""Speculative decoding per bench row: vLLM's spec-decode counters read off a real /metrics page, stored with
the row (V17), the acceptance figures derived as vLLM defines them, and `campaign compare` refusing a drafter
arm against anything but its baseline at the same shape.

The fixtures are one CPU vLLM 0.32 server of the tiny model (ngram, 3 draft tokens, prompt lookup 2-4)
captured with ``curl /metrics`` right after start-up (``vllm_metrics_ngram_before.txt``) and after four greedy
64-token completions of a repetitive prompt (``..._after.txt``); tests/fixtures/README-vllm_metrics_ngram.md
has the commands.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents.loadgen.specdecode import SpecCounts, over_run, parse
from console.cli.bench import show
from console.readmodel.results import bench_rows
from console.service import Service
from console.store import Store
from console.tui.views.results import detail_line
from testbed.agent_box import stop_agent
from testbed.fleet_fixtures import FAST
from testbed.ports import free_ports
from testbed.vllm_env import VllmEnv
from tests.support.cli import run_cli
from tests.support.local_box import add_vllm_box

FIXTURES = Path(__file__).parent / "fixtures"
BEFORE = (FIXTURES / "vllm_metrics_ngram_before.txt").read_text()
AFTER = (FIXTURES / "vllm_metrics_ngram_after.txt").read_text()


def test_counters_read_off_a_real_ngram_page() -> None:
    assert parse(BEFORE) == SpecCounts(0, 0, 0, (0, 0, 0))
    after = parse(AFTER)
    assert after == SpecCounts(72, 176, 76, (44, 28, 4))
    assert over_run([parse(BEFORE)], [after]) == after
    # the per-position counts add up to the accepted tokens, as vLLM counts them
    assert after is not None and sum(after.accepted_per_pos) == after.accepted


def test_a_server_without_speculation_has_no_block_never_zeros() -> None:
    plain = "\n".join(line for line in AFTER.splitlines() if "spec_decode" not in line)
    assert "vllm:generation_tokens_total" in plain
    assert parse(plain) is None
    assert over_run([parse(BEFORE), None], [parse(AFTER), parse(AFTER)]) is None


def test_a_restart_between_the_reads_gives_no_counts() -> None:
    assert over_run([parse(AFTER)], [parse(BEFORE)]) is None


def test_several_servers_and_engines_add_up() -> None:
    two_engines = AFTER + AFTER.replace('engine="0"', 'engine="1"')
    assert parse(two_engines) == SpecCounts(144, 352, 152, (88, 56, 8))
    total = over_run([parse(BEFORE), parse(BEFORE)], [parse(AFTER), parse(two_engines)])
    assert total == SpecCounts(216, 528, 228, (132, 84, 12))


@given(
    st.lists(
        st.tuples(st.integers(0, 10**9), st.integers(0, 10**9), st.integers(0, 10**9), st.integers(0, 3)),
        min_size=1,
        max_size=4,
    )
)
def test_parse_sums_every_engine(engines: list[tuple[int, int, int, int]]) -> None:
    lines = []
    for i, (drafts, tokens, accepted, pos) in enumerate(engines):
        lines += [
            f'vllm:spec_decode_num_drafts_total{{engine="{i}",model_name="m"}} {drafts}.0',
            f'vllm:spec_decode_num_draft_tokens_total{{engine="{i}",model_name="m"}} {tokens}.0',
            f'vllm:spec_decode_num_accepted_tokens_total{{engine="{i}",model_name="m"}} {accepted}',
            f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="{i}",position="{pos}"}} {accepted}',
            f'vllm:spec_decode_num_drafts_created{{engine="{i}"}} 1.7e+09',
        ]
    got = parse("# HELP x\n" + "\n".join(lines) + "\n")
    assert got is not None
    assert got.drafts == sum(e[0] for e in engines)
    assert got.draft_tokens == sum(e[1] for e in engines)
    assert got.accepted == sum(e[2] for e in engines)
    assert sum(got.accepted_per_pos) == got.accepted
    assert len(got.accepted_per_pos) == max(e[3] for e in engines) + 1


def _bench(store: Store, arm: str, k: int, spec: SpecCounts | None, shape: str = "router") -> int:
    start = 1_790_000_000_000 + k * 60_000
    result: dict[str, Any] = {
        "requests": 64,
        "failed": 0,
        "out_tok_per_s": 1000.0 + 10 * k,
        "duration_s": 30.0,
        "started_ms": start,
        "ended_ms": start + 30_000,
        **(spec.as_row() if spec is not None else {}),
    }
    return store.results.add_bench_run(
        {
            **result,
            "arm": arm,
            "shape": shape,
            "concurrency": 16,
            "box": "b1",
            "run_id": f"{arm}-{shape}-{k}",
            "t_ms": start + 30_000,
            "raw": result,
        }
    )


def test_a_drafter_row_stores_its_counters_and_shows_acceptance(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "state.db"
    counts = over_run([parse(BEFORE)], [parse(AFTER)])
    with Store(db) as store:
        spec_id = _bench(store, "tiny-cpu-ngram", 1, counts)
        plain_id = _bench(store, "tiny-cpu", 2, None)
        rows = {r.id: r for r in bench_rows(store)}
    spec, plain = rows[spec_id], rows[plain_id]
    assert (spec.spec_drafts, spec.spec_draft_tokens, spec.spec_accepted) == (72, 176, 76)
    assert spec.spec_accepted_per_pos == (44, 28, 4)
    assert spec.acceptance == pytest.approx(76 / 176)
    assert spec.mean_accepted_length == pytest.approx(1 + 76 / 72)  # vLLM's: the bonus token counted
    assert spec.acceptance_per_position == pytest.approx((44 / 72, 28 / 72, 4 / 72))  # vLLM's: per draft
    assert spec.speculation == "accepted 43% of 176 drafted, mean length 2.06, per position 61% 39% 6%"
    assert plain.spec_drafts is None and plain.acceptance is None and plain.speculation == ""
    show(spec, [])
    assert (
        "  speculation: accepted 43% of 176 drafted, mean length 2.06, per position 61% 39% 6%\n"
        in capsys.readouterr().out
    )
    show(plain, [])
    assert "speculation" not in capsys.readouterr().out
    assert "accepted 43% of 176 drafted, mean length 2.06, per position 61% 39% 6%" in detail_line(spec)


def test_compare_refuses_a_drafter_against_anything_but_its_baseline(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    counts = over_run([parse(BEFORE)], [parse(AFTER)])
    with Store(db) as store:
        for k in range(2):
            _bench(store, "tiny-cpu-ngram", k, counts)
            _bench(store, "tiny-cpu", 10 + k, None)
            _bench(store, "gpt-oss-20b", 20 + k, None)
            _bench(store, "tiny-cpu", 30 + k, None, shape="judge")
    code, _, err = run_cli(db, "compare", "tiny-cpu-ngram", "gpt-oss-20b")
    assert code == 2
    assert err == (
        "campaign: tiny-cpu-ngram is a drafter arm: it compares only with its baseline tiny-cpu, not "
        "gpt-oss-20b; bench the baseline alike (`campaign bench tiny-cpu --box BOX --shape router -c 16`) "
        "and compare `tiny-cpu-ngram tiny-cpu`\n"
    )
    code, _, err = run_cli(db, "compare", "gpt-oss-20b", "tiny-cpu-ngram")
    assert code == 2 and "its baseline tiny-cpu, not gpt-oss-20b" in err
    code, out, err = run_cli(db, "compare", "tiny-cpu-ngram", "tiny-cpu", "--shape", "router", "--json")
    assert code in (0, 1), err
    assert json.loads(out)["a"] and json.loads(out)["b"]
    code, out, err = run_cli(db, "compare", "tiny-cpu-ngram", "tiny-cpu", "--shape", "router")
    assert code in (0, 1), err  # each drafter run's acceptance, per position too, beside the throughput
    assert out.count("speculation: accepted 43% of 176 drafted") == 1, out  # A's newest run; B has none
    assert "per position 61% 39% 6%" in out


def test_compare_refuses_a_drafter_whose_baseline_has_no_row_at_its_shape(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    counts = over_run([parse(BEFORE)], [parse(AFTER)])
    with Store(db) as store:
        _bench(store, "tiny-cpu-ngram", 0, counts)
        _bench(store, "tiny-cpu", 1, None, shape="judge")
    code, out, err = run_cli(db, "compare", "tiny-cpu-ngram", "tiny-cpu")
    assert code == 2 and out == ""
    assert "its baseline tiny-cpu; it has no rows at router C16" in err


@pytest.mark.vllm
@pytest.mark.timeout(900)
async def test_a_bench_of_the_ngram_arm_on_cpu_vllm_stores_its_counters(
    vllm_env: VllmEnv, tmp_path: Path
) -> None:
    """The shipped tiny-cpu-ngram arm launched through the agent and benched: the row carries the drafts and
    accepted tokens of its own requests (the tiny model repeats itself over 128 tokens: ngram lookup hits)."""
    home = tmp_path / "agent-home"
    store = Store(tmp_path / "state.db")
    add_vllm_box(store, vllm_env, home)
    service = Service(store, settings=FAST)
    try:
        service.fleet.start("local")
        launched = await service.launch(
            service.plan_launch("tiny-cpu-ngram", "local", base_port=free_ports(1)), ready_timeout_s=600
        )
        assert launched.serving, launched.replicas
        # One seed, so the same prompts each run: drafts are looked up in the prompt, and a random seed's
        # prompts can leave every draft of the random-weight model rejected (3,709 drafted, 0 accepted once).
        await service.bench("tiny-cpu-ngram", "local", "router", 4, prompts=8, timeout_s=300, seed=7)
        (row,) = bench_rows(store)
        assert row.spec_drafts and row.spec_draft_tokens and row.spec_accepted, row
        assert row.spec_draft_tokens <= 3 * row.spec_drafts  # 3 draft tokens at most per draft
        assert len(row.spec_accepted_per_pos) == 3 and sum(row.spec_accepted_per_pos) == row.spec_accepted
        assert row.acceptance is not None and 0 < row.acceptance <= 1
        print(f"tiny-cpu-ngram router C4: {row.spec_accepted} accepted, {row.speculation}")
    finally:
        live = [launch.id for launch in store.launches.live("local")]
        if live:  # never leave a vLLM behind a failed test
            await service.stop_launches("local", live, grace_s=5)
        await service.close()
        stop_agent(home)
        store.close()
