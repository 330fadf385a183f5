"""One sweep fed to two 4-GPU boxes as one queue, against the same sweep walked one arm at a time.

Eight one-GPU arms (the fake engine, testbed/fake_engine.py, which holds ``--load-s`` seconds
before it listens, standing for loading weights, and then holds 20000 MiB on its card) are swept twice
over real sshd test boxes on this machine:

- queue: ``sweep run LIST --box A --box B``, two boxes whose fake nvidia-smi shows four idle RTX PRO 6000
  cards each (tests/fixtures/gpus/pcie-4gpu.json without its foreign process): eight GPUs, one arm each;
- one at a time: ``sweep run LIST --box C``, today's walk, on a box of one such card, so every arm does the
  same work as in the queue (one replica, its tripwire, its benches, its kill and GPU release).

Each arm is linted, claimed, launched, tripwired, benched (``--shapes short --concurrency 1``), killed and
its GPU confirmed free; the queue also reads each arm's GPU memory on its box before and after. Reported:
the wall-clock of each sweep (agents already running, so neither pays for pushing them) and one at a
time over the queue, the ratio the target compares with the eight GPUs. Runs alternate, medians reported.

    sudo python bench/sweep_boxes.py --load-s 20 --repeats 3     # root: test boxes are unix users

Ratios, never absolute claims: the console's own per-arm work (lint, probes, polling the journal) is
serial CPU on this machine, shared with eight servers, two agents and their samplers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from console.recipes import load_catalog  # noqa: E402
from console.service import Service  # noqa: E402
from console.service.sweep import SweepOptions  # noqa: E402
from console.store import Box, Store  # noqa: E402
from testbed import box_python  # noqa: E402
from testbed.fake_engine import install, write_model  # noqa: E402
from testbed.fake_nvidia_smi import variant  # noqa: E402
from testbed.ports import free_ports  # noqa: E402
from testbed.sshd import SshBox, SshdFarm  # noqa: E402
from testbed.sweep_recipes import RECIPES  # noqa: E402

ARMS = 8


def log(message: str) -> None:
    print(f"[sweep_boxes {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def recipes(folder: Path, load_s: float) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    names = [f"card-{i}" for i in range(1, ARMS + 1)]
    arms = "".join(
        f'[arms."{n}"]\nprofile = "fake-moe"\nmax_model_len = 2048\nmax_num_seqs = 2\n'
        f'env = {{ FAKE_ENGINE_GPU_MIB = "20000", FAKE_ENGINE_STARTUP_S = "{load_s}" }}\n'
        for n in names
    )
    (folder / "fake.toml").write_text(RECIPES + arms + f'[sweeps."cards"]\narms = {json.dumps(names)}\n')
    return folder


def register(store: Store, box: SshBox, python: str) -> None:
    store.boxes.add(
        Box(
            name=box.name,
            ssh_user=box.user,
            host="127.0.0.1",
            port=box.port,
            key_path=str(box.client_key),
            host_key=box.host_key_line,
            host_key_source="tofu",
        )
    )
    env = install(box.root / "fake-env", python)
    write_model(box.root / "models" / "fake-moe")
    store.boxes.update(box.name, serving_env=str(env), model_root=str(box.root / "models"))


async def sweep(db: Path, boxes: list[SshBox], catalog: Path) -> dict[str, Any]:
    """One sweep of the list over ``boxes`` in a fresh state.db; its wall-clock and every arm's outcome."""
    python = str(box_python.ensure())
    with Store(db) as store:
        for box in boxes:
            register(store, box, python)
        service = Service(store, catalog=load_catalog([catalog]))
        try:
            for box in boxes:  # the agent runs and the GPUs are known before the clock starts
                await service.connect(box.name)
                await service.probe(box.name)
            opened, _ = service.open_sweep("cards", [b.name for b in boxes], ["short"], [1])
            started = time.monotonic()
            done = await service.run_sweep(
                opened.id, SweepOptions(kill_grace_s=2, prompts=4, base_port=free_ports(ARMS))
            )
            wall = time.monotonic() - started
            states = [
                a.state if a.state == "served" else f"{a.state}: {a.reason}"
                for a in store.sweeps.arms(done.id)
            ]
        finally:
            await service.close()
    return {"wall_s": wall, "layout": opened.layout, "states": states}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--load-s", type=float, default=20.0, help="seconds each server takes to load before it serves"
    )
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--json", type=Path, help="also write the figures here")
    args = p.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="sweep-boxes-"))
    farm = SshdFarm(root)
    try:
        four = variant("pcie-4gpu", root / "four.json")
        one = variant("pcie-4gpu", root / "one.json", gpus=1)
        queue_boxes = [farm.start("sba", str(four)), farm.start("sbb", str(four))]
        single = [farm.start("sbc", str(one))]
        runs: dict[str, list[dict[str, Any]]] = {"queue": [], "one_at_a_time": []}
        for rep in range(args.repeats):  # alternating, so drift on a shared machine hits both alike
            for name, boxes in (("queue", queue_boxes), ("one_at_a_time", single)):
                catalog = recipes(root / f"recipes-{rep}-{name}", args.load_s)
                result = asyncio.run(sweep(root / f"{name}-{rep}.db", boxes, catalog))
                log(f"run {rep + 1}/{args.repeats} {name}: {result['wall_s']:.1f} s, arms {result['states']}")
                runs[name].append(result)
    finally:
        farm.stop()
    queue = statistics.median(r["wall_s"] for r in runs["queue"])
    serial = statistics.median(r["wall_s"] for r in runs["one_at_a_time"])
    report = {
        "arms": ARMS,
        "gpus": 8,
        "load_s": args.load_s,
        "queue_wall_s": queue,
        "one_at_a_time_wall_s": serial,
        "ratio": serial / queue,
        "runs": runs,
    }
    print(
        f"{ARMS} one-GPU arms, each loading {args.load_s:g} s: one at a time {serial:.1f} s, queue over two 4-GPU "
        f"boxes {queue:.1f} s: {serial / queue:.2f}x (median of {args.repeats})"
    )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
