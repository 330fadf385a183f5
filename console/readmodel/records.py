"""What the console's panels, the report and the exports read: plain frozen records, no Textual, no SQL.

A panel's record is a value at one instant (the read model's cursor), so a live view and a replayed
night render through the same code. Verdicts always carry a word, never only a colour, and the words
are computed here (``TripwireVerdict``, ``ResultRow.marks``), not in each view.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from agents import loglines
from agents.protocol import TimerAction
from agents.tripwire.grade import MAX_DEGENERATE
from console.quality.stats import A_AHEAD, TIE, Paired, decide, wilson, wilson_text
from console.store.checks import VerdictName
from console.store.conditions import join_kernel_lines
from console.store.launches import LaunchStatus
from console.store.results import ApiPrice, ModelIndexEntry, PublishedFigure
from console.store.timers import TimerState

CAPPED_MARGIN_W = 1.0
"""An enforced limit this far below the board maximum counts as capped (NVML reports whole watts)."""


def below_maximum(limit_w: float | None, max_w: float | None) -> bool:
    """Capped: an enforced limit under the board maximum (the campaign write-up's 400 W host lost 23-34%
    throughput)."""
    return limit_w is not None and max_w is not None and limit_w < max_w - CAPPED_MARGIN_W


STALE_MS = 30_000
"""A sample older than this at the cursor is shown as stale: a dead box must not look alive."""


@dataclass(frozen=True)
class CheckMark:
    name: str
    verdict: VerdictName
    reason: str

    @property
    def word(self) -> str:
        return {"ok": "ok", "warn": "WARN", "fail": "FAIL"}.get(self.verdict, self.verdict.upper())


@dataclass(frozen=True)
class TimerRow:
    """A hard stop at one instant: the deadline with the box's zone (None: never probed) and the time left
    (negative once past). The TUI reads it as of its cursor (``queries.timers``: the state and warnings
    its log had by then); ``campaign timer list|show|cancel`` reads it now (``deadlines``)."""

    id: int
    box: str
    deadline_ms: int
    action: TimerAction
    state: TimerState  # as of the instant
    remaining_ms: int
    box_tz: str | None
    input_text: str | None = None  # what the operator typed, for the record
    warnings: tuple[str, ...] = ()  # the log's warnings by the instant

    @classmethod
    def from_row(
        cls,
        row: Mapping[str, Any],
        *,
        at: int,
        box_tz: str | None,
        state: TimerState | None = None,
        warnings: tuple[str, ...] = (),
    ) -> TimerRow:
        """A ``timers`` row at ``at``; ``state`` as of then when the log says otherwise than the row."""
        return cls(
            id=row["id"],
            box=row["box"],
            deadline_ms=row["deadline_ms"],
            action=row["action"],
            state=row["state"] if state is None else state,
            remaining_ms=row["deadline_ms"] - at,
            box_tz=box_tz,
            input_text=row["input_text"],
            warnings=warnings,
        )

    @property
    def live(self) -> bool:
        return self.state in ("armed", "firing")


@dataclass(frozen=True)
class IngestHealth:
    """What a box's journal could not give this state.db: events quarantined (the first one's reason says
    why) and journal seqs the box no longer held when asked. Neither stops ingest; both must be seen."""

    quarantined: int = 0
    first_reason: str | None = None
    lost: int = 0
    lost_ranges: tuple[tuple[int, int], ...] = ()

    @property
    def line(self) -> str:
        """One line for a status column or a handover: empty when nothing is missing."""
        parts = []
        if self.quarantined:
            rows = "row" if self.quarantined == 1 else "rows"
            parts.append(f"{self.quarantined} {rows} quarantined (first: {self.first_reason})")
        if self.lost:
            ranges = ", ".join(f"{a}..{b}" for a, b in self.lost_ranges[:3]) + (
                ", ..." if len(self.lost_ranges) > 3 else ""
            )
            parts.append(f"{self.lost} journal {'row' if self.lost == 1 else 'rows'} lost (seqs {ranges})")
        return "; ".join(parts)


@dataclass(frozen=True)
class BoxStatus:
    """One box as ``campaign box status`` shows it: its fleet row and how far its journal is committed."""

    fleet: FleetRow
    committed_seq: int


@dataclass(frozen=True)
class FleetRow:
    name: str
    kind: str
    status: str
    status_detail: str | None
    gpu_summary: str | None
    price_per_hour: float | None
    checks: tuple[CheckMark, ...]
    serving: tuple[str, ...]  # arm names serving at the cursor
    timer: TimerRow | None  # the nearest armed timer
    last_sample_ms: int | None
    capped_gpus: int = 0
    tz: str | None = None
    ssh_target: str | None = None  # user@host[:port]; None for imported figures
    ingest: IngestHealth = IngestHealth()  # events quarantined, seqs lost

    @property
    def quarantined(self) -> int:
        return self.ingest.quarantined

    @property
    def lost_events(self) -> int:
        return self.ingest.lost

    @property
    def worst_check(self) -> str:
        """``fail`` beats ``warn`` beats ``ok``; ``unchecked`` when the box never ran a check."""
        verdicts = {c.verdict for c in self.checks}
        for v in ("fail", "warn", "ok"):
            if v in verdicts:
                return v
        return "unchecked"


@dataclass(frozen=True)
class GpuPower:
    gpu: int
    t_ms: int
    power_w: float | None
    enforced_limit_w: float | None
    max_limit_w: float | None
    sm_clock_mhz: float | None
    util_pct: float | None
    temp_c: float | None
    mem_used_mib: float | None
    mem_total_mib: float | None
    stale: bool = False

    @property
    def capped(self) -> bool:
        return below_maximum(self.enforced_limit_w, self.max_limit_w)


@dataclass(frozen=True)
class Series:
    """A downsampled series: one value (or None for a gap) per bucket over [start_ms, end_ms]."""

    label: str
    start_ms: int
    end_ms: int
    values: tuple[float | None, ...]

    @property
    def last(self) -> float | None:
        return next((v for v in reversed(self.values) if v is not None), None)

    @property
    def peak(self) -> float | None:
        present = [v for v in self.values if v is not None]
        return max(present) if present else None


@dataclass(frozen=True)
class GpuHistory:
    """One GPU over the chart window, a value per bucket: what it drew, the limit it was held to, its clock."""

    gpu: int
    power_w: Series
    limit_w: Series
    sm_clock_mhz: Series


@dataclass(frozen=True)
class ServerNow:
    """The latest server sample per serving launch at the cursor (running/waiting requests, KV use)."""

    launch_id: str
    arm: str
    t_ms: int
    gen_tok_per_s: float | None
    prompt_tok_per_s: float | None
    running: float | None
    waiting: float | None
    kv_usage: float | None


@dataclass(frozen=True)
class TripwireVerdict:
    """A tripwire outcome as counts, with the only code that puts it in words.

    ``total`` None means no tripwire was recorded (the arm was never tripwired). ``word`` is the short
    alarm a column shows (ok, DEGEN, WRONG, LEAK, or none); ``text`` is the sentence an export or a
    report prints, e.g. ``19/20 ok`` or ``FAILED 11/20 ok, 8 degenerate, 1 wrong``.
    """

    ok: int = 0
    degenerate: int = 0
    wrong: int = 0
    total: int | None = None
    passed: bool = False
    reasoning_leak: bool = False

    @classmethod
    def of(
        cls,
        ok: int | None,
        degenerate: int | None,
        wrong: int | None,
        total: int | None,
        passed: int | bool | None,
        reasoning_leak: int | bool | None = 0,
    ) -> TripwireVerdict:
        """From stored columns, which are all NULL when a bench row has no tripwire (a LEFT JOIN)."""
        if total is None:
            return NOT_RECORDED
        return cls(ok or 0, degenerate or 0, wrong or 0, total, bool(passed), bool(reasoning_leak))

    @property
    def recorded(self) -> bool:
        return self.total is not None

    @property
    def failed(self) -> bool:
        """A recorded verdict that failed: the arm's throughput is diagnostic only."""
        return self.recorded and not self.passed

    @property
    def word(self) -> str:
        if not self.recorded:
            return "none"
        if self.passed:
            return "ok"
        if self.reasoning_leak:
            return "LEAK"
        if self.ok + self.degenerate + self.wrong != self.total:
            return "FAIL"  # printed as ok/total only: what the other items were is not known
        return "DEGEN" if self.degenerate >= self.wrong else "WRONG"

    @property
    def text(self) -> str:
        """When the counts do not add up to the total, the split of the rest was not recorded (imported
        figures printed as "19/20"), so only ok/total is claimed."""
        if not self.recorded:
            return "not recorded"
        words = f"{self.ok}/{self.total} ok"
        split = self.ok + self.degenerate + self.wrong == self.total
        if split and (self.degenerate or self.wrong):
            words += f", {self.degenerate} degenerate, {self.wrong} wrong"
        elif not split and (self.total or 0) - self.ok > MAX_DEGENERATE:
            words += ", degenerate count unknown"  # the items not ok may or may not pass the agent's rule
        if self.reasoning_leak:
            words += ", reasoning leaked"
        return words if self.passed else f"FAILED {words}"


NOT_RECORDED = TripwireVerdict()


@dataclass(frozen=True)
class TripwireItem:
    """One of the tripwire's prompts: its verdict, why, and the reasoning that leaked into the answer."""

    id: str
    verdict: str  # ok, degenerate, wrong
    reasons: tuple[str, ...]
    reasoning_leak: str | None


def tripwire_items(text: str | None) -> tuple[TripwireItem, ...]:
    """The per-item verdicts the tripwire journals; imported runs carry none (their items are notes)."""
    value = json.loads(text) if text else None
    if not isinstance(value, list):
        return ()
    return tuple(
        TripwireItem(
            id=str(i.get("id") or "?"),
            verdict=str(i.get("verdict") or "?"),
            reasons=tuple(str(x) for x in i.get("reasons") or ()),
            reasoning_leak=str(i["reasoning_leak"]) if i.get("reasoning_leak") else None,
        )
        for i in value
        if isinstance(i, dict)
    )


def served_words(reasoning_parser: str | None, thinking: str | None, sampling: str | None) -> str:
    """How a row was served, in one line: the three things the campaign write-up's house-default table
    turns on (console/store/served.py says what each value means)."""
    if thinking is None and sampling is None:
        return "served with: not recorded"
    sent = "none sent (the server's defaults)" if sampling in (None, "{}") else sampling
    return f"served with: reasoning parser {reasoning_parser or 'none'}; thinking {thinking}; sampling {sent}"


@dataclass(frozen=True)
class TripwireRun:
    """One tripwire run with its verdict and every item: what ``campaign tripwire`` shows, and an arm's
    latest verdict on a box as the Live view and the report's failures list it."""

    id: int
    run_id: str | None
    arm: str
    box: str | None
    launch_id: str | None
    model: str | None
    t_ms: int
    verdict: TripwireVerdict
    items: tuple[TripwireItem, ...]
    source: str
    reasoning_parser: str | None  # the server's --reasoning-parser
    thinking: str | None  # whether thinking was on and what decided it; None: not recorded
    sampling: str | None  # JSON of the sampling fields sent; "{}": none

    @classmethod
    def from_row(cls, r: Mapping[str, Any]) -> TripwireRun:
        """A ``tripwire_runs`` row."""
        return cls(
            id=r["id"],
            run_id=r["run_id"],
            arm=r["arm"],
            box=r["box"],
            launch_id=r["launch_id"],
            model=r["model"],
            t_ms=r["t_ms"],
            verdict=TripwireVerdict.of(
                r["ok"], r["degenerate"], r["wrong"], r["total"], r["passed"], r["reasoning_leak"]
            ),
            items=tripwire_items(r["items"]),
            source=r["source"],
            reasoning_parser=r["reasoning_parser"],
            thinking=r["thinking"],
            sampling=r["sampling"],
        )

    @property
    def served(self) -> str:
        return served_words(self.reasoning_parser, self.thinking, self.sampling)


@dataclass(frozen=True)
class LaunchRow:
    id: str
    box: str
    arm: str
    state: LaunchStatus  # as of the cursor
    replica: int
    gpus: tuple[int, ...]
    port: int | None
    pid: int | None
    start_ms: int | None
    ready_ms: int | None
    stop_ms: int | None
    exit_code: int | None
    failure_reason: str | None
    backends_accepted: tuple[str, ...] | None  # None: the engine printed no accepted set
    log_path: str | None
    forced: bool
    kernel_lines: tuple[tuple[str, str], ...] = ()  # (category, line)
    model: str | None = None

    @property
    def alive(self) -> bool:
        return self.state in ("requested", "starting", "serving", "stopping")

    @property
    def kernel_line(self) -> str | None:
        """The kernels the engine said it used, in one line (its config lines left out)."""
        return join_kernel_lines(line for category, line in self.kernel_lines if category != "config")


@dataclass(frozen=True)
class BenchNow:
    """The load generator's run on a box nearest the cursor, shown beside the server's own numbers: its
    bench row (``ResultRow``) as of the cursor, or the sent ``bench`` command that has no row yet.

    A run in progress has no numbers yet (the load generator reports once, at its end); a finished one
    carries its rates and TTFT so the operator can hold them against the server's /metrics curve.
    """

    arm: str
    shape: str
    concurrency: int
    out_tok_per_s: float | None
    in_tok_per_s: float | None
    started_ms: int | None
    ended_ms: int | None
    running: bool
    req_per_s: float | None = None
    ttft_ms_p50: float | None = None

    @classmethod
    def of(cls, row: ResultRow, at: int) -> BenchNow:
        """A bench row as of ``at``: no numbers until it has ended."""
        running = row.ended_ms is None or row.ended_ms > at
        return cls(
            arm=row.arm,
            shape=row.shape,
            concurrency=row.concurrency,
            out_tok_per_s=None if running else row.out_tok_per_s,
            in_tok_per_s=None if running else row.in_tok_per_s,
            started_ms=row.started_ms,
            ended_ms=row.ended_ms,
            running=running,
            req_per_s=None if running else row.req_per_s,
            ttft_ms_p50=None if running else row.ttft_ms_p50,
        )


@dataclass(frozen=True)
class LiveView:
    box: FleetRow
    at_ms: int
    gpus: tuple[GpuPower, ...]
    out_tok_s: Series
    in_tok_s: Series
    servers: tuple[ServerNow, ...]
    bench: BenchNow | None
    tripwire: tuple[TripwireRun, ...]
    timers: tuple[TimerRow, ...]
    gpu_history: tuple[GpuHistory, ...] = ()
    throughput_source: str = "server"  # server (its /metrics) or loadgen (the load generator's own samples)

    @property
    def throughput_from(self) -> str:
        """Where the throughput chart's numbers come from, in words."""
        return "load generator" if self.throughput_source == "loadgen" else "server /metrics"


KernelUse = loglines.KernelCheck
"""One layer kind of a measured row: the backend the arm asked for and the kernels the engine named (the
agent's own record, read back from ``bench_runs.kernel_check``)."""


@dataclass(frozen=True)
class ReplicaResult:
    """One replica's share of a node run: detail only, never a result of its own."""

    bench_run_id: int
    replica: int
    launch_id: str | None
    base_url: str | None
    streams: int | None
    requests: int | None
    failed: int | None
    req_per_s: float | None
    in_tok_per_s: float | None
    out_tok_per_s: float | None
    ttft_ms_p50: float | None
    ttft_ms_p99: float | None
    tpot_ms_p50: float | None
    e2e_ms_p99: float | None


@dataclass(frozen=True)
class ResultRow:
    """One benchmark row with everything that must travel with its number: the arm, the kernel line
    the engine used, the tripwire verdict, the power limit it ran under and the marks.

    A measured row is a node row: ``replicas`` serving replicas benchmarked at once, throughput summed,
    latency percentiles over all their requests (each replica's share: ``ReplicaResult``).
    """

    id: int
    run_id: str | None
    box: str | None
    launch_id: str | None
    arm: str
    model: str | None
    configuration: str | None
    shape: str
    concurrency: int
    prompts: int | None
    seed: int | None
    input_len: int | None
    output_len: int | None
    prefix_len: int | None
    started_ms: int | None
    ended_ms: int | None
    duration_s: float | None
    requests: int | None
    failed: int | None
    req_per_s: float | None
    in_tok_per_s: float | None
    out_tok_per_s: float | None
    total_tok_per_s: float | None
    ttft_ms_p50: float | None
    ttft_ms_p99: float | None
    tpot_ms_p50: float | None
    tpot_ms_p99: float | None
    itl_ms_p50: float | None
    itl_ms_p99: float | None
    e2e_ms_p50: float | None
    e2e_ms_p99: float | None
    client_cpu: float | None
    client_bound: bool
    kernel_line: str | None
    power_limit_w: float | None
    tripwire_id: int | None
    tripwire: TripwireVerdict
    diagnostic_only: bool
    queueing: bool
    source: str  # measured or imported
    provenance: str | None
    replicas: int | None
    """Serving replicas measured at once; None when not recorded."""
    prefix_caching: bool | None
    """Whether the server cached prefixes (its engine config, else the arm's flags); None: not known."""
    kernel_fallback: bool
    """The engine used another kernel than the arm asked for on some layer kind (``kernel_check``)."""
    kernel_check: tuple[KernelUse, ...]
    admitted: int | None
    """The streams one replica admits at once for this request size (beyond it: queueing)."""
    repeat_group: str | None
    """The ``campaign bench --repeat N`` this run is one of."""
    reasoning_parser: str | None  # the server's --reasoning-parser (/v1/completions does not apply it)
    thinking: str | None  # whether thinking was on and what decided it; None: not recorded
    sampling: str | None  # JSON of the sampling fields the load generator sent; "{}": none
    request_rate: float | None = None
    """Requests/s its arrivals were paced at, ``concurrency`` the cap; None: the closed loop (C streams)."""
    burstiness: float | None = None
    """The gamma shape of its paced arrivals (1: Poisson); None: not paced."""
    spec_drafts: int | None = None
    """vLLM's spec-decode counters over the run (agents/loadgen/specdecode.py): drafts proposed, tokens
    drafted, tokens accepted, accepted per draft position; None: its servers do not speculate."""
    spec_draft_tokens: int | None = None
    spec_accepted: int | None = None
    spec_accepted_per_pos: tuple[int, ...] = ()
    spec_tokens: int | None = None
    """A drafter's tokens drafted per step and the share of them accepted as someone else published them
    (an imported row: its counters are unknown); None: not published."""
    spec_acceptance_published: float | None = None
    step_ms: float | None = None
    """The decode step's time and one stream's output rate as someone published them (the write-up's prose:
    GLM's 200 ms step at TP4, Qwen's 20 tok/s a stream at C256); None: not published."""
    per_stream_out_tok_s: float | None = None

    @property
    def acceptance(self) -> float | None:
        """Accepted / drafted tokens: vLLM's draft acceptance rate (its SpecDecodingProm docstring)."""
        if self.spec_accepted is None or not self.spec_draft_tokens:
            return None
        return self.spec_accepted / self.spec_draft_tokens

    @property
    def mean_accepted_length(self) -> float | None:
        """1 + accepted / drafts: tokens each verification step emits, the bonus token included (vLLM's
        mean acceptance length)."""
        if self.spec_accepted is None or not self.spec_drafts:
            return None
        return 1 + self.spec_accepted / self.spec_drafts

    @property
    def acceptance_per_position(self) -> tuple[float, ...]:
        """Accepted at draft position i / drafts: the share of verification steps whose i-th drafted token
        was accepted (vLLM's per-position acceptance rate, its SpecDecodingLogging); () without counters."""
        if not self.spec_drafts:
            return ()
        return tuple(n / self.spec_drafts for n in self.spec_accepted_per_pos)

    @property
    def speculation(self) -> str:
        """The acceptance words beside a drafter row's throughput (the per-position rates where the servers
        export them); empty for a row without counters."""
        rate, length = self.acceptance, self.mean_accepted_length
        if rate is None or length is None:
            if self.spec_acceptance_published is None:
                return ""
            drafted = f"{self.spec_tokens} draft tokens per step, " if self.spec_tokens else ""
            return f"{drafted}accepted {self.spec_acceptance_published:.0%} (as published, no counters)"
        words = f"accepted {rate:.0%} of {self.spec_draft_tokens:,} drafted, mean length {length:.2f}"
        per_position = self.acceptance_per_position
        if per_position:
            words += ", per position " + " ".join(f"{r:.0%}" for r in per_position)
        return words

    @property
    def fallbacks(self) -> tuple[KernelUse, ...]:
        return tuple(k for k in self.kernel_check if k.status == "fallback")

    @property
    def served(self) -> str:
        return served_words(self.reasoning_parser, self.thinking, self.sampling)

    @property
    def per_slot(self) -> float | None:
        """Output tok/s / concurrency: interactivity as vLLM's plot_pareto defines it (prefill and tails in)."""
        out = self.out_tok_per_s
        return out / self.concurrency if out is not None and self.concurrency > 0 else None

    @property
    def per_tpot_p50(self) -> float | None:
        """1000 / the row's TPOT p50: interactivity as InferenceX defines it, from the row's own column."""
        return 1000.0 / self.tpot_ms_p50 if self.tpot_ms_p50 else None

    @property
    def marks(self) -> str:
        """The words that must travel with the number (never a colour alone)."""
        words = []
        if self.diagnostic_only:
            words.append("DIAGNOSTIC-ONLY")
        if self.client_bound:
            words.append("CLIENT-BOUND")
        if self.kernel_fallback:
            words.append("KERNEL-FALLBACK")
        if self.queueing:
            words.append("QUEUEING")
        if self.source != "measured":
            words.append(self.source)
        return " ".join(words)

    def text(self) -> str:
        """Everything a `/` filter matches against."""
        return " ".join(
            str(v)
            for v in (
                self.box,
                self.arm,
                self.model,
                self.shape,
                self.kernel_line,
                self.tripwire.word,
                self.marks,
            )
            if v
        ).lower()


@dataclass(frozen=True)
class EvalRow:
    """A task-accuracy run: the share of ``items`` answered right, bound to the arm and box when known."""

    id: int
    box: str | None
    arm: str | None
    model: str
    configuration: str
    t_ms: int
    items: int
    overall: float
    families: Mapping[str, float]
    note: str | None
    source: str
    provenance: str | None
    unscored: int = 0  # items its quality run left out (timed out, errors): the accuracy reads high by them


@dataclass(frozen=True)
class ImportRow:
    """An imported campaign: where its figures come from and how many rows it wrote."""

    id: int
    t_ms: int
    source: str
    provenance: str
    rows: int


@dataclass(frozen=True)
class ImportedCounts:
    bench_runs: int
    tripwire_runs: int
    eval_runs: int
    kldiff_runs: int


@dataclass(frozen=True)
class EconomicsInputs:
    """What console.economics prices: every bench row, task accuracy, API prices, box prices and the board
    maximum each box's power limit is read against."""

    bench: tuple[ResultRow, ...]
    evals: tuple[EvalRow, ...]
    api_prices: tuple[ApiPrice, ...]
    box_prices: Mapping[str, float | None]
    box_max_power: Mapping[str, float | None] = field(default_factory=dict)  # board maximum per GPU, by box
    box_price_basis: Mapping[str, str | None] = field(default_factory=dict)  # cost-model basis, by box
    box_price_provenance: Mapping[str, str | None] = field(default_factory=dict)
    model_index: Mapping[str, ModelIndexEntry] = field(default_factory=dict)
    api_accuracy: Mapping[str, ApiAccuracy] = field(default_factory=dict)  # by quality run label
    published: tuple[PublishedFigure, ...] = ()
    arm_precision: Mapping[str, ArmPrecision] = field(default_factory=dict)  # arms the recipes define
    quality_pairs: frozenset[tuple[str, str]] = frozenset()  # (arm, arm) with a paired quality comparison


@dataclass(frozen=True)
class ApiAccuracy:
    """What an API endpoint scored on the suite's items (a quality run), shown beside the price it buys."""

    label: str
    accuracy: float
    items: int


@dataclass(frozen=True)
class ArmPrecision:
    """What decides an arm's numerics, read from its recipe: accuracy measured on one arm speaks for another
    only when all of these match (the write-up: "change precision and require their own paired quality
    gate"). ``None`` fields are the engine's default."""

    arm: str
    profile: str
    checkpoint: str
    quantization: str
    kv_cache_dtype: str | None
    mamba_ssm_cache_dtype: str | None
    dtype: str | None
    drafter: bool  # a speculative arm: its accuracy is its target's, but it is not the plain serving
    tensor_parallel: int
    expert_parallel: bool

    @property
    def keys(self) -> tuple[str | None, ...]:
        return (
            self.checkpoint,
            self.quantization,
            self.kv_cache_dtype,
            self.mamba_ssm_cache_dtype,
            self.dtype,
        )

    def differences(self, other: ArmPrecision) -> list[str]:
        """The precision keys that differ, as ``name a -> b``."""
        names = ("checkpoint", "quantization", "kv_cache_dtype", "--mamba-ssm-cache-dtype", "dtype")
        return [
            f"{n} {b or 'auto'} -> {a or 'auto'}"
            for n, a, b in zip(names, self.keys, other.keys, strict=True)
            if a != b
        ]


@dataclass
class ArmEntry:
    """An arm as the Arms view lists it: from the recipes, the store, or both."""

    name: str
    model: str | None
    in_recipes: bool
    launches: list[LaunchRow] = field(default_factory=list)

    @property
    def latest(self) -> LaunchRow | None:
        return max(self.launches, key=lambda r: r.start_ms or 0) if self.launches else None


@dataclass(frozen=True)
class SweepBench:
    """One node bench a sweep ran for an arm (a ``sweep_benches`` row), with its throughput row's figures."""

    launch_id: str
    shape: str
    concurrency: int
    bench_run_id: int | None  # None: no throughput row came back (``error`` says why)
    error: str | None
    admitted: int | None  # streams a replica admits at once for this shape
    t_ms: int
    out_tok_per_s: float | None
    queueing: bool  # the server could not admit the concurrency at once: TTFT is queueing
    kernel_fallback: bool
    diagnostic_only: bool
    replicas: int | None

    @property
    def marks(self) -> str:
        return " ".join(
            w for w, on in (("KERNEL-FALLBACK", self.kernel_fallback), ("QUEUEING", self.queueing)) if on
        )


def gpus_text(box: str, gpus: tuple[int, ...] | None) -> str:
    """``a GPU 2``, ``a GPUs 0,1``; the box alone when the attempt had every card (or none)."""
    if not gpus:
        return box
    return f"{box} GPU{'s' if len(gpus) > 1 else ''} {','.join(map(str, gpus))}"


@dataclass(frozen=True)
class SweepAttemptRow:
    """One attempt of a sweep arm: where it was claimed, the GPU memory read around it, how it ended."""

    attempt: int
    box: str
    gpus: tuple[int, ...] | None  # None: every card of the box
    launch_ids: tuple[str, ...]
    outcome: str | None  # None while it runs; interrupted: given back to the queue (reason says why)
    reason: str | None
    mem_before: tuple[tuple[int, float | None], ...]  # (GPU, MiB used) before the launch
    mem_after: tuple[tuple[int, float | None], ...]  # once it served
    started_ms: int
    ended_ms: int | None

    @property
    def place(self) -> str:
        return gpus_text(self.box, self.gpus)


@dataclass(frozen=True)
class SweepBoxRow:
    """A box a sweep feeds, as of the cursor: walking, out of the run (why), or left out of a resumed run."""

    box: str
    position: int
    state: str  # walking, out, left
    detail: str | None
    excluded: tuple[tuple[int, str], ...]  # GPUs this run does not use, and why
    gpu_count: (
        int | None
    )  # GPUs in its latest probe (the queue's slots); None: never probed, or a one-box sweep


@dataclass(frozen=True)
class SweepSlot:
    """One GPU of a box in a sweep over several boxes (``gpu`` None: a box without GPUs): what holds it."""

    box: str
    gpu: int | None
    arm: SweepArmRow | None
    excluded: str | None  # why this run does not use it

    @property
    def word(self) -> str:
        if self.excluded is not None:
            return "not used"
        return self.arm.arm if self.arm is not None else "idle"


@dataclass(frozen=True)
class SweepArmRow:
    """One arm a sweep tried (or will try), with its outcome as of the cursor and the engine's reason."""

    id: int
    position: int
    arm: str
    base: str | None  # the arm a pair or an accepted backend was derived from
    linear_backend: str | None
    moe_backend: str | None
    origin: str  # list, pair, accepted (named by an engine refusal)
    queued_by: str | None
    state: str  # pending, running, served, refused, degenerate, crashed, interrupted
    attempts: int
    reason: str | None
    backends_accepted: tuple[str, ...] | None  # None: the engine printed no accepted set (or not refused)
    backends_potential: tuple[str, ...]
    launch_ids: tuple[str, ...]
    gpu_mem_mib: float | None
    kv_cache_tokens: int | None
    max_concurrency: float | None
    tripwire_run_id: int | None
    started_ms: int | None
    ended_ms: int | None
    benches: tuple[SweepBench, ...]
    box: str | None  # where its attempt (as of the cursor) was claimed
    gpus: tuple[int, ...] | None  # its GPUs there; None: every card of the box
    history: tuple[SweepAttemptRow, ...]  # every attempt begun by the cursor

    @property
    def place(self) -> str:
        return "-" if self.box is None else gpus_text(self.box, self.gpus)

    @property
    def word(self) -> str:
        """Outcomes that lost the arm are upper case, so they read as alarms (and get their colour)."""
        alarms = {
            "refused": "REFUSED",
            "degenerate": "DEGEN",
            "crashed": "CRASHED",
            "interrupted": "INTERRUPTED",
        }
        return alarms.get(self.state, self.state)


@dataclass(frozen=True)
class SweepEntry:
    """A sweep as of an instant (the TUI's cursor; ``sweep status`` reads it as of now): its list, boxes,
    state, the console walking it and every arm in walk order."""

    id: int
    list_name: str
    box: str
    state: str  # running, interrupted, done, abandoned
    detail: str | None
    shapes: tuple[str, ...]
    concurrency: tuple[int, ...]
    bench_degenerate: bool
    runner_pid: int | None  # the console walking it, on ``runner_host``
    runner_host: str | None
    created_ms: int
    updated_ms: int
    arms: tuple[SweepArmRow, ...]
    layout: str  # node: each arm on every card of one box; packed: one queue over several boxes
    boxes: tuple[SweepBoxRow, ...]

    @property
    def finished(self) -> int:
        return sum(1 for a in self.arms if a.state in ("served", "refused", "degenerate", "crashed"))

    @property
    def current(self) -> SweepArmRow | None:
        return next((a for a in self.arms if a.state == "running"), None)

    @property
    def where(self) -> str:
        return ", ".join(b.box for b in self.boxes if b.state != "left") or self.box

    @property
    def waiting(self) -> list[SweepArmRow]:
        """Arms the queue has yet to start: never tried, or given back."""
        return [a for a in self.arms if a.state in ("pending", "interrupted")]

    def slots(self) -> list[SweepSlot]:
        """Every GPU of every walking box, with the arm running on it or why it is not used (packed sweeps)."""
        out = []
        for b in self.boxes:
            if b.state != "walking":
                continue
            excluded = dict(b.excluded)
            gpus: list[int | None] = list(range(b.gpu_count)) if b.gpu_count else [None]
            for gpu in gpus:
                arm = next(
                    (
                        a
                        for a in self.arms
                        if a.state == "running" and a.box == b.box and (gpu is None or gpu in (a.gpus or ()))
                    ),
                    None,
                )
                out.append(SweepSlot(b.box, gpu, arm, excluded.get(gpu) if gpu is not None else None))
        return out

    def counts(self) -> str:
        """``2 served, 1 refused, 1 pending``: every outcome in words, in walk order of first appearance."""
        seen: dict[str, int] = {}
        for a in self.arms:
            seen[a.state] = seen.get(a.state, 0) + 1
        return ", ".join(f"{n} {state}" for state, n in seen.items())


TimerEntry = TimerRow
"""A timer as ``campaign timer list|show|cancel`` names it: the same record, read now."""


@dataclass(frozen=True)
class TimerLogEntry:
    """One line of a timer's log: an arm, warning, pull, refusal or firing, by the console or the box."""

    id: int
    timer_id: int
    t_ms: int
    event: str
    enforcer: str | None
    now_ms: int | None
    deadline_ms: int | None
    remaining_s: float | None
    tz: str | None
    detail: dict[str, Any] | None


@dataclass(frozen=True)
class QualityRun:
    """A task-accuracy run in the quality ledger: scored per item against a launch, or published figures.

    A run bound to a launch names the exact arm (its argv row), layout and kernel lines it ran against
    and what the harness sent; a published run (``harness`` ``published``) has only its aggregate.
    """

    id: int
    label: str
    harness: str  # lm-eval, inspect, published
    harness_version: str | None
    tasks: tuple[str, ...]
    suite: str  # comparisons on one suite share one noise floor
    metric: str | None
    launch_id: str | None
    box: str | None
    arm: str | None
    model: str | None
    layout: str | None
    kernel_line: str | None
    reasoning_parser: str | None
    thinking: str | None
    sampling: Mapping[str, Any]
    config_key: str | None
    t_ms: int
    items: int
    unscored: int
    accuracy: float
    truncation_rate: float | None  # None: the harness does not log it
    mean_output_tokens: float | None
    source: str
    provenance: str | None
    source_file: str | None
    eval_run_id: int | None
    caps: Mapping[str, Any] | None = None  # caps sent ({"*": N or "window", family: N}); None: not set
    request_timeout_s: float | None = None  # seconds each request was given; None: the harness's own
    unscored_items: Mapping[str, str] = field(default_factory=dict)  # "task/item_id" -> why it has no score
    families: tuple[FamilyScore, ...] = ()  # per task (the house suite's families), where scored per item
    published_families: Mapping[str, float] = field(default_factory=dict)  # a published run's, printed
    provider: str | None = None  # an endpoint run's: OpenRouter (default routing) or the pinned provider
    precision: str | None = None  # FP8, FP4, ... as the write-up names the serving
    routing: str | None = None  # default or pinned
    degenerate_rate: float | None = None  # share of answers degenerated into repetition, where published
    stopped: str | None = None  # why it ended short of its suite ("HTTP 402"), its items how far it got

    @property
    def per_item(self) -> bool:
        return self.harness != "published"

    @property
    def interval(self) -> tuple[float, float] | None:
        """The Wilson 95% interval of the accuracy over the scored items."""
        return wilson(self.accuracy * self.items, self.items)

    @property
    def accuracy_text(self) -> str:
        """``0.725 [0.679, 0.766]``: the accuracy with its Wilson interval, as lists print it."""
        return wilson_text(self.accuracy * self.items, self.items)

    @property
    def short(self) -> str | None:
        """``short: 3 unscored (flattered)``: items left out (timed out, errors) make the accuracy read high;
        ``stopped (HTTP 402): 300 items``: a run that ended before its suite did."""
        if self.stopped:
            return f"stopped ({self.stopped}): {self.items} items"
        return f"short: {self.unscored} unscored (flattered)" if self.unscored else None

    @property
    def served_by(self) -> str | None:
        """``OpenRouter, default routing, FP8/FP4``: who served an endpoint run, how it was routed, at what
        precision; None for a run on the campaign's own servers."""
        parts = [x for x in (self.provider, self.routing and f"{self.routing} routing", self.precision) if x]
        return ", ".join(parts) or None


@dataclass(frozen=True)
class FamilyScore:
    """One family (task) of a run scored per item: its items, the sum of their scores, the Wilson interval."""

    family: str
    items: int
    right: float

    @property
    def accuracy(self) -> float:
        return self.right / self.items if self.items else 0.0

    @property
    def text(self) -> str:
        return wilson_text(self.right, self.items)


@dataclass(frozen=True)
class RepeatPair:
    """Two runs of one configuration on their common items: one point on the noise floor."""

    a: str
    b: str
    paired: Paired


@dataclass(frozen=True)
class NoiseFloor:
    """The largest aggregate gap between repeats of one configuration on a suite (the campaign write-up's
    0.022)."""

    suite: str
    repeats: tuple[RepeatPair, ...]

    @property
    def value(self) -> float:
        return max(abs(r.paired.diff) for r in self.repeats)

    @property
    def text(self) -> str:
        widest = max(self.repeats, key=lambda r: abs(r.paired.diff))
        return (
            f"{self.value:.3f} from {len(self.repeats)} repeat pair{'s' if len(self.repeats) != 1 else ''} "
            f"(widest {widest.paired.split} on {widest.paired.n} items)"
        )


@dataclass(frozen=True)
class QualityComparison:
    """Run A against run B on the items both scored, read against the suite's noise floor.

    ``basis`` is ``items`` when the split was counted from the stored items, ``published`` when it is a
    write-up's printed split. Truncation and output tokens are on the common items where known, else the
    runs' own figures.
    """

    a: QualityRun
    b: QualityRun
    paired: Paired
    basis: str
    floor: NoiseFloor | None
    a_truncation: float | None
    b_truncation: float | None
    a_mean_tokens: float | None
    b_mean_tokens: float | None
    kind: str = "comparison"  # or repeat (one configuration twice)
    note: str | None = None

    def swapped(self) -> QualityComparison:
        """The same comparison with B as A."""
        return replace(
            self,
            a=self.b,
            b=self.a,
            paired=self.paired.swapped(),
            a_truncation=self.b_truncation,
            b_truncation=self.a_truncation,
            a_mean_tokens=self.b_mean_tokens,
            b_mean_tokens=self.a_mean_tokens,
        )

    @property
    def decision(self) -> str:
        """``tie``, ``a``, ``b`` or ``unknown`` (console.quality.stats.decide)."""
        return decide(self.paired, self.floor.value if self.floor else None)

    @property
    def verdict(self) -> str:
        """``tie: inside the 0.022 floor``; ``A ahead by 0.040, outside the 0.022 floor``; or the floor unknown."""
        if self.floor is None:
            return "floor unknown: no repeat runs of one configuration on this suite to measure it"
        floor = f"{self.floor.value:.3f}"
        if self.decision == TIE:
            return f"tie: inside the {floor} floor"
        side = "A" if self.decision == A_AHEAD else "B"
        words = f"{side} ahead by {abs(self.paired.diff):.3f}, outside the {floor} floor"
        interval = self.paired.interval
        if interval is not None and interval[0] <= 0 <= interval[1]:
            words += ", but its 95% interval includes 0"
        return words

    @property
    def policy_warnings(self) -> tuple[str, ...]:
        """The runs were generated under different caps or request timeouts (seed-gaps F20: a cap cut 51% of one
        model's maths; a 600 s timeout dropped the hardest items), or one is short of unscored items."""
        a, b = self.a, self.b
        out = []
        if a.per_item and b.per_item and (a.caps or b.caps) and a.caps != b.caps:
            out.append(f"caps differ: A {_caps_words(a.caps)}, B {_caps_words(b.caps)}")
        if a.request_timeout_s != b.request_timeout_s and a.per_item and b.per_item:
            out.append(
                f"request timeouts differ: A {_seconds(a.request_timeout_s)}, B {_seconds(b.request_timeout_s)}"
            )
        out += [f"{side} is {r.short}" for side, r in (("A", a), ("B", b)) if r.short]
        return tuple(out)


def _caps_words(caps: Mapping[str, Any] | None) -> str:
    if not caps:
        return "not recorded"
    return ", ".join(f"{'every family' if k == '*' else k} {v}" for k, v in caps.items())


def _seconds(value: float | None) -> str:
    return "not recorded" if value is None else f"{value:g} s"


@dataclass(frozen=True)
class QualityLedger:
    """What the Economics view shows of the quality ledger: runs scored per item, published comparisons,
    and each suite's noise floor."""

    runs: tuple[QualityRun, ...]
    comparisons: tuple[QualityComparison, ...]
    floors: tuple[NoiseFloor, ...]


@dataclass(frozen=True)
class RepeatGroup:
    """The runs of one configuration benched alike (``campaign bench --repeat N``), with their spread.

    A lone run (``id`` None) is a group of one: it has a number but no spread, so nothing can be said
    about whether another number differs from it.
    """

    id: str | None
    arm: str
    box: str | None
    shape: str
    concurrency: int
    rows: tuple[ResultRow, ...]

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def values(self) -> tuple[float, ...]:
        """Output tok/s of each run that has one, in run order."""
        return tuple(r.out_tok_per_s for r in self.rows if r.out_tok_per_s is not None)

    @property
    def repeated(self) -> bool:
        return self.n >= 2

    @property
    def median(self) -> float | None:
        return statistics.median(self.values) if self.values else None

    @property
    def low(self) -> float | None:
        return min(self.values) if self.values else None

    @property
    def high(self) -> float | None:
        return max(self.values) if self.values else None

    @property
    def cv(self) -> float | None:
        """Coefficient of variation: the sample standard deviation over the mean (None below two runs)."""
        if not self.repeated or not statistics.fmean(self.values):
            return None
        return statistics.stdev(self.values) / statistics.fmean(self.values)

    @property
    def launch_ids(self) -> frozenset[str]:
        return frozenset(r.launch_id for r in self.rows if r.launch_id)

    @property
    def marks(self) -> str:
        """Every mark any of its runs carries, once each: a group is no cleaner than its worst run."""
        words = dict.fromkeys(word for r in self.rows for word in r.marks.split())
        return " ".join(words)

    @property
    def label(self) -> str:
        what = f"group {self.id}, {self.n} runs" if self.id else f"row {self.rows[0].id}, one run"
        return f"{self.arm} {self.shape} C{self.concurrency} ({what})"

    def summary(self) -> dict[str, object]:
        """The group's figures for JSON output (its rows are exported on their own)."""
        return {
            "id": self.id,
            "arm": self.arm,
            "box": self.box,
            "shape": self.shape,
            "concurrency": self.concurrency,
            "n": self.n,
            "median": self.median,
            "min": self.low,
            "max": self.high,
            "cv": self.cv,
            "marks": self.marks,
            "row_ids": [r.id for r in self.rows],
        }

    @property
    def spread_text(self) -> str:
        """``5,210 tok/s median, 5,105-5,300, CV 1.4%``; a lone run is just its number."""
        if self.median is None:
            return "no throughput"
        if not self.repeated:
            return f"{self.median:,.0f} tok/s, one run (no spread)"
        cv = f", CV {self.cv:.1%}" if self.cv is not None else ""
        return f"{self.median:,.0f} tok/s median, {self.low:,.0f}-{self.high:,.0f}{cv}"


@dataclass(frozen=True)
class ControlPair:
    """The same arm launched twice and benched alike: how far apart two identical configurations land."""

    a: RepeatGroup
    b: RepeatGroup

    @property
    def floor(self) -> float:
        """The relative difference of their medians (faster over slower, minus one): the noise floor."""
        hi, lo = (
            max(self.a.median or 0.0, self.b.median or 0.0),
            min(self.a.median or 0.0, self.b.median or 0.0),
        )
        return hi / lo - 1 if lo > 0 else math.inf


CompareVerdict = Literal["faster", "tie", "no-verdict"]


@dataclass(frozen=True)
class Comparison:
    """Whether ``a`` is faster than ``b``, read against both spreads and the noise floor.

    ``verdict``: ``faster`` (``winner`` by ``percent`` outside the spread), ``tie`` (the difference is
    inside the spread or the noise floor) or ``no-verdict`` (a side has no repeats).
    """

    a: RepeatGroup
    b: RepeatGroup
    verdict: CompareVerdict
    percent: float | None
    """How much faster the faster median is than the slower, in percent (None without medians)."""
    winner: Literal["a", "b"] | None  # when the verdict is faster
    floor: ControlPair | None
    text: str


@dataclass(frozen=True)
class GroupStanding:
    """A repeat group beside the best repeated group of its shape and concurrency (the Results view).

    ``word``: ``best``; ``TIE`` when the verdict against the best is a tie; ``-12.3%`` (its median against
    the best one's) when it is slower outside the spread; ``no verdict`` for a group without repeats.
    """

    group: RepeatGroup
    versus_best: Comparison | None  # None for the best one itself

    @property
    def word(self) -> str:
        c = self.versus_best
        if c is None:
            return "best" if self.group.repeated else "no verdict"
        if c.verdict == "tie":
            return "TIE"
        if c.verdict == "faster" and c.a.median is not None and c.b.median:
            return f"{c.a.median / c.b.median - 1:.1%}"
        return "no verdict"


_NUMBER_WORDS = (
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
    "twenty",
)


def _signed(kl: float) -> str:
    """An excess KL as the campaign write-up prints it (``+0.007``); one too small for three decimals keeps
    two digits."""
    return f"{kl:+.3f}" if abs(kl) >= 0.0005 else f"{kl:+.1e}"


@dataclass(frozen=True)
class KldiffVerdict:
    """A pair's divergence read against its control pair, with the only code that puts it in words.

    The rule (docs/kldiff.md), from the pair's mean KL and the control's (the floor), excess = mean - floor:
    ``below`` the floor when the mean is at or under it; ``just-above`` when the excess is under one floor;
    ``times`` otherwise, N = excess / floor rounded half up (the campaign write-up's +0.127 over 0.0184 is
    "seven times the floor"). A floor of exactly 0 (a control that reproduced bit for bit, as a deterministic
    CPU stack does) cannot be multiplied: any excess over it is ``exact-floor``. A control row itself is
    ``control`` ("the noise floor"); a pair without a control gets no verdict (``none``).
    """

    kind: str  # control, none, below, just-above, exact-floor, times
    excess: float | None = None
    times: int | None = None

    @classmethod
    def of(cls, role: str, mean_kl: float, floor: float | None) -> KldiffVerdict:
        if role == "control":
            return cls("control")
        if floor is None:
            return cls("none")
        excess = mean_kl - floor
        if excess <= 0:
            return cls("below", excess)
        if floor <= 0:
            return cls("exact-floor", excess)
        if excess < floor:
            return cls("just-above", excess)
        return cls("times", excess, int(excess / floor + 0.5))

    @property
    def rank(self) -> int:
        """Verdicts in order of how far a pair sits from its floor (below < just above < a multiple)."""
        return {"below": 0, "just-above": 1, "exact-floor": 2, "times": 2}.get(self.kind, -1)

    @property
    def word(self) -> str:
        """The short form a column shows."""
        if self.kind == "times":
            return f"{self.times}x floor"
        return {
            "control": "floor",
            "none": "no control",
            "below": "below floor",
            "just-above": "just above",
            "exact-floor": "ABOVE exact floor",
        }[self.kind]

    @property
    def text(self) -> str:
        """The sentence, in the campaign write-up's words: "below the floor", "just above: excess KL +0.007",
        "excess KL +0.127, seven times the floor"."""
        if self.kind == "control":
            return "the noise floor"
        if self.kind == "none":
            return "no verdict: no control pair (the same configuration served twice) to read it against"
        if self.kind == "below":
            return "below the floor"
        assert self.excess is not None
        if self.kind == "just-above":
            return f"just above: excess KL {_signed(self.excess)}"
        if self.kind == "exact-floor":
            return (
                f"excess KL {_signed(self.excess)} over an exact floor (the control reproduced bit for bit)"
            )
        n = self.times or 0
        times = {1: "as large as the floor", 2: "twice the floor"}.get(n) or (
            f"{_NUMBER_WORDS[n] if n < len(_NUMBER_WORDS) else n} times the floor"
        )
        return f"excess KL {_signed(self.excess)}, {times}"


@dataclass(frozen=True)
class KldiffRun:
    """One pair of servers compared on identical contexts (or a control pair), with its control's figures
    beside its own and the verdict read from them."""

    id: int
    run_id: str | None
    role: str  # pair or control
    box: str | None
    model: str | None
    launch_a: str | None
    launch_b: str | None
    arm_a: str
    arm_b: str
    kernel_a: str | None
    kernel_b: str | None
    t_ms: int
    contexts: int | None
    positions: int | None
    top_k: int | None
    top1_agreement: float | None
    top5_overlap: float | None
    mean_kl: float
    p50_kl: float | None
    p99_kl: float | None
    missing_token_method: str | None
    control_id: int | None
    control_arm_a: str | None
    control_arm_b: str | None
    control_positions: int | None
    control_top1_agreement: float | None
    control_mean_kl: float | None
    excess_kl: float | None
    recorded_verdict: str | None
    """The ``verdict`` column: the words the console wrote when it judged the pair (NULL: not judged)."""
    note: str | None
    source: str
    provenance: str | None

    @property
    def verdict(self) -> KldiffVerdict:
        return KldiffVerdict.of(self.role, self.mean_kl, self.control_mean_kl)

    @property
    def pair(self) -> str:
        return f"{self.arm_a} vs {self.arm_b}"

    def text(self) -> str:
        """Everything a `/` filter matches against."""
        return " ".join(
            str(v)
            for v in (
                self.box,
                self.model,
                self.pair,
                self.role,
                self.kernel_a,
                self.kernel_b,
                self.verdict.word,
                self.verdict.text,
                self.source,
            )
            if v
        ).lower()
