"""The one state object the console's panels draw from, with a time cursor for replay.

Live and offline are the same screens: live, the cursor follows the clock and the fleet layer keeps
writing the store; browsing, the cursor is parked at the end of the record and steps through it (as
Dolphie replays a recording). The panels never know which; they only ask ``model.<view>()``.
"""

from __future__ import annotations

from dataclasses import dataclass

from console.readmodel import queries
from console.readmodel.campaign import economics_inputs, index_text, model_index
from console.readmodel.curves import CurveView, curves
from console.readmodel.kldiff import kldiff_runs
from console.readmodel.quality import quality_ledger
from console.readmodel.records import (
    ArmEntry,
    EconomicsInputs,
    FleetRow,
    GpuPower,
    KldiffRun,
    LaunchRow,
    LiveView,
    QualityLedger,
    ResultRow,
    SweepEntry,
    TimerRow,
)
from console.readmodel.results import bench_rows, latest_tripwires
from console.readmodel.sweeps import sweeps
from console.store import Store
from console.timeutil import Clock, system_clock

WINDOWS_MS: tuple[int, ...] = (
    10 * 60_000,
    60 * 60_000,
    6 * 3600_000,
    24 * 3600_000,
    7 * 86_400_000,
    30 * 86_400_000,
)
"""Chart windows the operator cycles through; wide ones stay cheap because buckets are summed in SQL, from
the rollups once a bucket spans a rollup's bucket (gpu_rollup_1m from a minute, gpu_rollup_10m from ten)."""

REPLAY_STEPS_MS: dict[int, int] = {
    10 * 60_000: 60_000,
    60 * 60_000: 5 * 60_000,
    6 * 3600_000: 30 * 60_000,
    24 * 3600_000: 2 * 3600_000,
    7 * 86_400_000: 12 * 3600_000,
    30 * 86_400_000: 3 * 86_400_000,
}
"""What `[` and `]` move the cursor by with each chart window: a fixed, round size (about a tenth of it),
said in the top bar, so a step lands on the same minute every time."""


@dataclass
class Cursor:
    """Where the model reads: ``at_ms`` None means 'now' (live)."""

    at_ms: int | None = None
    span: tuple[int, int] | None = None

    @property
    def live(self) -> bool:
        return self.at_ms is None


class ReadModel:
    def __init__(self, store: Store, clock: Clock = system_clock, *, replay: bool = False):
        self.store = store
        self.clock = clock
        self.cursor = Cursor()
        self.window_ms = WINDOWS_MS[0]
        self._park = replay  # parked at the end of the record on the first query (a worker), not here

    # -- the cursor ---------------------------------------------------------------------------------
    def now(self) -> int:
        if self._park:
            self._park = False
            self.seek_end()
        return self.clock() if self.cursor.at_ms is None else self.cursor.at_ms

    def step(self, delta_ms: int) -> int:
        """Move the replay cursor, clamped to the recorded span; stepping a live model parks it first."""
        self.cursor.span = queries.data_span(self.store)
        at = self.now() + delta_ms
        if self.cursor.span:
            at = max(self.cursor.span[0], min(self.cursor.span[1], at))
        self.cursor.at_ms = at
        return at

    def seek_start(self) -> int:
        self.cursor.span = queries.data_span(self.store)
        self.cursor.at_ms = self.cursor.span[0] if self.cursor.span else self.clock()
        return self.cursor.at_ms

    def seek_end(self) -> int:
        self.cursor.span = queries.data_span(self.store)
        self.cursor.at_ms = self.cursor.span[1] if self.cursor.span else self.clock()
        return self.cursor.at_ms

    def follow_live(self) -> None:
        self.cursor.at_ms = None

    @property
    def step_ms(self) -> int:
        """The replay step that goes with the chart window (REPLAY_STEPS_MS)."""
        return REPLAY_STEPS_MS.get(self.window_ms, max(1000, self.window_ms // 10))

    def cycle_window(self) -> int:
        i = WINDOWS_MS.index(self.window_ms) if self.window_ms in WINDOWS_MS else -1
        self.window_ms = WINDOWS_MS[(i + 1) % len(WINDOWS_MS)]
        return self.window_ms

    # -- the views --------------------------------------------------------------------------------------
    def fleet(self) -> list[FleetRow]:
        return queries.fleet(self.store, self.now())

    def live(self, box: str, buckets: int, gpu_buckets: int | None = None) -> LiveView | None:
        """One box at the cursor; throughput charted in ``buckets``, GPU history in ``gpu_buckets`` (default
        the same). Throughput is the server's /metrics; where those are missing or all zero over the window,
        the load generator's own samples of a bench that ran in it."""
        at = self.now()
        read = self._box_at(box, at)
        if read is None:
            return None
        if self.cursor.live and read[0].status == "imported":
            # An imported box is a record, not a box to follow: live, it is read where its record ends.
            end = queries.record_end(self.store, box)
            if end is not None and end < at:
                at = end
                read = self._box_at(box, at)
                if read is None:
                    return None
        row, every, box_timers, gpus = read
        start = at - self.window_ms
        gpu_ids = [g.gpu for g in gpus]
        out, inp, history = queries.live_series(
            self.store, box, gpu_ids, start, at, buckets, gpu_buckets or buckets
        )
        source = "server"
        if not (out.peak or inp.peak):
            client_out, client_in = queries.loadgen_throughput(self.store, box, start, at, buckets)
            if client_out.peak is not None or client_in.peak is not None:
                out, inp, source = client_out, client_in, "loadgen"
        serving = [launch for launch in every if launch.state == "serving"]
        return LiveView(
            box=row,
            at_ms=at,
            gpus=tuple(gpus),
            out_tok_s=out,
            in_tok_s=inp,
            servers=tuple(queries.servers_now(self.store, at, serving)),
            bench=queries.bench_now(self.store, box, start, at),
            tripwire=tuple(latest_tripwires(self.store, at, box)),
            timers=tuple(box_timers),
            gpu_history=tuple(history),
            throughput_source=source,
        )

    def _box_at(
        self, box: str, at: int
    ) -> tuple[FleetRow, list[LaunchRow], list[TimerRow], list[GpuPower]] | None:
        """The box's fleet row with the launches, timers and latest GPU samples it is made of, each read once
        (the panels show them too): every SQLite call of a redraw gives up the interpreter lock, which an
        ingesting thread may then hold for its switch interval."""
        every = queries.launches(self.store, at, box)
        box_timers = queries.timers(self.store, at, box)
        gpus = queries.gpu_power(self.store, box, at)
        row = queries.box_now(self.store, at, box, every, box_timers, gpus)
        return None if row is None else (row, every, box_timers, gpus)

    def arms(self, recipe_arms: dict[str, str | None] | None = None) -> list[ArmEntry]:
        """Arms from the recipes (name -> model) merged with every arm the store has launched."""
        entries: dict[str, ArmEntry] = {
            name: ArmEntry(name=name, model=model, in_recipes=True)
            for name, model in (recipe_arms or {}).items()
        }
        at = self.now()
        models = queries.arm_models(self.store)
        for launch in queries.launches(self.store, at, with_kernels=True):
            entry = entries.setdefault(
                launch.arm, ArmEntry(name=launch.arm, model=models.get(launch.arm), in_recipes=False)
            )
            entry.launches.append(launch)
        return sorted(entries.values(), key=lambda e: e.name)

    def results(self, sort: str = "arm", text: str = "") -> list[ResultRow]:
        return bench_rows(self.store, self.now(), sort, text)

    def kldiff(self, text: str = "") -> list[KldiffRun]:
        return kldiff_runs(self.store, self.now(), text)

    def sweeps(self) -> list[SweepEntry]:
        return sweeps(self.store, self.now())

    def curves(self) -> list[CurveView]:
        """Every curve with its points as stored now: a curve is a record of what was measured, read whole (its
        points' states change live while a console walks it)."""
        return curves(self.store)

    def economics_inputs(self) -> EconomicsInputs:
        """What console.economics prices: the campaign's whole record, not the cursor's slice (a price is
        a summary of the runs)."""
        return economics_inputs(self.store)

    def model_named(self, model: str | None) -> str:
        """A model with its published intelligence index, as the write-up names it: ``GLM-5.3-Flash (46)``."""
        printed = index_text(model_index(self.store).get(model or ""))
        return (model or "-") if printed is None else f"{model} ({printed})"

    def quality(self) -> QualityLedger:
        """The quality ledger, whole: like a price, a comparison summarises runs rather than an instant."""
        return quality_ledger(self.store)
