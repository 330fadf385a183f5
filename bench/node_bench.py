"""A node bench against its peer: four replicas at C1024 in one load-generator run, against one at C256.

A node bench deals C streams round-robin over the ports of the node's replicas in one run of this load
generator (by default one worker process per 256 streams). Its peer is what one replica got before
node rows: the same load generator at C/4 against one server, measured in the same run. Two modes:

- ceiling: zero-cost servers (bench/zero_server.py) answer at once, so any rate is the client's own
  ceiling. The node run's ceiling over the peer's says whether one run over four replicas costs the
  client anything per stream (4.0x: nothing) and whether it is bound on one process (it would stay 1x).
- paced: each server sends one token every --itl-ms per stream, as a decoding server does (25 ms: 40
  tokens a second a stream, so a node at C1024 serves about 41,000 out tok/s, the write-up's busiest arms).
  The run must keep up without flagging itself ``client_bound``; reported is what it measured over the
  servers' ideal rate, and its busiest worker's share of a core.

    python bench/node_bench.py --client-cpus 0-3 --server-cpus 4-7       # a host with 8 cores or more
    python bench/node_bench.py --replicas 8 --concurrency 2048 --client-cpus 0-7 --server-cpus 8-15
                                        # issue 34's check: 8 replicas, 1,024 in / 128 out, 16 cores

Figures are medians of interleaved repeats, reported as ratios, never as absolute claims.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.loadgen_ceiling import cpu_list, log, run_loadgen, start_server  # noqa: E402


def servers(n: int, cpus: list[int], itl_ms: float) -> tuple[list[subprocess.Popen[str]], list[str]]:
    """``n`` single-process servers, server ``i`` pinned to ``cpus[i mod len]``: one per replica."""
    procs, urls = [], []
    for i in range(n):
        proc, url = start_server([cpus[i % len(cpus)]], 1, itl_ms)
        procs.append(proc)
        urls.append(url)
    return procs, urls


def summary(runs: list[dict[str, Any]], ideal: float | None) -> dict[str, Any]:
    tps = [r["out_tok_per_s"] for r in runs]
    requests = [[u["requests"] for u in r["per_url"]] for r in runs]
    return {
        "out_tok_per_s": statistics.median(tps),
        "runs": tps,
        "of_ideal": statistics.median(tps) / ideal if ideal else None,
        "client_bound": [r["client_bound"] for r in runs],
        "busiest_worker_util": [r["client_cpu"] for r in runs],
        "processes": runs[0]["client"]["processes"],
        "cores_used": [r["client"]["cores_used"] for r in runs],
        "failed": sum(r["failed"] for r in runs),
        "requests_per_url": requests[0],
    }


def measure(mode: str, itl_ms: float, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    client, server_cpus = cpu_list(args.client_cpus), cpu_list(args.server_cpus)
    procs, urls = servers(args.replicas, server_cpus, itl_ms)
    node_c, peer_c = args.concurrency, args.concurrency // args.replicas
    # A stream's request: its first token at once, then output_len - 1 gaps of itl_ms.
    per_stream = args.output_len / ((args.output_len - 1) * itl_ms / 1000) if itl_ms else None
    peer_runs, node_runs = [], []
    try:
        for rep in range(args.repeats):  # interleaved, so drift on a shared machine hits both alike
            log(f"{mode} run {rep + 1}/{args.repeats}: peer, 1 server at C{peer_c}")
            peer_runs.append(
                run_loadgen(urls[:1], peer_c, args.prompts_per_c * peer_c, args, client, None, tmp)
            )
            log(f"{mode} run {rep + 1}/{args.repeats}: node, {args.replicas} servers at C{node_c}")
            node_runs.append(run_loadgen(urls, node_c, args.prompts_per_c * node_c, args, client, None, tmp))
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(10)
    peer = summary(peer_runs, per_stream * peer_c if per_stream else None)
    node = summary(node_runs, per_stream * node_c if per_stream else None)
    return {
        "mode": mode,
        "itl_ms": itl_ms,
        "peer": peer,
        "node": node,
        "node_over_peer": node["out_tok_per_s"] / peer["out_tok_per_s"],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--replicas", type=int, default=4)
    p.add_argument(
        "--concurrency", type=int, default=1024, help="the node's streams (the peer gets C / replicas)"
    )
    p.add_argument("--input-len", type=int, default=1024, help="prompt tokens a request (issue 34's row)")
    p.add_argument("--output-len", type=int, default=128)
    p.add_argument("--prompts-per-c", type=int, default=8, help="requests per run = this x its concurrency")
    p.add_argument(
        "--itl-ms", type=float, default=25.0, help="the paced servers' gap between tokens of a stream"
    )
    p.add_argument(
        "--client-cpus", default="0-3", help="CPUs for the load generator (its default process count)"
    )
    p.add_argument("--server-cpus", default="4-7", help="CPUs for the servers, one server per CPU in turn")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--json", type=Path, help="also write the figures here")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmpdir:
        report = [
            measure("ceiling", 0.0, args, Path(tmpdir)),
            measure("paced", args.itl_ms, args, Path(tmpdir)),
        ]
    print(
        f"{'mode':8} {'run':>22} {'out tok/s':>11} {'of ideal':>9} {'client_bound':>13} {'busiest':>8} {'procs':>6}"
    )
    for r in report:
        for name, c, s in (
            ("peer", args.concurrency // args.replicas, r["peer"]),
            ("node", args.concurrency, r["node"]),
        ):
            servers_n = 1 if name == "peer" else args.replicas
            ideal = "-" if s["of_ideal"] is None else f"{s['of_ideal']:.0%}"
            print(
                f"{r['mode']:8} {f'{name}: {servers_n} x server, C{c}':>22} {s['out_tok_per_s']:>11,.0f} {ideal:>9} "
                f"{str(any(s['client_bound'])):>13} {max(s['busiest_worker_util']):>8.0%} {s['processes']:>6}"
            )
        print(
            f"{r['mode']:8} node over peer: {r['node_over_peer']:.2f}x; node requests per server "
            f"{r['node']['requests_per_url']}"
        )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
