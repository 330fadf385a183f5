"""Read-only queries for the live panels (fleet, launches, checks, timers, GPUs, servers, the running
bench), each answering 'as of instant ``at``'. Bench and tripwire rows are in console.readmodel.results,
sweeps in console.readmodel.sweeps, the rest of the campaign's record in console.readmodel.campaign.

Replaying a night and watching it live are the same question asked at a different instant, so every
query takes ``at`` and ignores rows after it. Charts are downsampled in SQL (GROUP BY bucket) so a
state.db with millions of samples costs one indexed range scan per panel, not a Python loop.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from console.readmodel.records import (
    STALE_MS,
    BenchNow,
    CheckMark,
    FleetRow,
    GpuHistory,
    GpuPower,
    IngestHealth,
    LaunchRow,
    Series,
    ServerNow,
    TimerRow,
)
from console.readmodel.results import latest_bench
from console.store import Box, Store
from console.store.jsonutil import json_list, json_tuple_or_none
from console.store.launches import LaunchStatus
from console.store.schema import ROLLUP_TIERS_MS, rollup_table
from console.store.timers import TimerState

_TIMER_END_EVENTS: dict[str, TimerState] = {
    "fired": "fired",
    "cancelled": "cancelled",
    "failed": "failed",
    "firing": "firing",
}


def data_span(store: Store) -> tuple[int, int] | None:
    """First and last instants with recorded data (the replay range); None for an empty campaign.

    Sample tables are asked box by box with one min() or max() per query, so SQLite answers each from
    the (box, t_ms) index instead of scanning millions of rows.
    """
    bounds: list[int] = []
    for (box,) in store.db.execute("SELECT name FROM boxes").fetchall():
        for table in ("gpu_samples", "server_samples"):
            for fn in ("min", "max"):
                value = store.scalar(f"SELECT {fn}(t_ms) FROM {table} WHERE box = ?", [box])
                if value is not None:
                    bounds.append(value)
    row = store.rows(
        """SELECT min(lo) AS lo, max(hi) AS hi FROM (
             SELECT min(started_ms) AS lo, max(coalesce(ended_ms, started_ms)) AS hi FROM bench_runs
             UNION ALL SELECT min(t_ms), max(t_ms) FROM tripwire_runs
             UNION ALL SELECT min(start_ms), max(coalesce(stop_ms, ready_ms, start_ms)) FROM launches
             UNION ALL SELECT min(created_ms), max(updated_ms) FROM timers)"""
    )[0]
    bounds += [v for v in (row["lo"], row["hi"]) if v is not None]
    return (int(min(bounds)), int(max(bounds))) if bounds else None


def record_end(store: Store, box: str) -> int | None:
    """Where a box's record ends: its last server sample (the last instant something served), else its last
    GPU sample; None without samples. Live reads an imported box there (ReadModel.live)."""
    for table in ("server_samples", "gpu_samples"):
        last = store.scalar(f"SELECT max(t_ms) FROM {table} WHERE box = ?", [box])
        if last is not None:
            return int(last)
    return None


# -- launches ----------------------------------------------------------------------------------------
def launch_state_at(row: dict[str, Any], at: int | None) -> LaunchStatus | None:
    """The state a launch was in at ``at``, from its recorded instants; None if it had not started yet.

    ``at`` None asks for the record as it stands (an export), not for an instant.
    """
    start, ready, stop = row["start_ms"], row["ready_ms"], row["stop_ms"]
    final: LaunchStatus = row["state"]  # the store writes only LAUNCH_STATES
    if at is None:
        return final
    if start is not None and start > at:
        return None
    if stop is not None and stop <= at:
        return final if final in ("failed", "stopped") else "stopped"
    if stop is None and final in ("failed", "stopped", "stopping"):
        return final  # ended (or ending) without a recorded stop instant: the state row is the record
    if ready is not None and ready <= at:
        return "serving"
    return "starting" if start is not None else final


def launches(
    store: Store, at: int | None, box: str | None = None, with_kernels: bool = False
) -> list[LaunchRow]:
    """Launches that had started by ``at`` (every one when None), with their kernel lines when asked."""
    where, params = ("WHERE l.box = ?", [box]) if box else ("", [])
    rows = store.rows(
        f"""SELECT l.*, a.model FROM launches l LEFT JOIN arms a ON a.id = l.arm_id {where}
            ORDER BY coalesce(l.start_ms, 0), l.id""",
        params,
    )
    kernels: dict[str, list[tuple[str, str]]] = defaultdict(list)
    if with_kernels and rows:
        clauses = {"t_ms <= ?": at, "box = ?": box or None}
        used = {c: v for c, v in clauses.items() if v is not None}
        for k in store.rows(
            "SELECT launch_id, category, line FROM kernel_lines "
            f"{'WHERE ' + ' AND '.join(used) if used else ''} ORDER BY t_ms, id",
            list(used.values()),
        ):
            kernels[k["launch_id"]].append((k["category"], k["line"]))
    out = []
    for r in rows:
        state = launch_state_at(r, at)
        if state is None:
            continue
        out.append(
            LaunchRow(
                id=r["id"],
                box=r["box"],
                arm=r["arm"],
                state=state,
                replica=r["replica"],
                gpus=tuple(json_list(r["gpus"])),
                port=r["port"],
                pid=r["pid"],
                start_ms=r["start_ms"],
                ready_ms=r["ready_ms"],
                stop_ms=r["stop_ms"] if state in ("failed", "stopped") else None,
                exit_code=r["exit_code"] if state in ("failed", "stopped") else None,
                failure_reason=r["failure_reason"] if state == "failed" else None,
                backends_accepted=json_tuple_or_none(r["backends_accepted"]),
                log_path=r["log_path"],
                forced=bool(r["forced"]),
                kernel_lines=tuple(kernels.get(r["id"], ())),
                model=r["model"],
            )
        )
    return out


def arm_models(store: Store) -> dict[str, str]:
    """The model each arm serves, by arm name, from every arm the store has resolved."""
    return {r["arm"]: r["model"] for r in store.rows("SELECT arm, model FROM arms")}


def failed_launches(store: Store, at: int | None) -> list[LaunchRow]:
    """Launches that had failed by ``at``, by box and arm, each with the engine's reason."""
    return sorted((r for r in launches(store, at) if r.state == "failed"), key=lambda r: (r.box, r.arm, r.id))


# -- checks and timers -----------------------------------------------------------------------------
def last_checks(store: Store, box: str, at: int) -> tuple[CheckMark, ...]:
    rows = store.rows(
        """SELECT check_name, verdict, reason FROM check_verdicts v
           WHERE box = ? AND t_ms = (SELECT max(t_ms) FROM check_verdicts w
                                     WHERE w.box = v.box AND w.check_name = v.check_name AND w.t_ms <= ?)
           ORDER BY check_name""",
        [box, at],
    )
    return tuple(CheckMark(r["check_name"], r["verdict"], r["reason"]) for r in rows)


def timers(store: Store, at: int, box: str | None = None, include_ended: bool = True) -> list[TimerRow]:
    """Timers that existed at ``at``, in deadline order, with their state and warnings as of then."""
    where = "t.created_ms <= ?" + (" AND t.box = ?" if box else "")
    params: list[Any] = [at] + ([box] if box else [])
    rows = store.rows(
        f"""SELECT t.*, b.tz AS box_tz FROM timers t LEFT JOIN boxes b ON b.name = t.box
            WHERE {where} ORDER BY t.deadline_ms, t.id""",
        params,
    )
    if not rows:
        return []
    marks = ",".join("?" * len(rows))
    log: dict[int, list[str]] = defaultdict(list)
    for e in store.rows(
        f"SELECT timer_id, event FROM timer_log WHERE timer_id IN ({marks}) AND t_ms <= ? ORDER BY t_ms, id",
        [r["id"] for r in rows] + [at],
    ):
        log[e["timer_id"]].append(e["event"])
    out = []
    for r in rows:
        events = log.get(r["id"], [])
        ended = [_TIMER_END_EVENTS[e] for e in events if e in _TIMER_END_EVENTS]
        # With no log the timers row is the only record; it describes now, not the cursor.
        state: TimerState = ended[-1] if ended else ("armed" if events else r["state"])
        row = TimerRow.from_row(
            r,
            at=at,
            box_tz=r["box_tz"],
            state=state,
            warnings=tuple(e for e in events if e.startswith("warn")),
        )
        if include_ended or row.live:
            out.append(row)
    return out


# -- fleet -----------------------------------------------------------------------------------------------
def fleet(store: Store, at: int, box: str | None = None) -> list[FleetRow]:
    """Every box (or just ``box``) that existed at ``at``; a box destroyed before ``at`` is gone."""
    every = launches(store, at, box)
    live_timers = timers(store, at, box, include_ended=False)
    health = ingest_health(store, at, box)
    return [
        _fleet_row(store, b, at, every, live_timers, health, gpu_power(store, b["name"], at))
        for b in _boxes(store, at, box)
    ]


def box_now(
    store: Store, at: int, box: str, every: list[LaunchRow], box_timers: list[TimerRow], gpus: list[GpuPower]
) -> FleetRow | None:
    """``box``'s fleet row from its launches, timers and GPUs as of ``at``, already read: Live reads them for
    its panels too, and reading each once keeps a redraw's SQLite calls few. None for a box not there."""
    rows = _boxes(store, at, box)
    if not rows:
        return None
    return _fleet_row(store, rows[0], at, every, box_timers, ingest_health(store, at, box), gpus)


def _boxes(store: Store, at: int, box: str | None) -> list[dict[str, Any]]:
    only = "AND name = ?" if box else ""
    return store.rows(
        f"SELECT * FROM boxes WHERE (destroyed_ms IS NULL OR destroyed_ms > ?) {only} ORDER BY name",
        [at, box] if box else [at],
    )


def _fleet_row(
    store: Store,
    b: dict[str, Any],
    at: int,
    every: list[LaunchRow],
    box_timers: list[TimerRow],
    health: dict[str, IngestHealth],
    gpus: list[GpuPower],
) -> FleetRow:
    """One box's row: the arms serving on it, its first live timer (``timers`` come in deadline order), its
    latest GPU samples and its ingest health."""
    name = b["name"]
    serving = dict.fromkeys(
        launch.arm for launch in every if launch.box == name and launch.state == "serving"
    )
    return FleetRow(
        name=name,
        kind=b["kind"],
        status=b["status"],
        status_detail=b["status_detail"],
        gpu_summary=b["gpu_summary"],
        price_per_hour=b["price_per_hour"],
        checks=last_checks(store, name, at),
        serving=tuple(serving),
        timer=next((t for t in box_timers if t.box == name and t.live), None),
        last_sample_ms=max((g.t_ms for g in gpus), default=None),
        capped_gpus=sum(1 for g in gpus if g.capped),
        tz=b["tz"],
        ssh_target=Box.from_row(b).ssh_target,
        ingest=health.get(name, IngestHealth()),
    )


def ingest_health(store: Store, at: int, box: str | None = None) -> dict[str, IngestHealth]:
    """Per box (only boxes with any): events quarantined by ``at`` with the first one's reason, and the
    seqs recorded as lost."""
    only, params = ("AND box = ?", [at, box]) if box else ("", [at])
    quarantined = {
        r["box"]: (r["n"], r["reason"])
        for r in store.rows(
            "SELECT box, count(*) AS n, (SELECT reason FROM quarantine q2 WHERE q2.box = q.box ORDER BY seq LIMIT 1) "
            f"AS reason FROM quarantine q WHERE quarantined_ms <= ? {only} GROUP BY box",
            params,
        )
    }
    lost: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for r in store.rows(
        f"SELECT box, first_seq, last_seq FROM lost_events WHERE recorded_ms <= ? {only} ORDER BY box, first_seq",
        params,
    ):
        lost[r["box"]].append((r["first_seq"], r["last_seq"]))
    return {
        name: IngestHealth(
            quarantined=quarantined.get(name, (0, None))[0],
            first_reason=quarantined.get(name, (0, None))[1],
            lost=sum(b - a + 1 for a, b in lost.get(name, [])),
            lost_ranges=tuple(lost.get(name, [])),
        )
        for name in set(quarantined) | set(lost)
    }


# -- GPUs and servers ------------------------------------------------------------------------------------
def gpu_power(store: Store, box: str, at: int) -> list[GpuPower]:
    """The latest sample of each GPU at ``at`` (one sampler tick covers every GPU of a box), in one statement:
    the box's last tick, then each GPU's latest row within STALE_MS of it (a redraw's statements each give up
    the interpreter lock)."""
    # SQLite fills the bare columns of a max() aggregate from the row holding the maximum: one row per GPU.
    rows = store.rows(
        """WITH last(t) AS (SELECT max(t_ms) FROM gpu_samples WHERE box = :box AND t_ms <= :at)
           SELECT g.*, max(g.t_ms) AS t_ms FROM last JOIN gpu_samples g
             ON g.box = :box AND g.t_ms > last.t - :stale AND g.t_ms <= last.t
           GROUP BY g.gpu""",
        {"box": box, "at": at, "stale": STALE_MS},
    )
    latest = {r["gpu"]: r for r in rows}
    return [
        GpuPower(
            gpu=g,
            t_ms=r["t_ms"],
            power_w=r["power_w"],
            enforced_limit_w=r["enforced_limit_w"],
            max_limit_w=r["max_limit_w"],
            sm_clock_mhz=r["sm_clock_mhz"],
            util_pct=r["util_pct"],
            temp_c=r["temp_c"],
            mem_used_mib=r["mem_used_mib"],
            mem_total_mib=r["mem_total_mib"],
            stale=at - r["t_ms"] > STALE_MS,
        )
        for g, r in sorted(latest.items())
    ]


EXACT_WINDOW_MS = 3600_000
"""Windows up to an hour average every sample; wider ones probe each bucket (see ``_bucketed``)."""

PROBE_MS = 20_000

GPU_EXACT_WINDOW_MS = 600_000
GPU_PROBE_MS = 5_000
"""GPU samples come eight a second on an 8-GPU box: beyond ten minutes each bucket averages its first five."""


def _packing(sql: str, columns: int) -> str:
    """A query returning the rows ``(k, b, a0, ..., a{columns-1})`` of ``sql`` as one row: a JSON array of
    them, each average written with 17 significant digits (it reads back as the same double; ``_unpacked``).

    A chart's hundreds of buckets would otherwise be hundreds of sqlite3 steps, and each step gives up the
    interpreter lock: beside a busy thread (an ingesting link) every one waits up to the switch interval
    to take it back, the redraw's p99 (bench/tui_ingest.py). Parsing the one row keeps the lock."""
    cells = ", ".join(f"iif(a{i} IS NULL, NULL, printf('%!.17g', a{i}))" for i in range(columns))
    return f"SELECT json_group_array(json_array(k, b, {cells})) FROM ({sql})"


def _unpacked(text: str) -> list[tuple[Any, ...]]:
    return [
        (k, b, *(None if v is None else float(v) for v in averages)) for k, b, *averages in json.loads(text)
    ]


def _fetch(store: Store, *charts: tuple[str, dict[str, Any]]) -> list[list[tuple[Any, ...]]]:
    """The rows of each packed chart query (``_packing``), all in one statement: one sqlite3 step for them all,
    where each statement of a redraw may wait out an ingesting thread's switch interval. Their parameters
    share one namespace: a name two charts bind must have one value."""
    values: dict[str, Any] = {}
    for _sql, params in charts:
        clash = [name for name in params.keys() & values.keys() if params[name] != values[name]]
        assert not clash, f"charts bind {clash} to different values"
        values.update(params)
    row = store.db.execute("SELECT " + ", ".join(f"({sql})" for sql, _ in charts), values).fetchone()
    return [_unpacked(text) for text in row]


def _bucketed(
    table: str,
    where: str,
    params: dict[str, Any],
    columns: Sequence[str],
    span: tuple[int, int, int],
    exact_ms: int,
    probe_ms: int,
    key: str | None = None,
    tag: str = "",
) -> tuple[str, dict[str, Any]]:
    """A packed query (``_packing``) of ``avg(column)`` per bucket of ``span`` (start, end, buckets) over
    the rows ``where`` selects, as rows ``(key, bucket, *averages)``; ``key`` (an SQL expression) splits the
    rows into series first. ``tag`` prefixes the bucket parameters' names, so charts of other bucket counts
    can run in one statement (``_fetch``).

    Up to ``exact_ms`` every row counts. Beyond, a 24-hour window at 1 Hz would read 86,400 rows per
    series on every redraw, so each bucket averages only its first ``probe_ms``, read bucket by bucket
    through the table's (..., t_ms) index: a decimated overview, gaps included.
    """
    start, end, buckets = span
    width = max(1, (end - start) // buckets)
    averages = ", ".join(f"avg({c}) AS a{i}" for i, c in enumerate(columns))
    by = key or "NULL"
    t = tag
    values = {**params, f"{t}start": start, f"{t}end": end, f"{t}n": buckets, f"{t}span": max(1, end - start)}
    if end - start <= exact_ms or width <= probe_ms:
        sql = f"""SELECT {by} AS k, ((t_ms - :{t}start) * :{t}n - 1) / :{t}span AS b, {averages} FROM {table}
                  WHERE {where} AND t_ms > :{t}start AND t_ms <= :{t}end GROUP BY k, b"""
    else:
        sql = f"""WITH RECURSIVE b(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM b WHERE i < :{t}n - 1)
                  SELECT {by} AS k, b.i AS b, {averages} FROM b JOIN {table}
                    ON {where} AND t_ms > :{t}start + b.i * :{t}width
                      AND t_ms <= :{t}start + b.i * :{t}width + :{t}probe
                  GROUP BY k, b.i"""
        values.update({f"{t}width": width, f"{t}probe": probe_ms})
    return _packing(sql, len(columns)), values


def _summed(rows: Iterable[tuple[Any, ...]], buckets: int, columns: int) -> list[list[float | None]]:
    """Per column, the series' bucket averages summed across series (two replicas read as their total)."""
    out: list[list[float | None]] = [[None] * buckets for _ in range(columns)]
    for _key, b, *averages in rows:
        i = min(buckets - 1, max(0, int(b)))
        for column, value in zip(out, averages, strict=True):
            if value is not None:
                column[i] = (column[i] or 0.0) + value
    return out


def throughput(store: Store, box: str, start: int, end: int, buckets: int) -> tuple[Series, Series]:
    """Output and input tok/s of every launch on ``box`` as the server's /metrics counted them, summed,
    averaged into ``buckets`` in SQL.

    Each launch is averaged within a bucket and then summed across launches, so two replicas read as
    their total, not their mean. One query for every launch of the window (a redraw's SQLite calls each give
    up the interpreter lock, which an ingesting thread then holds for up to its switch interval); samples
    are read through each launch's primary key (launch_id, t_ms), which is clustered.
    """
    (rows,) = _fetch(store, _throughput_chart(box, start, end, buckets))
    return _throughput_series(rows, start, end, buckets)


def _throughput_chart(box: str, start: int, end: int, buckets: int) -> tuple[str, dict[str, Any]]:
    return _bucketed(
        "server_samples",
        """launch_id IN (SELECT id FROM launches WHERE box = :box AND coalesce(start_ms, 0) <= :end
                         AND (stop_ms IS NULL OR stop_ms >= :start))""",
        {"box": box, "start": start, "end": end},
        ("gen_tok_per_s", "prompt_tok_per_s"),
        (start, end, max(1, buckets)),
        EXACT_WINDOW_MS,
        PROBE_MS,
        key="launch_id",
        tag="tp_",
    )


def _throughput_series(
    rows: list[tuple[Any, ...]], start: int, end: int, buckets: int
) -> tuple[Series, Series]:
    out, inp = _summed(rows, max(1, buckets), 2)
    return Series("out tok/s", start, end, tuple(out)), Series("in tok/s", start, end, tuple(inp))


def loadgen_throughput(store: Store, box: str, start: int, end: int, buckets: int) -> tuple[Series, Series]:
    """Output and input tok/s on ``box`` as the load generator measured them (its ``bench_progress``
    samples, agents/jobs.py), each run averaged within a bucket and runs summed, like ``throughput``.

    What Live charts when the server exposes no metrics: the client's own count of finished requests.
    The samples stay in the journal table, read through its (box, kind, t_ms) index.
    """
    buckets = max(1, buckets)
    chart = _bucketed(
        "journal",
        "box = :box AND kind = 'bench_progress'",
        {"box": box},
        ("json_extract(payload, '$.out_tok_per_s')", "json_extract(payload, '$.in_tok_per_s')"),
        (start, end, buckets),
        EXACT_WINDOW_MS,
        PROBE_MS,
        key="json_extract(payload, '$.bench_id')",
    )
    (rows,) = _fetch(store, chart)
    return _throughput_series(rows, start, end, buckets)


GPU_COLUMNS = ("power_w", "enforced_limit_w", "sm_clock_mhz")
"""What a GPU's history charts: its draw, its enforced limit and its SM clock."""


def _gpus_where(box: str, gpus: Sequence[int]) -> tuple[str, dict[str, Any]]:
    """The rows of ``gpus`` on ``box``, as a WHERE clause and its parameters, read through the (box, gpu,
    t_ms) primary keys of gpu_samples and the rollups."""
    marks = {f"gpu{i}": gpu for i, gpu in enumerate(gpus)}
    return f"box = :box AND gpu IN ({', '.join(':' + m for m in marks)})", {"box": box, **marks}


def _rollup_of(span: tuple[int, int, int]) -> str | None:
    """The rollup table GPU charts of ``span`` read (schema V27, V29): the coarsest tier whose bucket its
    buckets span, beyond the exact window; None: the raw rows. A 30-day window reads ~4,300 ten-minute rows a
    GPU, not 43,000 minutes or 2.6 M samples."""
    start, end, buckets = span
    if end - start <= GPU_EXACT_WINDOW_MS:
        return None
    width = (end - start) // buckets
    spanned = [tier for tier in ROLLUP_TIERS_MS if width >= tier]
    return rollup_table(spanned[-1]) if spanned else None


def _from_rollup(
    store: Store, table: str, box: str, gpus: Sequence[int], span: tuple[int, int, int]
) -> list[tuple[Any, ...]]:
    """Rows like ``_bucketed``'s keyed by GPU, averaged exactly from the rollup ``table``; a GPU without rollup
    rows in the window has none."""
    start, end, buckets = span
    averages = ", ".join(f"sum({c}_sum) / nullif(sum({c}_n), 0) AS a{i}" for i, c in enumerate(GPU_COLUMNS))
    where, params = _gpus_where(box, gpus)
    sql = f"""SELECT gpu AS k, ((t_ms - :start) * :n) / :span AS b, {averages} FROM {table}
              WHERE {where} AND t_ms >= :start AND t_ms < :end GROUP BY k, b"""
    values = {**params, "start": start, "end": end, "n": buckets, "span": max(1, end - start)}
    (rows,) = _fetch(store, (_packing(sql, len(GPU_COLUMNS)), values))
    return rows


def _gpu_chart(box: str, gpus: Sequence[int], span: tuple[int, int, int]) -> tuple[str, dict[str, Any]]:
    """The packed query of ``gpus``' raw samples bucketed over ``span``."""
    where, params = _gpus_where(box, gpus)
    return _bucketed(
        "gpu_samples",
        where,
        params,
        GPU_COLUMNS,
        span,
        GPU_EXACT_WINDOW_MS,
        GPU_PROBE_MS,
        key="gpu",
        tag="gpu_",
    )


def gpu_history(
    store: Store, box: str, gpus: Sequence[int], start: int, end: int, buckets: int
) -> list[GpuHistory]:
    """Each GPU's draw, enforced limit and SM clock averaged into ``buckets``, every GPU in one query (the
    rollup's, and the raw rows' for the GPUs it lacks), read through the (box, gpu, t_ms) primary keys.

    One query for the box, not one a GPU: each SQLite call of a redraw gives up the interpreter lock, and
    an ingesting thread that takes it keeps it up to its switch interval (bench/tui_ingest.py)."""
    span = (start, end, max(1, buckets))
    table = _rollup_of(span)
    rows = _from_rollup(store, table, box, gpus, span) if gpus and table else []
    found = {row[0] for row in rows}
    raw = [gpu for gpu in gpus if gpu not in found]
    if raw:
        (more,) = _fetch(store, _gpu_chart(box, raw, span))
        rows += more
    return _histories(rows, gpus, span)


def live_series(
    store: Store, box: str, gpus: Sequence[int], start: int, end: int, buckets: int, gpu_buckets: int
) -> tuple[Series, Series, list[GpuHistory]]:
    """``throughput`` in ``buckets`` and ``gpu_history`` in ``gpu_buckets``, as Live charts them: in one
    statement where the GPU charts read raw samples (windows up to a day), as ``gpu_history`` where they read
    the rollup. Each statement of a redraw may wait out an ingesting thread's switch interval."""
    span = (start, end, max(1, gpu_buckets))
    if not gpus or _rollup_of(span):
        out, inp = throughput(store, box, start, end, buckets)
        return out, inp, gpu_history(store, box, gpus, start, end, gpu_buckets)
    served, rows = _fetch(store, _throughput_chart(box, start, end, buckets), _gpu_chart(box, gpus, span))
    return *_throughput_series(served, start, end, buckets), _histories(rows, gpus, span)


def _histories(
    rows: list[tuple[Any, ...]], gpus: Sequence[int], span: tuple[int, int, int]
) -> list[GpuHistory]:
    """Each of ``gpus``' history from its rows (keyed by GPU), in ``gpus``' order."""
    start, end, buckets = span
    by_gpu: dict[int, list[tuple[Any, ...]]] = defaultdict(list)
    for row in rows:
        by_gpu[row[0]].append(row)
    out = []
    for gpu in gpus:
        power, limit, clock = _summed(by_gpu[gpu], buckets, 3)  # one series per GPU: the sum is its average
        out.append(
            GpuHistory(
                gpu=gpu,
                power_w=Series("W", start, end, tuple(power)),
                limit_w=Series("limit W", start, end, tuple(limit)),
                sm_clock_mhz=Series("MHz", start, end, tuple(clock)),
            )
        )
    return out


def servers_now(store: Store, at: int, serving: list[LaunchRow]) -> list[ServerNow]:
    """Each serving launch's latest server sample at ``at``, in ``serving``'s order (a launch without one is
    left out), in one query driven by the launch list (json_each), so each launch's latest instant is one
    seek of its (launch_id, t_ms) key; an IN list would have SQLite try every sample of the launches."""
    if not serving:
        return []
    rows = store.rows(
        """SELECT s.* FROM json_each(:ids) l JOIN server_samples s ON s.launch_id = l.value
             AND s.t_ms = (SELECT max(t_ms) FROM server_samples WHERE launch_id = l.value AND t_ms <= :at)""",
        {"ids": json.dumps([launch.id for launch in serving]), "at": at},
    )
    latest = {r["launch_id"]: r for r in rows}
    return [
        ServerNow(
            launch_id=launch.id,
            arm=launch.arm,
            t_ms=r["t_ms"],
            gen_tok_per_s=r["gen_tok_per_s"],
            prompt_tok_per_s=r["prompt_tok_per_s"],
            running=r["running"],
            waiting=r["waiting"],
            kv_usage=r["kv_usage"],
        )
        for launch in serving
        if (r := latest.get(launch.id)) is not None
    ]


def bench_now(store: Store, box: str, start: int, at: int) -> BenchNow | None:
    """The bench run in progress at ``at`` on ``box``, else the latest one that ended in the window.

    A bench the console started has no row until the load generator reports at its end, so a sent
    ``bench`` command without its result row is the run in progress (its arguments name the workload).
    """
    pending = store.rows(
        """SELECT c.args, c.created_ms FROM commands c
           WHERE c.box = ? AND c.op = 'bench' AND c.state != 'failed' AND c.created_ms <= ? AND c.created_ms > ?
             AND NOT EXISTS (SELECT 1 FROM bench_runs r WHERE r.run_id = c.id
                             AND coalesce(r.ended_ms, r.started_ms) <= ?)
           ORDER BY c.created_ms DESC LIMIT 1""",
        [box, at, start, at],
    )
    if pending:
        args = json.loads(pending[0]["args"])
        return BenchNow(
            arm=str(args.get("arm") or "?"),
            shape=str(args.get("workload") or args.get("shape") or "?"),
            concurrency=int(args.get("concurrency") or 0),
            out_tok_per_s=None,
            in_tok_per_s=None,
            started_ms=pending[0]["created_ms"],
            ended_ms=None,
            running=True,
        )
    row = latest_bench(store, box, start, at)
    return None if row is None else BenchNow.of(row, at)
