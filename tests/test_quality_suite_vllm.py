"""Acceptance on the tiny CPU vLLM (seed-gaps F8, H11): two ``quality run --suite seed6`` runs of the tiny-cpu arm
pair on identical item ids and report per-family Wilson intervals; a sweep with ``--mode both`` of that arm and
of the tiny model trained on the tripwire's questions (testbed/tiny_model.py) evals only the trained one, whose
tripwire passes: one quality run bound to the sweep's launch. The random-weight model fails its tripwire and
gets none (not re-running a finished eval on resume is tests/test_sweep_eval.py, on the fake engine). The tiny
models score about 0: the pairing and the storage are what is tested."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.quality.suites import house
from console.quality.suites.runner import Caps
from console.readmodel.quality import compare_runs, quality_run
from testbed.ports import free_ports
from testbed.vllm_env import TRAINED_NAME, VllmEnv, ensure_trained
from tests.support.cli import run_campaign
from tests.support.local_box import served_model_recipe, serving_tiny_cpu

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(1500)]


async def test_two_runs_pair_item_by_item_and_a_sweep_evals_only_the_arm_whose_tripwire_passed(
    vllm_env: VllmEnv, tmp_path: Path
) -> None:
    async with serving_tiny_cpu(vllm_env, tmp_path) as (db, store, service):
        launch = store.launches.live("local")[0]
        # One run as the operator types it (its own process), one through the service the TUI calls.
        done = run_campaign(db, "quality", "run", launch.id, "--suite", "seed6", "--cap", "16", "--json")
        assert done.returncode == 0, done.stderr
        a = json.loads(done.stdout)["run"]["id"]
        b = (await service.run_suite(launch.id, "seed6", caps=Caps(16))).run.id
        ra, rb = quality_run(store, a), quality_run(store, b)
        assert ra.suite == rb.suite == "seed6 v3" and ra.launch_id == rb.launch_id == launch.id
        assert ra.caps == {"*": 16} and ra.request_timeout_s == 3600.0
        assert ra.sampling["max_model_len"] == 2048  # the window vLLM's /tokenize reported
        ids = [
            {
                (r["task"], r["item_id"])
                for r in store.rows("SELECT task, item_id FROM quality_items WHERE run_id = ?", [x])
            }
            for x in (a, b)
        ]
        assert ids[0] == ids[1] and len(ids[0]) == ra.items == rb.items
        assert ra.unscored == 0 and {f for f, _ in ids[0]} == set(house.FAMILIES)
        pair = compare_runs(store, a, b)
        assert pair.paired.n == ra.items and pair.policy_warnings == ()
        assert {f.family for f in ra.families} == set(house.FAMILIES)
        for family in ra.families:
            assert family.text.startswith(f"{family.accuracy:.3f} [") and family.items >= 4
        answers = json.loads(Path(ra.source_file or "").read_text())
        long = [r for r in answers["items"] if r["family"] == "long-context"]
        assert len(long) == 4 and all(r["max_tokens"] <= 16 for r in answers["items"])
        listed = run_campaign(db, "quality", "list")
        assert listed.returncode == 0 and f"run {a} by family: code " in listed.stdout

        # The sweep of the same arm (it stops the server above, as one left by an earlier attempt) and the trained one.
        ensure_trained()
        recipes = tmp_path / "recipes"
        recipes.mkdir()
        trained = served_model_recipe("tiny-trained", TRAINED_NAME, "the tiny Llama trained on the tripwire")
        (recipes / "eval.toml").write_text(
            trained + '[sweeps."tiny-eval"]\narms = ["tiny-cpu", "tiny-trained"]\n'
        )
        sweep = (
            "sweep run tiny-eval --box local --mode both --cap 16 --shapes short --concurrency 1 --prompts 4"
        )
        waits = "--ready-timeout 600 --kill-grace 10 --tripwire-max-tokens 64 --json --base-port"
        swept = run_campaign(db, *sweep.split(), *waits.split(), str(free_ports(1)), recipes=recipes)
        assert swept.returncode == 0, swept.stderr
        arm = store.rows("SELECT id, state, launch_ids FROM sweep_arms WHERE arm = 'tiny-cpu'")[0]
        assert arm["state"] == "degenerate"
        sweep_launch = json.loads(arm["launch_ids"])[0]
        assert store.rows("SELECT id FROM quality_runs WHERE launch_id = ?", [sweep_launch]) == []
        served = store.rows("SELECT state, launch_ids FROM sweep_arms WHERE arm = 'tiny-trained'")[0]
        assert served["state"] == "served", swept.stderr
        served_launch = json.loads(served["launch_ids"])[0]
        evals = store.rows("SELECT id, suite FROM quality_runs WHERE launch_id = ?", [served_launch])
        assert [e["suite"] for e in evals] == ["seed6 v3"]
        assert quality_run(store, evals[0]["id"]).items == ra.items
