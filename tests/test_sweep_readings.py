"""Where the sweep queue reads a GPU's memory (console/service/sweep/gpumem.py), on a real sshd box.

The box's fake nvidia-smi shows four RTX PRO 6000 cards, GPU 3 held by a foreign process (18437 MiB,
tests/fixtures/gpus/pcie-4gpu.json). Its agent samples every GPU each second and the supervised link brings
the ticks in, as in a sweep. Each reading must come from the box: the opening probe for the first arms,
a fresh probe once anything changed, and the first sampler tick after the arm served, with a probe when
no tick comes.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from console.service import Service
from console.service.sweep import gpumem
from console.service.sweep.gpumem import GpuHeld, MemoryGuard
from console.service.sweep.ride import LinkWatch
from console.store import Store
from testbed.fleet_fixtures import FAST, box_started, farm, register
from testbed.sshd import SshdUnavailable

pytestmark = pytest.mark.timeout(120)


def _probes(store: Store) -> int:
    """Probes asked of the box: each is a command stored before it is sent."""
    return int(store.scalar("SELECT count(*) FROM commands WHERE op = 'probe'"))


@pytest.mark.sshd
def test_each_reading_comes_from_the_box_with_no_probe_more_than_it_needs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    try:
        farm()
    except SshdUnavailable as exc:
        pytest.skip(str(exc))
    box = box_started("qr", "pcie-4gpu")

    async def go() -> None:
        with Store(tmp_path / "state.db") as store:
            register(store, box)
            service = Service(store, settings=FAST)
            watch = LinkWatch(service, box.name, 30.0, lambda _: None)
            try:
                await watch.start()  # supervised, as the queue's links are: samples land in the background
                guard = MemoryGuard(service)
                guard.opened(box.name, await service.probe(box.name))
                opening = _probes(store)

                # The first arms read the opening probe: GPU 0 free, GPU 3 held by the foreign process.
                assert await guard.before(box.name, [0]) == {0: 0.0}
                with pytest.raises(GpuHeld, match=r"GPU 3 of box qr held 18437 MiB .* pid 48213"):
                    await guard.before(box.name, [3])
                assert _probes(store) == opening
                # A GPU given once is read afresh the next time it is given, and so is every GPU once
                # something changed on the boxes (an arm ended, a server was stopped).
                assert await guard.before(box.name, [0]) == {0: 0.0}
                assert _probes(store) == opening + 1
                guard.changed()
                assert await guard.before(box.name, [1]) == {1: 0.0}
                assert _probes(store) == opening + 2

                # Once an arm served: the sampler's first tick after it, no probe. GPU 3 shows the
                # foreign process's memory, GPU 0 nothing, so an arm given GPUs 0 and 3 is not on GPU 0.
                served_ms = store.clock()
                after, problem = await guard.after(box.name, {0: 0.0, 3: 0.0}, served_ms)
                assert after == {0: 0.0, 3: 18437.0}
                assert problem == (
                    "GPU 0 of box qr shows no memory of it (0 MiB used before the launch, 0 MiB once it "
                    "served): its server is not on the GPU it was given"
                )
                assert _probes(store) == opening + 2
                # No tick after the instant (a sampler paused on a full disk): a probe reads it instead.
                monkeypatch.setattr(gpumem, "SAMPLE_WAIT_S", 0.5)
                after, problem = await guard.after(box.name, {3: 0.0}, served_ms + 3_600_000)
                assert (after, problem) == ({3: 18437.0}, None)
                assert _probes(store) == opening + 3
            finally:
                watch.stop()
                await service.close()

    try:
        asyncio.run(go())
    finally:
        box.kill_agent()
