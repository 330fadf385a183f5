"""Does this load generator tell the same story as `vllm bench serve` about one real server?

One real CPU vLLM (the product's ``tiny-cpu`` arm, as the tests serve it) pinned to one core, the clients
pinned to the other, the same shape for both (256 tokens in, 32 out, 48 prompts at C8 by default), run
one after the other in rounds. Each run is read from both sides:

- the client's figures (by vLLM's definitions, both clients), and its CPU over its own timed window;
- the server's: ``/metrics`` scraped before and after the run says what work the client really sent
  (requests, prompt, generation and max tokens per request as the server counted them, prompt tokens
  served from the prefix cache) and what the server itself measured (its TTFT, inter-token, prefill and
  end-to-end times); its processes' CPU time inside the client's window says how much of its core it got
  and what each generated token cost it.

That separates "the clients send different work" from "they measure the same work differently" from
"the server was slower during one of them". Printed are medians per client, the ratios of the medians
and the medians of round-by-round ratios ("paired": the two runs of a ratio were back to back, so drift
between rounds cancels), for the clients' figures and for the server's own. Two clients agree when their
paired ratios match the server's. A run in which the server had its requests but less than
``--min-server-share`` of its core (other work on the machine) is set aside, kept in the JSON, and run again.

The clients:

- ``ours``: ``python -m agents.loadgen`` with ``--warmup 0``, so the server sees exactly the same number
  of requests from each client (`vllm bench serve` sends no warm-up by default); a new seed each run.
- ``ours-again``: the same, run again right after ``ours``: ours/ours-again is what two runs of one client
  differ by on this machine, the floor below which a ratio between two clients says nothing.
- ``vllm``: `vllm bench serve` (random dataset, ``--ignore-eos``) with a new ``--seed`` each run.
- ``vllm-seed0``: the same command without ``--seed``, as it is usually typed: its default seed 0 sends
  the same prompts every run, so from its second run on the server takes 60% of their tokens from its
  prefix cache. Kept to show what that does to the figures; ``--clients ours,ours-again,vllm`` leaves it out.
- ``baseline`` (only with ``--baseline DIR``): the load generator of another checkout of this repository,
  run exactly as ``ours``, to measure a change to it alternately with the current one.

    python bench/agreement.py                              # server on CPU 0, clients on CPU 1, 5 rounds
    python bench/agreement.py --rounds 12 --json out.json
    python bench/agreement.py --no-prefix-caching --clients ours,ours-again,vllm --rounds 10   # the same work
    python bench/agreement.py --base-url http://127.0.0.1:8000 --model tiny-llama   # a running server
    python bench/agreement.py --curve 1,2,4,8 --repeat 3 --json curve.json       # a whole curve

Curve mode (``--curve``) compares the console's curve points instead of one load-generator run: the
tiny-cpu arm is launched through the console (a fresh state.db in a temporary directory, this machine
registered as box ``local``) and warmed up with one bench; then ``campaign curve tiny-cpu --box local
--shape SHAPE --concurrency LIST --repeat N --prompts-per-slot K --json`` runs as its own process (the real
CLI), and afterwards, at each C, `vllm bench serve --max-concurrency C --request-rate inf` N times against
the same server with the same shape and K x C prompts, a fresh ``--seed`` each run. Per C: both sides'
output tok/s, TTFT p50 and TPOT p50 (medians of the N runs), ours over vllm's, and pass/fail against
``--bound-tok-s`` (25 %) and ``--bound-latency`` (40 %); whether TPOT p50 rises with C on each side; and
``campaign pareto --shape SHAPE``. The CPUs are split as in the rounds: the agent daemon starts on
``--server-cpus``, so the server it launches runs there, and is then moved (every thread) to ``--client-cpus``,
so the load generators it spawns for the curve run there, as does `vllm bench serve`. Unpinned, the 2-core
machine's engine, API server and client share both cores; the API server then misses its turn for whole
responses and vLLM merges their tokens into one chunk (``RequestOutputCollector``): TTFT becomes the whole
response and TPOT 0 for either client, at random, run by run (bench/results/curve_agreement.txt).

Needs the CPU vLLM venv and the tiny model (testbed/vllm_env.py). The first round warms the
server and is not counted.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.loadgen_ceiling import cpu_list  # noqa: E402
from testbed.agreement import (  # noqa: E402
    CLIENT_KEYS,
    SERVER_HISTOGRAMS,
    Runner,
    Shape,
    Target,
    log,
    measured,
    run_ours,
    run_reference,
)

if TYPE_CHECKING:
    from testbed.vllm_env import VllmEnv
    from testbed.vllm_server import TinyServer

CLIENTS = ("ours", "ours-again", "vllm", "vllm-seed0", "baseline")
SIDES = ("client", "server", "vs_server")
REPORT_DEFINITIONS = {
    "client": "each client's own figures over its timed run, by vLLM's definitions (both clients: full run, "
    "request sent to first / last token; the load generator's steady-state window is not compared)",
    "server": "the server's /metrics over the same run: what it was sent and its own timings (means of its "
    "histograms, from the API server's arrival), its CPU per generated token and its share of its core",
    "vs_server": "per run, the client against the server: ms it adds to TTFT and E2E means, its TPOT p50 "
    "over the server's mean inter-token latency, and the share of decode steps it read apart (a gap of at least "
    "a tenth of the server's mean inter-token latency)",
    "medians": "per client, the median of its runs",
    "ratios": "ours over the other client, of the medians (unpaired: the server's drift between runs is in them)",
    "paired_ratios": "ours over the other client round by round (back-to-back runs), then the median",
    "set_aside": "runs in which the server had its requests but lost its core to other work, each run again",
}
"""What each part of the report is, written into its JSON."""


def contended(run: dict[str, Any], concurrency: int, min_share: float) -> bool:
    """The server had its requests (at least 0.9 C in flight on average) but not its core (less than
    ``min_share`` of it): other work on the machine, not the client, set this run's pace."""
    server = run["server"]
    share, in_flight = server["cpu_share"], server["in_flight"]
    return (
        share is not None and in_flight is not None and share < min_share and in_flight >= 0.9 * concurrency
    )


def median_of(runs: Sequence[dict[str, Any]], side: str, key: str) -> float | None:
    values = [r[side][key] for r in runs if r[side][key] is not None]
    return statistics.median(values) if values else None


def summary(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Medians per client (both sides) and each client's figures over `vllm bench serve`'s."""
    medians = {
        name: {side: {k: median_of(rs, side, k) for k in rs[0][side] if k != "seed"} for side in SIDES}
        for name, rs in runs.items()
    }
    ratios: dict[str, dict[str, float | None]] = {}
    paired: dict[str, dict[str, float | None]] = {}
    for other in (n for n in runs if n != "ours"):
        if "ours" in runs:  # over baseline: the change's effect
            ours, theirs = medians["ours"]["client"], medians[other]["client"]
            ratios[f"ours/{other}"] = {
                k: a / b if (a := ours[k]) and (b := theirs[k]) else None for k in CLIENT_KEYS
            }
            # Round by round (the two ran back to back), then the median: drift between rounds cancels. The
            # server's own figures get the same treatment: the clients agree when theirs move as the server's.
            pairs = list(zip(runs["ours"], runs[other], strict=True))
            paired[f"ours/{other}"] = {
                f"{side}.{k}": statistics.median(q)
                if (q := [a[side][k] / b[side][k] for a, b in pairs if a[side][k] and b[side][k]])
                else None
                for side, keys in (
                    ("client", CLIENT_KEYS),
                    ("server", (*SERVER_HISTOGRAMS, "cpu_ms_per_token")),
                )
                for k in keys
            }
    return {"medians": medians, "ratios": ratios, "paired_ratios": paired, "definitions": REPORT_DEFINITIONS}


def fmt(value: float | None, spec: str = ".1f") -> str:
    return "-" if value is None else format(value, spec)


def table(report: dict[str, Any]) -> str:
    names = list(report["runs"])
    med, ratios = report["medians"], report["ratios"]
    paired = report["paired_ratios"]
    head = (
        f"{'client side (median)':24}"
        + "".join(f"{n:>12}" for n in names)
        + "".join(f"{r:>18}" for r in ratios)
        + "".join(f"{r + ' paired':>25}" for r in paired)
    )
    lines = [head]
    for k in CLIENT_KEYS:
        lines.append(
            f"{k:24}"
            + "".join(f"{fmt(med[n]['client'][k]):>12}" for n in names)
            + "".join(f"{fmt(ratios[r][k], '.3f'):>18}" for r in ratios)
            + "".join(f"{fmt(paired[r]['client.' + k], '.3f'):>25}" for r in paired)
        )
    lines.append(
        f"{'client cpu_share':24}"
        + "".join(f"{fmt(med[n]['client']['cpu_share'], '.1%'):>12}" for n in names)
    )
    lines.append(
        f"{'server side (median)':24}"
        + "".join(f"{n:>12}" for n in names)
        + " " * 18 * len(ratios)
        + "".join(f"{r + ' paired':>25}" for r in paired)
    )
    for k in (
        "requests",
        "prompt_tokens_per_request",
        "generation_tokens_per_request",
        "max_tokens_per_request",
        "prefix_cache_hit_share",
        *SERVER_HISTOGRAMS,
        "cpu_ms_per_token",
        "cpu_share",
        "in_flight",
    ):
        spec = ".1%" if k in ("prefix_cache_hit_share", "cpu_share") else ".2f"
        lines.append(
            f"{k:24}"
            + "".join(f"{fmt(med[n]['server'][k], spec):>12}" for n in names)
            + (
                " " * 18 * len(ratios)
                + "".join(f"{fmt(paired[r]['server.' + k], '.3f'):>25}" for r in paired)
                if "server." + k in next(iter(paired.values()), {})
                else ""
            )
        )
    lines.append(f"{'vs server (median)':24}" + "".join(f"{n:>12}" for n in names))
    for k in next(iter(med.values()))["vs_server"]:
        spec = ".3f" if k in ("tpot_p50_over_server_itl", "decode_seen_share") else ".1f"
        lines.append(f"{k:24}" + "".join(f"{fmt(med[n]['vs_server'][k], spec):>12}" for n in names))
    loads = report["load_1m"]
    lines.append(
        f"load average (1 min) at the start of each run: min {min(loads):.2f}, median "
        f"{statistics.median(loads):.2f}, max {max(loads):.2f}; runs set aside and repeated because "
        f"other work took the server's core: {len(report['set_aside'])}"
    )
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--input-len", type=int, default=256)
    p.add_argument("--output-len", type=int, default=32)
    p.add_argument("--prompts", type=int, default=48)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument(
        "--rounds", type=int, default=5, help="counted rounds, each client once per round, alternately"
    )
    p.add_argument(
        "--clients",
        default="ours,ours-again,vllm,vllm-seed0",
        help=f"which of {', '.join(CLIENTS)}, in run order",
    )
    p.add_argument("--server-cpus", default="0")
    p.add_argument("--client-cpus", default="1")
    p.add_argument(
        "--no-prefix-caching",
        action="store_true",
        help="serve without prefix caching, so that no "
        "client's prompts are answered from the cache (the work is then the same for all)",
    )
    p.add_argument("--base-url", help="a running vLLM to measure instead of starting the tiny-cpu arm")
    p.add_argument("--model", help="its served model name (with --base-url)")
    p.add_argument(
        "--server-session",
        type=int,
        help="the process session id of that server (its CPU time per token is then reported too)",
    )
    p.add_argument("--tokenizer", type=Path, help="its tokenizer directory (default: the tiny model's)")
    p.add_argument(
        "--baseline",
        type=Path,
        metavar="DIR",
        help="a checkout whose agents/loadgen runs as the client `baseline` (added to --clients after ours)",
    )
    p.add_argument(
        "--min-server-share",
        type=float,
        default=0.8,
        help="run a client again (up to --tries times) "
        "when the server, busy with its requests, got less than this share of its core meanwhile",
    )
    p.add_argument("--tries", type=int, default=3)
    p.add_argument("--json", type=Path, help="also write every run and the medians here")
    curve = p.add_argument_group("curve mode")
    curve.add_argument(
        "--curve",
        metavar="C1,C2,...",
        help="compare a console curve at these concurrencies instead of one run (see above)",
    )
    curve.add_argument("--repeat", type=int, default=3, help="runs per point, each side")
    curve.add_argument("--prompts-per-slot", type=int, default=4, help="prompts per run: this x C")
    curve.add_argument(
        "--shape", default="short", help="a shape of the recipes (default short: 256 in, 64 out)"
    )
    curve.add_argument("--bound-tok-s", type=float, default=0.25, help="agreement bound on output tok/s")
    curve.add_argument("--bound-latency", type=float, default=0.40, help="agreement bound on TTFT/TPOT p50")
    return p


def client_names(p: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    """The clients in run order: --clients, with ``baseline`` right after ``ours`` when --baseline names a
    checkout that --clients leaves out."""
    names: list[str] = args.clients.split(",")
    if args.baseline and "baseline" not in names:
        names.insert(names.index("ours") + 1 if "ours" in names else 0, "baseline")
    if "baseline" in names and not args.baseline:
        p.error("the client baseline needs --baseline DIR")
    if unknown := [n for n in names if n not in CLIENTS]:
        p.error(f"--clients: unknown {', '.join(unknown)}; choose from {', '.join(CLIENTS)}")
    return names


@dataclass(frozen=True)
class Serving:
    """The server being measured."""

    base_url: str
    model: str
    session: int | None
    """Its process session, for its CPU time (None: not measured)."""
    started: TinyServer | None
    """The tiny-cpu arm when this script started it (and stops it), None for a running one (--base-url)."""


def start_serving(
    p: argparse.ArgumentParser, args: argparse.Namespace, env: VllmEnv, server_cpus: list[int], tmp: Path
) -> Serving:
    """The running server --base-url names, or else the tiny-cpu arm started here pinned to --server-cpus
    (its own process session)."""
    from testbed import vllm_server  # the tiny-cpu arm

    if args.base_url:
        if not args.model:
            p.error("--base-url needs --model (the served model name)")
        return Serving(args.base_url.rstrip("/"), args.model, args.server_session, None)
    log(f"starting the tiny-cpu arm pinned to CPU {server_cpus}")
    extra = ("--no-enable-prefix-caching",) if args.no_prefix_caching else ()
    server = vllm_server.start(env, tmp / "vllm.log", cpus=set(server_cpus), extra_args=extra)
    return Serving(server.base_url, server.model, server.process.pid, server)


def runners(
    target: Target, shape: Shape, client_cpus: list[int], tmp: Path, baseline: Path | None
) -> dict[str, Runner]:
    """How each client runs once (``baseline`` only with a checkout to run it from)."""
    rng = random.Random()
    out: dict[str, Runner] = {
        "ours": lambda s: run_ours(target, shape, client_cpus, tmp, s),
        "ours-again": lambda s: run_ours(target, shape, client_cpus, tmp, s),
        "vllm": lambda s: run_reference(target, shape, client_cpus, tmp, rng.randrange(1, 2**31), s),
        "vllm-seed0": lambda s: run_reference(target, shape, client_cpus, tmp, None, s),
    }
    if baseline is not None:
        out["baseline"] = lambda s: run_ours(target, shape, client_cpus, tmp, s, baseline)
    return out


def measure_client(
    args: argparse.Namespace,
    serving: Serving,
    rnd: int,
    name: str,
    runner: Runner,
    set_aside: list[dict[str, Any]],
) -> dict[str, Any]:
    """One run of a client, run again (up to --tries in all, 10 s apart) while the server had its requests
    but not its core; each run so set aside goes to ``set_aside``. The last try counts whatever it got."""
    for attempt in range(1, args.tries + 1):
        log(f"round {rnd}/{args.rounds}{' (warm-up)' if rnd == 0 else ''}: {name}, try {attempt}")
        got = measured(serving.base_url, serving.session, runner)
        log(json.dumps(got))
        if attempt == args.tries or not contended(got, args.concurrency, args.min_server_share):
            break
        set_aside.append({"name": name, "round": rnd, **got})
        log(f"the server got {got['server']['cpu_share']:.0%} of its core: other work; again in 10 s")
        time.sleep(10)
    return got


def run_rounds(
    args: argparse.Namespace, serving: Serving, names: list[str], run: dict[str, Runner]
) -> tuple[dict[str, list[dict[str, Any]]], list[dict[str, Any]]]:
    """Every client once per round, in order, for a warm-up round and then --rounds counted ones: the
    counted runs per client, and the runs set aside because other work took the server's core."""
    runs: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    set_aside: list[dict[str, Any]] = []
    for rnd in range(args.rounds + 1):  # round 0 warms the server up and is not counted
        for name in names:
            got = measure_client(args, serving, rnd, name, run[name], set_aside)
            if rnd:
                runs[name].append(got)
    return runs, set_aside


CURVE_KEYS = ("out_tok_per_s", "ttft_ms_p50", "tpot_ms_p50")
"""The figures a curve point is compared on: ours (the console's stored runs) against `vllm bench serve`'s."""


def campaign(db: Path, *argv: str, timeout: float = 3600) -> subprocess.CompletedProcess[str]:
    """``campaign --db DB ARGV...`` as its own process, the operator's CLI of this checkout."""
    return subprocess.run(
        [sys.executable, "-m", "console", "--db", str(db), *argv],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def served_model(base_url: str) -> str:
    with urllib.request.urlopen(base_url + "/v1/models", timeout=30) as response:
        return str(json.load(response)["data"][0]["id"])


def pin_all_threads(pid: int, cpus: set[int]) -> None:
    """Every thread of a running process onto ``cpus`` (sched_setaffinity moves one thread; children spawned
    later inherit the spawning thread's)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        os.sched_setaffinity(int(task.name), cpus)


def within(ratio: float | None, bound: float) -> bool:
    return ratio is not None and abs(ratio - 1.0) <= bound


def rises(values: Sequence[float | None]) -> bool:
    """Each value above the one before (every one known)."""
    known = [v for v in values if v is not None]
    return len(known) == len(values) and all(b > a for a, b in itertools.pairwise(known))


async def curve_session(args: argparse.Namespace, env: VllmEnv, tmp: Path) -> dict[str, Any]:
    """Launch the tiny-cpu arm through the console, warm it, run the console's curve through its CLI, then
    `vllm bench serve` at each of its concurrencies: every figure, both sides."""
    from console.service import Service
    from console.store import Box, Store
    from testbed.agent_box import stop_agent
    from testbed.fleet_fixtures import FAST
    from testbed.ports import free_ports

    levels = [int(c) for c in args.curve.split(",")]
    db, home = tmp / "state.db", tmp / "agent-home"
    store = Store(db)
    # This machine as box ``local``, serving from the CPU vLLM environment and its models.
    store.boxes.add(
        Box(
            name="local",
            kind="local",
            agent_home=str(home),
            serving_env=str(env.prefix),
            model_root=str(env.model_root),
        )
    )
    service = Service(store, settings=FAST)
    server_cpus, client_cpus = set(cpu_list(args.server_cpus)), set(cpu_list(args.client_cpus))
    try:
        os.sched_setaffinity(0, server_cpus)  # the agent daemon, and so the server it launches, start here
        service.fleet.start("local")
        log(f"launching the tiny-cpu arm through the console, on CPU {sorted(server_cpus)}")
        launched = await service.launch(
            service.plan_launch("tiny-cpu", "local", base_port=free_ports(1)), ready_timeout_s=600
        )
        if not launched.serving:
            raise RuntimeError(f"tiny-cpu did not serve: {launched.replicas}")
        agent_pid = int((home / "agent.pid").read_text().split()[0])
        pin_all_threads(agent_pid, client_cpus)  # the load generators it spawns from now on run there
        os.sched_setaffinity(0, client_cpus)  # the curve's CLI and `vllm bench serve`
        log(f"agent {agent_pid}, its load generators and vllm bench serve on CPU {sorted(client_cpus)}")
        port = launched.replicas[0].port
        base_url = f"http://127.0.0.1:{port}"
        model = served_model(base_url)
        log(f"serving {model} at {base_url}; warming up (one bench, C8, 32 prompts)")
        await service.bench("tiny-cpu", "local", args.shape, 8, prompts=32, timeout_s=600)

        argv = (
            *f"curve tiny-cpu --box local --shape {args.shape} --concurrency {args.curve}".split(),
            *f"--repeat {args.repeat} --prompts-per-slot {args.prompts_per_slot} --json".split(),
        )
        log(f"campaign {' '.join(argv)}")
        load_before = os.getloadavg()
        done = await asyncio.to_thread(campaign, db, *argv)
        if done.returncode != 0:
            raise RuntimeError(f"campaign curve failed ({done.returncode}): {done.stderr[-3000:]}")
        body = json.loads(done.stdout)
        points = {p["concurrency"]: p for p in body["points"]}
        ours: dict[int, list[dict[str, Any]]] = {}
        for c in levels:
            ids = points[c]["bench_run_ids"]
            rows = store.rows(
                "SELECT id, concurrency, prompts, out_tok_per_s, ttft_ms_p50, tpot_ms_p50 FROM bench_runs "
                f"WHERE id IN ({','.join('?' * len(ids))}) ORDER BY id",
                ids,
            )
            ours[c] = rows
        log(f"the curve stored {sum(len(r) for r in ours.values())} runs; now vllm bench serve")

        target = Target(base_url, model, env.model_dir, env.python)
        shape_len = shape_lengths(args.shape)
        rng = random.Random()
        theirs: dict[int, list[dict[str, Any]]] = {}
        for c in levels:
            shape = Shape(shape_len[0], shape_len[1], args.prompts_per_slot * c, c)
            theirs[c] = []
            for i in range(args.repeat):
                seed = rng.randrange(1, 2**31)
                log(f"vllm bench serve C{c} run {i + 1}/{args.repeat} --seed {seed}")
                got = await asyncio.to_thread(run_reference, target, shape, [], tmp, seed)
                got.pop("decode_gaps_ms", None)
                got.pop("window", None)
                theirs[c].append(got)
        load_after = os.getloadavg()

        pareto = await asyncio.to_thread(campaign, db, "pareto", "--shape", args.shape)
        if pareto.returncode != 0 and "upgrade it once" in pareto.stderr:
            # this checkout's schema moved on while the run went (a shared work tree): upgrade, read again
            await asyncio.to_thread(campaign, db, "box", "list")
            pareto = await asyncio.to_thread(campaign, db, "pareto", "--shape", args.shape)
        pareto_json = await asyncio.to_thread(campaign, db, "pareto", "--shape", args.shape, "--json")
        return {
            "shape": args.shape,
            "input_len": shape_len[0],
            "output_len": shape_len[1],
            "prompts_per_slot": args.prompts_per_slot,
            "repeat": args.repeat,
            "concurrencies": levels,
            "base_url": base_url,
            "model": model,
            "load_before": load_before,
            "load_after": load_after,
            "curve": body,
            "curve_stderr": done.stderr,
            "ours_runs": ours,
            "vllm_runs": theirs,
            "pareto": pareto.stdout + pareto.stderr,
            "pareto_json": json.loads(pareto_json.stdout) if pareto_json.returncode == 0 else None,
        }
    finally:
        live = [row.id for row in store.launches.live("local")]
        if live:
            await service.stop_launches("local", live, grace_s=5)
        await service.close()
        store.close()
        stop_agent(home)


def shape_lengths(name: str) -> tuple[int, int]:
    """A shape's input and output lengths, from the recipes the console reads."""
    from console.recipes import load_catalog

    shape = load_catalog().shapes[name]
    return shape.input_len, shape.output_len


def curve_summary(data: dict[str, Any], bounds: dict[str, float]) -> dict[str, Any]:
    """Per C: medians of each side's runs, ours over vllm's, pass/fail; and whether TPOT p50 rises with C."""
    per_c: dict[str, Any] = {}
    for c in data["concurrencies"]:
        ours, theirs = data["ours_runs"][c], data["vllm_runs"][c]
        row: dict[str, Any] = {"prompts": data["prompts_per_slot"] * c}
        for k in CURVE_KEYS:
            a = median_known([r[k] for r in ours])
            b = median_known([r[k] for r in theirs])
            ratio = a / b if a is not None and b else None
            row[k] = {
                "ours": a,
                "vllm": b,
                "ours_runs": [r[k] for r in ours],
                "vllm_runs": [r[k] for r in theirs],
                "ratio": ratio,
                "bound": bounds[k],
                "pass": within(ratio, bounds[k]),
            }
        per_c[str(c)] = row
    levels = [str(c) for c in data["concurrencies"]]
    return {
        "points": per_c,
        "tpot_rises_ours": rises([per_c[c]["tpot_ms_p50"]["ours"] for c in levels]),
        "tpot_rises_vllm": rises([per_c[c]["tpot_ms_p50"]["vllm"] for c in levels]),
        "all_pass": all(per_c[c][k]["pass"] for c in levels for k in CURVE_KEYS),
        "every_point_stored": all(
            p["state"] == "done" and len(p["bench_run_ids"]) == data["repeat"]
            for p in data["curve"]["points"]
        ),
    }


def median_known(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def curve_table(data: dict[str, Any], summary: dict[str, Any]) -> str:
    labels = {"out_tok_per_s": "out tok/s", "ttft_ms_p50": "TTFT p50 ms", "tpot_ms_p50": "TPOT p50 ms"}
    lines = [
        f"shape {data['shape']} ({data['input_len']} in, {data['output_len']} out), "
        f"{data['prompts_per_slot']} prompts a slot, {data['repeat']} runs a point each side, medians; "
        "ours = campaign curve's stored runs, vllm = vllm bench serve --request-rate inf --max-concurrency C "
        "(fresh --seed each run)",
        f"{'C':>3} {'figure':12} {'ours':>9} {'vllm':>9} {'ours/vllm':>10} {'bound':>6}  verdict",
    ]
    for c in data["concurrencies"]:
        point = summary["points"][str(c)]
        for k in CURVE_KEYS:
            f = point[k]
            lines.append(
                f"{c:>3} {labels[k]:12} {fmt(f['ours']):>9} {fmt(f['vllm']):>9} {fmt(f['ratio'], '.3f'):>10} "
                f"{'±' + format(f['bound'], '.0%'):>6}  {'pass' if f['pass'] else 'FAIL'}"
            )
    lines.append(
        f"TPOT p50 rises with C: ours {'yes' if summary['tpot_rises_ours'] else 'no'}, "
        f"vllm {'yes' if summary['tpot_rises_vllm'] else 'no'}; every point stored with "
        f"{data['repeat']} runs: {'yes' if summary['every_point_stored'] else 'no'}; "
        f"all within bounds: {'yes' if summary['all_pass'] else 'no'}"
    )
    lb, la = data["load_before"], data["load_after"]
    lines.append(
        f"load average (1/5/15 min) before the curve {lb[0]:.2f}/{lb[1]:.2f}/{lb[2]:.2f}, "
        f"after the last vllm run {la[0]:.2f}/{la[1]:.2f}/{la[2]:.2f}; {os.cpu_count()} CPUs"
    )
    lines.append("")
    lines.append(f"$ campaign pareto --shape {data['shape']}")
    lines.append(data["pareto"].rstrip())
    return "\n".join(lines)


def run_curve_mode(args: argparse.Namespace) -> int:
    from testbed import vllm_env

    env = vllm_env.ensure()
    bounds = {
        "out_tok_per_s": args.bound_tok_s,
        "ttft_ms_p50": args.bound_latency,
        "tpot_ms_p50": args.bound_latency,
    }
    with tempfile.TemporaryDirectory() as tmpdir:
        data = asyncio.run(curve_session(args, env, Path(tmpdir)))
    summary = curve_summary(data, bounds)
    print(curve_table(data, summary))
    if args.json:
        args.json.write_text(json.dumps({**data, "summary": summary}, indent=2, default=str))
    return 0 if summary["all_pass"] else 1


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if args.curve:
        return run_curve_mode(args)
    names = client_names(p, args)
    from testbed import vllm_env, vllm_server  # the cached CPU vLLM venv and the tiny-cpu arm

    env = vllm_env.ensure()
    shape = Shape(args.input_len, args.output_len, args.prompts, args.concurrency)
    client_cpus, server_cpus = cpu_list(args.client_cpus), cpu_list(args.server_cpus)
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        serving = start_serving(p, args, env, server_cpus, tmp)
        # this process's scrapes and samples stay off the server's CPUs
        os.sched_setaffinity(0, set(client_cpus))
        target = Target(serving.base_url, serving.model, args.tokenizer or env.model_dir, env.python)
        try:
            runs, set_aside = run_rounds(
                args, serving, names, runners(target, shape, client_cpus, tmp, args.baseline)
            )
        finally:
            if serving.started is not None:
                vllm_server.stop(serving.started.process)
    report = {
        "shape": asdict(shape),
        "server_cpus": server_cpus,
        "client_cpus": client_cpus,
        "server_argv": serving.started.argv if serving.started else None,
        "base_url": serving.base_url,
        "rounds": args.rounds,
        "min_server_share": args.min_server_share,
        "set_aside": set_aside,
        "load_1m": [r["load_1m"] for rs in runs.values() for r in rs],
        "runs": runs,
        **summary(runs),
    }
    print(table(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
