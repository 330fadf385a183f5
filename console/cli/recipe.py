"""``campaign recipe lint|list|show``: check arms against the campaign write-up's rules and see what a launch would run."""

from __future__ import annotations

import argparse
import json
import shlex
from typing import Any

from console.cli.common import open_store, print_json, print_table, say
from console.errors import Refused
from console.readmodel import lint_box, moe_evidence, plan_box
from console.recipes import (
    BoxSpec,
    Catalog,
    Finding,
    MoeEvidence,
    RecipeError,
    ResolveError,
    generic_box,
    lint,
    lint_catalog,
    load_catalog,
    recipe_source,
    resolve,
)
from console.recipes.multinode import PlanBox, generic_boxes, plan
from console.recipes.resolve import get_arm


def _catalog(paths: list[str] | None, *, linting: bool = False) -> Catalog:
    """The recipes; for ``lint`` a recipe that does not even load is a finding (exit 1), not bad input."""
    try:
        return load_catalog(paths or None)
    except RecipeError as exc:
        if linting:
            raise Refused(str(exc)) from exc
        raise


def _box(args: argparse.Namespace, catalog: Catalog) -> tuple[BoxSpec | None, MoeEvidence | None]:
    """The first named box as resolve sees it (its row plus the GPUs its latest probe measured, else its
    inventory's), and what this campaign's sweeps measured of MoE backends, as a launch there would be linted."""
    if not args.box:
        return None, None
    with open_store(args) as store:
        box = lint_box(store, args.box[0])
        evidence = moe_evidence(store, catalog)
    return box, evidence


def _boxes(args: argparse.Namespace) -> list[PlanBox]:
    """Every named box with its registered address: where a multi-box arm's plan puts head and workers."""
    if not args.box:
        return []
    with open_store(args) as store:
        return [plan_box(store, name) for name in args.box]


def _box_rules(box: BoxSpec | None) -> str | None:
    """Which box the box rules ran on and on what figures; None without --box."""
    if box is None:
        return None
    if box.gpu_count == 0:
        return (
            f"box rules R4 and R10 not run: no GPUs known for box {box.name} (no probe, and none in its "
            f"inventory; `campaign check {box.name}` probes it)"
        )
    return f"box rules R4 and R10 on box {box.name}, GPUs from {box.gpus_basis}"


def _finding_line(f: Finding) -> str:
    where = f"{f.where()}: " if f.file else ""
    note = " (expected: shipped on purpose)" if f.expected else ""
    return f"{where}{f.rule_id} {f.severity} {f.arm}: {f.reason}{note}"


def _aliases(catalog: Catalog) -> str:
    """' (N aliases)' where some arms are another arm's settings under a second name (``same_as``)."""
    n = sum(1 for a in catalog.arms.values() if a.alias_of)
    return f" ({n} alias{'es' if n > 1 else ''})" if n else ""


def _lint(args: argparse.Namespace) -> int:
    catalog = _catalog(args.paths, linting=True)
    box, evidence = _box(args, catalog)
    findings = lint_catalog(catalog, box, evidence, [b.spec for b in _boxes(args)])
    box_rules = _box_rules(box)
    if args.json:
        print_json([f.to_dict() for f in findings])
        if box_rules:
            say(box_rules)
    else:
        for f in findings:
            alias_of = catalog.arms[f.arm].alias_of if f.arm in catalog.arms else None
            print(_finding_line(f) + (f" (alias of {alias_of})" if alias_of else ""))
        errors = [f for f in findings if f.blocking]
        expected = [f for f in errors if f.expected]
        warnings = len(findings) - len(errors)
        print(
            f"{len(catalog.arms)} arms{_aliases(catalog)} in {len(catalog.files)} files: {len(errors)} errors "
            f"({len(expected)} expected), {warnings} warnings" + (f"; {box_rules}" if box_rules else "")
        )
    return 1 if any(f.blocking and not f.expected for f in findings) else 0


def _summary(
    catalog: Catalog,
    name: str,
    box: BoxSpec | None,
    evidence: MoeEvidence | None,
    boxes: list[PlanBox] | None = None,
) -> dict[str, Any]:
    """One arm linted and laid out: its replicas on ``box``, or a multi-box arm's plan over ``boxes``."""
    arm = catalog.arms[name]
    profile = catalog.profiles[arm.profile]
    spans = arm.nodes > 1
    findings = lint(catalog, name, box, evidence, boxes=[b.spec for b in boxes or []] if spans else ())
    try:
        if spans:
            out = plan(catalog, name, boxes or generic_boxes(arm)).to_dict()
        else:
            out = resolve(catalog, name, box or generic_box(catalog, name)).to_dict()
    except ResolveError as exc:
        out = {
            "arm": name,
            "model": profile.checkpoint,
            "argv": None,
            "env": None,
            "tensor_parallel": arm.tensor_parallel,
            "error": str(exc),
        }
    out.update(
        profile_name=arm.profile,
        description=arm.description,
        source=recipe_source(arm.origin),
        alias_of=arm.alias_of,
        findings=[f.to_dict() for f in findings],
    )
    return out


def _layout(catalog: Catalog, r: dict[str, Any], box: BoxSpec | None) -> str:
    arm = catalog.arms[r["arm"]]
    if "error" in r:
        return "does not fit"
    if arm.nodes > 1:
        return (
            f"{arm.nodes} boxes {r['mode']} TP{arm.tensor_parallel}"
            + (f" DP{arm.data_parallel}" if arm.data_parallel > 1 else f" PP{arm.nodes}")
            + (" EP" if arm.expert_parallel else "")
        )
    count = f"{len(r['replicas'])}x" if box else ("per-card" if arm.replicas is None else f"{arm.replicas}x")
    return (
        f"{count} TP{arm.tensor_parallel}"
        + (f" DP{arm.data_parallel}" if arm.data_parallel > 1 else "")
        + (" EP" if arm.expert_parallel else "")
    )


def _kernels(d: dict[str, Any], catalog: Catalog) -> str:
    arm = catalog.arms[d["arm"]]
    return f"{arm.linear_backend or 'auto'}/{arm.moe_backend or 'auto'}"


def _lint_cell(findings: list[dict[str, Any]]) -> str:
    errors = sum(1 for f in findings if f["severity"] == "error")
    warns = len(findings) - errors
    parts = [f"{errors} error" + ("s" if errors > 1 else "")] if errors else []
    parts += [f"{warns} warn"] if warns else []
    return ", ".join(parts) or "ok"


def _list(args: argparse.Namespace) -> int:
    catalog = _catalog(args.paths)
    box, evidence = _box(args, catalog)
    boxes = _boxes(args)
    rows = [_summary(catalog, name, box, evidence, boxes) for name in sorted(catalog.arms)]
    if args.json:
        print_json(rows)
        return 0
    table = [
        {
            "arm": r["arm"] + (f" (alias of {r['alias_of']})" if r["alias_of"] else ""),
            "model": r.get("served_model_name") or r["model"],
            "layout": _layout(catalog, r, box),
            "kernels": _kernels(r, catalog),
            "lint": _lint_cell(r["findings"]),
            "source": r["source"],
        }
        for r in rows
    ]
    print_table(table, ["arm", "model", "layout", "kernels", "lint", "source"])
    return 0


def _show(args: argparse.Namespace) -> int:
    catalog = _catalog(args.paths)
    get_arm(catalog, args.arm)
    box, evidence = _box(args, catalog)
    summary = _summary(catalog, args.arm, box, evidence, _boxes(args))
    if args.json:
        print_json(summary)
        return 0 if "error" not in summary else 1
    arm = catalog.arms[args.arm]
    print(f"arm      {arm.name}  ({arm.origin})")
    _print_alias(catalog, arm.alias_of)
    if arm.description:
        print(f"         {arm.description}")
    print(f"profile  {arm.profile}  model {summary['model']}")
    if arm.nodes > 1:
        print(
            f"boxes    {', '.join(args.box) if args.box else f'(none: {arm.nodes} stand-in nodes, argv only)'}"
        )
    else:
        print(f"box      {box.name if box else '(none: one server, argv only)'}")
    if box:
        print(f"         {_box_rules(box)}")
    for f in summary["findings"]:
        print(
            f"lint     {f['rule_id']} {f['severity']}: {f['reason']}"
            + (" (expected)" if f["expected"] else "")
        )
    if "error" in summary:
        print(f"cannot resolve: {summary['error']}")
        return 1
    serving = summary["profile"]
    print(f"request  {json.dumps(serving['request'])}  extra_body {json.dumps(serving['extra_body'])}")
    patches, requires_env = catalog.serving_needs(arm)
    if patches or requires_env:  # what its serving env must carry: check --arm and launch refuse without
        needs = [f"patch {p.name} ({p.source})" for p in patches] + [f"{n} {r}" for n, r in requires_env]
        print(f"needs    {'; '.join(needs)}")
    if arm.nodes > 1:
        _print_plan(summary)
        return 0
    for rep in summary["replicas"]:
        gpus = ",".join(map(str, rep["gpus"])) or "cpu"
        print(f"replica {rep['index']}  gpus {gpus}  port {rep['port']}")
        print(f"  env  {' '.join(f'{k}={v}' for k, v in sorted(rep['env'].items()))}")
        print(f"  argv (quoted for reading; launched as a list) {shlex.join(rep['argv'])}")
    return 0


def _print_alias(catalog: Catalog, alias_of: str | None) -> None:
    """An alias's second line in ``show``: whose settings it is, and where they are written."""
    if alias_of:
        target = catalog.arms[alias_of]
        print(f"         alias of {target.name} ({target.origin}): its settings, plan and findings")


def _print_plan(summary: dict[str, Any]) -> None:
    """A multi-box arm's processes in launch order: box, role, GPUs, and each argv (docs/multinode.md)."""
    how = "data parallel across nodes" if summary["mode"] == "dp" else "one pipeline stage per box over Ray"
    print(
        f"plan     {how}; head {summary['boxes'][0]} at {summary['head_address']}, inter-node port "
        f"{summary['inter_node_port']}; API on 127.0.0.1:{summary['processes'][0]['port']} of the head"
    )
    for i, p in enumerate(summary["processes"]):
        gpus = ",".join(map(str, p["gpus"])) or (
            "its node's, through Ray" if summary["mode"] == "ray" else "cpu"
        )
        rank = f"  first rank {p['start_rank']}" if p["start_rank"] is not None else ""
        print(
            f"{i}  {p['role']} on {p['box']}  gpus {gpus}{rank}"
            + ("  (no HTTP API)" if p["headless"] else "")
        )
        print(f"  env  {' '.join(f'{k}={v}' for k, v in sorted(p['env'].items()))}")
        print(f"  argv (quoted for reading; launched as a list) {shlex.join(p['argv'])}")


def register(sub: argparse._SubParsersAction[Any], help_text: str) -> None:
    p = sub.add_parser("recipe", help=help_text, description=help_text)
    rsub = p.add_subparsers(dest="recipe_command", metavar="ACTION", required=True)

    def common(q: argparse.ArgumentParser, paths: bool = False) -> None:
        q.add_argument(
            "--box",
            metavar="NAME",
            action="append",
            help="resolve on this box (its latest probe gives the GPUs, else "
            "its inventory); lint sees this state.db's sweeps. Repeat it for a multi-box arm's boxes, the "
            "head first: its plan and R10 span them (other arms use the first)",
        )
        q.add_argument("--json", action="store_true", help="machine-readable output")
        if not paths:
            q.add_argument(
                "--recipes",
                dest="paths",
                metavar="PATH",
                action="append",
                help="recipe files or directories instead of the shipped and user recipes (repeatable)",
            )

    q = rsub.add_parser(
        "lint", help="lint arms against the campaign write-up's rules (exit 1 on an unexpected error)"
    )
    q.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="recipe files or directories (default: the shipped recipes, yours on top)",
    )
    common(q, paths=True)
    q.set_defaults(func=_lint)

    q = rsub.add_parser("list", help="every arm with its model, layout, kernels, lint verdict and source")
    common(q)
    q.set_defaults(func=_list)

    q = rsub.add_parser("show", help="one arm resolved: argv, env and GPUs per replica, and its findings")
    q.add_argument("arm", metavar="ARM")
    common(q)
    q.set_defaults(func=_show)
