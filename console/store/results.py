"""Results: bench runs, tripwire runs, task-accuracy runs, API prices and imported campaigns.

A throughput number is only worth something next to its arm, the kernel line the engine used, the
tripwire verdict and the power limit it ran under. ``add_bench_run`` fills in what only the store
knows (the launches' kernel lines checked against what the arm asked, prefix caching and queueing:
console.store.conditions; the box's enforced power limit, the launch's tripwire) so a row can never be
written bare; a failed tripwire marks every throughput row of that launch diagnostic-only. A bench row is
a node row: every serving replica measured at once, each one's share in ``bench_replicas``.

Imported figures (the demo campaign; another client's runs, ``campaign import vllm-bench``) are written by
``record_import`` in one transaction, traced to an ``imports`` row by ``import_id``: the same files imported
twice change nothing, changed files replace their own rows and nothing else.

This module writes; what views, reports and exports read of these tables is console.readmodel's
(results.py and campaign.py there), as records.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, NotRequired, Protocol, TypedDict

from console.errors import InputError
from console.store.boxes import Box
from console.store.conditions import HasLaunches, conditions, streams_per_replica
from console.store.connection import Connection
from console.store.jsonutil import dumps
from console.store.kldiff import ImportedKldiff
from console.store.launches import argv_flag
from console.store.quality import PublishedPair, PublishedRun
from console.store.served import COMPLETIONS, NOT_APPLICABLE, sampling_sent, thinking

if TYPE_CHECKING:
    from console.store.boxes import Boxes
    from console.store.kldiff import Kldiff
    from console.store.quality import Quality

SERVED_COLUMNS = ("reasoning_parser", "thinking", "sampling")
"""What a bench or tripwire row was served with (console/store/served.py)."""
BENCH_COLUMNS = (
    "box",
    "launch_id",
    "arm",
    "model",
    "configuration",
    "shape",
    "concurrency",
    "prompts",
    "seed",
    "input_len",
    "output_len",
    "prefix_len",
    "started_ms",
    "ended_ms",
    "duration_s",
    "requests",
    "failed",
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
    "steady",
    "client_cpu",
    "client_bound",
    "kernel_line",
    "power_limit_w",
    "tripwire_id",
    "diagnostic_only",
    "queueing",
    "source",
    "provenance",
    "raw",
    "import_id",
    "run_id",
    "replicas",
    "prefix_caching",
    "kernel_fallback",
    "kernel_check",
    "admitted",
    "repeat_group",
    "request_rate",
    "burstiness",
    "spec_drafts",
    "spec_draft_tokens",
    "spec_accepted",
    "spec_accepted_per_pos",
    "spec_tokens",
    "spec_acceptance_published",
    "step_ms",
    "per_stream_out_tok_s",
    *SERVED_COLUMNS,
)
REPLICA_COLUMNS = (
    "base_url",
    "streams",
    "requests",
    "failed",
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
)
"""A node run's per-replica detail (``bench_replicas``): the load generator's ``per_url`` entries."""
TRIPWIRE_COLUMNS = (
    "box",
    "launch_id",
    "arm",
    "model",
    "t_ms",
    "ok",
    "degenerate",
    "wrong",
    "total",
    "passed",
    "reasoning_leak",
    "items",
    "source",
    "provenance",
    "import_id",
    "run_id",
    *SERVED_COLUMNS,
)
EVAL_COLUMNS = (
    "box",
    "arm",
    "model",
    "configuration",
    "t_ms",
    "items",
    "overall",
    "families",
    "note",
    "source",
    "provenance",
    "import_id",
)
JSON_COLUMNS = frozenset(
    {"steady", "raw", "items", "families", "kernel_check", "sampling", "spec_accepted_per_pos"}
)
TIMINGS_KEY = "request_timings"
"""The load generator's per-request block in a bench result (agents/loadgen/run.py: ``request_timings``)."""
_REAL: tuple[type, ...] = (float, int)
_INTEGER: tuple[type, ...] = (int,)
_TEXT: tuple[type, ...] = (str,)
TIMING_COLUMNS: dict[str, tuple[type, ...]] = {
    "start_ms": _REAL,
    "target": _INTEGER,
    "ttft_ms": _REAL,
    "tpot_ms": _REAL,
    "itl_p50_ms": _REAL,
    "itl_max_ms": _REAL,
    "e2e_ms": _REAL,
    "in_tokens": _INTEGER,
    "out_tokens": _INTEGER,
    "error": _TEXT,
}
"""``bench_requests``' columns besides its key, and the JSON types each takes (None aside): the block's
``columns`` (agents/loadgen/metrics.py: TIMING_COLUMNS; a test keeps the two lists equal)."""
_TIMINGS_INSERT = (
    f"INSERT INTO bench_requests (bench_run_id, i, {', '.join(TIMING_COLUMNS)}) "
    f"VALUES ({', '.join('?' * (len(TIMING_COLUMNS) + 2))})"
)


class ResultError(InputError, ValueError):
    """A result row that cannot be stored as given; the message names the field and the fix."""


@dataclass(frozen=True)
class ApiPrice:
    """USD per million tokens; ``cached_in_per_mtok`` None means cached input pays the full input price."""

    model: str
    provider: str
    in_per_mtok: float
    out_per_mtok: float
    cached_in_per_mtok: float | None = None
    note: str | None = None
    accuracy_run: str | None = None
    """The quality run (its label) that scored the endpoint this price buys; None: not scored."""

    def __post_init__(self) -> None:
        for name in ("in_per_mtok", "out_per_mtok", "cached_in_per_mtok"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ResultError(f"API price for {self.model} ({self.provider}): {name} {value} is negative")


@dataclass
class ImportedLaunch:
    """One arm as the imported campaign ran it: its layout, kernel lines and how the launch ended."""

    box: str
    arm: str
    model: str
    configuration: str
    gpus: list[list[int]]
    tensor_parallel: int
    kernel_lines: list[tuple[str, str]]  # (category, line)
    state: str  # stopped or failed
    failure_reason: str | None = None
    kv_cache_tokens: int | None = None

    @property
    def launch_id(self) -> str:
        return f"import:{self.box}:{self.arm}"


class ImportedTripwire(TypedDict):
    """A tripwire verdict as the write-up printed it (the import adds launch, time and source)."""

    box: str
    arm: str
    model: str
    ok: int
    degenerate: int
    wrong: int
    total: int
    passed: int
    items: dict[str, bool]  # JSON beside the verdict: whether the write-up split degenerate from wrong
    provenance: str


class ImportedBench(TypedDict):
    """A throughput row of the write-up's tables: ``bench_runs`` columns (the import adds its source)."""

    box: str
    launch_id: str
    arm: str
    model: str
    configuration: str | None
    shape: str
    concurrency: int
    replicas: int
    input_len: int
    output_len: int
    prefix_len: int
    out_tok_per_s: float
    in_tok_per_s: float | None
    total_tok_per_s: float | None
    ttft_ms_p50: float | None
    tpot_ms_p50: float | None
    kernel_line: str | None
    power_limit_w: float
    queueing: int
    diagnostic_only: int
    provenance: str
    spec_tokens: NotRequired[int | None]  # a drafter's tokens per step and accepted share, as published
    spec_acceptance_published: NotRequired[float | None]
    step_ms: NotRequired[float | None]  # a decode step's time and one stream's out tok/s, as published
    per_stream_out_tok_s: NotRequired[float | None]


class ImportedEval(TypedDict):
    """A task-accuracy row of the write-up: ``eval_runs`` columns, ``families`` its accuracy per family."""

    box: str | None
    arm: str | None
    model: str
    configuration: str
    items: int
    overall: float
    families: dict[str, float]
    note: str | None
    provenance: str


@dataclass(frozen=True)
class ModelIndexEntry:
    """A model's place on a published intelligence index; ``value`` None: absent from the index's view."""

    model: str
    value: float | None
    estimate: bool
    index_name: str
    version: str
    as_of: str  # the index's date, YYYY-MM-DD
    provenance: str


@dataclass(frozen=True)
class PublishedFigure:
    """Figures a write-up printed for an arm that are read beside the campaign's own, never priced or ranked:
    a frontier row's cost, a per-hour row, a table column that conflicts with another table."""

    source_table: str
    arm: str
    box: str | None
    shape: str | None
    concurrency: int | None
    figures: dict[str, float]
    note: str | None
    provenance: str


@dataclass
class ImportPayload:
    """Everything one import writes. Tripwire rows are keyed by launch id so bench rows can cite them."""

    boxes: list[Box] = field(default_factory=list)
    launches: list[ImportedLaunch] = field(default_factory=list)
    tripwires: dict[str, ImportedTripwire] = field(default_factory=dict)
    bench_runs: list[ImportedBench] = field(default_factory=list)
    eval_runs: list[ImportedEval] = field(default_factory=list)
    api_prices: list[ApiPrice] = field(default_factory=list)
    quality_runs: list[PublishedRun] = field(default_factory=list)
    quality_pairs: list[PublishedPair] = field(default_factory=list)
    box_max_power: dict[str, float] = field(default_factory=dict)  # the board maximum per GPU, by box
    model_index: list[ModelIndexEntry] = field(default_factory=list)
    published_figures: list[PublishedFigure] = field(default_factory=list)
    kldiff_runs: list[ImportedKldiff] = field(default_factory=list)
    """In order, a control before the pairs read against it (console/store/kldiff.py)."""
    client_runs: list[dict[str, Any]] = field(default_factory=list)
    """Bench rows another client measured (``vllm bench serve``: ops/vllm_bench.py), as ``bench_runs`` columns
    with a ``request_timings`` block. No imported launch stands behind them, so kernel line, tripwire and
    power limit are what the row gives (unknown unless the operator said); each one's requests are stored
    as ``bench_requests`` rows, as a measured run's are."""

    @property
    def row_count(self) -> int:
        return (
            len(self.boxes)
            + len(self.launches)
            + len(self.tripwires)
            + len(self.bench_runs)
            + len(self.eval_runs)
            + len(self.api_prices)
            + len(self.quality_runs)
            + len(self.quality_pairs)
            + len(self.kldiff_runs)
            + len(self.client_runs)
            + len(self.model_index)
            + len(self.published_figures)
        )


@dataclass(frozen=True)
class ImportOutcome:
    import_id: int
    state: str  # imported, unchanged, replaced
    rows: int


def _encode(row: Mapping[str, object], columns: tuple[str, ...]) -> dict[str, Any]:
    out = {}
    for c in columns:
        if c not in row:
            continue
        value = row[c]
        if c in JSON_COLUMNS and value is not None and not isinstance(value, str):
            value = dumps(value)
        elif isinstance(value, bool):
            value = int(value)
        out[c] = value
    return out


class TimingsError(ValueError):
    """A ``request_timings`` block that cannot be stored as given: the bench row is kept without it."""


def _timing_positions(columns: object) -> list[int]:
    """Where each of TIMING_COLUMNS sits in the block's ``columns`` (a block may order them as it likes)."""
    if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
        raise TimingsError("its columns are not a list of names")
    missing = [c for c in TIMING_COLUMNS if c not in columns]
    if missing or len(set(columns)) != len(columns):
        raise TimingsError(f"its columns {columns} lack {missing} or repeat a name")
    return [columns.index(c) for c in TIMING_COLUMNS]


def _typed(value: object, kinds: tuple[type, ...]) -> bool:
    """None, or one of ``kinds`` (never a bool), an integer within SQLite's 64 bits (a bigger one would fail
    the insert, and with it the bench row)."""
    if value is None:
        return True
    if isinstance(value, bool) or not isinstance(value, kinds):
        return False
    return not isinstance(value, int) or -(2**63) <= value < 2**63


def timing_rows(block: object) -> list[tuple[object, ...]]:
    """The ``bench_requests`` rows (``i`` and TIMING_COLUMNS) of a result's ``request_timings`` block, each
    checked for its shape and
    types; raises TimingsError naming the first problem. Why check at all: the block comes off the wire, and
    a wrong type stored would surface only later, as a wrong tail or SLO verdict."""
    if not isinstance(block, dict):
        raise TimingsError(f"it is {type(block).__name__}, not an object")
    positions = _timing_positions(block.get("columns"))
    rows = block.get("rows")
    if not isinstance(rows, list):
        raise TimingsError("its rows are not a list")
    width = len(block["columns"])
    kinds = list(TIMING_COLUMNS.values())
    out: list[tuple[object, ...]] = []
    for i, row in enumerate(rows):
        if not isinstance(row, list) or len(row) != width:
            raise TimingsError(f"row {i} is not a list of {width} values")
        values = [row[p] for p in positions]
        bad = [c for c, v, k in zip(TIMING_COLUMNS, values, kinds, strict=True) if not _typed(v, k)]
        if bad:
            raise TimingsError(f"row {i} has a value of the wrong type in {', '.join(bad)}")
        out.append((i, *values))
    return out


def _omitted(block: object) -> int:
    """How many requests the load generator left out of the block (its size bound); 0 if it says nothing."""
    omitted = block.get("omitted") if isinstance(block, dict) else None
    return omitted if isinstance(omitted, int) and not isinstance(omitted, bool) and omitted > 0 else 0


def _timings(row: Mapping[str, object]) -> tuple[list[tuple[object, ...]], dict[str, object]]:
    """A bench result's request rows and what ``raw`` keeps of its block; a malformed block gives no rows and
    the reason, never an error: the run's own figures are worth storing without its per-request detail."""
    block = row.get(TIMINGS_KEY)
    summary: dict[str, object] = {"stored": 0, "omitted": _omitted(block)}
    if block is None:
        return [], summary
    try:
        rows = timing_rows(block)
    except TimingsError as exc:
        summary["skipped"] = f"request timings not stored: {exc}"
        return [], summary
    summary["stored"] = len(rows)
    return rows, summary


def _without_timings(raw: object, summary: dict[str, object]) -> object:
    """The result as ``raw`` keeps it: the timings block replaced by ``summary`` (rows stored, rows the load
    generator omitted, or why none was stored), since its rows are in ``bench_requests`` already."""
    if not isinstance(raw, dict) or TIMINGS_KEY not in raw:
        return raw
    return {**{k: v for k, v in raw.items() if k != TIMINGS_KEY}, TIMINGS_KEY: summary}


class ResultsConnection(Connection, HasLaunches, Protocol):
    """What ``Results`` needs of the store: its connection, the launches a row's conditions come from, and the
    repositories an import fills beside the results."""

    @property
    def boxes(self) -> Boxes: ...

    @property
    def kldiff(self) -> Kldiff: ...

    @property
    def quality(self) -> Quality: ...


class Results:
    def __init__(self, store: ResultsConnection):
        self.store = store

    # -- writers: measured rows ------------------------------------------------------------------
    def add_bench_run(self, row: dict[str, Any]) -> int:
        """Store one benchmark result (a node row) and its per-replica detail; what only the store knows is
        filled in: the conditions of the number (console.store.conditions), power limit and tripwire.

        ``row`` is the bench command's arguments plus the load generator's JSON plus box/launch/t_ms
        (see console.store.ingest). A node run names every replica it measured in ``launch_ids`` (in
        the order of its base URLs) and the load generator's ``per_url`` holds each one's share; a row
        naming only ``launch_id`` measured that one replica. Keys that are not columns stay in ``raw``.

        Its ``request_timings`` block becomes ``bench_requests`` rows in the same transaction; ``raw`` keeps
        only a summary in its place (rows stored, rows omitted, or why none was), not the rows twice. A
        malformed block loses only itself: the bench row is stored, and the summary says why it was skipped.
        """
        for key in ("arm", "shape", "concurrency"):
            if row.get(key) in (None, ""):
                raise ResultError(f"bench result without {key!r}: the bench command must name it")
        timings, summary = _timings(row)
        row = {**row, "raw": _without_timings(row.get("raw"), summary)}
        values = _encode(row, BENCH_COLUMNS)
        values.setdefault("started_ms", row.get("t_ms"))
        if (
            values.get("total_tok_per_s") is None
            and row.get("in_tok_per_s") is not None
            and row.get("out_tok_per_s") is not None
        ):
            values["total_tok_per_s"] = row["in_tok_per_s"] + row["out_tok_per_s"]
        launch_ids = [
            str(x)
            for x in row.get("launch_ids") or ([values["launch_id"]] if values.get("launch_id") else [])
        ]
        with self.store.atomic():
            if launch_ids:
                values.setdefault("launch_id", launch_ids[0])
                self._conditions(values, launch_ids)
                launch_id = values["launch_id"]
                self._fill_served(values, row, launch_id)
                if values.get("power_limit_w") is None:
                    values["power_limit_w"] = self._power_limit(
                        values.get("box"), launch_id, values.get("started_ms")
                    )
                if values.get("tripwire_id") is None:
                    latest = self.store.rows(
                        "SELECT id, passed FROM tripwire_runs WHERE launch_id IN "
                        f"({','.join('?' * len(launch_ids))}) ORDER BY t_ms DESC, id DESC LIMIT 1",
                        launch_ids,
                    )
                    if latest:
                        values["tripwire_id"] = latest[0]["id"]
                        values["diagnostic_only"] = values.get("diagnostic_only") or int(
                            not latest[0]["passed"]
                        )
            bench_id = self.store.insert("bench_runs", values)
            self.store.db.table("bench_replicas").insert_all(
                {
                    **_encode(share, REPLICA_COLUMNS),
                    "bench_run_id": bench_id,
                    "replica": i,
                    "launch_id": launch_ids[i] if i < len(launch_ids) else None,
                }
                for i, share in enumerate(row.get("per_url") or [])
            )
            self.store.db.conn.executemany(_TIMINGS_INSERT, ((bench_id, *t) for t in timings))
            return bench_id

    def _conditions(self, values: dict[str, Any], launch_ids: list[str]) -> None:
        """Fill the kernel line and check, prefix caching, replicas and queueing of a row over ``launch_ids``."""
        request_tokens = sum(int(values.get(k) or 0) for k in ("prefix_len", "input_len", "output_len"))
        cond = conditions(self.store, launch_ids, request_tokens)
        if not values.get("kernel_line"):
            values["kernel_line"] = cond.kernel_line
        values.setdefault("kernel_check", dumps([asdict(c) for c in cond.kernel_check]))
        values["kernel_fallback"] = int(bool(values.get("kernel_fallback")) or cond.kernel_fallback)
        if values.get("prefix_caching") is None and cond.prefix_caching is not None:
            values["prefix_caching"] = int(cond.prefix_caching)
        values["replicas"] = values.get("replicas") or len(launch_ids)
        values.setdefault("admitted", cond.admitted)
        if values["admitted"] is not None:
            queues = streams_per_replica(int(values["concurrency"]), values["replicas"]) > values["admitted"]
            values["queueing"] = int(bool(values.get("queueing")) or queues)

    def add_tripwire_run(self, row: dict[str, Any]) -> int:
        """Store a tripwire verdict and attach it to the launch's throughput rows.

        A failed verdict marks every bench row of the launch (a node row measuring it among its replicas
        too) diagnostic-only: a fast arm whose output is degenerate must never read as a result (the
        seed's DP2 x TP2 GLM layout).
        """
        missing = [k for k in ("arm", "ok", "degenerate", "wrong", "total", "passed") if row.get(k) is None]
        if missing:
            raise ResultError(
                f"tripwire result without {', '.join(missing)}: the tripwire JSON must carry them"
            )
        values = _encode(row, TRIPWIRE_COLUMNS)
        values.setdefault("t_ms", self.store.clock())
        with self.store.atomic() as db:
            if values.get("launch_id"):
                self._fill_served(values, row, values["launch_id"])
            tripwire_id = self.store.insert("tripwire_runs", values)
            if values.get("launch_id"):
                db.execute(
                    "UPDATE bench_runs SET tripwire_id = ?, diagnostic_only = max(diagnostic_only, ?) "
                    "WHERE (launch_id = ? OR id IN (SELECT bench_run_id FROM bench_replicas WHERE launch_id = ?)) "
                    "AND (tripwire_id IS NULL OR ? = 0)",
                    [
                        tripwire_id,
                        int(not values["passed"]),
                        values["launch_id"],
                        values["launch_id"],
                        int(values["passed"]),
                    ],
                )
        return tripwire_id

    def add_eval_run(self, row: dict[str, Any]) -> int:
        missing = [k for k in ("model", "configuration", "items", "overall") if row.get(k) in (None, "")]
        if missing:
            raise ResultError(f"task-accuracy row without {', '.join(missing)}")
        if not 0.0 <= float(row["overall"]) <= 1.0:
            raise ResultError(f"task accuracy {row['overall']} for {row['model']} is outside 0..1")
        values = _encode(row, EVAL_COLUMNS)
        values.setdefault("t_ms", self.store.clock())
        with self.store.atomic():
            return self.store.insert("eval_runs", values)

    def add_api_price(self, price: ApiPrice) -> None:
        """Insert or replace the price of (model, provider): prices move, the latest entry counts."""
        with self.store.atomic() as db:
            db.table("api_prices").insert({**asdict(price), "t_ms": self.store.clock()}, replace=True)

    def _fill_served(self, values: dict[str, Any], row: dict[str, Any], launch_id: str) -> None:
        """The reasoning parser the launch's server ran with (its argv, over the tool's echo of its profile),
        whether thinking was on, and the sampling the run sent (its ``request`` and ``extra_body``)."""
        rows = self.store.rows(
            "SELECT a.argv FROM launches l JOIN arms a ON a.id = l.arm_id WHERE l.id = ?", [launch_id]
        )
        argv: list[str] = json.loads(rows[0]["argv"]) if rows and rows[0]["argv"] else []
        if argv:
            values["reasoning_parser"] = argv_flag(argv, "--reasoning-parser")
        sent = [s for s in (row.get("request"), row.get("extra_body")) if isinstance(s, dict)]
        if not sent:
            return  # a tool that did not say what it sent: not recorded
        values.setdefault("sampling", dumps(sampling_sent(*sent)))
        if row.get("endpoint") == COMPLETIONS:
            values.setdefault("thinking", NOT_APPLICABLE)
        else:
            profile = row.get("profile")
            default = profile.get("thinking_default") if isinstance(profile, dict) else None
            values.setdefault(
                "thinking", thinking(sent, argv_flag(argv, "--default-chat-template-kwargs"), default)
            )

    def _power_limit(self, box: str | None, launch_id: str, at_ms: int | None) -> float | None:
        """The lowest enforced limit among the launch's GPUs in the newest sample at or before the run."""
        launch = self.store.rows("SELECT box, gpus FROM launches WHERE id = ?", [launch_id])
        box = box or (launch[0]["box"] if launch else None)
        if box is None:
            return None
        gpus = json.loads(launch[0]["gpus"]) if launch and launch[0]["gpus"] else None
        t = self.store.scalar(
            "SELECT max(t_ms) FROM gpu_samples WHERE box = ? AND t_ms <= ?",
            [box, at_ms or self.store.clock()],
        )
        if t is None:
            return None
        sql = "SELECT min(coalesce(enforced_limit_w, power_limit_w)) FROM gpu_samples WHERE box = ? AND t_ms = ?"
        params: list[Any] = [box, t]
        if gpus:
            sql += f" AND gpu IN ({','.join('?' * len(gpus))})"
            params += gpus
        limit = self.store.scalar(sql, params)
        return None if limit is None else float(limit)

    # -- imports ---------------------------------------------------------------------------------
    def has_measured_data(self) -> bool:
        """True when anything in the db came from a real box (a demo must not be mixed into it)."""
        return bool(
            self.store.scalar(
                "SELECT (SELECT count(*) FROM bench_runs WHERE source != 'imported')"
                " + (SELECT count(*) FROM tripwire_runs WHERE source != 'imported')"
                " + (SELECT count(*) FROM eval_runs WHERE source != 'imported')"
                " + (SELECT count(*) FROM quality_runs WHERE source != 'imported')"
                " + (SELECT count(*) FROM journal)"
                " + (SELECT count(*) FROM launches WHERE id NOT LIKE 'import:%')"
            )
        )

    def is_empty(self) -> bool:
        """Nothing to look at: no results, no launches and no box besides the local one."""
        return not self.store.scalar(
            "SELECT (SELECT count(*) FROM bench_runs) + (SELECT count(*) FROM tripwire_runs)"
            " + (SELECT count(*) FROM launches) + (SELECT count(*) FROM boxes WHERE kind != 'local')"
        )

    def imports(self) -> list[dict[str, Any]]:
        return self.store.rows("SELECT * FROM imports ORDER BY t_ms, id")

    def record_import(
        self, source: str, digest: str, provenance: str, payload: ImportPayload
    ) -> ImportOutcome:
        """Write an imported campaign in one transaction; the same ``digest`` again is a no-op."""
        same = self.store.rows(
            "SELECT id, rows FROM imports WHERE source = ? AND digest = ?", [source, digest]
        )
        if same:
            return ImportOutcome(same[0]["id"], "unchanged", same[0]["rows"])
        now = self.store.clock()
        with self.store.atomic():
            replaced = self._drop_earlier_imports(source, payload)
            import_id = self.store.insert(
                "imports",
                {
                    "t_ms": now,
                    "source": source,
                    "provenance": provenance,
                    "rows": payload.row_count,
                    "digest": digest,
                },
            )
            self._import_boxes(payload)
            for launch in payload.launches:
                self._import_launch(launch, now)
            self._import_runs(payload, import_id, now)
            for price in payload.api_prices:
                self.add_api_price(price)
            self.store.quality.add_published(payload.quality_runs, payload.quality_pairs, import_id)
            self._import_published(payload, import_id)
            self.store.kldiff.add_imported(payload.kldiff_runs, import_id, now)
        return ImportOutcome(import_id, "replaced" if replaced else "imported", payload.row_count)

    def _drop_earlier_imports(self, source: str, payload: ImportPayload) -> bool:
        """Delete the earlier imports of ``source`` and the imported launches and arms on the payload's boxes;
        True when there were any."""
        db = self.store.db
        old = [r["id"] for r in self.store.rows("SELECT id FROM imports WHERE source = ?", [source])]
        for import_id in old:
            # Cascades to the bench, tripwire, eval, quality and kldiff rows of that import and nothing else.
            db.execute("DELETE FROM imports WHERE id = ?", [import_id])
        if old:
            for name in {launch.box for launch in payload.launches}:
                db.execute("DELETE FROM kernel_lines WHERE box = ? AND launch_id LIKE 'import:%'", [name])
                db.execute("DELETE FROM launches WHERE box = ? AND id LIKE 'import:%'", [name])
                db.execute("DELETE FROM arms WHERE box = ? AND recipe_hash LIKE 'imported:%'", [name])
        return bool(old)

    def _import_published(self, payload: ImportPayload, import_id: int) -> None:
        """The model index and the published figures read beside the campaign's own; a model the index
        already has (from an earlier source) takes the newest import's entry."""
        for m in payload.model_index:
            self.store.db.table("model_index").insert({**asdict(m), "import_id": import_id}, replace=True)
        self.store.db.table("published_figures").insert_all(
            {**asdict(f), "figures": dumps(f.figures), "import_id": import_id}
            for f in payload.published_figures
        )

    def _import_boxes(self, payload: ImportPayload) -> None:
        for box in payload.boxes:
            self._import_box(box)
            self.store.db.execute(
                "UPDATE boxes SET max_power_w = ? WHERE name = ?",
                [payload.box_max_power.get(box.name), box.name],
            )

    def _import_runs(self, payload: ImportPayload, import_id: int, now: int) -> None:
        """The tripwire, bench and eval rows, each bench row tied to its launch's imported tripwire."""
        tripwire_ids = {}
        for launch_id, tw in payload.tripwires.items():
            values = _encode(
                {**tw, "launch_id": launch_id, "t_ms": now, "source": "imported", "import_id": import_id},
                TRIPWIRE_COLUMNS,
            )
            tripwire_ids[launch_id] = self.store.insert("tripwire_runs", values)
        self.store.db.table("bench_runs").insert_all(
            {
                **_encode({**row, "source": "imported", "import_id": import_id}, BENCH_COLUMNS),
                "tripwire_id": tripwire_ids.get(row["launch_id"]),
            }
            for row in payload.bench_runs
        )
        for row in payload.eval_runs:
            self.add_eval_run({**row, "t_ms": now, "source": "imported", "import_id": import_id})
        for client_run in payload.client_runs:
            self._import_client_run(client_run, import_id)

    def _import_client_run(self, row: Mapping[str, Any], import_id: int) -> None:
        """One row another client measured, with its requests: the same checks and ``raw`` summary as
        ``add_bench_run`` gives a measured row, none of the conditions only this console's launches know."""
        for key in ("arm", "shape", "concurrency"):
            if row.get(key) in (None, ""):
                raise ResultError(f"imported bench row without {key!r}: the import must name it")
        timings, summary = _timings(row)
        values = _encode(
            {
                **row,
                "raw": _without_timings(row.get("raw"), summary),
                "source": "imported",
                "import_id": import_id,
            },
            BENCH_COLUMNS,
        )
        bench_id = self.store.insert("bench_runs", values)
        self.store.db.conn.executemany(_TIMINGS_INSERT, ((bench_id, *t) for t in timings))

    def _import_box(self, box: Box) -> None:
        existing = self.store.rows("SELECT status FROM boxes WHERE name = ?", [box.name])
        if existing and existing[0]["status"] != "imported":
            raise ResultError(
                f"a box named {box.name!r} exists and was not imported: rename or remove it "
                f"(`campaign box rm {box.name}`) before importing the demo"
            )
        if existing:  # an earlier import of the same box: the data files are the authority
            self.store.boxes.update(
                box.name,
                provider=box.provider,
                price_per_hour=box.price_per_hour,
                status_detail=box.status_detail,
                tz=box.tz,
                gpu_summary=box.gpu_summary,
                price_basis=box.price_basis,
                price_provenance=box.price_provenance,
            )
        else:
            self.store.boxes.add(box)

    def _import_launch(self, launch: ImportedLaunch, now: int) -> None:
        db = self.store.db
        recipe_hash = "imported:" + launch.configuration
        db.table("arms").insert(
            {
                "arm": launch.arm,
                "model": launch.model,
                "box": launch.box,
                "recipe_hash": recipe_hash,
                "argv": "[]",
                "env": "{}",
                "gpus": dumps(launch.gpus),
                "tensor_parallel": launch.tensor_parallel,
                "lint": None,
                "created_ms": now,
            },
            ignore=True,
        )
        arm_id = self.store.scalar(
            "SELECT id FROM arms WHERE arm = ? AND box = ? AND recipe_hash = ?",
            [launch.arm, launch.box, recipe_hash],
        )
        db.execute("DELETE FROM kernel_lines WHERE launch_id = ?", [launch.launch_id])
        db.table("launches").insert(
            {
                "id": launch.launch_id,
                "box": launch.box,
                "arm": launch.arm,
                "arm_id": arm_id,
                "replica": 0,
                "gpus": dumps(sorted(g for r in launch.gpus for g in r)),
                "state": launch.state,
                "failure_reason": launch.failure_reason,
                "kv_cache_tokens": launch.kv_cache_tokens,
                "start_ms": None,
                "stop_ms": None,
            },
            replace=True,
        )
        db.table("kernel_lines").insert_all(
            {
                "box": launch.box,
                "launch_id": launch.launch_id,
                "t_ms": now,
                "category": category,
                "line": line,
            }
            for category, line in launch.kernel_lines
        )
