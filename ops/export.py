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
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from console.economics import EconomicsRow
from console.errors import InputError
from console.readmodel import KldiffRun, LaunchRow, ResultRow
from console.timeutil import from_ms

FORMATS = ("tsv", "csv", "json")

SUMMARY_COLUMNS = (
    "arm",
    "box",
    "model",
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
    "accuracy_basis",
    "accuracy_arm",
    "accuracy_box",
    "api_provider",
    "api_usd_per_mtok",
    "api_over_node",
    "on_frontier",
    "diagnostic_only",
    "power_limit_w",
    "max_power_w",
    "capped",
    "source",
)
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
FLAGS = frozenset({"client_bound", "kernel_fallback", "diagnostic_only", "queueing", "on_frontier", "capped"})
UNKNOWN_OR_FLAG = frozenset({"prefix_caching"})
"""Yes, no, or not known (empty in TSV/CSV, null in JSON)."""
FINE = frozenset({"mean_kl", "p50_kl", "p99_kl", "control_mean_kl", "excess_kl"})
"""Divergences are read in thousandths of a nat and below (the campaign write-up's 0.00158): six decimals,
not four."""


class ExportError(InputError, ValueError):
    """An export that cannot be written as asked (format, destination)."""


def summary_rows(rows: Iterable[ResultRow]) -> list[dict[str, Any]]:
    """One row per (arm, box, shape, concurrency) run, measured first, imported after."""
    out = []
    for r in sorted(
        rows, key=lambda r: (r.source != "measured", r.box or "", r.arm, r.shape, r.concurrency, r.id)
    ):
        row = {c: getattr(r, c, None) for c in SUMMARY_COLUMNS}
        row["tripwire"] = r.tripwire.text
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
        out.append({c: d[c] for c in ECONOMICS_COLUMNS})
    return out


def _cell(column: str, value: Any) -> str:
    if column in FLAGS or (column in UNKNOWN_OR_FLAG and value is not None):
        return "yes" if value else "no"
    if value is None:
        return ""
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
