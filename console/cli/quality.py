"""``campaign quality import|run|compare|list|pairs``: task accuracy per item, bound to the launch it ran on.

``import FILE --launch L`` reads lm-evaluation-harness output (``results_*.json`` with its
``samples_*.jsonl``, or their folder) or an Inspect AI log (``.eval``/``.json``) and binds it to the launch's
exact arm, layout and kernel lines; ``run LAUNCH --tasks ...`` drives lm-evaluation-harness against the
launch where it is installed. ``compare A B`` pairs two runs on the items both scored: the split, the
difference with its 95% interval, truncation and output tokens side by side, and a verdict against the
noise floor measured from repeats of one configuration. docs/quality.md has the method.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from console.bounds import ROW_ID, IntBound
from console.cli.common import (
    Column,
    argument,
    concurrency_arg,
    csv_values,
    open_store,
    print_json,
    print_table,
    row_id_arg,
    run,
    say,
    service_for,
    wait_s_arg,
)
from console.errors import InputError
from console.quality.suites import SUITES
from console.quality.suites.runner import DEFAULT_TIMEOUT_S, Caps, parse_cap
from console.readmodel.quality import (
    CommonRow,
    SideBySide,
    common_table,
    compare_or_side_by_side,
    noise_floor,
    published_comparisons,
    quality_run,
    quality_runs,
    served_difference,
)
from console.readmodel.records import QualityComparison, QualityRun
from console.service import QualityImported

LIMIT = IntBound(
    "an item limit", 1, 1_000_000, "give the items per task of a smoke run, e.g. 20, or none for all"
)
"""``quality run --limit``: lm-eval's per-task cap (0 would be no items, not no cap)."""


def _caps(caps: Mapping[str, Any] | None) -> str:
    if not caps:
        return "not recorded"
    return ", ".join(f"{'all' if k == '*' else k} {v}" for k, v in caps.items())


def _seconds(value: float | None) -> str:
    return "not recorded" if value is None else f"{value:g} s"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _tokens(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _where(r: QualityRun) -> str:
    bound = " on ".join(x for x in (r.arm, r.box) if x)
    return f"{r.label}" + (f" ({bound})" if bound and bound != r.label else "")


def _show_import(done: QualityImported, as_json: bool) -> None:
    r = done.run
    if as_json:
        print_json({"run_id": r.id, "state": done.state, "run": asdict(r)})
        return
    if done.state == "unchanged":
        say(f"already imported: the same files against launch {r.launch_id} are quality run {r.id}")
    print(
        f"quality run {r.id}: {r.harness} {', '.join(r.tasks)}, {r.items} items, accuracy {r.accuracy_text}, "
        f"truncated {_pct(r.truncation_rate)}, mean {_tokens(r.mean_output_tokens)} output tokens"
    )
    print(f"  bound to launch {r.launch_id}: {r.arm} on {r.box}, {r.layout or 'layout not recorded'}")
    print(f"  kernels: {r.kernel_line or 'none recorded'}")
    for f in r.families:
        print(f"  {f.family:<13} {f.items:>4} items  {f.text}")
    if r.caps or r.request_timeout_s:
        print(f"  caps {_caps(r.caps)}; request timeout {_seconds(r.request_timeout_s)}")
    if r.unscored:
        print(f"  {r.short}: left out of the accuracy")
        for key, why in list(r.unscored_items.items())[:10]:
            print(f"    {key}: {why}")
        if r.unscored_items:
            print(f"  `campaign quality run --complete {r.id}` runs them again")


def _import(args: argparse.Namespace) -> int:
    with service_for(args) as service:
        done = service.import_quality(Path(args.file), args.launch, args.metric, args.force)
    _show_import(done, args.json)
    return 0


def _run(args: argparse.Namespace) -> int:
    if args.complete is not None or args.suite:
        return _run_suite(args)
    if args.launch is None:
        raise InputError(
            "quality run --tasks: give the LAUNCH to run against", "`campaign launch` lists them"
        )
    if args.url is not None:
        raise InputError(
            "quality run --url goes with --suite or --complete", "lm-eval reaches the launch itself"
        )
    tasks = csv_values(args.tasks, "tasks", str) or []
    caps = Caps.of(args.cap or [])
    with service_for(args) as service:
        say(f"running lm-evaluation-harness ({', '.join(tasks)}) against launch {args.launch}")
        done = run(
            service,
            lambda: service.run_quality(
                args.launch,
                tasks,
                limit=args.limit,
                concurrency=args.concurrency,
                output=Path(args.output) if args.output else None,
                cap=caps.default,
                request_timeout_s=args.request_timeout,
            ),
        )
    _show_import(done, args.json)
    return 0


def _run_suite(args: argparse.Namespace) -> int:
    output = Path(args.output) if args.output else None
    with service_for(args) as service:
        if args.complete is not None:
            if args.launch is not None or args.cap:
                raise InputError(
                    "quality run --complete RUN takes no LAUNCH or --cap: it reuses the run's own",
                    f"`campaign quality run --complete {args.complete}`",
                )
            say(f"running the unscored items of quality run {args.complete} again")
            done = run(
                service, lambda: service.complete_suite(args.complete, args.concurrency, output, args.url)
            )
        else:
            if args.launch is None:
                raise InputError(f"quality run --suite {args.suite}: give the LAUNCH to run against")
            say(f"running {args.suite} against launch {args.launch}")
            caps = Caps.of(args.cap or [])
            done = run(
                service,
                lambda: service.run_suite(
                    args.launch,
                    args.suite,
                    caps=caps,
                    request_timeout_s=args.request_timeout,
                    concurrency=args.concurrency,
                    output=output,
                    base_url=args.url,
                ),
            )
    _show_import(done, args.json)
    return 0


def comparison_json(c: QualityComparison) -> dict[str, Any]:
    p = c.paired
    return {
        "a": {"run_id": c.a.id, "label": c.a.label, "arm": c.a.arm, "box": c.a.box, "layout": c.a.layout},
        "b": {"run_id": c.b.id, "label": c.b.label, "arm": c.b.arm, "box": c.b.box, "layout": c.b.layout},
        "basis": c.basis,
        "kind": c.kind,
        "items": p.n,
        "a_only": p.a_only,
        "b_only": p.b_only,
        "split": p.split,
        "p_value": p.p_value,
        "difference": p.diff,
        "interval_95": p.interval,
        "a_accuracy": p.a_mean,
        "b_accuracy": p.b_mean,
        "a_truncation": c.a_truncation,
        "b_truncation": c.b_truncation,
        "a_mean_output_tokens": c.a_mean_tokens,
        "b_mean_output_tokens": c.b_mean_tokens,
        "floor": c.floor.value if c.floor else None,
        "decision": c.decision,
        "verdict": c.verdict,
        "note": c.note,
        "a_interval_95": c.a.interval,
        "b_interval_95": c.b.interval,
        "warnings": list(c.policy_warnings),
    }


def _show_comparison(c: QualityComparison) -> None:
    p = c.paired
    for side, r in (("A", c.a), ("B", c.b)):
        print(f"{side}  run {r.id}  {_where(r)}" + (f"  {r.layout}" if r.layout else ""))
    basis = "the split the write-up published" if c.basis == "published" else "the stored items"
    print(f"paired on the {p.n} items both scored ({basis})")
    rows = [
        (
            "split",
            p.split,
            "",
            f"A right and B wrong : B right and A wrong; exact McNemar p = {p.p_value:.3f}",
        )
    ]
    a_acc, b_acc = (p.a_mean, p.b_mean) if p.a_mean is not None else (c.a.accuracy, c.b.accuracy)
    interval = p.interval
    spread = f" (95% {interval[0]:+.3f} to {interval[1]:+.3f})" if interval else ""
    own = "" if p.a_mean is not None else " (each run's own items)"
    rows.append(("accuracy", f"{a_acc:.3f}", f"{b_acc:.3f}", f"difference {p.diff:+.3f}{spread}{own}"))
    wilson = f"A {c.a.accuracy_text}, B {c.b.accuracy_text} (each run's items, 95% Wilson)"
    rows.append(("own items", "", "", wilson))
    b_families = {f.family: f for f in c.b.families}
    for f in c.a.families:
        other = b_families.get(f.family)
        if other is not None and (len(c.a.families) > 1 or len(c.b.families) > 1):
            rows.append(
                (f"  {f.family}", "", "", f"A {f.text} of {f.items}, B {other.text} of {other.items}")
            )
    rows.append(("truncated", _pct(c.a_truncation), _pct(c.b_truncation), ""))
    rows.append(("mean tokens", _tokens(c.a_mean_tokens), _tokens(c.b_mean_tokens), ""))
    rows.append(("floor", "", "", c.floor.text if c.floor else "unknown"))
    print_table(
        [dict(zip(("name", "a", "b", "note"), row, strict=True)) for row in rows],
        [
            Column("name", min_width=11),
            Column("a", right=True, min_width=9),
            Column("b", right=True, min_width=9),
            Column("note"),
        ],
        header=False,
        indent=2,
    )
    print(f"verdict: {c.verdict}")
    for warning in c.policy_warnings:
        print(f"  warning: {warning}")
    if c.note:
        print(f"  ({c.note})")


def _side_by_side_json(s: SideBySide) -> dict[str, Any]:
    return {
        "a": {"run_id": s.a.id, "label": s.a.label, "arm": s.a.arm, "box": s.a.box},
        "b": {"run_id": s.b.id, "label": s.b.label, "arm": s.b.arm, "box": s.b.box},
        "basis": "side by side",
        "verdict": None,
        "why": s.why,
        "figures": [{"figure": name, "a": a, "b": b} for name, a, b in s.rows],
    }


def _show_side_by_side(s: SideBySide) -> None:
    for side, r in (("A", s.a), ("B", s.b)):
        print(f"{side}  run {r.id}  {_where(r)}")
    print(f"no paired verdict: without per-item results the runs cannot be paired ({s.why});")
    print("their published figures side by side:")
    print_table(
        [{"figure": name, "a": a or "-", "b": b or "-"} for name, a, b in s.rows],
        [Column("figure", min_width=11), Column("a", right=True), Column("b", right=True)],
        header=False,
        indent=2,
    )


def _compare(args: argparse.Namespace) -> int:
    with open_store(args, read_only=True) as store:
        served = served_difference(quality_run(store, args.a), quality_run(store, args.b))
        if served and not args.json:
            print(served)  # before the verdict, and before a refusal to pair them
        comparison = compare_or_side_by_side(store, args.a, args.b)
    if isinstance(comparison, SideBySide):
        if args.json:
            print_json({**_side_by_side_json(comparison), "served_differently": served})
        else:
            _show_side_by_side(comparison)
    elif args.json:
        print_json({**comparison_json(comparison), "served_differently": served})
    else:
        _show_comparison(comparison)
    return 0


def _list(args: argparse.Namespace) -> int:
    with open_store(args, read_only=True) as store:
        runs = quality_runs(store)
        floors = {s: noise_floor(store, s) for s in dict.fromkeys(r.suite for r in runs)}
    if args.json:
        print_json(
            {
                "runs": [asdict(r) for r in runs],
                "floors": {s: (f.value if f else None) for s, f in floors.items()},
            }
        )
        return 0
    if not runs:
        print("no quality runs yet: `campaign quality import FILE --launch LAUNCH`")
        return 0
    print_table(
        [
            {
                "id": r.id,
                "run": r.label,
                "harness": r.harness,
                "tasks": ", ".join(r.tasks),
                "items": r.items,
                "accuracy (95% Wilson)": r.accuracy_text,
                "truncated": _pct(r.truncation_rate),
                "tokens": _tokens(r.mean_output_tokens),
                "layout": r.layout or "",
                "served by": r.served_by or "",
                "source": r.source,
                "note": r.short or "",
            }
            for r in runs
        ],
        [
            "id",
            "run",
            "harness",
            "tasks",
            "items",
            "accuracy (95% Wilson)",
            "truncated",
            "tokens",
            "layout",
            "served by",
            "source",
            "note",
        ],
    )
    for r in runs:
        if len(r.families) > 1:
            print(
                f"run {r.id} by family: " + "; ".join(f"{f.family} {f.text} of {f.items}" for f in r.families)
            )
        if line := _published_detail(r):
            print(f"run {r.id} ({r.label}): {line}")
    for suite, floor in floors.items():
        print(
            f"noise floor of {suite}: {floor.text if floor else 'unknown (no repeat runs of one configuration)'}"
        )
    return 0


def _published_detail(r: QualityRun) -> str | None:
    """What a published run prints beyond the table: its caps, degenerate rate and family figures."""
    if r.per_item:
        return None
    parts = [f"caps {_caps(r.caps)}"] if r.caps else []
    if r.degenerate_rate is not None:
        share = r.degenerate_rate  # the write-up prints 3.0% and 0.25%
        parts.append(f"degenerate {share:.1%}" if share >= 0.01 else f"degenerate {share:.2%}")
    if r.published_families:
        parts.append("by family " + ", ".join(f"{k} {v:.3f}" for k, v in r.published_families.items()))
    return "; ".join(parts) or None


def _table(args: argparse.Namespace) -> int:
    with open_store(args, read_only=True) as store:
        table = common_table(store, args.model)
    if args.json:
        print_json(asdict(table))
        return 0
    n = f"{table.items} common"
    print(f"{table.model} on {table.box}: quality over every item each run scored")
    print(
        f"and over the {table.items} items every build scored, the only column on which they are comparable"
        if args.common
        else f"(--common adds the {table.items} items every build scored, the only comparable column)"
    )
    print_table(
        [
            {
                "build": r.build or r.arm,
                "kernel line": r.kernel_line or "not recorded",
                "out tok/s": "-" if r.out_tok_s is None else f"{r.out_tok_s:,.0f}",
                "quality (all scored)": _all_scored(r),
                f"quality ({n})": f"{r.common:.3f}",
                "maths (common)": "-" if r.maths_common is None else f"{r.maths_common:.3f}",
                "maths tokens": _tokens(r.maths_tokens),
                "maths at cap": _pct(r.maths_at_cap),
            }
            for r in table.rows
        ],
        [
            Column("build"),
            Column("kernel line"),
            Column("out tok/s", right=True),
            Column("quality (all scored)", right=True),
            *(
                (
                    Column(f"quality ({n})", right=True),
                    Column("maths (common)", right=True),
                    Column("maths tokens", right=True),
                    Column("maths at cap", right=True),
                )
                if args.common
                else ()
            ),
        ],
    )
    for r in table.rows:
        if r.all_scored_note:
            print(f"* {r.build or r.arm}: {r.all_scored_note}")
    return 0


def _all_scored(r: CommonRow) -> str:
    if r.all_scored is None:
        return "-"
    return f"{r.all_scored:.3f}" + ("*" if r.all_scored_note else f" ({r.all_items})" if r.all_items else "")


def _pairs(args: argparse.Namespace) -> int:
    with open_store(args, read_only=True) as store:
        comparisons = published_comparisons(store)
    if args.json:
        print_json([comparison_json(c) for c in comparisons])
        return 0
    if not comparisons:
        print("no published comparisons (`campaign demo` imports the write-up's)")
        return 0
    print_table(
        [
            {
                "kind": c.kind,
                "a": f"{c.a.id} {c.a.label}",
                "b": f"{c.b.id} {c.b.label}",
                "split": c.paired.split,
                "items": c.paired.n,
                "diff": f"{c.paired.diff:+.3f}",
                "verdict": c.verdict,
            }
            for c in comparisons
        ],
        ["kind", "a", "b", "split", "items", "diff", "verdict"],
    )
    return 0


def register(sub: argparse._SubParsersAction[Any], help_text: str) -> None:
    p = sub.add_parser(
        "quality", help=help_text, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True)
    imp = verbs.add_parser("import", help="bind a harness's per-item results to the launch they ran against")
    imp.add_argument(
        "file",
        metavar="FILE",
        help="lm-eval results_*.json / samples_*.jsonl / their folder, or an Inspect .eval/.json log",
    )
    imp.add_argument("--launch", required=True, metavar="LAUNCH", help="the launch the harness ran against")
    imp.add_argument(
        "--metric",
        metavar="NAME",
        help="the score to read where a task logs several "
        "(lm-eval NAME[,FILTER], e.g. exact_match,strict-match; an Inspect scorer)",
    )
    imp.add_argument("--force", action="store_true", help="bind even when the file names another model")
    imp.add_argument("--json", action="store_true", help="print {run_id, state, run} as JSON on stdout")
    imp.set_defaults(func=_import)
    r = verbs.add_parser(
        "run",
        help="run the house suite (--suite seed6) or lm-evaluation-harness (--tasks) against a serving launch",
    )
    r.add_argument("launch", nargs="?", metavar="LAUNCH", help="a serving launch id")
    what = r.add_mutually_exclusive_group(required=True)
    what.add_argument("--tasks", metavar="T1,T2", help="lm-eval task names, e.g. gsm8k,ifeval")
    what.add_argument(
        "--suite", choices=SUITES, help="the console's own suite: six families scored here (docs/quality.md)"
    )
    what.add_argument(
        "--complete",
        type=argument(ROW_ID.parse),
        metavar="RUN",
        help="run again only the unscored items of a --suite run, under its caps and timeout, and merge them",
    )
    r.add_argument(
        "--cap",
        type=argument(parse_cap),
        action="append",
        metavar="[FAMILY=]N",
        help="generation cap in tokens, for every family (32768) or one (code=20480); repeatable "
        "(default: the window minus the prompt)",
    )
    r.add_argument(
        "--url",
        metavar="URL",
        help="with --suite or --complete: reach the launch's server at this URL (http://HOST:PORT) instead of "
        "through the box link (a server on this machine, or a tunnel you hold)",
    )
    r.add_argument(
        "--request-timeout",
        type=wait_s_arg,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help="seconds one request may take; an item that runs out is unscored, not wrong (default 3600)",
    )
    r.add_argument(
        "--limit", type=argument(LIMIT.parse), metavar="N", help="at most N items per task (a smoke run)"
    )
    r.add_argument(
        "--concurrency", type=concurrency_arg, default=8, metavar="C", help="requests in flight (default 8)"
    )
    r.add_argument(
        "--output", metavar="DIR", help="where lm_eval writes (default: quality/ beside the state.db)"
    )
    r.add_argument("--json", action="store_true", help="print {run_id, state, run} as JSON on stdout")
    r.set_defaults(func=_run)
    c = verbs.add_parser("compare", help="pair two runs on the items both scored, against the noise floor")
    c.add_argument("a", type=row_id_arg, metavar="A", help="a quality run id (`campaign quality list`)")
    c.add_argument("b", type=row_id_arg, metavar="B", help="another quality run id")
    c.add_argument("--json", action="store_true", help="the comparison as JSON on stdout")
    c.set_defaults(func=_compare)
    tb = verbs.add_parser(
        "table",
        help="builds of one model on the items all of them scored (the write-up's four quantisers)",
        description="builds of one model on the items all of them scored: build, kernel line, out tok/s, "
        "quality over every item scored, quality and maths on the common items",
    )
    tb.add_argument("--model", required=True, metavar="MODEL", help="the model, as `quality list` names it")
    tb.add_argument(
        "--common", action="store_true", help="compare on the common items (the only comparable column)"
    )
    tb.add_argument("--json", action="store_true", help="the table as JSON on stdout")
    tb.set_defaults(func=_table)
    for name, func, text in (
        ("list", _list, "every quality run and each suite's noise floor"),
        ("pairs", _pairs, "the published paired comparisons and their verdicts"),
    ):
        v = verbs.add_parser(name, help=text, description=text)
        v.add_argument("--json", action="store_true", help="as JSON on stdout")
        v.set_defaults(func=func)
