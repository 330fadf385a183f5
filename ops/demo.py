"""The demo campaign: the campaign write-up's published figures (docs/campaign.md), imported into a state.db.

A newcomer's first start should show a real campaign, not an empty screen. The figures live in
``ops/data/seed/`` (TSV/TOML files that say which table of the write-up each came from); this module
only reads them, checks that they hang together and hands them to ``store.results.record_import``,
which marks every row ``source='imported'`` with its provenance. No number is typed in here. Its throughput
rows become curves (``source='imported'``), one per (arm, box, shape) at the concurrencies the write-up
measured: mostly a one-point curve, never an invented point.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

from agents.tripwire.grade import Thresholds
from console.economics import COST_BASES, DEFAULT_UTILISATION
from console.economics.hour import PER_HOUR_TABLE
from console.economics.table import FRONTIER_TABLE
from console.errors import InputError, Refused
from console.readmodel import KldiffVerdict
from console.readmodel.quality import COMMON_TABLE
from console.store import Box, Store
from console.store.errors import full_disk_guard
from console.store.history import History
from console.store.kldiff import ImportedKldiff
from console.store.quality import PublishedPair, PublishedRun
from console.store.queued import QUEUED_KINDS, QueuedItem
from console.store.results import (
    ApiPrice,
    ImportedBench,
    ImportedLaunch,
    ImportedTripwire,
    ImportOutcome,
    ImportPayload,
    ModelIndexEntry,
    PublishedFigure,
)
from ops.demo_history import build_history

SEED_DIR = (
    resources.files("ops") / "data" / "seed"
)  # package data: the wheel carries it, no source tree needed
SOURCE = "the campaign write-up (docs/campaign.md)"
"""The import's name in state.db (the write-up's file name where it was published, not a path in this
repository): kept as it was first released, so re-importing replaces the old import instead of doubling it."""
PROVENANCE = (
    "Sqwish Labs, 'Blackwell inference benchmarks: 4x RTX PRO 6000 and 8x RTX 5090', September 2026: the "
    "headline and per-model throughput tables (600 W Server Edition, 400 W Workstation, 8x RTX 5090), the "
    "task-accuracy tables, their paired comparisons and noise floor, the logit-level divergence tables and the "
    "Economics prices, transcribed in ops/data/seed/"
)
QUALITY_PROVENANCE = "the campaign write-up's item-paired comparisons (ops/data/seed/quality_*.tsv)"
FAMILIES = ("maths", "code", "tools", "long_ctx", "knowledge", "instructions")
LAUNCH_STATES = ("stopped", "failed", "queued")
"""arms.tsv launch_state: it ran and stopped, the engine refused it, or it was queued and never ran (no launch)."""

Progress = Callable[[str, int, int], None]
"""(step, done, total): the CLI draws it as a bar on stderr."""


class DemoDataError(InputError, ValueError):
    """A data file that does not parse or does not hang together; names the file, line and column."""


class MeasuredDataPresent(Refused):
    """The database holds measured results; mixing the demo in needs an explicit --force."""


@dataclass(frozen=True)
class Cell:
    """A TSV row with its origin, so every conversion error can say file:line."""

    values: dict[str, str]
    where: str

    def text(self, key: str) -> str | None:
        value = self.values.get(key, "").strip()
        return value or None

    def number(self, key: str, kind: type = float) -> Any:
        value = self.text(key)
        if value is None:
            return None
        try:
            return kind(value)
        except ValueError:
            raise DemoDataError(
                f"{self.where}: column {key!r} is {value!r}, expected a {kind.__name__}"
            ) from None

    def need(self, key: str, kind: type = str) -> Any:
        value = self.number(key, kind) if kind is not str else self.text(key)
        if value is None:
            raise DemoDataError(f"{self.where}: column {key!r} is empty; the row needs it")
        return value


def read_tsv(path: Traversable) -> list[Cell]:
    """Rows of a TSV whose ``#`` lines are its provenance header; the first other line names the columns."""
    header: list[str] | None = None
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        if header is None:
            header = fields
            continue
        if len(fields) > len(header):
            raise DemoDataError(f"{path.name}:{number}: {len(fields)} columns, the header has {len(header)}")
        rows.append(
            Cell(
                dict(zip(header, fields + [""] * (len(header) - len(fields)), strict=True)),
                f"{path.name}:{number}",
            )
        )
    return rows


def _kernel_category(text: str) -> str:
    lowered = text.lower()
    if "moe" in lowered or "expert" in lowered:
        return "moe"
    if "attention" in lowered:
        return "attention"
    return "linear"


def _layout(tp: int, replicas: int) -> list[list[int]]:
    return [list(range(r * tp, (r + 1) * tp)) for r in range(replicas)]


def digest(data_dir: Traversable = SEED_DIR) -> str:
    h = hashlib.sha256()
    for path in sorted(data_dir.iterdir(), key=lambda p: p.name):
        if path.is_file():
            h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def kldiff_rows(data_dir: Traversable, arms: dict[tuple[str, str], Cell]) -> list[ImportedKldiff]:
    """The divergence tables, each pair after its control, the verdict in the read model's words."""
    rows: list[ImportedKldiff] = []
    floors: dict[str, float] = {}
    for c in read_tsv(data_dir / "kldiff.tsv"):
        label, role, box = c.need("label"), c.need("role"), c.text("box")
        control = c.text("control")
        if control is not None and control not in floors:
            raise DemoDataError(f"{c.where}: control {control!r} is not a control row above it")
        mean_kl = c.need("mean_kl", float)
        if role == "control":
            floors[label] = mean_kl
        verdict = KldiffVerdict.of(role, mean_kl, floors[control] if control else None)
        rows.append(
            {
                "label": label,
                "role": role,
                "control": control,
                "model": c.text("model"),
                "box": box,
                "arm_a": c.need("arm_a"),
                "arm_b": c.need("arm_b"),
                "kernel_a": _kernel(arms, c.need("arm_a"), box),
                "kernel_b": _kernel(arms, c.need("arm_b"), box),
                "positions": c.number("positions", int),
                "top_k": 20,
                "top1_agreement": c.number("top1_agreement"),
                "top5_overlap": c.number("top5_overlap"),
                "mean_kl": mean_kl,
                "verdict": verdict.text,
                "note": c.text("note"),
                "provenance": f"{c.need('table')} ({c.where})",
            }
        )
    return rows


def _kernel(arms: dict[tuple[str, str], Cell], arm: str, box: str | None) -> str | None:
    """The kernel arms.tsv names for ``arm`` on ``box``; None for an arm it does not list."""
    row = arms.get((arm, box or ""))
    return row.text("kernel") if row else None


def load_payload(data_dir: Traversable = SEED_DIR) -> ImportPayload:
    """Read and cross-check the data files into what ``record_import`` writes."""
    payload = ImportPayload()
    power = _load_boxes(data_dir, payload)
    shapes = {c.need("shape"): c for c in read_tsv(data_dir / "shapes.tsv")}
    arms = _load_arms(data_dir, power, payload)
    _load_throughput(data_dir, arms, shapes, power, payload)
    _load_speculation(data_dir, arms, payload)
    _load_evals(data_dir, arms, payload)
    _load_quality(data_dir, arms, payload)
    runs = {r.label for r in payload.quality_runs}
    payload.api_prices.extend(_api_price(c, runs) for c in read_tsv(data_dir / "api_prices.tsv"))
    payload.model_index.extend(_model_index(c) for c in read_tsv(data_dir / "aa_index.tsv"))
    payload.published_figures.extend(_published_economics(data_dir, arms))
    payload.kldiff_runs = kldiff_rows(data_dir, arms)
    return payload


def read_boxes(data_dir: Traversable) -> list[dict[str, Any]]:
    """boxes.toml's entries (the demo's boxes and the recorded history's, ops/demo_history.py)."""
    try:
        boxes_toml = tomllib.loads((data_dir / "boxes.toml").read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise DemoDataError(f"boxes.toml: {exc}") from exc
    return list(boxes_toml.get("box", []))


def _load_boxes(data_dir: Traversable, payload: ImportPayload) -> dict[str, float]:
    """The boxes of boxes.toml, each with its board maximum; returns the power limit each was run at."""
    power: dict[str, float] = {}
    for b in read_boxes(data_dir):
        payload.boxes.append(
            Box(
                name=b["name"],
                kind="ssh",
                provider=b.get("provider"),
                price_per_hour=b.get("price_per_hour"),
                status="imported",
                status_detail=f"imported figures, not reachable: {b['provenance']}",
                tz=b.get("tz"),
                gpu_summary=b.get("gpu_summary"),
                price_basis=_price_basis(b),
                price_provenance=b.get("price_provenance"),
            )
        )
        power[b["name"]] = float(b["power_limit_w"])
        payload.box_max_power[b["name"]] = float(b["max_power_w"])
    return power


def _price_basis(box: dict[str, Any]) -> str | None:
    """What the box's price is (console/economics/costs.py reads it); a basis the cost model lacks is refused."""
    basis = box.get("price_basis")
    if basis is not None and basis not in COST_BASES:
        raise DemoDataError(
            f"boxes.toml: box {box['name']!r} has price_basis {basis!r}; use one of {', '.join(COST_BASES)}"
        )
    return None if basis is None else str(basis)


def _load_arms(
    data_dir: Traversable, power: dict[str, float], payload: ImportPayload
) -> dict[tuple[str, str], Cell]:
    """Each arm of arms.tsv as a launch, with its tripwire where the write-up printed one; returns the arms'
    rows by (arm, box)."""
    arms: dict[tuple[str, str], Cell] = {}
    for c in read_tsv(data_dir / "arms.tsv"):
        key = (c.need("arm"), c.need("box"))
        if key[1] not in power:
            raise DemoDataError(f"{c.where}: box {key[1]!r} is not in boxes.toml")
        if key in arms:
            raise DemoDataError(
                f"{c.where}: arm {key[0]} on {key[1]} is listed twice (first at {arms[key].where})"
            )
        arms[key] = c
        if c.need("launch_state") not in LAUNCH_STATES:
            raise DemoDataError(
                f"{c.where}: launch_state {c.need('launch_state')!r} is not one of {', '.join(LAUNCH_STATES)}"
            )
        if c.need("launch_state") == "queued":
            continue  # never ran: its queued_work.tsv item is the record (load_queued), not a launch
        launch = _arm_launch(c, key)
        payload.launches.append(launch)
        if c.text("tw_total"):
            payload.tripwires[launch.launch_id] = _arm_tripwire(c, key, launch)
    return arms


def _arm_launch(c: Cell, key: tuple[str, str]) -> ImportedLaunch:
    kernel = c.text("kernel")
    launch = ImportedLaunch(
        box=key[1],
        arm=key[0],
        model=c.need("model"),
        configuration=c.text("configuration") or key[0],
        gpus=_layout(c.need("tp", int), c.need("replicas", int)),
        tensor_parallel=c.need("tp", int),
        kernel_lines=[(_kernel_category(kernel), kernel)] if kernel else [],
        state=c.need("launch_state"),
        failure_reason=c.text("failure_reason"),
        kv_cache_tokens=c.number("kv_cache_tokens", int),
    )
    if launch.state == "failed" and not launch.failure_reason:
        raise DemoDataError(f"{c.where}: a failed launch needs its failure_reason")
    return launch


AGENT_RULE = Thresholds()
"""The tripwire's pass rule on the box (its defaults: the write-up's readings)."""


def tripwire_passed(
    ok: int, degenerate: int | None, total: int, rule: Thresholds = AGENT_RULE
) -> bool | None:
    """Whether the agent would pass these counts (agents/tripwire/grade.py: at least ``min_ok`` ok, at most
    ``max_degenerate`` degenerate); None when only ok/total was printed and the items that were not ok could
    be degenerate enough to fail or not (the degenerate count is unknown)."""
    if ok < rule.min_ok:
        return False
    if degenerate is not None:
        return degenerate <= rule.max_degenerate
    return True if total - ok <= rule.max_degenerate else None


def _arm_tripwire(c: Cell, key: tuple[str, str], launch: ImportedLaunch) -> ImportedTripwire:
    """The printed counts, passed as the agent's thresholds judge them: a ``tw_passed`` that disagrees is an
    error unless ``tw_override`` gives the reason; where the split is unknown the printed verdict stands."""
    ok, total, degenerate = c.need("tw_ok", int), c.need("tw_total", int), c.number("tw_degenerate", int)
    printed, derived = c.need("tw_passed", int), tripwire_passed(ok, degenerate, total)
    override = c.text("tw_override")
    if derived is not None and bool(printed) != derived and not override:
        rule = AGENT_RULE
        raise DemoDataError(
            f"{c.where}: tw_passed is {printed} but {ok}/{total} ok"
            + ("" if degenerate is None else f", {degenerate} degenerate")
            + f" {'passes' if derived else 'fails'} the agent's rule (at least {rule.min_ok} ok, at most "
            f"{rule.max_degenerate} degenerate: agents/tripwire/grade.py); set tw_passed to {int(derived)} or "
            "give tw_override the reason"
        )
    notes = [c.need("table"), c.text("note") or "tripwire as printed"]
    if derived is None:
        notes.append("degenerate count unknown: the write-up prints only ok/total, its verdict kept")
    if override and derived is not None and bool(printed) != derived:
        notes.append(f"verdict overrides the agent's rule: {override}")
    return {
        "box": key[1],
        "arm": key[0],
        "model": launch.model,
        "ok": ok,
        "degenerate": degenerate or 0,
        "wrong": c.number("tw_wrong", int) or 0,
        "total": total,
        "passed": printed if override or derived is None else int(derived),
        "items": {"split_published": degenerate is not None},
        "provenance": "; ".join(notes),
    }


def _load_throughput(
    data_dir: Traversable,
    arms: dict[tuple[str, str], Cell],
    shapes: dict[str, Cell],
    power: dict[str, float],
    payload: ImportPayload,
) -> None:
    """The throughput tables as bench rows; each row's arm must be in arms.tsv and its shape in shapes.tsv."""
    for c in read_tsv(data_dir / "throughput.tsv"):
        key = (c.need("arm"), c.need("box"))
        arm = arms.get(key)
        if arm is None:
            raise DemoDataError(f"{c.where}: arm {key[0]} on {key[1]} is not in arms.tsv")
        if arm.need("launch_state") == "queued":
            raise DemoDataError(
                f"{c.where}: arm {key[0]} on {key[1]} is queued in arms.tsv ({arm.where}): a queued arm has no "
                "figures; give it a launch_state it ran with, or drop this row"
            )
        shape = shapes.get(c.need("shape"))
        if shape is None:
            raise DemoDataError(f"{c.where}: shape {c.need('shape')!r} is not in shapes.tsv")
        table = c.text("published_table")
        if table is not None:  # another table's reading of a measured configuration: read beside it
            payload.published_figures.append(_published_reading(c, key, table))
            continue
        row = _bench_row(c, key, arm, shape, power[key[1]])
        tripwire = payload.tripwires.get(row["launch_id"])
        if tripwire is not None and not tripwire["passed"]:
            row["diagnostic_only"] = 1  # a failed tripwire makes every row of its launch diagnostic-only
        payload.bench_runs.append(row)


def _published_reading(c: Cell, key: tuple[str, str], table: str) -> PublishedFigure:
    ttft_s = c.number("ttft_p50_s")
    figures = {"out_tok_s": c.need("out_tok_s", float)}
    if ttft_s is not None:
        figures["ttft_p50_s"] = ttft_s
    return PublishedFigure(
        source_table=table,
        arm=key[0],
        box=key[1],
        shape=c.need("shape"),
        concurrency=c.need("concurrency", int),
        figures=figures,
        note=c.text("note"),
        provenance=f"{table} ({c.where})",
    )


def _text_provenance(c: Cell) -> str | None:
    """'text: ...' for a row or cells the write-up's prose gives rather than a table."""
    cells = c.text("from_text")
    if cells is None:
        return None
    what = "the whole row" if cells == "row" else cells
    return f"text ({what} from the write-up's prose)"


def _bench_row(c: Cell, key: tuple[str, str], arm: Cell, shape: Cell, power_limit_w: float) -> ImportedBench:
    out_tok, in_tok = c.need("out_tok_s", float), c.number("in_tok_s")
    ttft_s = c.number("ttft_p50_s")
    notes = (arm.text("table"), _text_provenance(c), c.text("note"), c.text("step_note"))
    kernel = arm.text("kernel")
    return {
        "box": key[1],
        "launch_id": f"import:{key[1]}:{key[0]}",
        "arm": key[0],
        "model": arm.need("model"),
        "configuration": arm.text("configuration"),
        "shape": shape.need("shape"),
        "concurrency": c.need("concurrency", int),
        "replicas": arm.need("replicas", int),
        "input_len": shape.need("input_len", int),
        "output_len": shape.need("output_len", int),
        "prefix_len": shape.need("prefix_len", int),
        "out_tok_per_s": out_tok,
        "in_tok_per_s": in_tok,
        "total_tok_per_s": None if in_tok is None else in_tok + out_tok,
        "ttft_ms_p50": None if ttft_s is None else ttft_s * 1000,
        "tpot_ms_p50": c.number("tpot_ms_p50"),
        "step_ms": c.number("step_ms"),
        "per_stream_out_tok_s": c.number("per_stream_tok_s"),
        "kernel_line": f"{kernel} (as the write-up names it)"
        if kernel and arm.text("kernel_source") != "engine"
        else kernel,
        "power_limit_w": power_limit_w,
        "queueing": c.number("queueing", int) or 0,
        "diagnostic_only": c.number("diagnostic_only", int) or 0,
        "provenance": "; ".join(x for x in notes if x),
    }


@dataclass(frozen=True)
class _Speculation:
    """One speculation.tsv row: a drafter arm's published draft tokens and accepted share, for one row or all."""

    where: str
    key: tuple[str, str]
    tokens: int
    share: float
    row: tuple[str, int] | None  # (shape, concurrency); None: the arm's figure
    note: str | None


def _speculation(c: Cell, arms: dict[tuple[str, str], Cell]) -> _Speculation:
    key = (c.need("arm"), c.need("box"))
    if key not in arms:
        raise DemoDataError(f"{c.where}: arm {key[0]} on {key[1]} is not in arms.tsv")
    tokens, share = c.need("draft_tokens", int), c.need("acceptance", float)
    if tokens < 1 or not 0 <= share <= 1:
        raise DemoDataError(
            f"{c.where}: {tokens} draft tokens, acceptance {share}: give at least one token per step and the "
            "accepted share of drafted tokens, 0 to 1"
        )
    shape, concurrency = c.text("shape"), c.number("concurrency", int)
    if (shape is None) != (concurrency is None):
        raise DemoDataError(f"{c.where}: give both shape and concurrency (one row), or neither (the arm)")
    row = None if shape is None else (shape, concurrency)
    return _Speculation(c.where, key, tokens, share, row, c.text("note"))


def _load_speculation(
    data_dir: Traversable, arms: dict[tuple[str, str], Cell], payload: ImportPayload
) -> None:
    """A drafter arm's published draft tokens and acceptance (speculation.tsv) onto its throughput rows: a figure
    with a shape and concurrency on that row, one without on each row of the arm no figure is tied to; where every
    row has its own, beside them in their provenance, in words."""
    figures = [_speculation(c, arms) for c in read_tsv(data_dir / "speculation.tsv")]
    for f in sorted(figures, key=lambda f: f.row is None):  # the rows' own figures first
        rows = [r for r in payload.bench_runs if (r["arm"], r["box"]) == f.key]
        if f.row is not None:
            rows = [r for r in rows if (r["shape"], r["concurrency"]) == f.row]
            if not rows:
                raise DemoDataError(
                    f"{f.where}: throughput.tsv has no row of {f.key[0]} on {f.key[1]} at {f.row}"
                )
        free = [r for r in rows if f.row is not None or "spec_acceptance_published" not in r]
        for r in free:
            r["spec_tokens"], r["spec_acceptance_published"] = f.tokens, f.share
        for r in rows if not free else ():
            r["provenance"] += f"; also published: {f.tokens} draft tokens, {f.share:.0%} accepted ({f.note})"


def _families(c: Cell) -> dict[str, float]:
    """A row's family accuracies (quality.tsv, quality_runs.tsv): the FAMILIES columns it fills."""
    return {f: share for f in FAMILIES if (share := c.number(f)) is not None}


def _load_evals(data_dir: Traversable, arms: dict[tuple[str, str], Cell], payload: ImportPayload) -> None:
    """The task-accuracy tables as eval runs; a row naming an arm must name one in arms.tsv."""
    for c in read_tsv(data_dir / "quality.tsv"):
        arm_name, box = c.text("arm"), c.text("box")
        if arm_name and (arm_name, box) not in arms:
            raise DemoDataError(f"{c.where}: arm {arm_name} on {box} is not in arms.tsv")
        overall = c.need("overall", float)
        families = _families(c)
        payload.eval_runs.append(
            {
                "box": box,
                "arm": arm_name,
                "model": c.need("model"),
                "configuration": c.need("configuration"),
                "items": c.need("items", int),
                "overall": overall,
                "families": families,
                "note": c.text("note"),
                "provenance": "Task accuracy, served the way each vendor says to (403 items)",
            }
        )


def _api_price(c: Cell, runs: set[str]) -> ApiPrice:
    run = c.text("accuracy_run")
    if run is not None and run not in runs:
        raise DemoDataError(f"{c.where}: accuracy_run {run!r} is not a run of quality_runs.tsv")
    return ApiPrice(
        c.need("model"),
        c.need("provider"),
        c.need("in_per_mtok", float),
        c.need("out_per_mtok", float),
        c.number("cached_in_per_mtok"),
        c.text("note"),
        run,
    )


def _model_index(c: Cell) -> ModelIndexEntry:
    """A model's Artificial Analysis index as the write-up prints it (empty: the dash, absent)."""
    return ModelIndexEntry(
        model=c.need("model"),
        value=c.number("aa_index"),
        estimate=bool(c.number("estimate", int)),
        index_name=c.need("index"),
        version=c.need("version"),
        as_of=c.need("as_of"),
        provenance="; ".join(x for x in (f"the write-up's preamble ({c.where})", c.text("note")) if x),
    )


FRONTIER_FIGURES = (
    "accuracy",
    "node_per_m",
    "api_median_per_m",
    "api_cheapest_per_m",
    "median_ratio",
    "api_accuracy",
)
PER_HOUR_FIGURES = ("in_m", "out_m", "api_in", "api_out", "api_bill", "ratio_list70", "ratio_fully70")


def _published_economics(data_dir: Traversable, arms: dict[tuple[str, str], Cell]) -> list[PublishedFigure]:
    """The Economics tables' printed figures per configuration (frontier and per-hour), with the reason the
    data file gives where the console's own figure differs; every row must name an arm of arms.tsv."""
    out = []
    for name, table, columns in (
        ("econ_frontier.tsv", FRONTIER_TABLE, FRONTIER_FIGURES),
        ("econ_per_hour.tsv", PER_HOUR_TABLE, PER_HOUR_FIGURES),
    ):
        for c in read_tsv(data_dir / name):
            key = (c.need("arm"), c.need("box"))
            if key not in arms:
                raise DemoDataError(f"{c.where}: arm {key[0]} on {key[1]} is not in arms.tsv")
            figures = {k: v for k in columns if (v := c.number(k)) is not None}
            out.append(
                PublishedFigure(
                    source_table=table,
                    arm=key[0],
                    box=key[1],
                    shape=c.text("shape"),
                    concurrency=c.number("concurrency", int),
                    figures={**figures, "utilisation": DEFAULT_UTILISATION},
                    note=c.text("reason") or c.text("note"),
                    provenance=f"Economics, '{table}' ({c.where}), at Scan list and {DEFAULT_UTILISATION:.0%} use",
                )
            )
    return out


def _sampling(c: Cell) -> dict[str, Any] | None:
    """A published run's sampling as the JSON object it was sent as; empty: the write-up does not say."""
    text = c.text("sampling")
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise DemoDataError(
            f'{c.where}: sampling {text!r} is not JSON ({e.msg}); write an object such as {{"temperature": 1.0}}'
        ) from None
    if not isinstance(value, dict):
        raise DemoDataError(
            f'{c.where}: sampling {text!r} is not a JSON object; write one such as {{"temperature": 1.0}}'
        )
    return value


COMMON_FIGURES = {
    "all_scored": "quality_all_scored",
    "maths_tokens": "maths_mean_tokens",
    "maths_at_cap": "maths_at_cap",
}
"""quality_runs.tsv cells that 'Four quantisers of one model' prints for a build, and their figure names."""


def _common_figures(c: Cell, arm: str | None, box: str | None) -> list[PublishedFigure]:
    """What the four-quantisers section prints for a run's build beyond its accuracy: its 'quality (all
    scored)' cell and its maths answers' mean length and share at the cap, if any."""
    given = {cell: v for cell in COMMON_FIGURES if (v := c.number(cell)) is not None}
    if not given:
        return []
    if not (arm and box):
        raise DemoDataError(f"{c.where}: {', '.join(given)} need the run's arm and box; give both")
    figures = {COMMON_FIGURES[cell]: v for cell, v in given.items()}
    return [
        PublishedFigure(
            source_table=COMMON_TABLE,
            arm=arm,
            box=box,
            shape=None,
            concurrency=None,
            figures=figures,
            note=None,
            provenance=f"'{COMMON_TABLE}' ({c.where})",
        )
    ]


CAPS = {"32k": 32_768, "65k": 65_536}
"""A published run's caps as the write-up names them: its per-family caps (maths at 32,768), or 65k of room."""


def _caps(c: Cell) -> dict[str, int] | None:
    text = c.text("caps")
    if text is None:
        return None
    if text not in CAPS:
        raise DemoDataError(
            f"{c.where}: caps {text!r} is not one of {', '.join(CAPS)}; write the caps as printed"
        )
    return {"*": CAPS[text]}


def _routing(c: Cell) -> str | None:
    routing = c.text("routing")
    if routing not in (None, "default", "pinned"):
        raise DemoDataError(f"{c.where}: routing {routing!r} is neither 'default' nor 'pinned'")
    return routing


def _load_quality(data_dir: Traversable, arms: dict[tuple[str, str], Cell], payload: ImportPayload) -> None:
    """The write-up's item-paired comparisons and its noise-floor repeats, as published runs and pairs."""
    runs: dict[str, Cell] = {}
    for c in read_tsv(data_dir / "quality_runs.tsv"):
        name, arm, box = c.need("run"), c.text("arm"), c.text("box")
        if name in runs:
            raise DemoDataError(f"{c.where}: run {name!r} is listed twice (first at {runs[name].where})")
        if arm and box and (arm, box) not in arms:
            raise DemoDataError(f"{c.where}: arm {arm} on {box} is not in arms.tsv")
        runs[name] = c
        payload.published_figures.extend(_common_figures(c, arm, box))
        payload.quality_runs.append(
            PublishedRun(
                label=name,
                suite=c.need("suite"),
                items=c.need("items", int),
                accuracy=c.need("accuracy", float),
                arm=arm,
                box=box,
                model=c.text("model"),
                truncation_rate=c.number("truncation"),
                mean_output_tokens=c.number("mean_tokens"),
                provenance="; ".join(x for x in (QUALITY_PROVENANCE, c.text("note")) if x),
                reasoning_parser=c.text("reasoning_parser"),
                thinking=c.text("thinking"),
                sampling=_sampling(c),
                families=_families(c),
                caps=_caps(c),
                provider=c.text("provider"),
                precision=c.text("precision"),
                routing=_routing(c),
                degenerate_rate=c.number("degenerate"),
                stopped=c.text("stopped"),
            )
        )
    for c in read_tsv(data_dir / "quality_pairs.tsv"):
        a, b = c.need("a"), c.need("b")
        for name in (a, b):
            if name not in runs:
                raise DemoDataError(f"{c.where}: run {name!r} is not in quality_runs.tsv")
        if c.need("kind") not in ("repeat", "comparison"):
            raise DemoDataError(f"{c.where}: kind {c.need('kind')!r} is neither 'repeat' nor 'comparison'")
        items, a_only, b_only = c.need("items", int), c.need("a_only", int), c.need("b_only", int)
        if a_only + b_only > items:
            raise DemoDataError(
                f"{c.where}: a split of {a_only} to {b_only} cannot come from {items} common items"
            )
        payload.quality_pairs.append(
            PublishedPair(
                kind=c.need("kind"),
                a=a,
                b=b,
                items=items,
                a_only=a_only,
                b_only=b_only,
                a_accuracy=c.number("a_accuracy"),
                b_accuracy=c.number("b_accuracy"),
                a_truncation=c.number("a_truncation"),
                b_truncation=c.number("b_truncation"),
                a_mean_tokens=c.number("a_mean_tokens"),
                b_mean_tokens=c.number("b_mean_tokens"),
                note=c.text("note"),
                provenance=f"{QUALITY_PROVENANCE}, section '{c.need('where')}'",
            )
        )


def load_queued(data_dir: Traversable = SEED_DIR) -> list[QueuedItem]:
    """The write-up's queued work (queued_work.tsv), checked against arms.tsv: a queued launch is an arms.tsv
    row in launch_state 'queued' and each such row has its item; a repeat or eval names an arm that ran."""
    states = {(c.need("arm"), c.need("box")): c for c in read_tsv(data_dir / "arms.tsv")}
    items: list[QueuedItem] = []
    launched: set[tuple[str, str]] = set()
    for c in read_tsv(data_dir / "queued_work.tsv"):
        kind, arm, box = c.need("kind"), c.text("arm"), c.text("box")
        if kind not in QUEUED_KINDS:
            raise DemoDataError(f"{c.where}: kind {kind!r} is not one of {', '.join(QUEUED_KINDS)}")
        row = states.get((arm, box)) if arm and box else None
        if kind == "launch":
            if row is None or row.need("launch_state") != "queued":
                raise DemoDataError(
                    f"{c.where}: a queued launch of {arm} on {box} needs its arms.tsv row in launch_state 'queued'"
                )
            launched.add((row.need("arm"), row.need("box")))
        elif arm and box and (row is None or row.need("launch_state") == "queued"):
            raise DemoDataError(f"{c.where}: a {kind} of {arm} on {box} needs an arms.tsv row of it that ran")
        items.append(
            QueuedItem(
                model=c.need("model"),
                kind=kind,
                what=c.need("what"),
                sentence=c.need("sentence"),
                section=c.need("section"),
                box=box,
                arm=arm,
                list=c.text("list"),
            )
        )
    for key, row in states.items():
        if row.need("launch_state") == "queued" and key not in launched:
            raise DemoDataError(
                f"{row.where}: arm {key[0]} on {key[1]} is queued but queued_work.tsv has no item for it"
            )
    return items


def build_demo(
    store: Store, *, force: bool = False, progress: Progress | None = None, data_dir: Traversable = SEED_DIR
) -> ImportOutcome:
    """Import the campaign write-up's figures into ``store``; refuses a db with measured data unless ``force``."""
    report = progress or (lambda _step, _done, _total: None)
    if not force and store.results.has_measured_data():
        raise MeasuredDataPresent(
            f"{store.path} holds measured results; the demo would mix imported figures into them. Build the "
            "demo in its own file (campaign demo --db demo.db) or pass --force to mix them, marked 'imported'"
        )
    report("reading ops/data/seed", 0, 3)
    payload = load_payload(data_dir)
    queued = load_queued(data_dir)
    # The campaign as it ran (ops/demo_history.py): built before anything is written, written with the import.
    history = build_history(payload, read_boxes(data_dir), data_dir)
    report(f"writing {payload.row_count} rows", 1, 3)
    with full_disk_guard(store.path), store.atomic():  # a full disk is one line, and leaves no half import
        outcome = store.results.record_import(SOURCE, digest(data_dir), PROVENANCE, payload)
        if outcome.state != "unchanged":
            History(store).add_imported(outcome.import_id, history)
    # The write-up's points as measured: a curve per (arm, box, shape) over its own concurrencies (mostly one).
    store.curves.add_imported(outcome.import_id)
    store.queued.add_imported(outcome.import_id, queued)  # open work: never a launch, a result or a failure
    report(outcome.state, 3, 3)
    return outcome


def seed_if_empty(store: Store) -> bool:
    """On the first start of plain ``campaign``: fill an empty db with the demo. True when it did."""
    if not store.results.is_empty():
        return False
    build_demo(store)
    return True
