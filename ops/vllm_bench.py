"""A colleague's ``vllm bench serve`` runs, imported as bench rows beside the console's own.

Two layouts are read, as vLLM 0.32 writes them (vllm/benchmarks/serve.py, vllm/benchmarks/sweep/serve.py):

- ``vllm bench serve --save-result``: one JSON object per run (``--append-result`` appends more, one a line);
- ``vllm bench sweep serve``: ``OUTPUT_DIR/EXPERIMENT/<combination>/run=<i>.json`` (each a saved result with
  the combination's overrides and ``run_number`` added) and ``summary.json`` (the same runs as a list).
  ``warmup.json`` and ``*.failure.json`` are not measured runs and are left out.

Each run becomes one ``bench_runs`` row marked ``imported``: arm and shape are the operator's (vLLM's file
names neither), concurrency is the run's ``max_concurrency`` (a run without one was paced by its request rate,
not a number of streams: it is refused unless the operator files it at ``--concurrency C``), the rates and
the p50/p99 latencies go into the columns of the same meaning, and the provenance names the file and its
sha256. Kernel line, tripwire and power limit stay unknown unless given: nothing in the file says them.
vLLM's ``date`` is the local time of the machine that ran it, without its zone: an instant is stored only when
the operator names the zone; otherwise the text stays in the provenance and the instant is left NULL.

With ``--save-detailed`` the file also holds every request (``input_lens``, ``output_lens``, ``ttfts``,
``itls``, ``errors``, ``start_times``): those become ``bench_requests`` rows under the console's definitions
(E2E = TTFT + the sum of the ITLs, i.e. the last token event; TPOT = (E2E - TTFT) / (tokens - 1)), so
``campaign requests`` reads an imported run as it reads a measured one.

Once stored, the runs are filed as curves marked imported (``store.curves.add_imported``): one per arm, box
and shape, a point per concurrency (or request rate) the runs cover, a combination's ``run=0,1,2`` one point's
repeats (a ``repeat_group``). A sweep's arm is its combination's server part (``SERVE--...``), so one server's
runs at several concurrencies are one curve. The JSON of ``campaign export curves`` (ops/export.py) is read
too: each point's ``runs`` are saved results, filed under their curve's arm.

Everything is read and checked before anything is written; ``store.results.record_import`` writes it in one
transaction, and the same files with the same options again change nothing.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Any

from console.errors import InputError
from console.recipes.model import Shape
from console.store import Store
from console.store.curves import CurveRow
from console.store.results import TIMING_COLUMNS, TIMINGS_KEY, ImportOutcome, ImportPayload
from console.timeutil import to_ms

SOURCE_PREFIX = "vllm bench: "
"""An import's name in state.db is this and the resolved path: importing the same path again replaces it."""
REQUIRED = (
    "duration",
    "completed",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
)
"""What every generation result of ``vllm bench serve`` carries (``benchmark()``'s result for
BenchmarkMetrics); an embedding run or another tool's JSON lacks some of them."""
LATENCIES = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2e": "e2el"}
"""The console's latency names and vLLM's (``median_<name>_ms``, ``p99_<name>_ms``)."""
PER_REQUEST = ("input_lens", "output_lens", "ttfts", "itls", "errors")
"""The lists ``--save-detailed`` keeps (``start_times`` too, optional here): one entry per request."""
BULKY = (*PER_REQUEST, "start_times", "latencies", "queue_times", "generated_texts")
"""Per-request lists: kept out of ``raw`` (the requests are rows of their own)."""
DATE_FORMAT = "%Y%m%d-%H%M%S"
"""vLLM's ``date``: ``datetime.now().strftime(...)`` taken after the run, the machine's local time."""
RUN_FILE = re.compile(r"run=(\d+)\.json")
SUMMARY = "summary.json"
WANTS = "give a file `vllm bench serve --save-result` wrote, or a `vllm bench sweep serve` experiment folder"


class VllmBenchError(InputError, ValueError):
    """A path that is not a vLLM benchmark result, or a run the options cannot file; says what and where."""


@dataclass(frozen=True)
class Options:
    """What the operator says that the file does not: the arm and shape to file the runs under, and
    optionally the concurrency of a run paced by request rate, the zone of ``date``, kernel and power."""

    arm: str | None
    shape: Shape
    concurrency: int | None = None
    tz: tzinfo | None = None
    kernel_line: str | None = None
    power_limit_w: float | None = None

    def key(self) -> str:
        """The options as text for the import's digest: other options over the same files are another import."""
        return json.dumps(
            [
                self.arm,
                self.shape.name,
                self.shape.prefix_len,
                self.shape.input_len,
                self.shape.output_len,
                self.concurrency,
                str(self.tz) if self.tz else None,
                self.kernel_line,
                self.power_limit_w,
            ]
        )


@dataclass(frozen=True)
class Run:
    """One run as read: vLLM's result object, where it came from, the combination it belongs to (a sweep's
    folder; None for a plain result) and the sha256 of its file."""

    result: dict[str, Any]
    where: str
    combination: str | None
    sha256: str


@dataclass(frozen=True)
class Imported:
    outcome: ImportOutcome
    rows: list[dict[str, Any]]
    """The bench rows as mapped (``bench_runs`` columns), in the order read."""
    curves: list[CurveRow]
    """The curves the import's rows were filed as (``store.curves.add_imported``)."""


# -- reading -----------------------------------------------------------------------------------------------
def _documents(path: Path) -> tuple[list[object], str]:
    """The JSON values in the file (one, or several appended one after another) and the file's sha256."""
    data = _read(path)
    text = data.decode("utf-8", errors="replace")
    decoder = json.JSONDecoder()
    docs: list[object] = []
    i = 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i == len(text):
            break
        try:
            doc, i = decoder.raw_decode(text, i)
        except json.JSONDecodeError as exc:
            raise VllmBenchError(
                f"{path}: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})", WANTS
            ) from None
        docs.append(doc)
    if not docs:
        raise VllmBenchError(f"{path}: empty, not a benchmark result", WANTS)
    return docs, hashlib.sha256(data).hexdigest()


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise VllmBenchError(f"{path}: cannot be read ({exc.strerror or exc})", WANTS) from exc


def _file_runs(path: Path, combination: str | None) -> list[Run]:
    """The runs of one file: a saved result, several appended ones, or a sweep's ``summary.json`` list."""
    docs, sha = _documents(path)
    if len(docs) == 1 and isinstance(docs[0], dict) and isinstance(docs[0].get("curves"), list):
        return _exported_runs(docs[0]["curves"], path, sha)
    listed = len(docs) == 1 and isinstance(docs[0], list)
    if isinstance(docs[0], list) and listed:
        docs = list(docs[0])
        if not docs:
            raise VllmBenchError(f"{path}: an empty list, no run in it", WANTS)
    many = listed or len(docs) > 1
    runs = []
    for k, doc in enumerate(docs):
        where = f"{path}[{k}]" if many else str(path)
        runs.append(Run(_checked(doc, where), where, combination, sha))
    return runs


def _exported_runs(curves: list[Any], path: Path, sha: str) -> list[Run]:
    """The runs of ``campaign export curves --format json``: each point's ``runs`` are saved results, filed
    under their curve's arm (as a sweep's combination is) unless the operator gives another."""
    runs = []
    for i, curve in enumerate(curves):
        if not isinstance(curve, dict) or not isinstance(curve.get("points"), list):
            raise VllmBenchError(f"{path}: curves[{i}] has no list of points", WANTS)
        arm = curve.get("arm") if isinstance(curve.get("arm"), str) else None
        for j, point in enumerate(curve["points"]):
            records = point.get("runs") if isinstance(point, dict) else None
            if not isinstance(records, list):
                raise VllmBenchError(f"{path}: curves[{i}].points[{j}] has no list of runs", WANTS)
            for k, doc in enumerate(records):
                where = f"{path}[curves {i} points {j} runs {k}]"
                runs.append(Run(_checked(doc, where), where, arm, sha))
    if not runs:
        raise VllmBenchError(f"{path}: an export of no curve point, no run in it", WANTS)
    return runs


def _checked(doc: object, where: str) -> dict[str, Any]:
    """``doc`` when it is a generation result of ``vllm bench serve``; else a one-line refusal."""
    if not isinstance(doc, dict):
        raise VllmBenchError(
            f"{where}: a JSON {type(doc).__name__}, not a vLLM benchmark result object", WANTS
        )
    missing = [k for k in REQUIRED if k not in doc]
    if missing:
        raise VllmBenchError(
            f"{where}: not a `vllm bench serve` generation result (no {', '.join(missing)})", WANTS
        )
    bad = [k for k in REQUIRED if _number(doc[k]) is None]
    if bad:
        raise VllmBenchError(
            f"{where}: {', '.join(bad)} not a finite number", "the file is damaged: " + WANTS
        )
    return doc


def _combination(folder: Path, root: Path) -> str:
    """The sweep combination's name: its folder relative to the path given (the folder's own name at the root)."""
    rel = folder.relative_to(root).as_posix()
    return folder.name if rel == "." else rel


def _tree_runs(root: Path) -> list[Run]:
    """Every measured run under a sweep's output: ``run=<i>.json`` files, else a folder's ``summary.json``."""
    runs: list[Run] = []
    for folder in sorted({root, *(p for p in root.rglob("*") if p.is_dir())}):
        numbered = sorted(
            (int(m.group(1)), p)
            for p in folder.iterdir()
            if p.is_file() and (m := RUN_FILE.fullmatch(p.name)) is not None
        )
        if numbered:
            for _, p in numbered:
                runs += _file_runs(p, _combination(folder, root))
        elif (folder / SUMMARY).is_file():
            runs += _file_runs(folder / SUMMARY, _combination(folder, root))
    if not runs:
        raise VllmBenchError(
            f"{root}: no run=<i>.json or summary.json under it, so no run of `vllm bench sweep serve`",
            "give the sweep's experiment folder (OUTPUT_DIR/EXPERIMENT), or one result file",
        )
    return runs


def read_runs(path: Path) -> list[Run]:
    """The runs at ``path``: a result file (or a sweep's ``summary.json``), or a sweep's folder tree."""
    path = path.resolve()
    if path.is_dir():
        return _tree_runs(path)
    if not path.exists():
        raise VllmBenchError(f"{path}: no such file or folder", WANTS)
    return _file_runs(
        path, path.parent.name if path.name == SUMMARY or RUN_FILE.fullmatch(path.name) else None
    )


# -- mapping -----------------------------------------------------------------------------------------------
def _number(value: object) -> float | None:
    """A finite JSON number; None for anything else (vLLM writes NaN where a run had nothing to measure)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _concurrency(run: Run, given: int | None) -> int:
    """The run's ``max_concurrency``; ``given`` only where vLLM ran without one, and never against it."""
    value = run.result.get("max_concurrency")
    rate = run.result.get("request_rate")
    if value is None:
        if given is None:
            raise VllmBenchError(
                f"{run.where}: max_concurrency is null: vllm bench serve ran without --max-concurrency, its load "
                f"set by request rate {rate!r}, not by a number of streams",
                "give --concurrency C to file it at C anyway, or import a run with --max-concurrency",
            )
        return given
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise VllmBenchError(f"{run.where}: max_concurrency {value!r} is not a positive whole number", WANTS)
    if given is not None and given != value:
        raise VllmBenchError(
            f"{run.where}: ran at max_concurrency {value}, not the --concurrency {given} given",
            "leave --concurrency out: it is only for runs without --max-concurrency",
        )
    return value


def _arm(run: Run, given: str | None) -> str:
    if given:
        return given
    if run.combination:
        return serve_part(run.combination)
    raise VllmBenchError(
        f"{run.where}: a single run names no arm (vLLM's file records no serving configuration)",
        "give --arm NAME: the configuration it measured, as it should read beside yours",
    )


def serve_part(combination: str) -> str:
    """The arm of a sweep combination: its server's part. vLLM names a combination's folder
    ``SERVE--<serve overrides>-BENCH--<bench overrides>`` (sweep/serve.py), so the runs of one server at
    several concurrencies or rates are one arm's curve; a combination without a bench part is itself."""
    serve, sep, _bench = combination.partition("-BENCH--")
    return serve if sep and serve else combination


def _pacing(result: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """(request rate, burstiness) of a run paced by rate; (None, None) for ``inf``: every request at once up
    to ``max_concurrency``, a closed loop."""
    rate = _number(result.get("request_rate"))
    if rate is None:
        return None, None
    return rate, _number(result.get("burstiness"))


def _instants(run: Run, tz: tzinfo | None) -> tuple[int | None, int | None]:
    """(started, ended) in UTC epoch ms from ``date`` (written when the run ended) and ``duration``, where the
    zone of that local time is known; (None, None) where it is not or ``date`` does not parse."""
    date = run.result.get("date")
    if tz is None or not isinstance(date, str):
        return None, None
    try:
        ended = to_ms(datetime.strptime(date, DATE_FORMAT).replace(tzinfo=tz))
    except ValueError:
        return None, None
    duration = _number(run.result.get("duration")) or 0.0
    return ended - round(duration * 1000), ended


def _latencies(result: Mapping[str, Any]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for ours, theirs in LATENCIES.items():
        out[f"{ours}_ms_p50"] = _number(result.get(f"median_{theirs}_ms"))
        out[f"{ours}_ms_p99"] = _number(result.get(f"p99_{theirs}_ms"))
    return out


def _provenance(run: Run, tz: tzinfo | None) -> str:
    date = run.result.get("date")
    when = (
        f"date {date} in {tz}"
        if tz is not None
        else f"date {date} (local time of the machine that ran it, zone not given: no instant stored)"
    )
    kind = f"vllm bench sweep serve, combination {run.combination}" if run.combination else "vllm bench serve"
    return f"{kind}: {run.where} (sha256 {run.sha256}); {when}"


def to_row(run: Run, options: Options) -> dict[str, Any]:
    """The ``bench_runs`` row of one run (with its ``request_timings`` block where the file has the requests)."""
    r = run.result
    duration = _number(r["duration"]) or 0.0
    completed = int(r["completed"])
    failed = int(_number(r.get("failed")) or 0)
    started, ended = _instants(run, options.tz)
    block = timings_block(r, run.where)
    raw: dict[str, Any] = {k: v for k, v in r.items() if k not in BULKY}
    raw["imported_from"] = {"file": run.where, "sha256": run.sha256, "combination": run.combination}
    if block is None:
        raw["per_request"] = "absent: the run was saved without --save-detailed"
    if completed:
        raw["tokens_per_request"] = {
            "in": float(r["total_input_tokens"]) / completed,
            "out": float(r["total_output_tokens"]) / completed,
        }
    row: dict[str, Any] = {
        "box": None,
        "launch_id": None,
        "arm": _arm(run, options.arm),
        "model": r.get("model_id") if isinstance(r.get("model_id"), str) else None,
        "configuration": run.combination or (r.get("label") if isinstance(r.get("label"), str) else None),
        "shape": options.shape.name,
        "concurrency": _concurrency(run, options.concurrency),
        "request_rate": _pacing(r)[0],
        "burstiness": _pacing(r)[1],
        "prompts": r.get("num_prompts") if isinstance(r.get("num_prompts"), int) else None,
        "input_len": options.shape.input_len,
        "output_len": options.shape.output_len,
        "prefix_len": options.shape.prefix_len,
        "started_ms": started,
        "ended_ms": ended,
        "duration_s": duration,
        "requests": completed + failed,
        "failed": failed,
        "req_per_s": _number(r["request_throughput"]),
        "in_tok_per_s": float(r["total_input_tokens"]) / duration if duration > 0 else None,
        "out_tok_per_s": _number(r["output_throughput"]),
        "total_tok_per_s": _number(r["total_token_throughput"]),
        **_latencies(r),
        "kernel_line": options.kernel_line,
        "power_limit_w": options.power_limit_w,
        "provenance": _provenance(run, options.tz),
    }
    if block is not None:
        raw[TIMINGS_KEY] = block
        row[TIMINGS_KEY] = block
    row["raw"] = raw
    return row


# -- per request ------------------------------------------------------------------------------------------
def _lists(result: Mapping[str, Any], where: str) -> dict[str, list[Any]] | None:
    """The per-request lists, all of one length; None where the run kept none (saved without
    ``--save-detailed``). Lists of different lengths are a damaged file: refused, not guessed at."""
    if not all(isinstance(result.get(k), list) for k in PER_REQUEST):
        return None
    lists: dict[str, list[Any]] = {k: result[k] for k in PER_REQUEST}
    n = len(lists["ttfts"])
    if any(len(v) != n for v in lists.values()):
        sizes = ", ".join(f"{k} {len(v)}" for k, v in lists.items())
        raise VllmBenchError(
            f"{where}: its per-request lists differ in length ({sizes})", "the file is damaged"
        )
    starts = result.get("start_times")
    lists["start_times"] = starts if isinstance(starts, list) and len(starts) == n else [None] * n
    return lists


def _request(ttft_s: object, itls_s: object, out_tokens: object, error: object) -> list[object]:
    """[ttft, tpot, itl median, itl max, e2e] in ms for one request; all None for a failed one (vLLM zeroes
    what a failed request never measured, and a zero would read as a fast request)."""
    ttft = _number(ttft_s)
    if error or ttft is None:
        return [None] * 5
    gaps = [g * 1000 for g in (itls_s if isinstance(itls_s, list) else []) if _number(g) is not None]
    e2e = ttft * 1000 + sum(gaps)
    tokens = out_tokens if isinstance(out_tokens, int) and not isinstance(out_tokens, bool) else 0
    tpot = (e2e - ttft * 1000) / (tokens - 1) if tokens > 1 else None
    return [
        ttft * 1000,
        tpot,
        statistics.median(gaps) if gaps else None,
        max(gaps) if gaps else None,
        e2e,
    ]


def _whole(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def timings_block(result: Mapping[str, Any], where: str) -> dict[str, Any] | None:
    """The run's requests as a ``request_timings`` block (TIMING_COLUMNS, sorted by start); None without
    ``--save-detailed`` lists."""
    lists = _lists(result, where)
    if lists is None:
        return None
    starts = [_number(t) for t in lists["start_times"]]
    known = [t for t in starts if t is not None]
    t0 = min(known) if known else None
    rows = []
    for i, start in enumerate(starts):
        error = lists["errors"][i]
        rows.append(
            {
                "start_ms": (start - t0) * 1000 if start is not None and t0 is not None else None,
                "target": 0,  # vllm bench serve sends to one base URL
                **dict(
                    zip(
                        ("ttft_ms", "tpot_ms", "itl_p50_ms", "itl_max_ms", "e2e_ms"),
                        _request(lists["ttfts"][i], lists["itls"][i], lists["output_lens"][i], error),
                        strict=True,
                    )
                ),
                "in_tokens": _whole(lists["input_lens"][i]),
                "out_tokens": _whole(lists["output_lens"][i]),
                "error": str(error) if error else None,
            }
        )
    rows.sort(key=lambda row: (row["start_ms"] is None, row["start_ms"] or 0.0))
    return {"columns": list(TIMING_COLUMNS), "rows": [[row[c] for c in TIMING_COLUMNS] for row in rows]}


# -- importing ---------------------------------------------------------------------------------------------
def digest(runs: Sequence[Run], options: Options) -> str:
    """The files read (each run's place and its file's sha256) and the options they were filed under."""
    h = hashlib.sha256(options.key().encode())
    for run in runs:
        h.update(b"\0" + run.where.encode() + b"\0" + run.sha256.encode())
    return h.hexdigest()


def _described(runs: Sequence[Run]) -> str:
    """The import's provenance line: how many runs from how many files (each row names its own file)."""
    files = {r.where.partition("[")[0] for r in runs}
    return f"{len(runs)} run(s) of vllm bench serve from {len(files)} file(s)"


def _grouped(rows: Iterable[dict[str, Any]], tag: str) -> list[dict[str, Any]]:
    """The rows, the repeats of one point (same arm, shape, concurrency and rate: a sweep's run=0,1,2 of a
    combination) tied by a ``repeat_group`` as the console ties its own repeats; a lone run has none. ``tag``
    (the import's digest) keeps two imports' groups apart."""
    rows = list(rows)
    points: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in rows:
        key = (row["arm"], row["shape"], row["concurrency"], row["request_rate"], row["burstiness"])
        points.setdefault(key, []).append(row)
    for (arm, shape, c, rate, burst), members in points.items():
        if len(members) > 1:
            paced = "" if rate is None else f" rate {rate:g} burstiness {burst}"
            for row in members:
                row["repeat_group"] = f"imported {tag}: {arm} {shape} C={c}{paced}"
    return rows


def import_vllm_bench(store: Store, path: Path, options: Options) -> Imported:
    """Read every run at ``path``, map each to a bench row, and write them as one import (or nothing: the
    first file or run that cannot be filed is refused before anything is written)."""
    runs = read_runs(path)
    key = digest(runs, options)
    rows = _grouped((to_row(run, options) for run in runs), key[:12])
    payload = ImportPayload(client_runs=rows)
    source = SOURCE_PREFIX + str(path.resolve())
    outcome = store.results.record_import(source, key, _described(runs), payload)
    return Imported(outcome, rows, store.curves.add_imported(outcome.import_id))
