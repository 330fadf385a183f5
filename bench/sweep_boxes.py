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

Where the time goes: every run is timed phase by phase, per arm (``Timed`` wraps the service intents the
walk calls, and the store gives the box's own instants of each server's start and ready). The summary
block prints each phase's median over the arms and repeats, queue against one at a time, so the part of
the queue's wall-clock that is not the eight loads side by side is named (start-up, probes, settle).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agents.protocol import ProbeReport  # noqa: E402
from console.readmodel import bench_run, tripwire_run  # noqa: E402
from console.recipes import load_catalog  # noqa: E402
from console.service import Service  # noqa: E402
from console.service.launches import LaunchOutcome, LaunchPlan  # noqa: E402
from console.service.runs import BenchNode  # noqa: E402
from console.service.sweep import SweepOptions  # noqa: E402
from console.store import Box, Store  # noqa: E402
from console.store.launches import Launch  # noqa: E402
from console.store.sweeps import SweepArm, SweepRow  # noqa: E402
from testbed import box_python  # noqa: E402
from testbed.fake_engine import install, write_model  # noqa: E402
from testbed.fake_nvidia_smi import variant  # noqa: E402
from testbed.ports import free_ports  # noqa: E402
from testbed.sshd import SshBox, SshdFarm  # noqa: E402
from testbed.sweep_recipes import RECIPES  # noqa: E402

ARMS = 8
PHASES = (
    ("start-up", "sweep started -> its first arm claimed (link, settle, the queue's probe of each box)"),
    ("claim", "arm claimed -> its launch sent (settle, lint, plan, the GPU reading before)"),
    ("deliver", "launch sent -> the agent started the server"),
    ("load", "server started -> the agent saw it ready (the fake engine's --load-s, then the agent's tick)"),
    (
        "tripwire",
        "ready, or the tripwire sent if later -> its client's first chat (sent with the launch, the client "
        "started and imported openai during the load, then saw the server serve: its poll, the preflight)",
    ),
    (
        "tripwire seen",
        "its first chat -> the console saw the job end (20 chats, agent tick, journal pull, poll)",
    ),
    ("bench", "bench sent -> the load generator's end on the box"),
    ("bench seen", "the load generator's end -> the console saw the job end"),
    ("kill", "kill sent -> the server gone and its GPU confirmed free, as the console saw it"),
    ("between", "what is left of the arm's walk: tripwire's end -> bench, bench's end -> kill"),
)
PHASE_NAMES = [name for name, _ in PHASES]


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


def now_ms() -> float:
    return time.time() * 1000.0


class Timed(Service):
    """The service, with the instants each intent the sweep's walk calls began and returned, per arm: the
    measurement of where a sweep's time goes. Nothing is changed: each method calls the service's own."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.marks: dict[str, dict[str, float]] = {}
        """Arm -> mark -> epoch ms (fractional: the console's clock, comparable with the box's t_ms here)."""
        self.probes: list[tuple[str, float, float]] = []
        self._jobs: dict[str, tuple[str, str]] = {}
        """Command id -> (arm, job: tripwire or bench)."""
        self._first_launch: dict[str, str] = {}
        """Arm -> its first replica's launch id."""

    def mark(self, arm: str, what: str, at: float | None = None) -> None:
        self.marks.setdefault(arm, {}).setdefault(what, now_ms() if at is None else at)

    def progress(self, sweep: SweepRow, arms: list[SweepArm], what: str) -> None:
        claimed = re.search(r"(card-\d+): lint$", what)
        if claimed:
            self.mark(claimed[1], "claimed")

    async def probe(self, box: str, serving_python: str | None = None) -> ProbeReport:
        began = now_ms()
        try:
            return await super().probe(box, serving_python)
        finally:
            self.probes.append((box, began, now_ms()))

    async def launch(self, plan: LaunchPlan, **kwargs: Any) -> LaunchOutcome:
        self.mark(plan.resolved.arm, "launch")
        self._first_launch.setdefault(plan.resolved.arm, plan.launch_ids[0])
        return await super().launch(plan, **kwargs)

    async def tripwire(
        self, launch_id: str, max_tokens: int | None = None, *, ready_within_s: float | None = None
    ) -> str:
        arm = self._arm(launch_id)
        self.mark(arm, "tripwire")
        job = await super().tripwire(launch_id, max_tokens, ready_within_s=ready_within_s)
        self._jobs[job] = (arm, "tripwire")
        return job

    async def start_bench(self, node: BenchNode, shape: str, concurrency: int, *args: Any, **kw: Any) -> str:
        self.mark(node.arm, "bench")
        job = await super().start_bench(node, shape, concurrency, *args, **kw)
        self._jobs[job] = (node.arm, "bench")
        return job

    async def until_job_ends(
        self, box: str, command_id: str, timeout_s: float, tick: Callable[[float], None] | None = None
    ) -> str | None:
        error = await super().until_job_ends(box, command_id, timeout_s, tick)
        if command_id in self._jobs:
            arm, job = self._jobs[command_id]
            self.mark(arm, f"{job} seen")
            if job == "tripwire" and (verdict := tripwire_run(self.store, command_id)) is not None:
                self.mark(arm, "tripwire chats", verdict.t_ms)  # the client's start of its chats
            elif job == "bench" and (row := bench_run(self.store, command_id)) and row.ended_ms is not None:
                self.mark(arm, "bench done", row.ended_ms)
        return error

    async def stop_launches(
        self, box: str, launch_ids: list[str], grace_s: float, *, wait: bool = True
    ) -> list[Launch]:
        arm = self._arm(launch_ids[0])
        self.mark(arm, "kill")
        stopped = await super().stop_launches(box, launch_ids, grace_s, wait=wait)
        self.mark(arm, "freed")
        return stopped

    def _arm(self, launch_id: str) -> str:
        launch = self.store.launches.get(launch_id)
        return launch.arm if launch is not None else launch_id

    def phases(self, started_ms: float) -> dict[str, dict[str, float]]:
        """Each arm's phases in seconds (PHASES), from the marks and the box's instants of its server."""
        out: dict[str, dict[str, float]] = {}
        first_claim = min(m["claimed"] for m in self.marks.values() if "claimed" in m)
        for arm, m in sorted(self.marks.items()):
            launch = self.store.launches.get(self._first_launch.get(arm, ""))
            if launch is None or launch.start_ms is None or launch.ready_ms is None:
                continue
            steps = {
                "claim": m["launch"] - m["claimed"],
                "deliver": launch.start_ms - m["launch"],
                "load": launch.ready_ms - launch.start_ms,
                "tripwire": m["tripwire chats"] - max(launch.ready_ms, m["tripwire"]),
                "tripwire seen": m["tripwire seen"] - m["tripwire chats"],
                "bench": m["bench done"] - m["bench"],
                "bench seen": m["bench seen"] - m["bench done"],
                "kill": m["freed"] - m["kill"],
                "between": (m["bench"] - m["tripwire seen"]) + (m["kill"] - m["bench seen"]),
            }
            out[arm] = {k: round(v / 1000.0, 3) for k, v in steps.items()}
        out["(sweep)"] = {"start-up": round((first_claim - started_ms) / 1000.0, 3)}
        return out


async def sweep(db: Path, boxes: list[SshBox], catalog: Path) -> dict[str, Any]:
    """One sweep of the list over ``boxes`` in a fresh state.db; its wall-clock, every arm's outcome and
    phases, and the probes the sweep asked for."""
    python = str(box_python.ensure())
    with Store(db) as store:
        for box in boxes:
            register(store, box, python)
        service = Timed(store, catalog=load_catalog([catalog]))
        try:
            for box in boxes:  # the agent runs and the GPUs are known before the clock starts
                await service.connect(box.name)
                await service.probe(box.name)
            service.probes.clear()
            opened, _ = service.open_sweep("cards", [b.name for b in boxes], ["short"], [1])
            started_ms = now_ms()
            started = time.monotonic()
            cpu = time.process_time()
            done = await service.run_sweep(
                opened.id,
                SweepOptions(kill_grace_s=2, prompts=4, base_port=free_ports(ARMS)),
                service.progress,
            )
            wall = time.monotonic() - started
            cpu = time.process_time() - cpu
            states = [
                a.state if a.state == "served" else f"{a.state}: {a.reason}"
                for a in store.sweeps.arms(done.id)
            ]
            phases = service.phases(started_ms)
            probes = [
                (b, round((t0 - started_ms) / 1000, 2), round((t1 - t0) / 1000, 2))
                for b, t0, t1 in service.probes
            ]
        finally:
            await service.close()
    return {
        "wall_s": wall,
        "console_cpu_s": cpu,
        "load_average": os.getloadavg()[0],
        "layout": opened.layout,
        "states": states,
        "phases": phases,
        "probes": probes,
    }


def medians(runs: list[dict[str, Any]]) -> dict[str, float]:
    """Each phase's median over every arm of every run (start-up: over the runs)."""
    values: dict[str, list[float]] = {name: [] for name in PHASE_NAMES}
    for run in runs:
        for arm in run["phases"].values():
            for name, seconds in arm.items():
                values[name].append(seconds)
    return {name: statistics.median(v) for name, v in values.items() if v}


def summary(report: dict[str, Any]) -> str:
    """The block the README quotes: the ratio, then each phase's median seconds, queue and one at a time."""
    queue, serial = medians(report["runs"]["queue"]), medians(report["runs"]["one_at_a_time"])
    lines = [
        f"{report['arms']} one-GPU arms, each loading {report['load_s']:g} s: one at a time "
        f"{report['one_at_a_time_wall_s']:.1f} s, queue over two 4-GPU boxes {report['queue_wall_s']:.1f} s: "
        f"{report['ratio']:.2f}x (median of {report['repeats']}; load average {report['load_average']})",
        f"{'phase (median s an arm)':<26}{'queue':>8}{'one at a time':>15}",
    ]
    for name, _ in PHASES:
        lines.append(
            f"{name:<26}{queue.get(name, float('nan')):>8.2f}{serial.get(name, float('nan')):>15.2f}"
        )
    walk = {k: sum(v for n, v in m.items() if n != "start-up") for k, m in (("q", queue), ("s", serial))}
    lines.append(f"{'sum, claimed to freed':<26}{walk['q']:>8.2f}{walk['s']:>15.2f}")
    for run in report["runs"]["queue"]:  # a queue's wall is its start-up and its slowest arm
        arms = [sum(p.values()) for a, p in run["phases"].items() if a != "(sweep)"]
        lines.append(
            f"queue run: {run['wall_s']:.1f} s = start-up {run['phases']['(sweep)']['start-up']:.2f} s + "
            f"slowest arm {max(arms):.2f} s (median arm {statistics.median(arms):.2f} s), "
            f"load average {run['load_average']:.1f}"
        )
    probes = [len(r["probes"]) for r in report["runs"]["queue"]]
    cpu = {k: statistics.median(r["console_cpu_s"] for r in v) for k, v in report["runs"].items()}
    lines.append(
        f"queue probes a run: {statistics.median(probes):g} (one at a time: none); console CPU a run: "
        f"queue {cpu['queue']:.1f} s, one at a time {cpu['one_at_a_time']:.1f} s"
    )
    return "\n".join(lines)


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
                log(
                    f"run {rep + 1}/{args.repeats} {name}: {result['wall_s']:.1f} s (console CPU "
                    f"{result['console_cpu_s']:.1f} s, load average {result['load_average']:.1f}), arms "
                    f"{result['states']}"
                )
                runs[name].append(result)
    finally:
        farm.stop()
    queue = statistics.median(r["wall_s"] for r in runs["queue"])
    serial = statistics.median(r["wall_s"] for r in runs["one_at_a_time"])
    report = {
        "arms": ARMS,
        "gpus": 8,
        "load_s": args.load_s,
        "repeats": args.repeats,
        "load_average": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "queue_wall_s": queue,
        "one_at_a_time_wall_s": serial,
        "ratio": serial / queue,
        "runs": runs,
    }
    print(summary(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
