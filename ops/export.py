"""Exports in the formats the campaign write-up's readers use: summary_all.tsv, kernels_by_server.tsv,
economics, kldiff.

Every throughput row leaves with its arm, kernel line, tripwire verdict and power limit beside it, and a
diagnostic-only row says so in every format (a ``diagnostic_only`` column: ``yes`` in TSV/CSV, ``true``
in JSON), because a number copied out of context is how a degenerate arm becomes a purchase. So do the
conditions it was measured under: the replicas of the node, the random seed, prefix caching, a kernel other
than the arm asked for (``kernel_fallback``) and the repeat group it belongs to. Rows are node rows; each
replica's share is detail that stays in the store. Economics rows say the same of accuracy borrowed from
another box or arm (``accuracy_basis``) and of a box run below its board maximum (``capped``).
"""

from __future__ import annotations

import csv
import io
import json
import os
import statistics
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from console.economics import (
    DEFAULT_UTILISATION,
    BreakEven,
    CostModel,
    EconomicsRow,
    PerHourRow,
    cost_basis_rows,
    index_text,
)
from console.errors import InputError
from console.readmodel import KldiffRun, LaunchRow, ResultRow, bench_requests, bench_row
from console.readmodel.curves import CurvePointView, CurveView, curves
from console.readmodel.requests import RequestTiming
from console.store import Store
from console.store.results import ModelIndexEntry
from console.timeutil import from_ms

FORMATS = ("tsv", "csv", "json")

SUMMARY_COLUMNS = (
    "arm",
    "box",
    "model",
    "aa_index",
    "configuration",
    "shape",
    "concurrency",
    "replicas",
    "req_per_s",
    "in_tok_per_s",
    "out_tok_per_s",
    "total_tok_per_s",
    "ttft_ms_p50",
    "ttft_ms_p99",
    "tpot_ms_p50",
    "tpot_ms_p99",
    "itl_ms_p50",
    "itl_ms_p99",
    "e2e_ms_p50",
    "e2e_ms_p99",
    "step_ms",
    "per_stream_out_tok_s",
    "kernel_line",
    "tripwire",
    "power_limit_w",
    "client_bound",
    "kernel_fallback",
    "diagnostic_only",
    "queueing",
    "prefix_caching",
    "seed",
    "repeat_group",
    "source",
    "started_utc",
    "provenance",
    "reasoning_parser",
    "thinking",
    "sampling",
)
KERNEL_COLUMNS = ("box", "launch_id", "arm", "model", "state", "category", "line", "failure_reason")
ECONOMICS_COLUMNS = (
    "box",
    "arm",
    "model",
    "rows",
    "node_usd_per_hour",
    "node_usd_per_mtok",
    "accuracy",
    "accuracy_items",
    "accuracy_low_95",
    "accuracy_high_95",
    "accuracy_unscored",
    "accuracy_basis",
    "accuracy_arm",
    "accuracy_box",
    "api_provider",
    "api_usd_per_mtok",
    "api_accuracy",
    "api_accuracy_items",
    "api_over_node",
    "api_over_node_fully_loaded",
    "on_frontier",
    "diagnostic_only",
    "power_limit_w",
    "max_power_w",
    "capped",
    "source",
    "aa_index",
    "node_basis",
    "price_provenance",
    "shapes_note",
    "held",
    "published_node_usd_per_mtok",
    "published_note",
)
"""``export economics``: the accuracy the API endpoint scored on the same items beside each API price, the
ratio at the fully-loaded basis beside the one at the chosen basis, the basis in words, and the write-up's
printed figure with the reason whenever the computed one differs."""
PER_HOUR_COLUMNS = (
    "box",
    "arm",
    "model",
    "shape",
    "concurrency",
    "in_mtok_per_node_hour",
    "out_mtok_per_node_hour",
    "api_provider",
    "api_in_usd_per_mtok",
    "api_out_usd_per_mtok",
    "api_bill_usd",
    "node_usd_per_hour",
    "node_basis",
    "api_over_node",
    "api_over_node_fully_loaded",
    "diagnostic_only",
    "capped",
    "published",
    "note",
    "source",
)
"""``export economics --per-hour``: the write-up's 'The same hour of output, bought from an API'."""
COSTBASE_COLUMNS = ("basis", "label", "utilisation", "gbp_per_node_hour", "usd_per_node_hour", "note")
"""``export costbases``: the write-up's cost-basis table, then its two stated figures beside the computed."""
KLDIFF_COLUMNS = (
    "role",
    "box",
    "model",
    "arm_a",
    "arm_b",
    "kernel_a",
    "kernel_b",
    "positions",
    "top_k",
    "top1_agreement",
    "top5_overlap",
    "mean_kl",
    "p50_kl",
    "p99_kl",
    "control_arm_a",
    "control_arm_b",
    "control_positions",
    "control_top1_agreement",
    "control_mean_kl",
    "excess_kl",
    "verdict",
    "missing_token_method",
    "source",
    "measured_utc",
    "run_id",
    "provenance",
)
CURVE_COLUMNS = (
    "curve_id",
    "curve_source",
    "position",
    "rate",
    "run_index",
    "bench_run_id",
    *SUMMARY_COLUMNS,
)
"""``export curves`` as CSV/TSV: one line per run of each curve point, the summary's figures beside it."""
FLAGS = frozenset({"client_bound", "kernel_fallback", "diagnostic_only", "queueing", "on_frontier", "capped"})
UNKNOWN_OR_FLAG = frozenset({"prefix_caching"})
"""Yes, no, or not known (empty in TSV/CSV, null in JSON)."""
FINE = frozenset({"mean_kl", "p50_kl", "p99_kl", "control_mean_kl", "excess_kl"})
PENCE = frozenset({"gbp_per_node_hour", "usd_per_node_hour"})
"""Cost bases print to the penny and the cent, as the write-up's table does (3.08, not 3.0822)."""
"""Divergences are read in thousandths of a nat and below (the campaign write-up's 0.00158): six decimals,
not four."""


class ExportError(InputError, ValueError):
    """An export that cannot be written as asked (format, destination)."""


@dataclass(frozen=True)
class ExportedPoint:
    """A curve point as read for export: its view and each run's row with its stored requests."""

    view: CurvePointView
    runs: tuple[tuple[ResultRow, tuple[RequestTiming, ...]], ...]


@dataclass(frozen=True)
class ExportedCurve:
    """A curve as read for export: its view, where it came from (console, sweep, imported) and its points."""

    view: CurveView
    source: str
    points: tuple[ExportedPoint, ...]


def read_curves(store: Store) -> list[ExportedCurve]:
    """Every curve with its done points' rows and requests (console/readmodel's readers), oldest first."""
    return [
        ExportedCurve(
            view,
            store.curves.get(view.id).source,
            tuple(
                ExportedPoint(
                    p,
                    tuple(
                        (bench_row(store, str(r.row_id)), tuple(bench_requests(store, r.row_id)))
                        for r in p.runs
                    ),
                )
                for p in view.points
                if p.state == "done"
            ),
        )
        for view in curves(store)
    ]


def summary_rows(
    rows: Iterable[ResultRow], index: dict[str, ModelIndexEntry] | None = None
) -> list[dict[str, Any]]:
    """One row per (arm, box, shape, concurrency) run, measured first, imported after; ``aa_index`` is the
    model's intelligence index as printed (console.economics.index_text) when ``index`` lists it."""
    out = []
    for r in sorted(
        rows, key=lambda r: (r.source != "measured", r.box or "", r.arm, r.shape, r.concurrency, r.id)
    ):
        row = {c: getattr(r, c, None) for c in SUMMARY_COLUMNS}
        row["tripwire"] = r.tripwire.text
        row["aa_index"] = index_text((index or {}).get(r.model or ""))
        row["kernel_line"] = r.kernel_line or "not recorded"
        row["started_utc"] = from_ms(r.started_ms).isoformat() if r.started_ms is not None else None
        out.append(row)
    return out


def kernel_rows(launches: Iterable[LaunchRow]) -> list[dict[str, Any]]:
    """Every server and each kernel line it printed (kernels_by_server.tsv); silence is a row too."""
    rows = []
    for launch in sorted(launches, key=lambda r: (r.box, r.arm, r.id)):
        server = {
            "box": launch.box,
            "launch_id": launch.id,
            "arm": launch.arm,
            "model": launch.model,
            "state": launch.state,
            "failure_reason": launch.failure_reason,
        }
        lines: Sequence[tuple[str | None, str]] = launch.kernel_lines or [(None, "none recorded")]
        rows += [{**server, "category": category, "line": line} for category, line in lines]
    return rows


def kldiff_rows(runs: Iterable[KldiffRun]) -> list[dict[str, Any]]:
    """Every divergence row with its control's figures beside it and the verdict in words; a row without
    a control says so rather than leaving the verdict blank."""
    out = []
    for r in runs:
        row = {c: getattr(r, c, None) for c in KLDIFF_COLUMNS}
        row["verdict"] = r.verdict.text
        row["kernel_a"], row["kernel_b"] = r.kernel_a or "not recorded", r.kernel_b or "not recorded"
        row["measured_utc"] = from_ms(r.t_ms).isoformat() if r.source == "measured" else None
        out.append(row)
    return out


def economics_rows(table: Iterable[EconomicsRow]) -> list[dict[str, Any]]:
    """console.economics' table under the export's column names (USD made explicit)."""
    out = []
    for e in table:
        d = asdict(e)
        d["capped"] = e.capped
        d["node_usd_per_mtok"] = d.pop("node_per_mtok")
        d["api_usd_per_mtok"] = d.pop("api_per_mtok")
        d["published_node_usd_per_mtok"] = d.pop("published_node_per_mtok")
        d["shapes_note"] = e.shapes_note
        d["accuracy_low_95"], d["accuracy_high_95"] = e.accuracy_interval or (None, None)
        out.append({c: d[c] for c in ECONOMICS_COLUMNS})
    return out


def per_hour_rows(table: Iterable[PerHourRow]) -> list[dict[str, Any]]:
    """console.economics' per-hour table under the export's column names (units made explicit)."""
    out = []
    for h in table:
        d = asdict(h)
        d["in_mtok_per_node_hour"] = d.pop("in_m")
        d["out_mtok_per_node_hour"] = d.pop("out_m")
        d["api_in_usd_per_mtok"] = d.pop("api_in_per_mtok")
        d["api_out_usd_per_mtok"] = d.pop("api_out_per_mtok")
        out.append({c: d[c] for c in PER_HOUR_COLUMNS})
    return out


def costbase_rows(cost: CostModel) -> list[dict[str, Any]]:
    """The cost-basis table as the write-up prints it, then the break-even resale fill and the fully-loaded
    multiplier: each figure the write-up states, beside the one its parameters give and how."""
    rows: list[dict[str, Any]] = [
        {
            "basis": r.basis,
            "label": r.label,
            "utilisation": r.utilisation,
            "gbp_per_node_hour": r.gbp_per_node_hour,
            "usd_per_node_hour": r.usd_per_node_hour,
            "note": None,
        }
        for r in cost_basis_rows(cost)
    ]
    even: BreakEven = cost.break_even()
    rows.append(
        {
            "basis": "break_even_fill",
            "label": "resale fill of the idle hours at which the fully-loaded node costs nothing",
            "utilisation": even.utilisation,
            "note": even.text,
        }
    )
    u = DEFAULT_UTILISATION
    factor = cost.fully_loaded_factor(u)
    published = cost.published_fully_loaded_multiplier
    computed = (
        f"computed x{factor:.3f} = ${cost.quoted_usd('list', u):.2f} / ${cost.quoted_usd('fully_loaded', u):.2f} "
        f"(Scan list / fully loaded, each at {u:.0%} use, to the cent)"
    )
    rows.append(
        {
            "basis": "fully_loaded_multiplier",
            "label": "what turns an API / node ratio at Scan list into one fully loaded",
            "utilisation": u,
            "note": computed if published is None else f"x{published:g} (published; {computed})",
        }
    )
    return rows


def curve_rows(curves: Iterable[ExportedCurve]) -> list[dict[str, Any]]:
    """One row per run of each curve point, in the curve's point order and the point's run order."""
    out = []
    for c in curves:
        for p in c.points:
            for k, (row, _requests) in enumerate(p.runs):
                (summary,) = summary_rows([row])
                out.append(
                    {
                        "curve_id": c.view.id,
                        "curve_source": c.source,
                        "position": p.view.position,
                        "rate": p.view.rate,
                        "run_index": k,
                        "bench_run_id": row.id,
                        **summary,
                    }
                )
    return out


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _s(ms: float | None) -> float | None:
    return None if ms is None else ms / 1000


def save_result(
    row: ResultRow, requests: Sequence[RequestTiming], burstiness: float | None
) -> dict[str, Any]:
    """One run as ``vllm bench serve --save-result`` writes it (vllm/benchmarks/serve.py's field names, as
    ops/vllm_bench.py reads them), so ``campaign import vllm-bench`` reads it back; the console's own
    conditions under ``console``. With the run's stored requests: their lists (``ttfts``, ``latencies``,
    ``start_times`` in s, ``input_lens``, ``output_lens``, ``errors``) and the means; ``itls`` is left out,
    since the console keeps each request's ITL median and maximum, not every gap."""
    ok = [q for q in requests if q.ok]
    duration = row.duration_s
    completed = None if row.requests is None else row.requests - (row.failed or 0)

    def total(tokens: str, rate: float | None) -> int | None:
        if requests:
            return sum(getattr(q, tokens) or 0 for q in ok)
        return None if rate is None or duration is None else round(rate * duration)

    record: dict[str, Any] = {
        "model_id": row.model,
        "num_prompts": row.prompts,
        "request_rate": "inf" if row.request_rate is None else row.request_rate,
        "burstiness": 1.0 if burstiness is None else burstiness,
        "max_concurrency": row.concurrency,
        "duration": duration,
        "completed": completed,
        "failed": row.failed,
        "total_input_tokens": total("in_tokens", row.in_tok_per_s),
        "total_output_tokens": total("out_tokens", row.out_tok_per_s),
        "request_throughput": row.req_per_s,
        "output_throughput": row.out_tok_per_s,
        "total_token_throughput": row.total_tok_per_s,
    }
    for theirs, ours in (("ttft", "ttft"), ("tpot", "tpot"), ("itl", "itl"), ("e2el", "e2e")):
        if ok and ours != "itl":  # a mean of per-request ITL medians is not vLLM's mean ITL
            record[f"mean_{theirs}_ms"] = _mean(
                [v for q in ok if (v := getattr(q, f"{ours}_ms")) is not None]
            )
        record[f"median_{theirs}_ms"] = getattr(row, f"{ours}_ms_p50")
        record[f"p99_{theirs}_ms"] = getattr(row, f"{ours}_ms_p99")
    if requests:
        record |= {
            "ttfts": [_s(q.ttft_ms) or 0.0 for q in requests],
            "latencies": [_s(q.e2e_ms) or 0.0 for q in requests],
            "start_times": [_s(q.start_ms) for q in requests],
            "input_lens": [q.in_tokens or 0 for q in requests],
            "output_lens": [q.out_tokens or 0 for q in requests],
            "errors": [q.error or "" for q in requests],
        }
    (summary,) = summary_rows([row])
    record["console"] = {"bench_run_id": row.id, **{k: v for k, v in summary.items() if k not in record}}
    return record


def curves_json(curves: Iterable[ExportedCurve]) -> str:
    """``{"curves": [{curve..., "points": [{point..., "runs": [save_result, ...]}]}]}``."""
    out = []
    for c in curves:
        points = []
        for p in c.points:
            runs = [save_result(row, requests, c.view.burstiness) for row, requests in p.runs]
            points.append({**p.view.summary(), "runs": runs})
        out.append({**c.view.summary(), "source": c.source, "points": points})
    return json.dumps({"curves": out}, indent=2, ensure_ascii=False) + "\n"


def _cell(column: str, value: Any) -> str:
    if column in FLAGS or (column in UNKNOWN_OR_FLAG and value is not None):
        return "yes" if value else "no"
    if value is None:
        return ""
    if isinstance(value, float) and column in PENCE:
        return f"{value:.2f}"
    if isinstance(value, float):
        return f"{value:.{6 if column in FINE else 4}f}".rstrip("0").rstrip(".")
    return str(value)


def render(rows: list[dict[str, Any]], columns: Sequence[str], fmt: str) -> str:
    if fmt not in FORMATS:
        raise ExportError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    if fmt == "json":
        records = [
            {
                c: (
                    bool(r.get(c))
                    if c in FLAGS or (c in UNKNOWN_OR_FLAG and r.get(c) is not None)
                    else r.get(c)
                )
                for c in columns
            }
            for r in rows
        ]
        return json.dumps(records, indent=2, ensure_ascii=False) + "\n"
    buf = io.StringIO()
    if fmt == "csv":
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(columns)
        for r in rows:
            writer.writerow([_cell(c, r.get(c)) for c in columns])
        return buf.getvalue()
    buf.write("\t".join(columns) + "\n")
    for r in rows:
        # A tab or newline inside a cell would shift every column after it; TSV has no quoting.
        buf.write("\t".join(_cell(c, r.get(c)).replace("\t", " ").replace("\n", " ") for c in columns) + "\n")
    return buf.getvalue()


def write_atomic(text: str, destination: str | None) -> None:
    """Write to stdout, or to a file that either appears whole or not at all (temp file + rename)."""
    if destination in (None, "-"):
        sys.stdout.write(text)
        return
    path = Path(destination)
    if path.is_dir():
        raise ExportError(
            f"-o {destination}: is a directory; give a file name, e.g. {path / 'summary_all.tsv'}"
        )
    if not path.parent.exists():
        raise ExportError(f"-o {destination}: directory {path.parent} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as exc:
        raise ExportError(f"-o {destination}: cannot write in {path.parent} ({exc.strerror})") from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise ExportError(f"-o {destination}: {exc.strerror or exc}; nothing was written") from exc
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
