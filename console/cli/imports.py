"""``campaign import vllm-bench PATH --arm NAME --shape NAME``: another client's runs, beside the console's own.

PATH is a file ``vllm bench serve --save-result`` wrote (one run, or several with ``--append-result``) or a
``vllm bench sweep serve`` experiment folder (``<combination>/run=<i>.json``, ``summary.json``). Each run
becomes one bench row marked ``imported`` (ops/vllm_bench.py has the mapping): the Results view, ``campaign
compare`` and ``campaign requests`` read it beside the measured rows of the same arm, shape and
concurrency. The rows are filed as curves marked imported (one per arm, box and shape; a sweep's arm is its
combination's server part), which ``campaign curves``, ``pareto`` and ``compare --at-*`` read. vLLM's files name neither the arm nor the shape, so the operator does; kernel line, tripwire
and power limit stay unknown unless given. Importing the same files again changes nothing.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from console.bounds import POWER_LIMIT_W
from console.cli.common import argument, concurrency_arg, open_store, print_json, say
from console.errors import InputError
from console.recipes import load_catalog
from console.recipes.model import Shape
from console.timeutil import zone
from ops.vllm_bench import Imported, Options, import_vllm_bench


def _shape(name: str) -> Shape:
    """The recipes' shape of that name: an imported row is filed under a shape the console's rows use."""
    shapes = load_catalog().shapes
    if name not in shapes:
        raise InputError(
            f"no shape {name!r} in the recipes",
            f"give one of {', '.join(sorted(shapes))} (recipes/shapes.toml)",
        )
    return shapes[name]


def _fmt(value: float | None, spec: str = ".1f") -> str:
    return "-" if value is None else format(value, spec)


def _show(done: Imported, path: str, as_json: bool) -> None:
    o = done.outcome
    if as_json:
        rows = [{k: v for k, v in r.items() if k not in ("raw", "request_timings")} for r in done.rows]
        curves = [{"id": c.id, "arm": c.arm, "box": c.box, "shape": c.shape} for c in done.curves]
        print_json({"import_id": o.import_id, "state": o.state, "rows": rows, "curves": curves})
        return
    verb = {
        "imported": "imported",
        "replaced": "re-imported (files changed)",
        "unchanged": "already imported",
    }
    print(f"{verb[o.state]}: {len(done.rows)} vllm bench run(s) from {path} (import {o.import_id})")
    for r in done.rows:
        timings = r.get("request_timings")
        kept = f", {len(timings['rows'])} requests stored" if isinstance(timings, dict) else ""
        print(
            f"  {r['arm']} {r['shape']} C={r['concurrency']}: {r['requests']} requests ({r['failed']} failed), "
            f"{_fmt(r['out_tok_per_s'])} out tok/s, TTFT p50 {_fmt(r['ttft_ms_p50'])} ms, "
            f"TPOT p50 {_fmt(r['tpot_ms_p50'], '.2f')} ms{kept}"
        )
    for c in done.curves:
        points = ", ".join(f"C{x:g}" if c.rate is None else f"{x:g}/s" for x in (c.rate or c.concurrency))
        print(f"  filed as curve #{c.id}: {c.arm} {c.shape} on {c.box}, {points} (`campaign curves {c.id}`)")
    if done.rows and done.rows[0]["started_ms"] is None:
        say("no instant stored: vLLM's date is local time without its zone (give --tz ZONE to store one)")


def _vllm_bench(args: argparse.Namespace) -> int:
    options = Options(
        arm=args.arm,
        shape=_shape(args.shape),
        concurrency=args.concurrency,
        tz=zone(args.tz) if args.tz else None,
        kernel_line=args.kernel,
        power_limit_w=args.power_limit,
    )
    with open_store(args, seed=False) as store:
        done = import_vllm_bench(store, Path(args.path), options)
    _show(done, args.path, args.json)
    return 0


def register(sub: argparse._SubParsersAction[Any], help_text: str) -> None:
    p = sub.add_parser("import", help=help_text, description=__doc__)
    verbs = p.add_subparsers(dest="verb", metavar="SOURCE", required=True)
    v = verbs.add_parser(
        "vllm-bench",
        help="vllm bench serve --save-result JSON, or a vllm bench sweep serve folder",
        description=__doc__,
    )
    v.add_argument("path", metavar="PATH", help="a result file, a sweep's summary.json, or a sweep folder")
    v.add_argument(
        "--arm",
        help="the arm to file the runs under (default for a sweep: its combination's server part, SERVE--...)",
    )
    v.add_argument("--shape", required=True, help="the recipes' shape the runs used (e.g. tiny, router)")
    v.add_argument(
        "-c",
        "--concurrency",
        type=concurrency_arg,
        help="for runs made without --max-concurrency only: the concurrency to file them at",
    )
    v.add_argument(
        "--tz", metavar="ZONE", help="the zone of the machine that ran them (vLLM's date is its local time)"
    )
    v.add_argument("--kernel", metavar="LINE", help="the kernel line the engine used, where known")
    v.add_argument(
        "--power-limit", type=argument(POWER_LIMIT_W.parse), metavar="W", help="the enforced limit per GPU"
    )
    v.add_argument("--json", action="store_true", help="the import and its rows as JSON")
    v.set_defaults(func=_vllm_bench)
