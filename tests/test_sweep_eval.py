"""``sweep run --mode eval|bench|both`` (seed-gaps H11) through a real agent on the local box running the fake
engine (testbed/fake_engine.py), whose chat answers pass the tripwire (the tiny random-weight vLLM fails it:
tests/test_quality_suite_vllm.py covers that arm). After a passed tripwire the house suite runs against the same
server, bound to the arm's launch, under the sweep's caps and timeout; an arm failing its tripwire gets no eval;
a resumed sweep does not run a finished eval again."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from console.errors import InputError
from console.quality.suites.runner import Caps
from console.readmodel.quality import quality_runs
from console.recipes import load_catalog
from console.service import Service
from console.service.sweep import SweepOptions
from console.store import Store
from testbed.fleet_fixtures import FAST
from testbed.ports import free_ports
from testbed.sweep_recipes import RECIPES

pytestmark = pytest.mark.timeout(300)
LIST = '\n[sweeps."fake-eval"]\narms = ["fake-serve", "fake-degenerate"]\n'


@pytest.fixture
def recipes(tmp_path: Path) -> Path:
    path = tmp_path / "recipes"
    path.mkdir()
    (path / "fake.toml").write_text(RECIPES + LIST)
    return path


def _sweep(db: Path, recipes: Path, mode: str) -> int:
    async def go() -> int:
        with Store(db) as store:
            service = Service(store, catalog=load_catalog([recipes]), settings=FAST)
            sweep, _ = service.open_sweep("fake-eval", "local", ["short"], [1])
            options = SweepOptions(
                kill_grace_s=2,
                prompts=4,
                base_port=free_ports(1),
                mode=mode,
                caps=Caps(16, {"code": 8}),
                request_timeout_s=120,
            )
            try:
                await service.run_sweep(sweep.id, options)
            finally:
                await service.close()
            return sweep.id

    return asyncio.run(go())


def test_both_evaluates_a_passed_arm_on_its_launch_and_a_resume_does_not_run_it_again(
    local_db: Path, recipes: Path
) -> None:
    sweep_id = _sweep(local_db, recipes, "both")
    with Store(local_db) as store:
        arms = {a.arm: a for a in store.sweeps.arms(sweep_id)}
        served, degenerate = arms["fake-serve"], arms["fake-degenerate"]
        assert (served.state, degenerate.state) == ("served", "degenerate")
        runs = [r for r in quality_runs(store) if r.per_item]
        assert len(runs) == 1  # the degenerate arm got no eval
        run = runs[0]
        assert run.launch_id == served.launch_ids[0] and run.arm == "fake-serve"
        assert run.suite == "seed6 v3" and run.caps == {"*": 16, "code": 8} and run.request_timeout_s == 120
        assert run.items > 40 and run.unscored == 0
        assert store.sweeps.benches(served.id) and not store.sweeps.benches(degenerate.id)
        # Interrupted after its eval and benches: the resumed sweep launches the arm again, and neither the eval
        # nor the benches run twice.
        store.sweeps.finish_arm(served.id, "interrupted", "killed by the test")
        store.sweeps.stop(sweep_id, "interrupted", "killed by the test")
    assert _sweep(local_db, recipes, "both") == sweep_id
    with Store(local_db) as store:
        again = store.sweeps.get_arm(served.id)
        attempts = store.sweeps.attempts_of(served.id)
        assert again.state == "served" and len(attempts) == 2
        assert attempts[1].launch_ids != attempts[0].launch_ids
        assert [r.id for r in quality_runs(store) if r.per_item] == [run.id]
        assert len(store.sweeps.benches(served.id)) == 1


def test_eval_mode_runs_no_bench_and_a_bad_mode_is_refused(local_db: Path, recipes: Path) -> None:
    sweep_id = _sweep(local_db, recipes, "eval")
    with Store(local_db) as store:
        served = next(a for a in store.sweeps.arms(sweep_id) if a.arm == "fake-serve")
        assert not store.sweeps.benches(served.id)
        assert [r.launch_id for r in quality_runs(store) if r.per_item] == [served.launch_ids[0]]
    with pytest.raises(InputError, match="--mode sometimes: not a sweep mode"):
        _sweep(local_db, recipes, "sometimes")
