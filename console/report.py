"""The markdown handover (the seed's docs/RESUME.md): what the next person needs to pick the campaign up.

Boxes and their last checks, what runs where, armed timers (UTC, box-local and the operator's zone),
open failures with their reasons, best rows per model and the quality/cost frontier. Measured and
imported figures are never mixed in one table: an imported number is someone else's claim.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import tzinfo
from typing import Any

from console.economics import DEFAULT_UTILISATION, economics_table, frontier_chart
from console.store import Store
from console.store.results import tripwire_verdict
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


def _boxes(store: Store) -> list[str]:
    out = ["## Boxes", ""]
    boxes = store.boxes.every()
    if not boxes:
        return out + ["No boxes.", ""]
    rows = []
    for b in boxes:
        verdicts = store.checks.last_verdicts(b.name)
        checks = ", ".join(f"{v.check} {v.verdict}" for v in verdicts) or "never checked"
        price = f"${b.price_per_hour:.2f}/h" if b.price_per_hour is not None else None
        rows.append((b.name, b.gpu_summary, b.status, b.ssh_target, price, checks))
    return out + _table(rows, ("box", "GPUs", "status", "reached as", "price", "last checks")) + [""]


def _running(store: Store) -> list[str]:
    out = ["## What runs where", ""]
    rows = store.rows(
        """SELECT l.box, l.arm, l.id, l.state, l.port, l.gpus, l.start_ms,
                  (SELECT group_concat(line, ' | ') FROM kernel_lines k WHERE k.launch_id = l.id
                     AND k.category != 'config') AS kernels
           FROM launches l WHERE l.state IN ('requested', 'starting', 'serving', 'stopping')
           ORDER BY l.box, l.arm"""
    )
    if not rows:
        return out + ["Nothing is launched.", ""]
    table = [(r["box"], r["arm"], r["id"], r["state"], r["port"], r["gpus"],
              fmt_utc(r["start_ms"]) if r["start_ms"] else None, r["kernels"] or "not recorded") for r in rows]  # fmt: skip
    return out + _table(table, ("box", "arm", "launch", "state", "port", "GPUs", "started", "kernel line")) + [""]


def _timers(store: Store, now_ms: int, mine: tzinfo) -> list[str]:
    out = ["## Timers", ""]
    timers = store.timers.every(active_only=True)
    if not timers:
        return out + ["No timer is armed: nothing will stop the boxes on its own.", ""]
    rows = []
    for t in timers:
        box_tz = store.timers.box_tz(t.box)
        rows.append((t.id, t.box, t.action, fmt_utc(t.deadline_ms),
                     fmt_zone(t.deadline_ms, zone(box_tz)) if box_tz else "box zone unknown",
                     fmt_zone(t.deadline_ms, mine), fmt_remaining(t.deadline_ms - now_ms), t.state))  # fmt: skip
    header = ("id", "box", "action", "deadline (UTC)", "box local", "your local", "in", "state")
    return out + _table(rows, header) + [""]


def _failures(store: Store) -> list[str]:
    out = ["## Open failures", ""]
    rows: list[tuple[Any, ...]] = []
    for b in store.boxes.every(include_destroyed=False):
        for v in store.checks.last_failed(b.name):
            rows.append((b.name, f"check {v.check}", v.reason))
    for r in store.results.failed_launches():
        rows.append((r["box"], f"launch {r['arm']}", r["failure_reason"] or f"exit code {r['exit_code']}"))
    for r in store.results.failed_tripwires():
        rows.append((r["box"], f"tripwire {r['arm']}", f"{r['verdict']}: its throughput is diagnostic only"))
    for t in store.timers.every():
        if t.state == "failed":
            rows.append((t.box, f"timer {t.id}", f"{t.action} at {fmt_utc(t.deadline_ms)} failed"))
    if not rows:
        return out + ["None.", ""]
    return out + _table(rows, ("box", "what", "reason")) + [""]


def _best(store: Store, source: str, title: str) -> list[str]:
    rows = store.results.best_per_model(source=source)
    if not rows:
        return []
    table = [(r["model"], r["arm"], r["box"], f"{r['shape']} C{r['concurrency']}", r["out_tok_per_s"],
              None if r["ttft_ms_p50"] is None else f"{r['ttft_ms_p50'] / 1000:.2f} s" + (" (queueing)" if r["queueing"] else ""),
              r["kernel_line"] or "not recorded",
              tripwire_verdict(r["tw_ok"], r["tw_degenerate"], r["tw_wrong"], r["tw_total"], r["tw_passed"], r["tw_leak"]),
              None if r["power_limit"] is None else f"{r['power_limit']:.0f} W")
             for r in rows]  # fmt: skip
    header = ("model", "arm", "box", "shape", "out tok/s", "TTFT p50", "kernel line", "tripwire", "power limit")
    note = "Fastest row per model and shape; diagnostic-only rows (failed tripwire) are left out."
    return [f"## {title}", "", note, "", *_table(table, header), ""]


def _quality(store: Store) -> list[str]:
    rows = store.results.eval_runs()
    if not rows:
        return []
    table = [(r["model"], r["configuration"], r["items"], f"{r['overall']:.3f}", r["source"], r["note"]) for r in rows]
    return ["## Task accuracy", "", *_table(table, ("model", "configuration", "items", "overall", "source", "note")), ""]


def _frontier(store: Store, utilisation: float) -> list[str]:
    rows, _ = economics_table(store, utilisation=utilisation)
    best: dict[tuple[str | None, str], Any] = {}
    for r in rows:
        if r.on_frontier and (r.box, r.arm) not in best:
            best[(r.box, r.arm)] = r
    if not best:
        return []
    table = [(r.model, r.arm, r.box, r.rows, f"{r.accuracy:.3f}" + ("" if r.accuracy_box == r.box else f" ({r.accuracy_box})"),
              f"${r.node_per_mtok:.3f}", r.source) for r in sorted(best.values(), key=lambda r: r.node_per_mtok)]  # fmt: skip
    return [
        "## Quality/cost frontier",
        "",
        f"Nothing is both cheaper and better than these (node cost at {utilisation:.0%} utilisation, USD per "
        "million tokens averaged per request over router and promptopt). `campaign export economics` has "
        "every configuration and its API prices.",
        "",
        *_table(table, ("model", "arm", "box", "rows", "accuracy", "node $/M tok", "source")),
        "",
        "```",
        frontier_chart(rows).rstrip(),
        "```",
        "",
    ]


def _imports(store: Store) -> list[str]:
    imports = store.results.imports()
    if not imports:
        return []
    lines = ["## Imported data", ""]
    for i in imports:
        lines.append(f"- {fmt_utc(i['t_ms'])}: {i['rows']} rows from {i['source']}. {i['provenance']}")
    return lines + [""]


def build_report(store: Store, *, now_ms: int, operator_tz: str | None = None,
                 utilisation: float = DEFAULT_UTILISATION) -> str:  # fmt: skip
    """The whole handover as markdown. ``now_ms`` fixes 'remaining' so a report is reproducible."""
    mine = zone(operator_tz)  # an unknown zone is refused before anything is written, timers or not
    parts = [
        "# Campaign handover",
        "",
        f"Written {fmt_utc(now_ms)} from `{store.path}` (schema v{store.schema_version}). Every instant is UTC "
        "unless a zone is named beside it.",
        "",
        *_boxes(store),
        *_running(store),
        *_timers(store, now_ms, mine),
        *_failures(store),
        *(_best(store, "measured", "Best measured rows per model")
          or ["## Best measured rows per model", "", "Nothing measured yet.", ""]),
        *_best(store, "imported", "Best imported rows per model (someone else's measurements)"),
        *_quality(store),
        *_frontier(store, utilisation),
        *_imports(store),
    ]  # fmt: skip
    return "\n".join(parts).rstrip() + "\n"
