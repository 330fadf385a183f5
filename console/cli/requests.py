"""``campaign requests ROW [--slo ttft:MS,tpot:MS,e2el:MS] [--json]``: one bench run read from its requests.

Tails as honest as the request count allows: beside each empirical p90/p99 of TTFT, TPOT and E2E, MLPerf
LoadGen's early-stopping estimate for that many requests (a p99 from too few requests says so and how many
it needs); interactivity by both of the field's definitions; throughput per GPU; and, with ``--slo``, the
share of requests meeting every limit (with its Wilson interval), the goodput, and a p99 verdict per limit
that rests on the estimate. Computed from the stored timings: a new SLO needs no re-run. Beside them, the
GPUs' energy over the run's window, from NVML's energy counter where every measured GPU journals one, else
integrated from the agent's 1 Hz power samples (each figure says which), or why it is not valid. Only reads.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

from console.cli.common import open_store, print_json, print_table
from console.errors import InputError
from console.readmodel import DEFINITIONS, ENERGY_SOURCE, RequestFigures, request_figures
from console.tails import TailEstimate, parse_slo


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def _estimate(t: TailEstimate) -> str:
    if t.estimate is None:
        return f"too few (needs {t.needed})" if t.needed else "-"
    return f"{_ms(t.empirical)} (est. {_ms(t.estimate)})"


def _rate(value: float | None, unit: str) -> str:
    return "-" if value is None else f"{value:,.1f} {unit}"


def _show(f: RequestFigures) -> None:
    b = f.bench
    print(
        f"row {b.id}: {b.arm} {b.shape} C{b.concurrency} on {b.box or '-'}: {f.requests} requests "
        f"({f.ok} ok, {f.requests - f.ok} failed) over {_rate(b.duration_s, 's')}"
    )
    print_table(
        [
            {
                "ms": t.name,
                "n": t.n,
                "p50": _ms(t.p50),
                "p90 (estimate)": _estimate(t.p90),
                "p99 (estimate)": _estimate(t.p99),
            }
            for t in f.tails
        ],
        ["ms", "n", "p50", "p90 (estimate)", "p99 (estimate)"],
        indent=2,
    )
    print(
        f"  interactivity: {_rate(f.interactivity_tpot, 'tok/s/user')} (1000/median TPOT), "
        f"{_rate(f.interactivity_per_slot, 'tok/s/user')} (output tok/s / C)"
    )
    gpus = f"{f.gpus} GPU{'s' if f.gpus != 1 else ''}" if f.gpus else "GPUs not known"
    print(f"  per GPU ({gpus}): {_rate(f.out_per_gpu, 'out tok/s')}, {_rate(f.total_per_gpu, 'total tok/s')}")
    _show_energy(f)
    if f.slo is not None:
        _show_slo(f)


def _show_energy(f: RequestFigures) -> None:
    """One line labelled with its source, or the reasons it is not valid, one a line; nothing at all for a run
    without GPU samples (a CPU box, an imported row)."""
    e = f.energy
    label = f"energy ({ENERGY_SOURCE if e is None else e.source})"
    if e is None:
        if f.energy_note:
            print(f"  {label}: not computed: {f.energy_note}")
        return
    if not e.valid:
        print(f"  {label}: not valid, the samples cannot support it:")
        for reason in e.reasons:
            print(f"    {reason}")
        return
    per_token = "-" if e.j_per_out_token is None else f"{e.j_per_out_token:,.4g} J/out token"
    per_watt = "-" if e.out_tok_per_s_per_w is None else f"{e.out_tok_per_s_per_w:,.4g} out tok/s per W"
    gpus = f"{len(e.gpus)} GPU{'s' if len(e.gpus) != 1 else ''}"
    print(
        f"  {label}: {e.joules:,.0f} J over the {e.window_s:,.1f} s window, {per_token}, {per_watt}, "
        f"{e.avg_power_w:,.0f} W average ({gpus})"
    )
    if e.source_note:
        print(f"    {e.source_note}")


def _show_slo(f: RequestFigures) -> None:
    slo = f.slo
    assert slo is not None
    limits = ", ".join(f"{k} <= {v:g} ms" for k, v in slo.limits.items())
    low, high = slo.interval or (None, None)
    share = "-" if slo.attainment is None else f"{slo.attainment:.1%}"
    band = "" if low is None or high is None else f" (Wilson 95%: {low:.1%}-{high:.1%})"
    print(f"  SLO {limits}: {slo.verdict}")
    print(
        f"    {slo.good} of {slo.n} requests meet every limit: {share}{band}; "
        f"goodput {_rate(slo.goodput_req_per_s, 'req/s')}"
    )
    for key, v in slo.verdicts:
        more = f", needs {v.needed_more} more requests" if v.needed_more else ""
        print(f"    p99 {key}: {v.verdict} ({v.over} of {v.n} over {v.limit:g} ms or failed{more})")


def _json(f: RequestFigures) -> dict[str, Any]:
    return {
        "bench_row": f.bench.id,
        "run_id": f.bench.run_id,
        "requests": f.requests,
        "ok": f.ok,
        "tails": [asdict(t) for t in f.tails],
        "interactivity_tpot": f.interactivity_tpot,
        "interactivity_per_slot": f.interactivity_per_slot,
        "gpus": f.gpus,
        "out_tok_per_s_per_gpu": f.out_per_gpu,
        "total_tok_per_s_per_gpu": f.total_per_gpu,
        "slo": None if f.slo is None else {**asdict(f.slo), "verdict": f.slo.verdict},
        "energy": None if f.energy is None else {**asdict(f.energy), "label": f"energy ({f.energy.source})"},
        "energy_note": f.energy_note,
        "definitions": DEFINITIONS,
    }


def _run(args: argparse.Namespace) -> int:
    try:
        limits = parse_slo(args.slo) if args.slo else None
    except ValueError as exc:
        raise InputError(f"--slo {args.slo!r}: {exc}", "write it as ttft:300,tpot:50,e2el:2000 (ms)") from exc
    with open_store(args, read_only=True) as store:
        figures = request_figures(store, args.row, limits)
    if args.json:
        print_json(_json(figures))
    else:
        _show(figures)
    return 0


def register(sub: argparse._SubParsersAction[Any], help_text: str) -> None:
    p = sub.add_parser(
        "requests", help=help_text, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("row", metavar="ROW", help="a bench row id, or the run id `campaign bench` printed")
    p.add_argument(
        "--slo", metavar="LIMITS", help="ttft:MS,tpot:MS,e2el:MS (any of them), as vLLM's --goodput"
    )
    p.add_argument("--json", action="store_true", help="every figure, its definition and the SLO as JSON")
    p.set_defaults(func=_run)
