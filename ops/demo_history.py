"""The demo's recorded history: the campaign write-up's figures laid out on a timeline, as a campaign in
progress would have recorded them.

ops/demo.py imports the write-up's tables (results, tripwires, launches); on its own that is a campaign
after the fact, and every live panel of a newcomer's first screen stays empty. This module builds what the
console records while a campaign runs: each box checked (its power limit against its board maximum, judged
by console.checks.power itself), each arm started, tripwired and benched in the order the write-up's sweep
lists walked them, GPU power and clock series at the limit the box ran under, server throughput at each
published rate, the hard stops the write-up tells of and the sweep lists with each arm's outcome.

Every figure comes from ops/data/seed/: the rates from throughput.tsv, the limits from boxes.toml, outcomes
from arms.tsv, and history.toml for what the write-up does not print (dates, durations, idle draw, clocks),
each named there. The series are seeded, so one data set gives one history, byte for byte. The rows are
written by console/store/history.py as rows of the write-up's import: marked imported, never measured here.
"""

from __future__ import annotations

import random
import tomllib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from importlib.resources.abc import Traversable
from typing import Any

from agents.protocol import ProbeGpu, ProbeReport
from agents.watchdog import WARN_AT_S
from console.checks.power import check_power
from console.errors import InputError
from console.readmodel import TripwireVerdict
from console.store.history import (
    BenchSpan,
    CheckRun,
    GpuSample,
    HistoryPayload,
    ImportedSweep,
    ImportedSweepArm,
    ImportedTimer,
    LaunchSpan,
    ServerSample,
    TimerEvent,
)
from console.store.results import ImportedBench, ImportedLaunch, ImportPayload

HISTORY_FILE = "history.toml"
OUTCOMES = ("served", "refused", "degenerate", "not reached")
CAP_LOSS = 0.23
"""The write-up's cost of running RTX PRO 6000 cards at 400 instead of 600 W on NVFP4 (rule 7): a capped
card holds its limit by running its clock down by about as much."""
CAP_LOSS_SPAN_W = 200.0
"""The 600 - 400 W that loss was measured over: another cap loses in proportion to its own span."""


class HistoryDataError(InputError, ValueError):
    """history.toml does not parse or disagrees with the other data files; names the file and the entry."""

    def __init__(self, message: str):
        super().__init__(message, "fix ops/data/seed/history.toml so it agrees with arms.tsv and boxes.toml")


@dataclass(frozen=True)
class Timeline:
    """history.toml's [timeline]: sampling intervals and how long each step of an arm takes, in ms."""

    gpu_sample_ms: int
    server_sample_ms: int
    startup_ms: int
    tripwire_ms: int
    bench_ms: int
    gap_ms: int
    noise: float
    seed: int
    idle_clock_mhz: float
    bench_draw: float


@dataclass(frozen=True)
class BoxPlan:
    """One box: boxes.toml's limits beside history.toml's figures for it."""

    name: str
    gpu_count: int
    limit_w: float
    max_w: float
    default_w: float
    gpu_name: str
    memory_mib: float
    boost_clock_mhz: float
    idle_w: float
    loading_w: float
    starts_ms: int | None
    ends_ms: int

    @property
    def bench_clock_mhz(self) -> float:
        """Capped cards hold their limit with a lower clock (CAP_LOSS over CAP_LOSS_SPAN_W)."""
        capped_w = max(0.0, self.max_w - self.limit_w)
        return self.boost_clock_mhz * (1 - CAP_LOSS * min(1.0, capped_w / CAP_LOSS_SPAN_W))


@dataclass
class Phase:
    """A stretch of one box's timeline: what its GPUs (``gpus``) were doing from ``start`` to ``end``."""

    start: int
    end: int
    kind: str  # loading, tripwire, bench, serving (idle between benches), stopping (being killed)
    gpus: frozenset[int]
    bench: ImportedBench | None = None


@dataclass
class Walk:
    """One box's arms laid out in time, with the phases its samples are drawn from."""

    start: int
    end: int
    phases: list[Phase] = field(default_factory=list)
    arm_spans: dict[str, tuple[int, int]] = field(default_factory=dict)  # arm -> (start, end)
    benches: dict[str, list[BenchSpan]] = field(default_factory=dict)  # arm -> its benches


def epoch_ms(value: object, where: str) -> int:
    """A TOML offset date-time as UTC epoch ms; a local (naive) one is refused."""
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise HistoryDataError(f"{HISTORY_FILE}: {where} is {value!r}; give a date-time with its offset (…Z)")
    return int(value.timestamp() * 1000)


def _need(entry: dict[str, Any], key: str, where: str) -> Any:
    if key not in entry:
        raise HistoryDataError(f"{HISTORY_FILE}: {where} has no {key!r}")
    return entry[key]


def read(data_dir: Traversable) -> dict[str, Any]:
    try:
        return tomllib.loads((data_dir / HISTORY_FILE).read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise HistoryDataError(f"{HISTORY_FILE}: {exc}") from exc


def _timeline(data: dict[str, Any]) -> Timeline:
    t = _need(data, "timeline", "the file")
    keys = ("gpu_sample_s", "server_sample_s", "startup_s", "tripwire_s", "bench_s", "gap_s")
    seconds = {k: int(float(_need(t, k, "[timeline]")) * 1000) for k in keys}
    return Timeline(
        gpu_sample_ms=seconds["gpu_sample_s"],
        server_sample_ms=seconds["server_sample_s"],
        startup_ms=seconds["startup_s"],
        tripwire_ms=seconds["tripwire_s"],
        bench_ms=seconds["bench_s"],
        gap_ms=seconds["gap_s"],
        noise=float(_need(t, "noise", "[timeline]")),
        seed=int(_need(t, "seed", "[timeline]")),
        idle_clock_mhz=float(_need(t, "idle_clock_mhz", "[timeline]")),
        bench_draw=float(_need(t, "bench_draw", "[timeline]")),
    )


def _plans(data: dict[str, Any], boxes: Sequence[dict[str, Any]]) -> dict[str, BoxPlan]:
    published = {b["name"]: b for b in boxes}
    plans = {}
    for i, h in enumerate(data.get("box", [])):
        where = f"[[box]] #{i + 1}"
        name = _need(h, "name", where)
        b = published.get(name)
        if b is None:
            raise HistoryDataError(
                f"{HISTORY_FILE}: {where} names box {name!r}, which boxes.toml does not list"
            )
        plans[name] = BoxPlan(
            name=name,
            gpu_count=int(b["gpu_count"]),
            limit_w=float(b["power_limit_w"]),
            max_w=float(b["max_power_w"]),
            default_w=float(_need(h, "default_limit_w", where)),
            gpu_name=str(_need(h, "gpu_name", where)),
            memory_mib=float(_need(h, "memory_mib", where)),
            boost_clock_mhz=float(_need(h, "boost_clock_mhz", where)),
            idle_w=float(_need(h, "idle_w", where)),
            loading_w=float(_need(h, "loading_w", where)),
            starts_ms=epoch_ms(h["starts"], f"{where} starts") if "starts" in h else None,
            ends_ms=epoch_ms(_need(h, "ends", where), f"{where} ends"),
        )
    return plans  # a box with no entry has no recorded history: its imported tables stand alone


def build_history(
    payload: ImportPayload, boxes: Sequence[dict[str, Any]], data_dir: Traversable
) -> HistoryPayload:
    """The history of ``payload``'s campaign (ops/demo.py's import of ``data_dir``); ``boxes`` are boxes.toml's
    entries. Deterministic: the same files give the same rows."""
    data = read(data_dir)
    timeline = _timeline(data)
    plans = _plans(data, boxes)
    launches = {(la.box, la.arm): la for la in payload.launches}
    sweeps = [_checked_sweep(i, s, launches, payload, plans) for i, s in enumerate(data.get("sweep", []))]
    rng = random.Random(timeline.seed)
    out = HistoryPayload()
    for name, plan in plans.items():
        order = _order(name, payload.launches, sweeps)
        walk = _walk(plan, order, payload, timeline)
        out.launches += _spans(order, walk, timeline)
        tripwired = [la for la in order if la.state != "failed" and la.launch_id in payload.tripwires]
        for la in tripwired:  # the tripwire's row is written when it ends
            out.tripwires[la.launch_id] = (
                walk.arm_spans[la.arm][0] + timeline.startup_ms + timeline.tripwire_ms
            )
        out.gpu_samples += _gpu_samples(plan, walk, timeline, rng)
        out.server_samples += _server_samples(plan, order, walk, timeline, rng)
        out.checks.append(CheckRun(name, walk.start, check_power(_probe(plan, walk.start))))
        for sweep in sweeps:
            if sweep["box"] == name:
                out.sweeps.append(_sweep(sweep, walk, launches, payload))
    out.timers = [_timer(i, t, plans) for i, t in enumerate(data.get("timer", []))]
    return out


def _checked_sweep(
    i: int,
    s: dict[str, Any],
    launches: dict[tuple[str, str], ImportedLaunch],
    payload: ImportPayload,
    plans: dict[str, BoxPlan],
) -> dict[str, Any]:
    """A [[sweep]] entry whose every outcome agrees with arms.tsv (the launch and its tripwire)."""
    where = f"[[sweep]] #{i + 1} ({s.get('list')})"
    box = _need(s, "box", where)
    _need(s, "provenance", where)
    if box not in plans:
        raise HistoryDataError(f"{HISTORY_FILE}: {where} names box {box!r}, which has no [[box]] entry")
    for a in _need(s, "arms", where):
        arm, outcome = _need(a, "arm", where), _need(a, "outcome", where)
        if outcome not in OUTCOMES:
            raise HistoryDataError(
                f"{HISTORY_FILE}: {where}: {arm} outcome {outcome!r} is not one of {OUTCOMES}"
            )
        launch = launches.get((box, arm))
        actual = _outcome(launch, payload)
        if outcome != actual:
            raise HistoryDataError(
                f"{HISTORY_FILE}: {where}: {arm} is {outcome!r} here but arms.tsv makes it {actual!r} on {box}"
            )
    if any(a["outcome"] == "not reached" for a in s["arms"]) and not s.get("stopped"):
        raise HistoryDataError(
            f"{HISTORY_FILE}: {where} has arms not reached; say why it stopped (stopped = ...)"
        )
    return s


def _outcome(launch: ImportedLaunch | None, payload: ImportPayload) -> str:
    """What arms.tsv says became of an arm: never launched, refused, its tripwire failed, or served."""
    if launch is None or launch.state not in ("stopped", "failed"):
        return "not reached"
    if launch.state == "failed":
        return "refused"
    tripwire = payload.tripwires.get(launch.launch_id)
    return "degenerate" if tripwire is not None and not tripwire["passed"] else "served"


def _order(
    box: str, launches: Sequence[ImportedLaunch], sweeps: Sequence[dict[str, Any]]
) -> list[ImportedLaunch]:
    """The box's launches in the order they ran: those no sweep list names first (the tables' own order),
    then each sweep's arms in its order; an arm is run once."""
    mine = {la.arm: la for la in launches if la.box == box and la.state in ("stopped", "failed")}
    swept = [a["arm"] for s in sweeps if s["box"] == box for a in s["arms"] if a["outcome"] != "not reached"]
    first = [la for arm, la in mine.items() if arm not in swept]
    return first + [mine[arm] for arm in dict.fromkeys(swept)]


def _arm_length(launch: ImportedLaunch, benches: Sequence[ImportedBench], t: Timeline) -> int:
    if launch.state == "failed":
        return t.startup_ms // 2 + t.gap_ms  # the engine refuses while loading
    return t.startup_ms + t.tripwire_ms + len(benches) * (t.bench_ms + t.gap_ms) + t.gap_ms


def _walk(plan: BoxPlan, order: Sequence[ImportedLaunch], payload: ImportPayload, t: Timeline) -> Walk:
    """Lay the box's arms out: from ``starts`` where given, else back from ``ends``; the box is checked first."""
    benches = {la.arm: [b for b in payload.bench_runs if b["launch_id"] == la.launch_id] for la in order}
    length = t.gap_ms + sum(_arm_length(la, benches[la.arm], t) for la in order)
    start = plan.starts_ms if plan.starts_ms is not None else plan.ends_ms - length - t.gap_ms
    if start + length > plan.ends_ms:
        raise HistoryDataError(
            f"{HISTORY_FILE}: box {plan.name}'s arms take {length // 60_000} min, more than its starts..ends"
        )
    walk = Walk(start, plan.ends_ms)
    now = start + t.gap_ms
    for la in order:
        gpus = frozenset(g for replica in la.gpus for g in replica)
        end = now + _arm_length(la, benches[la.arm], t)
        walk.arm_spans[la.arm] = (now, end)
        if la.state == "failed":
            walk.phases.append(Phase(now, now + t.startup_ms // 2, "loading", gpus))
            now = end
            continue
        ready = now + t.startup_ms
        walk.phases.append(Phase(now, ready, "loading", gpus))
        walk.phases.append(Phase(ready, ready + t.tripwire_ms, "tripwire", gpus))
        at = ready + t.tripwire_ms
        for b in benches[la.arm]:
            walk.phases.append(Phase(at, at + t.gap_ms, "serving", gpus))
            at += t.gap_ms
            walk.phases.append(Phase(at, at + t.bench_ms, "bench", gpus, b))
            walk.benches.setdefault(la.arm, []).append(
                BenchSpan(la.launch_id, b["shape"], b["concurrency"], at, at + t.bench_ms)
            )
            at += t.bench_ms
        walk.phases.append(Phase(at, end, "stopping", gpus))  # no scrape once the kill is sent
        now = end
    return walk


def _spans(order: Sequence[ImportedLaunch], walk: Walk, t: Timeline) -> list[LaunchSpan]:
    out = []
    for la in order:
        start, end = walk.arm_spans[la.arm]
        if la.state == "failed":
            out.append(LaunchSpan(la.launch_id, start, None, start + t.startup_ms // 2))
        else:
            out.append(LaunchSpan(la.launch_id, start, start + t.startup_ms, end))
    return out


def _ticks(start: int, end: int, step: int) -> Iterator[int]:
    return iter(range(start, end + 1, step))


def _jitter(rng: random.Random, value: float, noise: float) -> float:
    """``value`` within +-``noise`` of itself, in whole units: watts, MHz and tok/s as a panel prints them
    (SQLite keeps a whole REAL in a byte or two, so the demo stays small)."""
    return float(round(value * (1 + rng.uniform(-noise, noise))))


def _gpu_samples(plan: BoxPlan, walk: Walk, t: Timeline, rng: random.Random) -> list[GpuSample]:
    """Every GPU every tick from the check to the box's end: idle, loading, or at its limit in a bench."""
    out = []
    phases = iter(walk.phases)
    phase = next(phases, None)
    for at in _ticks(walk.start, walk.end, t.gpu_sample_ms):
        while phase is not None and phase.end <= at:
            phase = next(phases, None)
        active = phase if phase is not None and phase.start <= at else None
        for gpu in range(plan.gpu_count):
            kind = active.kind if active is not None and gpu in active.gpus else "idle"
            power, clock = _draw(plan, kind, t, rng)
            out.append(
                GpuSample(
                    box=plan.name,
                    gpu=gpu,
                    t_ms=at,
                    power_w=power,
                    power_limit_w=plan.limit_w,
                    enforced_limit_w=plan.limit_w,
                    max_limit_w=plan.max_w,
                    sm_clock_mhz=clock,
                    mem_total_mib=plan.memory_mib,
                )
            )
    return out


def _draw(plan: BoxPlan, kind: str, t: Timeline, rng: random.Random) -> tuple[float, float]:
    """(W, MHz) of one GPU: a capped card sits at its limit in a bench, an uncapped one a little under it."""
    if kind == "bench":
        capped = plan.limit_w < plan.max_w
        share = 1.0 if capped else t.bench_draw
        power = min(plan.limit_w, _jitter(rng, plan.limit_w * share, t.noise / 2))
        return power, _jitter(rng, plan.bench_clock_mhz, t.noise / 2)
    if kind in ("loading", "tripwire", "serving", "stopping"):
        return _jitter(rng, plan.loading_w, t.noise * 5), _jitter(rng, plan.bench_clock_mhz, t.noise)
    return _jitter(rng, plan.idle_w, t.noise * 5), t.idle_clock_mhz


def _server_samples(
    plan: BoxPlan, order: Sequence[ImportedLaunch], walk: Walk, t: Timeline, rng: random.Random
) -> list[ServerSample]:
    """Each served launch's /metrics rates: its published out and in tok/s through each bench, none asked
    between benches (no sample during the tripwire: the write-up gives it no rate)."""
    out = []
    ids = {la.arm: la.launch_id for la in order}
    for p in walk.phases:
        if p.kind not in ("bench", "serving"):
            continue
        arm = next(arm for arm, (s, e) in walk.arm_spans.items() if s <= p.start < e)
        for at in _ticks(p.start + t.server_sample_ms, p.end - 1, t.server_sample_ms):
            b = p.bench
            out.append(
                ServerSample(
                    box=plan.name,
                    launch_id=ids[arm],
                    t_ms=at,
                    gen_tok_per_s=_jitter(rng, b["out_tok_per_s"], t.noise) if b else 0.0,
                    prompt_tok_per_s=(
                        _jitter(rng, b["in_tok_per_s"], t.noise)
                        if b and b["in_tok_per_s"] is not None
                        else None
                        if b
                        else 0.0
                    ),
                    running=float(b["concurrency"]) if b else 0.0,
                )
            )
    return out


def _probe(plan: BoxPlan, t_ms: int) -> ProbeReport:
    """What NVML would have said of the box's GPUs: the limit it ran under against its board maximum."""
    gpus: list[ProbeGpu] = [
        {
            "index": i,
            "name": plan.gpu_name,
            "uuid": None,
            "pci_bus_id": None,
            "compute_cap": "12.0",
            "power_w": plan.idle_w,
            "power_limit_w": plan.limit_w,
            "enforced_limit_w": plan.limit_w,
            "max_limit_w": plan.max_w,
            "sm_clock_mhz": None,
            "util_pct": None,
            "mem_used_mib": None,
            "mem_total_mib": plan.memory_mib,
            "temp_c": None,
            "default_limit_w": plan.default_w,
            "min_limit_w": None,
            "max_sm_clock_mhz": None,
        }
        for i in range(plan.gpu_count)
    ]
    return {"t_ms": t_ms, "source": "nvml", "gpus": gpus}


def _sweep(
    s: dict[str, Any], walk: Walk, launches: dict[tuple[str, str], ImportedLaunch], payload: ImportPayload
) -> ImportedSweep:
    arms = []
    for a in s["arms"]:
        launch = launches.get((s["box"], a["arm"]))
        if a["outcome"] == "not reached" or launch is None:
            arms.append(ImportedSweepArm(a["arm"], "pending"))
            continue
        start, end = walk.arm_spans[a["arm"]]
        arms.append(
            ImportedSweepArm(
                arm=a["arm"],
                state=a["outcome"],
                reason=_reason(a["outcome"], launch, payload),
                launch_id=launch.launch_id,
                started_ms=start,
                ended_ms=end,
                kv_cache_tokens=launch.kv_cache_tokens,
                benches=tuple(walk.benches.get(a["arm"], ())),
            )
        )
    ran = [a for a in arms if a.started_ms is not None]
    created = min((a.started_ms for a in ran if a.started_ms is not None), default=walk.end)
    stopped = s.get("stopped")
    benches = [b for a in arms for b in a.benches]
    return ImportedSweep(
        list_name=_need(s, "list", "[[sweep]]"),
        box=s["box"],
        state="interrupted" if stopped else "done",
        detail=f"{stopped} (imported: {s['provenance']})" if stopped else f"imported: {s['provenance']}",
        shapes=list(dict.fromkeys(b.shape for b in benches)),
        concurrency=sorted({b.concurrency for b in benches}),
        created_ms=created,
        updated_ms=walk.end if stopped else max((a.ended_ms or created for a in ran), default=created),
        arms=arms,
    )


def _reason(outcome: str, launch: ImportedLaunch, payload: ImportPayload) -> str | None:
    """The engine's refusal as arms.tsv quotes it, or the failed tripwire in the read model's words."""
    if outcome == "refused":
        return launch.failure_reason
    tw = payload.tripwires.get(launch.launch_id)
    if outcome == "degenerate" and tw is not None:
        verdict = TripwireVerdict.of(tw["ok"], tw["degenerate"], tw["wrong"], tw["total"], tw["passed"])
        return f"tripwire {verdict.text}"
    return None


def _timer(i: int, t: dict[str, Any], plans: dict[str, BoxPlan]) -> ImportedTimer:
    """A hard stop with the log the console's timer keeps: armed, its warnings while still armed, its end."""
    where = f"[[timer]] #{i + 1}"
    box = _need(t, "box", where)
    if box not in plans:
        raise HistoryDataError(f"{HISTORY_FILE}: {where} names box {box!r}, which has no [[box]] entry")
    deadline = epoch_ms(_need(t, "deadline", where), f"{where} deadline")
    armed = epoch_ms(_need(t, "armed", where), f"{where} armed")
    ended_at = epoch_ms(_need(t, "ended_at", where), f"{where} ended_at")
    ended = _need(t, "ended", where)
    if ended not in ("fired", "cancelled") or not armed <= ended_at <= deadline:
        raise HistoryDataError(
            f"{HISTORY_FILE}: {where}: ended {ended!r} at {ended_at} must be fired or cancelled between armed "
            "and the deadline"
        )
    log = [TimerEvent(armed, "armed")]
    log += [
        TimerEvent(deadline - w * 1000, f"warn-{w // 60}m")
        for w in WARN_AT_S
        if armed < deadline - w * 1000 < ended_at
    ]
    log.append(
        TimerEvent(ended_at, ended, {"why": _need(t, "why", where), "source": "the campaign write-up"})
    )
    return ImportedTimer(
        box=box,
        deadline_ms=deadline,
        action=_need(t, "action", where),
        input_text=f"{_need(t, 'input', where)} (imported: the write-up's hard stop)",
        state=ended,
        log=log,
    )
