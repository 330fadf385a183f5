"""The markdown handover (the campaign write-up's docs/RESUME.md): what the next person needs to pick the
campaign up.

Boxes and their last checks, what runs where, armed timers (UTC, box-local and the operator's zone),
open failures with their reasons, best rows per model, each divergence pair against its noise floor and
the quality/cost frontier, and each curve's points with
its shape's frontier. Measured and imported figures are never mixed in one table: an imported
number is someone else's claim.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import tzinfo
from typing import Any

from console.economics import (
    DEFAULT_UTILISATION,
    CostModel,
    EconomicsRow,
    default_cost_model,
    economics_table,
    frontier_chart,
    index_text,
)
from console.quality.stats import wilson_text
from console.readmodel import (
    EvalRow,
    FleetRow,
    ImportRow,
    KldiffRun,
    LaunchRow,
    ResultRow,
    TimerRow,
    TripwireRun,
    best_per_model,
    economics_inputs,
    failed_launches,
    failed_tripwires,
    fleet,
    imports,
    kldiff_runs,
    launches,
    timers,
)
from console.readmodel.curve_frontier import chart_points, frontier
from console.readmodel.curves import CurveView, curves
from console.readmodel.quality import (
    CommonTable,
    common_tables,
    quality_runs,
    served_pairs,
    side_by_side_rows,
)
from console.readmodel.queued import Overflow, QueuedRow, overflowing_profiles, queued_work
from console.readmodel.records import QualityRun
from console.recipes import RecipeError, load_catalog
from console.store import Store
from console.store.results import ModelIndexEntry
from console.timeutil import fmt_remaining, fmt_utc, fmt_zone, zone


def _table(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> list[str]:
    def cell(v: Any) -> str:
        if v is None or v == "":
            return "–"
        if isinstance(v, float):
            return f"{v:,.0f}" if v >= 100 else f"{v:.3g}"
        return str(v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in r) + " |" for r in rows]
    return lines


def _boxes(boxes: Sequence[FleetRow]) -> list[str]:
    out = ["## Boxes", ""]
    if not boxes:
        return out + ["No boxes.", ""]
    rows = []
    for b in boxes:
        checks = ", ".join(f"{c.name} {c.verdict}" for c in b.checks) or "never checked"
        price = f"${b.price_per_hour:.2f}/h" if b.price_per_hour is not None else None
        rows.append((b.name, b.gpu_summary, b.status, b.ssh_target, price, checks))
    missing = [f"- {b.name}: {b.ingest.line}" for b in boxes if b.ingest.line]
    if missing:  # never silent: what a box's journal could not give this state.db
        missing = [
            "",
            "Journal rows not ingested (kept in the `quarantine` and `lost_events` tables):",
            "",
            *missing,
        ]
    return (
        out + _table(rows, ("box", "GPUs", "status", "reached as", "price", "last checks")) + missing + [""]
    )


def _running(rows: Sequence[LaunchRow]) -> list[str]:
    out = ["## What runs where", ""]
    alive = sorted((launch for launch in rows if launch.alive), key=lambda r: (r.box, r.arm, r.id))
    if not alive:
        return out + ["Nothing is launched.", ""]
    table = [
        (
            r.box,
            r.arm,
            r.id,
            r.state,
            r.port,
            ",".join(str(g) for g in r.gpus),
            fmt_utc(r.start_ms) if r.start_ms else None,
            r.kernel_line or "not recorded",
        )
        for r in alive
    ]
    return (
        out
        + _table(table, ("box", "arm", "launch", "state", "port", "GPUs", "started", "kernel line"))
        + [""]
    )


def _box_local(t: TimerRow) -> str:
    if not t.box_tz:
        return "box zone unknown"
    try:
        return fmt_zone(t.deadline_ms, zone(t.box_tz))
    except ValueError:
        return f"box zone {t.box_tz!r} unknown"  # a probed name this Python does not know (e.g. "BST")


def _timers(rows: Sequence[TimerRow], mine: tzinfo) -> list[str]:
    out = ["## Timers", ""]
    live = [t for t in rows if t.live]
    if not live:
        return out + ["No timer is armed: nothing will stop the boxes on its own.", ""]
    table = [
        (
            t.id,
            t.box,
            t.action,
            fmt_utc(t.deadline_ms),
            _box_local(t),
            fmt_zone(t.deadline_ms, mine),
            fmt_remaining(t.remaining_ms),
            t.state,
        )
        for t in live
    ]
    header = ("id", "box", "action", "deadline (UTC)", "box local", "your local", "in", "state")
    return out + _table(table, header) + [""]


def _failures(
    boxes: Sequence[FleetRow],
    failed: Sequence[LaunchRow],
    tripwires: Sequence[TripwireRun],
    timer_rows: Sequence[TimerRow],
) -> list[str]:
    out = ["## Open failures", ""]
    rows: list[tuple[Any, ...]] = []
    for b in boxes:
        rows += [(b.name, f"check {c.name}", c.reason) for c in b.checks if c.verdict == "fail"]
    for launch in failed:
        rows.append(
            (launch.box, f"launch {launch.arm}", launch.failure_reason or f"exit code {launch.exit_code}")
        )
    for t in tripwires:
        rows.append((t.box, f"tripwire {t.arm}", f"{t.verdict.text}: its throughput is diagnostic only"))
    for timer in timer_rows:
        if timer.state == "failed":
            rows.append(
                (timer.box, f"timer {timer.id}", f"{timer.action} at {fmt_utc(timer.deadline_ms)} failed")
            )
    if not rows:
        return out + ["None.", ""]
    return out + _table(rows, ("box", "what", "reason")) + [""]


def _queued(rows: Sequence[QueuedRow], overflow: Sequence[Overflow] | str) -> list[str]:
    """Work queued and not run, and the models no box here holds: open, never a result or a failure."""
    out = ["## Queued / open", ""]
    if rows:
        out += [
            f"Queued and not run ({len(rows)}): none of these is a result or a failure; each is listed with the "
            "words that queued it.",
            "",
            *_table(
                [(r.box, r.list, r.kind, r.arm, r.what, f"{r.sentence} ({r.section})") for r in rows],
                ("box", "list", "kind", "arm", "what", "queued by"),
            ),
            "",
        ]
    else:
        out += ["Nothing is queued.", ""]
    if isinstance(overflow, str):
        return out + [f"Models that overflow the node: not judged ({overflow}).", ""]
    if overflow:
        out += [
            "Models that overflow the node (no layout on one box here holds their weights; serving one takes "
            "several boxes):",
            "",
            *_table(
                [(o.profile, o.weights_gb, o.reason, o.description) for o in overflow],
                ("profile", "weights GB", "why", "profile's description"),
            ),
            "",
        ]
    return out


def _overflow(store: Store) -> list[Overflow] | str:
    """The recipes' profiles too large for any one box; the recipes' problem in words when they do not load."""
    try:
        return overflowing_profiles(store, load_catalog())
    except RecipeError as exc:
        return f"recipes not loaded: {exc}"


def _best(rows: Sequence[ResultRow], title: str) -> list[str]:
    if not rows:
        return []
    table = [
        (
            r.model,
            r.arm,
            r.box,
            f"{r.shape} C{r.concurrency}",
            r.out_tok_per_s,
            None
            if r.ttft_ms_p50 is None
            else f"{r.ttft_ms_p50 / 1000:.2f} s" + (" (queueing)" if r.queueing else ""),
            r.kernel_line or "not recorded",
            r.tripwire.text,
            None if r.power_limit_w is None else f"{r.power_limit_w:.0f} W",
            r.replicas,
            r.marks,
        )
        for r in rows
    ]
    header = (
        "model",
        "arm",
        "box",
        "shape",
        "out tok/s",
        "TTFT p50",
        "kernel line",
        "tripwire",
        "power limit",
        "replicas",
        "marks",
    )
    note = (
        "Fastest node row per model and shape (every replica measured at once); diagnostic-only rows "
        "(failed tripwire) are left out."
    )
    return [f"## {title}", "", note, "", *_table(table, header), ""]


def _named(model: str, index: Mapping[str, ModelIndexEntry]) -> str:
    """A model with its intelligence index in brackets, as the write-up names it: ``GLM-5.3-Flash (46)``."""
    printed = index_text(index.get(model))
    return model if printed is None else f"{model} ({printed})"


def _quality(evals: Sequence[EvalRow], index: Mapping[str, ModelIndexEntry]) -> list[str]:
    if not evals:
        return []
    table = [
        (
            _named(e.model, index),
            e.configuration,
            e.items,
            wilson_text(e.overall * e.items, e.items),
            e.source,
            e.note,
        )
        for e in evals
    ]
    return [
        "## Task accuracy",
        "",
        "Overall accuracy with its Wilson 95% interval over the items scored.",
        "",
        *_table(table, ("model", "configuration", "items", "overall [95%]", "source", "note")),
        "",
    ]


def _served_pairs(pairs: Sequence[tuple[QualityRun, QualityRun, str]]) -> list[str]:
    """One table per pair of runs of one arm and box served differently, laid out as the write-up's house
    default against vendor recipe (a figure a row, a run a column): the same weights, so the difference is
    the serving's."""
    if not pairs:
        return []
    out = ["## Same weights, served differently", ""]
    for a, b, words in pairs:
        out += [
            f"{a.arm} on {a.box}: {words}.",
            "",
            *_table(side_by_side_rows(a, b), ("", a.label, b.label)),
            "",
        ]
    return out


def _common(tables: Sequence[CommonTable]) -> list[str]:
    """Builds of one model on the items all of them scored, the only column on which they are comparable
    (the write-up's four quantisers), as `campaign quality table --common` prints them."""
    out = []
    for t in tables:
        rows = [
            (
                r.build or r.arm,
                r.kernel_line or "not recorded",
                r.out_tok_s,
                None if r.all_scored is None else f"{r.all_scored:.3f}" + ("*" if r.all_scored_note else ""),
                f"{r.common:.3f}",
                None if r.maths_common is None else f"{r.maths_common:.3f}",
            )
            for r in t.rows
        ]
        header = ("build", "kernel line", "out tok/s", "quality (all scored)", f"quality ({t.items} common)")
        out += [f"## {t.model} builds on their {t.items} common items ({t.box})", ""]
        out += [*_table(rows, (*header, "maths (common)")), ""]
        out += [f"\\* {r.build or r.arm}: {r.all_scored_note}" for r in t.rows if r.all_scored_note]
        out += [""] if any(r.all_scored_note for r in t.rows) else []
    return out


def _divergence(runs: Sequence[KldiffRun], title: str) -> list[str]:
    """Each pair with the floor it is read against and the verdict in the campaign write-up's words; controls
    show only as the floor column, as the campaign write-up's table reads."""
    pairs = [r for r in runs if r.role == "pair"]
    if not pairs:
        return []
    table = [
        (
            r.model,
            r.box,
            r.arm_a,
            r.arm_b,
            r.kernel_a or "not recorded",
            r.kernel_b or "not recorded",
            r.positions,
            None if r.top1_agreement is None else f"{r.top1_agreement:.1%}",
            f"{r.mean_kl:.4f}",
            None if r.control_mean_kl is None else f"{r.control_mean_kl:.4f}",
            r.verdict.text,
        )
        for r in pairs
    ]
    header = (
        "model",
        "box",
        "A",
        "B",
        "kernel A",
        "kernel B",
        "positions",
        "top-1 agree",
        "mean KL",
        "floor",
        "verdict",
    )
    note = (
        "Two servers scored on identical contexts, each pair read against its control (the same "
        "configuration served twice): the floor. `campaign export kldiff` has every figure."
    )
    return [f"## {title}", "", note, "", *_table(table, header), ""]


def _accuracy(r: EconomicsRow) -> str:
    """The row's accuracy with its Wilson 95% interval where its item count is known."""
    if r.accuracy is None:
        return "-"
    return (
        wilson_text(r.accuracy * r.accuracy_items, r.accuracy_items)
        if r.accuracy_items
        else f"{r.accuracy:.3f}"
    )


def _frontier(rows: Sequence[EconomicsRow], utilisation: float) -> list[str]:
    best: dict[tuple[str | None, str], EconomicsRow] = {}
    for r in rows:
        if r.on_frontier and (r.box, r.arm) not in best:
            best[(r.box, r.arm)] = r
    if not best:
        return []
    table = [
        (r.model, r.arm, r.box, r.rows, _accuracy(r), f"${r.node_per_mtok:.3f}", r.source)
        for r in sorted(best.values(), key=lambda r: r.node_per_mtok)
    ]
    return [
        "## Quality/cost frontier",
        "",
        f"Nothing is both cheaper and better than these (node cost {_basis(rows, utilisation)}, USD per "
        "million tokens averaged per request over router and promptopt), each with accuracy measured on its "
        "own box and arm at full power: borrowed accuracy (b) and capped boxes (c) are drawn but never on it. "
        "`campaign export economics` has every configuration and its API prices.",
        "",
        *_table(table, ("model", "arm", "box", "rows", "accuracy", "node $/M tok", "source")),
        "",
        "```",
        frontier_chart(rows).rstrip(),
        "```",
        "",
    ]


def _basis(rows: Sequence[EconomicsRow], utilisation: float) -> str:
    """The cost basis the boxes bought on the cost model were priced on, in words (the first such row's)."""
    named = next((r.node_basis for r in rows if r.node_basis and "own price" not in r.node_basis), None)
    return named or f"at {utilisation:.0%} utilisation"


def _economics_as_published(rows: Sequence[EconomicsRow], cost: CostModel) -> list[str]:
    """Each frontier configuration against its API prices: the API's accuracy on the same items, the ratio at
    the chosen basis and fully loaded; then the write-up's fully-loaded factor and break-even beside the
    computed ones, and every row whose computed cost differs from the printed one, with the reason."""
    on = [r for r in rows if r.on_frontier and r.api_provider]
    if not on:
        return []
    u = DEFAULT_UTILISATION
    table = [
        (
            r.arm,
            r.api_provider,
            f"${r.api_per_mtok:.3f}" if r.api_per_mtok is not None else None,
            "-" if r.api_accuracy is None else f"{r.api_accuracy:.3f} ({r.api_accuracy_items})",
            None if r.api_over_node is None else f"{r.api_over_node:.1f}x",
            None if r.api_over_node_fully_loaded is None else f"{r.api_over_node_fully_loaded:.1f}x",
        )
        for r in sorted(on, key=lambda r: (r.node_per_mtok, r.api_provider or ""))
    ]
    factor = cost.fully_loaded_factor(u)
    published = cost.published_fully_loaded_multiplier
    out = [
        "### Against the API",
        "",
        f"Node cost {_basis(rows, u)}; fully loaded, the same ratio times x{factor:.3f} "
        f"(${cost.quoted_usd('list', u):.2f} / ${cost.quoted_usd('fully_loaded', u):.2f} an active hour"
        + (f"; the write-up rounds it to x{published:g})." if published is not None else ")."),
        f"Break-even resale fill: {cost.break_even().text}.",
        "",
        *_table(table, ("arm", "API", "API $/M tok", "API accuracy (items)", "API / node", "fully loaded")),
        "",
    ]
    differ = {(r.box, r.arm): r.published_note for r in rows if r.published_note}
    if differ:
        out += ["Published and computed differ:", ""]
        out += [
            f"- {arm} ({box}): {note}" for (box, arm), note in sorted(differ.items(), key=lambda kv: kv[0][1])
        ]
        out.append("")
    return out


def _curves(rows: Sequence[CurveView]) -> list[str]:
    """Each curve's points (load, out tok/s with its repeats' min-max, both interactivities, TTFT/TPOT p50,
    state), then each shape's frontier over all its curves (console/readmodel/curve_frontier.py)."""
    if not rows:
        return []
    out = [
        "## Curves",
        "",
        "interactivity 1000/TPOT: 1000 / TPOT p50; per slot: output tok/s / concurrency (tok/s/user).",
        "",
    ]
    header = ("load", "out tok/s", "min-max", "1000/TPOT", "per slot", "TTFT p50 ms", "TPOT p50 ms", "state")
    for c in rows:
        out += [
            f"### #{c.id} {c.arm} on {c.box} at {c.shape}: {c.state}, {c.done}/{len(c.points)} points",
            "",
        ]
        table = [
            (
                f"C={p.concurrency}" if p.rate is None else f"rate {p.rate:g}/s",
                _num(p.out_tok_per_s),
                "-" if p.out_low is None else f"{p.out_low:,.1f}-{_num(p.out_high)}",
                _num(p.interactivity_tpot),
                _num(p.interactivity_per_slot),
                _num(p.ttft_ms_p50),
                _num(p.tpot_ms_p50),
                p.state_text,
            )
            for p in c.points
        ]
        out += [*_table(table, header), ""]
    for shape in dict.fromkeys(c.shape for c in rows):
        points, gpu = chart_points([c for c in rows if c.shape == shape], "tpot")
        on = sorted(frontier(points), key=lambda i: points[i].x.median)
        per = "per GPU" if gpu else "per node"
        out.append(f"Frontier at {shape} (out tok/s {per} against 1000/TPOT):")
        out += [
            f"- #{points[i].curve.id} {points[i].curve.arm} C={points[i].point.concurrency}: "
            f"{points[i].y.text()} out tok/s {per}, interactivity {points[i].x.text()}"
            for i in on
        ] or ["- no measured point yet"]
        out.append("")
    return out


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def _imports(rows: Sequence[ImportRow]) -> list[str]:
    if not rows:
        return []
    lines = ["## Imported data", ""]
    lines += [f"- {fmt_utc(i.t_ms)}: {i.rows} rows from {i.source}. {i.provenance}" for i in rows]
    return lines + [""]


def build_report(
    store: Store,
    *,
    now_ms: int,
    operator_tz: str | None = None,
    utilisation: float = DEFAULT_UTILISATION,
    basis: str = "list",
) -> str:
    """The whole handover as markdown. ``now_ms`` fixes 'remaining' so a report is reproducible."""
    mine = zone(operator_tz)  # an unknown zone is refused before anything is written, timers or not
    boxes = fleet(store, now_ms)
    timer_rows = timers(store, now_ms)
    inputs = economics_inputs(store)
    best = best_per_model(inputs.bench)
    cost = default_cost_model()
    economics, _ = economics_table(inputs, utilisation=utilisation, basis=basis, cost=cost)
    divergence = kldiff_runs(store, at=now_ms)
    parts = [
        "# Campaign handover",
        "",
        f"Written {fmt_utc(now_ms)} from `{store.path}` (schema v{store.schema_version}). Every instant is UTC "
        "unless a zone is named beside it.",
        "",
        *_boxes(boxes),
        *_running(launches(store, now_ms, with_kernels=True)),
        *_timers(timer_rows, mine),
        *_failures(boxes, failed_launches(store, now_ms), failed_tripwires(store, now_ms), timer_rows),
        *_queued(queued_work(store), _overflow(store)),
        *(
            _best([r for r in best if r.source == "measured"], "Best measured rows per model")
            or ["## Best measured rows per model", "", "Nothing measured yet.", ""]
        ),
        *_best(
            [r for r in best if r.source == "imported"],
            "Best imported rows per model (someone else's measurements)",
        ),
        *_quality(inputs.evals, inputs.model_index),
        *_served_pairs(served_pairs(quality_runs(store))),
        *_common(common_tables(store)),
        *_divergence([r for r in divergence if r.source == "measured"], "Logit-level divergence (measured)"),
        *_divergence(
            [r for r in divergence if r.source != "measured"],
            "Logit-level divergence (imported: someone else's measurements)",
        ),
        *_frontier(economics, utilisation),
        *_economics_as_published(economics, cost),
        *_curves(curves(store)),
        *_imports(imports(store)),
    ]
    return "\n".join(parts).rstrip() + "\n"
