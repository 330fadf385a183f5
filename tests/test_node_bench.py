"""The node bench through the real agent on the ``local`` box, against the fake engine where the behaviour
is a GPU engine's: four replicas of one arm, an engine that used another linear kernel than the arm asked
for (a fallback a CPU vLLM cannot show), prefix caching turned off by the arm. The same on a real CPU vLLM
(two replicas) is in tests/test_fleet_e2e.py."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from console.errors import InputError
from console.readmodel import bench_rows, compare, control_pairs, repeat_groups, replica_results
from console.recipes import load_catalog
from console.service import BenchOutcome, Service
from console.store import Store
from testbed.fleet_fixtures import FAST
from testbed.ports import free_ports
from tests.support.fake_recipes import FAKE_NVFP4_PROFILE

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.timeout(300)

RECIPES = (
    FAKE_NVFP4_PROFILE
    + """
[arms."fake-b12x"]  # asks b12x; the engine says it used Marlin (FAKE_ENGINE_LINEAR_KERNEL)
profile = "fake-nvfp4"
device = "cpu"  # the fake engine on the local box, which has no GPU
linear_backend = "b12x"
replicas = 4
max_model_len = 2048
max_num_seqs = 2
env = { FAKE_ENGINE_LINEAR_KERNEL = "MarlinNvFp4LinearKernel" }

[arms."fake-b12x".flags]
"--no-enable-prefix-caching" = true

[shapes.short]
input_len = 16
output_len = 4
"""
)


@pytest.fixture
def box(local_db: Path, tmp_path: Path) -> tuple[Path, Path]:
    """(state.db, recipes): the ``local`` box serving the fake engine (tests/conftest.py), these arms."""
    recipes = tmp_path / "node-recipes"
    recipes.mkdir()
    (recipes / "fake.toml").write_text(RECIPES)
    return local_db, recipes


def _campaign(db: Path, recipes: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CAMPAIGN_RECIPES": str(recipes), "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "console", "--db", str(db), *argv],
        env=env,
        text=True,
        capture_output=True,
        timeout=200,
    )


async def refuses_oversize_concurrency(service: Service, store: Store) -> None:
    """A -c the box's load generator could not hold is refused before a command row is stored or anything
    sent: first by the fallback ceiling (no probe of the box yet), then by the box's own MemAvailable once
    `campaign check` stored its probe. Each refusal names the budget, the bytes per in-flight request and
    the largest -c that fits, and that -c is accepted by the same check."""
    commands = store.scalar("SELECT COUNT(*) FROM commands")
    # The check alone first: a console without it must fail here, not send a run of 10^9 streams to this machine.
    with pytest.raises(InputError, match="per in-flight request"):
        service.check_bench_size("local", "short", 10**9)
    with pytest.raises(InputError) as refused:
        await service.bench("fake-b12x", "local", "short", 10**9)
    text = str(refused.value)
    assert (
        f"memory budget of 4 GiB ({4 << 30} bytes: no probe of box local with memory figures, so the "
        "fallback ceiling; `campaign check local` sizes it by the box's memory)" in text
    )
    assert re.search(r"at ~[\d.]+ \w+ \(\d+ bytes\) per in-flight request", text), text
    await service.check("local")
    with pytest.raises(InputError) as refused:
        await service.bench("fake-b12x", "local", "short", 10**12)
    text = str(refused.value)
    assert "-c 1000000000000 with 8000000000000 prompts needs" in text and "\n" not in text
    assert re.search(r"memory budget of [\d.]+ \w+ \(\d+ bytes: 25% of box local's MemAvailable", text), text
    found = re.search(r"at most -c (\d+) fits", text)
    assert found, text
    most = int(found[1])
    service.check_bench_size("local", "short", most)  # the largest that fits passes the same check
    with pytest.raises(InputError, match="per in-flight request"):
        service.check_bench_size("local", "short", most + 1)
    for c, prompts, why in (
        (0, None, "-c 0: a bench needs at least 1 stream"),
        (8, 0, "--prompts 0: must be 1 or more"),
    ):
        with pytest.raises(InputError, match=why):
            await service.bench("fake-b12x", "local", "short", c, prompts)
    assert store.scalar("SELECT COUNT(*) FROM commands") == commands  # nothing stored, nothing sent


@dataclass
class Measured:
    launch_ids: list[str]
    grouped: BenchOutcome
    seeded: BenchOutcome
    cli: subprocess.CompletedProcess[str]
    again: list[BenchOutcome]


def test_four_replicas_are_one_node_row_each_run_its_own_seed_and_the_fallback_marked(
    box: tuple[Path, Path],
) -> None:
    db, recipes = box

    async def go() -> Measured:
        with Store(db) as store:
            service = Service(store, catalog=load_catalog([recipes]), settings=FAST)
            try:
                plan = service.plan_launch("fake-b12x", "local", base_port=free_ports(4))
                assert not plan.blocking, plan.blocking
                first = await service.launch(plan, ready_timeout_s=60)
                assert first.serving and len(first.launch_ids) == 4
                grouped = await service.bench("fake-b12x", "local", "short", 8, repeat=2)
                # A launch id stands for every replica its launch started; --seed replays one seed.
                seeded = await service.bench(first.launch_ids[2], None, "short", 12, seed=5, repeat=2)
                for bad, why in (
                    (service.bench("fake-b12x", "local", "short", 2), "below the 4 replicas"),
                    (service.bench("fake-b12x", None, "short", 8), "name its box: --box NAME"),
                    (
                        service.bench("fake-b12x", "local", "short", 8, repeat=2, wait=False),
                        "--no-wait starts one run",
                    ),
                ):
                    with pytest.raises(InputError, match=why):
                        await bad
                await refuses_oversize_concurrency(service, store)
                cli = _campaign(
                    db,
                    recipes,
                    "bench",
                    "fake-b12x",
                    "--box",
                    "local",
                    "--shape",
                    "short",
                    "-c",
                    "8",
                    "--json",
                )
                # The control pair: the same arm launched again, benched alike (twice).
                await service.kill(service.plan_kill("fake-b12x", "local"), grace_s=2)
                second = await service.launch(
                    service.plan_launch("fake-b12x", "local", base_port=free_ports(4)), ready_timeout_s=60
                )
                assert second.serving
                again = [await service.bench("fake-b12x", "local", "short", 8, repeat=2) for _ in range(2)]
                await service.kill(service.plan_kill("fake-b12x", "local"), grace_s=2)
                return Measured(first.launch_ids, grouped, seeded, cli, again)
            finally:
                await service.close()

    m = asyncio.run(go())
    rows, group = m.grouped.rows, m.grouped.group
    assert len(rows) == 2 and group is not None and group.n == 2 and group.id
    for row in rows:
        assert (row.replicas, row.concurrency, row.prompts, row.failed) == (4, 8, 64, 0)  # 8 x C by default
        assert row.kernel_fallback and "KERNEL-FALLBACK" in row.marks
        assert [f.text for f in row.fallbacks] == ["linear: asked b12x, used MarlinNvFp4LinearKernel"]
        assert row.prefix_caching is False and not row.queueing and row.admitted == 2  # 2 streams per replica
    assert rows[0].seed != rows[1].seed  # every run its own seed unless asked
    assert [r.seed for r in m.seeded.rows] == [5, 5]
    assert all(
        r.queueing and "QUEUEING" in r.marks for r in m.seeded.rows
    )  # 3 streams per replica, 2 admitted
    assert m.cli.returncode == 0, m.cli.stderr
    out = json.loads(m.cli.stdout)
    assert out["replicas"] == 4 and len(out["per_replica"]) == 4 and out["kernel_fallback"] is True
    assert out["seed"] not in (rows[0].seed, rows[1].seed)
    with Store(db, read_only=True) as store:
        detail = replica_results(store, rows[0].id)
        assert [d.launch_id for d in detail] == m.launch_ids  # every replica, in port order
        assert [d.streams for d in detail] == [2, 2, 2, 2] and all(d.requests for d in detail)
        assert sum(d.requests or 0 for d in detail) == rows[0].requests
        assert [d.streams for d in replica_results(store, m.seeded.rows[0].id)] == [3, 3, 3, 3]
        # The same arm launched twice and benched alike is a control pair; compare reads its noise floor.
        g2, g3 = (x.group for x in m.again)
        assert g2 is not None and g3 is not None
        pairs = control_pairs(repeat_groups(bench_rows(store)))
        assert {(p.a.id, p.b.id) for p in pairs} == {(group.id, g2.id), (group.id, g3.id)}
        result = compare(
            store, g2.id or "", g3.id or ""
        )  # one launch, no pair: the first launch's pairs give it
        assert result.verdict in ("faster", "tie") and result.floor is not None
