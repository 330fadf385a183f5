"""Reading the GPUs: NVML when the box has ``nvidia-ml-py``, else ``nvidia-smi``, else nothing.

Why two paths: NVML reads a sample in a few milliseconds (an H200's whole sample: median 3.8 ms, 3 ms of it
the energy counter, tests/test_gpu_tier.py), but many images lack the bindings; one
``nvidia-smi`` call costs ~30 ms, so the fallback keeps ONE long-running ``nvidia-smi -lms 1000``
process instead of a subprocess per sample (docs/facts.md, GPUs). Real output has placeholders (``[N/A]``,
``[Not Supported]``) and drivers drop fields (an unknown field fails the whole query), so every value
may be None and an unknown field is dropped with a warning rather than killing the sampler. On the NVML path
a value NVML says does not exist here reads None in silence; any other failed call reads None too but is
journaled, naming the call (``NV_ABSENT``, ``NvFaults``): a broken binding must not pass for an idle GPU.

Each sample also carries the clocks-event (throttle) reasons bitmask, on both paths, and NVML's total energy
counter (mJ since driver load), on the NVML path only. The reasons call costs a few us; the counter call about
3 ms a GPU on an H200 (a driver round trip, as slow through ``nvmlDeviceGetFieldValues``), read every tick all
the same: at 1 Hz that is under 3 % of one core for 8 GPUs, and the counter lets console/readmodel/energy.py
read a run's joules instead of integrating 1 Hz power.
"""

from __future__ import annotations

import csv
import io
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from agents.protocol import GpuHolder, GpuReading, ProbeGpu

Warn = Callable[[str, str], None]
"""warn(where, message): report a fault the agent survived (journals a ``warning`` event)."""

SAMPLE_FIELDS: dict[str, str] = {
    "power_w": "power.draw",
    "power_limit_w": "power.limit",
    "enforced_limit_w": "enforced.power.limit",
    "max_limit_w": "power.max_limit",
    "sm_clock_mhz": "clocks.current.sm",
    "util_pct": "utilization.gpu",
    "mem_used_mib": "memory.used",
    "mem_total_mib": "memory.total",
    "temp_c": "temperature.gpu",
}
"""gpu_sample keys (agents/protocol.py) and the ``--query-gpu`` field each comes from."""

THROTTLE_FIELDS = ("clocks_event_reasons.active", "clocks_throttle_reasons.active")
"""The ``--query-gpu`` field of the clocks-event (throttle) reasons bitmask, in hex: its current name, then
the older name a driver that rejects it may still know (both in tests/fixtures/nvidia-smi/h200's
``smi_help_query_gpu.txt``). nvidia-smi offers no energy counter field there, so that path has none."""

PROBE_NUMERIC: dict[str, str] = {
    **SAMPLE_FIELDS,
    "default_limit_w": "power.default_limit",
    "min_limit_w": "power.min_limit",
    "max_sm_clock_mhz": "clocks.max.sm",
}
PROBE_TEXT: dict[str, str] = {
    "name": "name",
    "uuid": "uuid",
    "pci_bus_id": "pci.bus_id",
    "compute_cap": "compute_cap",
}

SOURCES = ("auto", "nvml", "nvidia-smi", "none")
"""auto: NVML if importable, else nvidia-smi; the others force one path (to check each on a real box)."""

_BAD_FIELD = re.compile(r'Field "([^"]+)" is not a valid field to query')


def value(raw: str | None) -> float | None:
    """A number from nvidia-smi CSV (with or without units); placeholders such as [N/A] are None."""
    if raw is None:
        return None
    text = raw.strip()
    if not text or text.startswith("[") or text in ("N/A", "Unknown Error"):
        return None
    try:
        return float(text.split()[0])
    except ValueError:
        return None


def hex_value(raw: str | None) -> int | None:
    """A bitmask nvidia-smi prints in hex (``0x0000000000000004``); placeholders read None."""
    text = (raw or "").strip()
    try:
        return int(text, 16) if text.lower().startswith("0x") else None
    except ValueError:
        return None


def text_value(raw: str | None) -> str | None:
    if raw is None:
        return None
    text = raw.strip()
    return None if not text or text.startswith("[") or text == "N/A" else text


def smi_path() -> str | None:
    return shutil.which("nvidia-smi")


def _csv_rows(out: str, fields: list[str]) -> list[dict[str, str]]:
    rows = []
    for cells in csv.reader(io.StringIO(out), skipinitialspace=True):
        if len(cells) == len(fields):
            rows.append(dict(zip(fields, cells, strict=True)))
    return rows


def smi_query(
    fields: list[str], warn: Warn, what: str = "--query-gpu", smi: str | None = None, timeout: float = 20.0
) -> list[dict[str, str]]:
    """One ``nvidia-smi --query-...`` call; a field the driver rejects is dropped (with a warning)."""
    exe = smi or smi_path()
    if exe is None:
        return []
    fields = list(fields)
    while fields:
        argv = [exe, f"{what}={','.join(fields)}", "--format=csv,noheader"]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            warn("nvidia-smi", f"{' '.join(argv)} failed: {exc}")
            return []
        if proc.returncode == 0:
            return _csv_rows(proc.stdout, fields)
        bad = _BAD_FIELD.search(proc.stdout + proc.stderr)
        if bad and bad.group(1) in fields:
            warn("nvidia-smi", f'this driver does not know field "{bad.group(1)}"; reading without it')
            fields.remove(bad.group(1))
            continue
        warn(
            "nvidia-smi",
            f"{' '.join(argv)} exited {proc.returncode}: {(proc.stdout + proc.stderr).strip()[:300]}",
        )
        return []
    return []


def load_nvml(warn: Warn | None = None) -> Any | None:
    """The initialised ``pynvml`` module (from nvidia-ml-py), or None when NVML is unavailable."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        if warn:
            warn("nvml", f"nvidia-ml-py is installed but nvmlInit failed: {exc}")
        return None
    return pynvml


NV_ABSENT: dict[int, str] = {
    3: "NVML_ERROR_NOT_SUPPORTED",
    6: "NVML_ERROR_NOT_FOUND",
    13: "NVML_ERROR_FUNCTION_NOT_FOUND",
    25: "NVML_ERROR_ARGUMENT_VERSION_MISMATCH",
}
"""The NVML return codes (nvml.h, a stable ABI; pynvml raises each as ``NVMLError_<Name>``) that mean
"this value does not exist here", read as None without a word, as nvidia-smi prints ``[N/A]``.

- NOT_SUPPORTED: the card or its mode lacks the counter (power limits on some vGPUs, clocks on MIG slices).
- FUNCTION_NOT_FOUND: the box's driver predates the call the binding asks for (a newer nvidia-ml-py on an
  older libnvidia-ml); ARGUMENT_VERSION_MISMATCH: the driver knows the call but not the struct version
  (``nvmlMemory_v2`` on an old driver). Both are "this driver has no such reading": the caller falls back.
- NOT_FOUND: the thing asked about is gone, e.g. a process that exited between the process list and
  ``nvmlSystemGetProcessName``: a race the next sample no longer sees.

Every other failure is a fault, reported (``NvFaults``) and then read as None. NO_PERMISSION is one on
purpose: the agent reads nothing that needs privileges (power, limits, clocks, memory, processes are
readable by any user on every driver we met), so a refusal means the box's container or driver setup hides
a value the console judges (a capped power limit, memory still held), and the operator must be told why
it reads unknown. So are UNINITIALIZED, GPU_IS_LOST, UNKNOWN and anything that is no NVML error at all
(a ctypes fault, a RuntimeError of a broken or mismatched binding): left silent, those read as an idle GPU.
"""

NV_WARN_EVERY_S = 600.0
"""A call that keeps failing is reported again at most this often (with how many failures were not)."""


def nv_code(exc: BaseException) -> int | None:
    """The NVML return code of a pynvml ``NVMLError`` (any subclass), else None."""
    if not any(c.__name__ == "NVMLError" for c in type(exc).__mro__):
        return None
    code = getattr(exc, "value", None)
    return code if isinstance(code, int) else None


def nv_absent(exc: BaseException) -> bool:
    """True for NVML's "no such value here" family (``NV_ABSENT``), which reads as None in silence."""
    return nv_code(exc) in NV_ABSENT


class NvFaults:
    """Reports NVML calls that failed for a reason other than ``NV_ABSENT``: the first failure of each call
    name at once (``warn("nvml:<call>", ...)``), then at most one report per ``every_s`` for that name, with
    the count of the failures in between. A sampler at 1 Hz over 8 GPUs must not journal 8 warnings a second.
    Thread-safe: the daemon's tick reads samples while its HTTP pool lists the GPUs' processes."""

    def __init__(
        self, warn: Warn, every_s: float = NV_WARN_EVERY_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.warn = warn
        self.every_s = every_s
        self._clock = clock
        self._lock = threading.Lock()
        self._reported: dict[str, float] = {}
        self._unreported: dict[str, int] = {}

    def report(self, name: str, exc: Exception) -> None:
        now = self._clock()
        with self._lock:
            last = self._reported.get(name)
            if last is not None and now - last < self.every_s:
                self._unreported[name] = self._unreported.get(name, 0) + 1
                return
            self._reported[name] = now
            more = self._unreported.pop(name, 0)
        code = nv_code(exc)
        what = (
            f"NVML error {code} ({type(exc).__name__}: {exc})"
            if code is not None
            else f"{type(exc).__name__}: {exc}"
        )
        since = f"; {more} more failure(s) of it since the last report" if more else ""
        self.warn(
            f"nvml:{name}",
            f"{name} failed: {what}; its value reads as None (not as idle){since}. "
            f"Reported again at most every {self.every_s:.0f} s while it keeps failing",
        )


def _stderr_warn(where: str, message: str) -> None:
    print(f"warning {where}: {message}", file=sys.stderr, flush=True)


_UNROUTED = NvFaults(_stderr_warn)
"""For callers that pass no NvFaults of their own: the faults still go somewhere (the agent's log)."""


def nv(fn: Callable[..., Any], *args: Any, faults: NvFaults | None = None) -> Any:
    """One NVML call: its value; None when NVML says the value does not exist here (``NV_ABSENT``); None
    and a rate-limited report to ``faults`` (default: stderr) for any other failure, naming the call."""
    try:
        return fn(*args)
    except Exception as exc:
        if not nv_absent(exc):
            (faults or _UNROUTED).report(getattr(fn, "__name__", None) or repr(fn), exc)
        return None


def _mw(v: Any) -> float | None:
    return None if v is None else float(v) / 1000.0


def _mib(v: Any) -> float | None:
    return None if v is None else float(v) / (1024 * 1024)


def nvml_text(v: Any) -> str | None:
    if v is None:
        return None
    return v.decode() if isinstance(v, bytes) else str(v)


def reading(
    index: int,
    figure: Callable[[str], float | None],
    throttle_reasons: int | None = None,
    energy_mj: int | None = None,
) -> GpuReading:
    """One GPU's ``gpu_sample`` entry, each figure looked up by its name (a key of ``SAMPLE_FIELDS``), with
    its throttle reasons bitmask and energy counter: the one place both sources (NVML, nvidia-smi) build
    the contract's shape."""
    return {
        "gpu": index,
        "power_w": figure("power_w"),
        "power_limit_w": figure("power_limit_w"),
        "enforced_limit_w": figure("enforced_limit_w"),
        "max_limit_w": figure("max_limit_w"),
        "sm_clock_mhz": figure("sm_clock_mhz"),
        "util_pct": figure("util_pct"),
        "mem_used_mib": figure("mem_used_mib"),
        "mem_total_mib": figure("mem_total_mib"),
        "temp_c": figure("temp_c"),
        "throttle_reasons": throttle_reasons,
        "energy_mj": energy_mj,
    }


def probe_gpu(
    index: int, text: Callable[[str], str | None], figure: Callable[[str], float | None]
) -> ProbeGpu:
    """One GPU of a probe, its text (``PROBE_TEXT``) and figures (``PROBE_NUMERIC``) looked up by name."""
    return {
        "index": index,
        "name": text("name"),
        "uuid": text("uuid"),
        "pci_bus_id": text("pci_bus_id"),
        "compute_cap": text("compute_cap"),
        "power_w": figure("power_w"),
        "power_limit_w": figure("power_limit_w"),
        "enforced_limit_w": figure("enforced_limit_w"),
        "max_limit_w": figure("max_limit_w"),
        "sm_clock_mhz": figure("sm_clock_mhz"),
        "util_pct": figure("util_pct"),
        "mem_used_mib": figure("mem_used_mib"),
        "mem_total_mib": figure("mem_total_mib"),
        "temp_c": figure("temp_c"),
        "default_limit_w": figure("default_limit_w"),
        "min_limit_w": figure("min_limit_w"),
        "max_sm_clock_mhz": figure("max_sm_clock_mhz"),
    }


def _nvml_figures(nvml: Any, h: Any, call: Callable[..., Any]) -> dict[str, float | None]:
    """A GPU's sample figures (``SAMPLE_FIELDS``) and its lowest power limit, from NVML, in W / MHz / MiB /
    C / %; a failing call reads as None (``nv``)."""
    util = call(nvml.nvmlDeviceGetUtilizationRates, h)
    # v2 reports "used" without the driver's reserved memory, as nvidia-smi does (v1 shows ~615 MiB on an
    # idle H200, which would read as a leftover process).
    mem = (
        call(nvml.nvmlDeviceGetMemoryInfo, h, getattr(nvml, "nvmlMemory_v2", None))
        if hasattr(nvml, "nvmlMemory_v2")
        else None
    )
    mem = mem or call(nvml.nvmlDeviceGetMemoryInfo, h)
    constraints = call(nvml.nvmlDeviceGetPowerManagementLimitConstraints, h) or (None, None)
    return {
        "power_w": _mw(call(nvml.nvmlDeviceGetPowerUsage, h)),
        "power_limit_w": _mw(call(nvml.nvmlDeviceGetPowerManagementLimit, h)),
        "enforced_limit_w": _mw(call(nvml.nvmlDeviceGetEnforcedPowerLimit, h)),
        "max_limit_w": _mw(constraints[1]),
        "sm_clock_mhz": _float(call(nvml.nvmlDeviceGetClockInfo, h, nvml.NVML_CLOCK_SM)),
        "util_pct": _float(getattr(util, "gpu", None)),
        "mem_used_mib": _mib(getattr(mem, "used", None)),
        "mem_total_mib": _mib(getattr(mem, "total", None)),
        "temp_c": _float(call(nvml.nvmlDeviceGetTemperature, h, nvml.NVML_TEMPERATURE_GPU)),
        "min_limit_w": _mw(constraints[0]),
    }


def _nvml_counters(nvml: Any, h: Any, call: Callable[..., Any]) -> tuple[int | None, int | None]:
    """(clocks-event reasons bitmask, total energy in mJ since driver load): a few us and ~3 ms (module doc).
    nvidia-ml-py 12.535+ names the first ``...ClocksEventReasons``; older bindings ``...ThrottleReasons``.
    A binding without a call, or a GPU where NVML says it does not exist (``NV_ABSENT``), reads None."""
    reasons = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
        nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None
    )
    energy = getattr(nvml, "nvmlDeviceGetTotalEnergyConsumption", None)
    mask = None if reasons is None else call(reasons, h)
    mj = None if energy is None else call(energy, h)
    return (None if mask is None else int(mask)), (None if mj is None else int(mj))


def nvml_gpu(nvml: Any, index: int, faults: NvFaults | None = None) -> GpuReading:
    """One GPU's sample from NVML; a GPU whose handle cannot be had reads as None throughout."""

    def call(fn: Callable[..., Any], *args: Any) -> Any:
        return nv(fn, *args, faults=faults)

    h = call(nvml.nvmlDeviceGetHandleByIndex, index)
    if h is None:
        return reading(index, lambda _: None)
    return reading(index, _nvml_figures(nvml, h, call).get, *_nvml_counters(nvml, h, call))


def nvml_probe_gpu(nvml: Any, index: int, faults: NvFaults | None = None) -> ProbeGpu:
    """One GPU's probe fields from NVML: the sample's figures and its identity and limits."""

    def call(fn: Callable[..., Any], *args: Any) -> Any:
        return nv(fn, *args, faults=faults)

    h = call(nvml.nvmlDeviceGetHandleByIndex, index)
    if h is None:
        return probe_gpu(index, lambda _: None, lambda _: None)
    figures = _nvml_figures(nvml, h, call)
    cc = call(nvml.nvmlDeviceGetCudaComputeCapability, h)
    figures.update(
        default_limit_w=_mw(call(nvml.nvmlDeviceGetPowerManagementDefaultLimit, h)),
        max_sm_clock_mhz=_float(call(nvml.nvmlDeviceGetMaxClockInfo, h, nvml.NVML_CLOCK_SM)),
    )
    texts = {
        "name": nvml_text(call(nvml.nvmlDeviceGetName, h)),
        "uuid": nvml_text(call(nvml.nvmlDeviceGetUUID, h)),
        "pci_bus_id": nvml_text(getattr(call(nvml.nvmlDeviceGetPciInfo, h), "busId", None)),
        "compute_cap": f"{cc[0]}.{cc[1]}" if cc else None,
    }
    return probe_gpu(index, texts.get, figures.get)


def _float(v: Any) -> float | None:
    return None if v is None else float(v)


def nvml_processes(nvml: Any, faults: NvFaults | None = None) -> list[GpuHolder]:
    out: list[GpuHolder] = []
    for index in range(int(nv(nvml.nvmlDeviceGetCount, faults=faults) or 0)):
        h = nv(nvml.nvmlDeviceGetHandleByIndex, index, faults=faults)
        if h is None:
            continue
        for p in nv(nvml.nvmlDeviceGetComputeRunningProcesses, h, faults=faults) or []:
            used = getattr(p, "usedGpuMemory", None)
            name = nvml_text(nv(nvml.nvmlSystemGetProcessName, p.pid, faults=faults)) or ""
            out.append({"gpu": index, "pid": int(p.pid), "name": name, "used_mib": _mib(used)})
    return out


def smi_processes(warn: Warn, smi: str | None = None) -> list[GpuHolder]:
    """Compute processes per GPU index (nvidia-smi names GPUs by uuid in this query)."""
    inventory = smi_query(["index", "uuid"], warn, smi=smi)
    by_uuid = {row["uuid"]: int(row["index"]) for row in inventory if row["index"].strip().isdigit()}
    apps = smi_query(
        ["gpu_uuid", "pid", "process_name", "used_memory"], warn, what="--query-compute-apps", smi=smi
    )
    out: list[GpuHolder] = []
    for row in apps:
        pid = value(row["pid"])
        if pid is None:
            continue
        out.append(
            {
                "gpu": by_uuid.get(row["gpu_uuid"].strip(), -1),
                "pid": int(pid),
                "name": row["process_name"].strip(),
                "used_mib": value(row["used_memory"]),
            }
        )
    return out


def _sample_from_row(row: dict[str, str]) -> GpuReading | None:
    index = value(row.get("index"))
    if index is None:
        return None
    mask = next((hex_value(row[f]) for f in THROTTLE_FIELDS if f in row), None)
    return reading(int(index), lambda key: value(row.get(SAMPLE_FIELDS[key])), throttle_reasons=mask)


class SmiLoop:
    """One ``nvidia-smi --query-gpu=... -lms 1000`` process feeding its latest whole round: one row per GPU.

    A field the driver rejects ends the process at once: it is dropped (warning) and the loop restarts
    without it, so that field reads None. Any other exit restarts after a back-off.
    """

    def __init__(self, warn: Warn, smi: str, interval_ms: int = 1000) -> None:
        self.warn = warn
        self.smi = smi
        self.interval_ms = interval_ms
        self.fields = ["index", *SAMPLE_FIELDS.values(), THROTTLE_FIELDS[0]]
        self._lock = threading.Lock()
        self._round: dict[int, GpuReading] = {}
        self._round_mono = float("-inf")
        self._current: dict[int, GpuReading] = {}
        """The round arriving, row by row (the reader thread's alone)."""
        self._began = 0.0
        """When its first row arrived."""
        self._width = 0
        """The GPUs of a round, known once the first round ended: a round of that many is whole at its last
        row. Until then the first round is handed out as it arrives (none before it to mix with)."""
        self._fresh = False
        self.read_mono = float("-inf")
        """When the round the last non-empty ``read`` returned began to arrive (monotonic)."""
        self._proc: subprocess.Popen[str] | None = None
        self._stopped = False
        self._restart_at = 0.0
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        argv = [
            self.smi,
            f"--query-gpu={','.join(self.fields)}",
            "--format=csv,noheader,nounits",
            "-lms",
            str(self.interval_ms),
        ]
        self._proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        )
        self._thread = threading.Thread(target=self._read, args=(self._proc,), daemon=True, name="nvidia-smi")
        self._thread.start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        fields = list(self.fields)
        tail: list[str] = []
        self._current = {}
        for line in proc.stdout:
            rows = _csv_rows(line, fields)
            if not rows:
                tail = (tail + [line.strip()])[-5:]
                continue
            sample = _sample_from_row(rows[0])
            if sample is not None:
                self._gather(sample)
        rc = proc.wait()
        if self._stopped:
            return
        text = " ".join(tail)
        bad = _BAD_FIELD.search(text)
        if bad and bad.group(1) in self.fields and bad.group(1) != "index":
            self.warn("nvidia-smi", f'this driver does not know field "{bad.group(1)}"; sampling without it')
            at = self.fields.index(bad.group(1))
            self.fields.remove(bad.group(1))
            if bad.group(1) == THROTTLE_FIELDS[0]:  # an older driver: its name for the same bitmask
                self.fields.insert(at, THROTTLE_FIELDS[1])
            self._restart_at = time.monotonic()
        else:
            self.warn("nvidia-smi", f"nvidia-smi -lms exited {rc}: {text[:300]}; restarting in 30 s")
            self._restart_at = time.monotonic() + 30.0

    def _gather(self, sample: GpuReading) -> None:
        """One GPU's row into the round it belongs to; a round is handed out once whole."""
        if sample["gpu"] in self._current:  # a GPU again: the next round began
            if self._width:  # a round short of a GPU (its row did not parse) goes as it is
                self._publish(self._current)
            self._width = max(self._width, len(self._current))  # the first round: now its size is known
            self._current = {}
        if not self._current:
            self._began = time.monotonic()
        self._current[sample["gpu"]] = sample
        if not self._width:  # the first round, of a size not known yet: each row of it as it comes
            self._publish(dict(self._current))
        elif len(self._current) >= self._width:
            self._publish(self._current)
            self._current = {}

    def _publish(self, whole: dict[int, GpuReading]) -> None:
        with self._lock:
            self._round, self._round_mono, self._fresh = whole, self._began, True

    def read(self) -> list[GpuReading]:
        """The latest whole round (each GPU's row, read together) when one arrived since the last read, else [].

        Rows of one ``-lms`` round arrive one line at a time; a tick that lands mid-round reports the round
        before (each value at most one period old), never rows of two rounds, so ``read_mono`` dates them all.
        """
        proc = self._proc
        if (
            not self._stopped
            and proc is not None
            and proc.poll() is not None
            and self._thread is not None
            and not self._thread.is_alive()
            and time.monotonic() >= self._restart_at
        ):
            self.start()
        with self._lock:
            if not self._fresh:
                return []
            self._fresh = False
            self.read_mono = self._round_mono
            return [self._round[k].copy() for k in sorted(self._round)]

    def stop(self) -> None:
        self._stopped = True
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()


class GpuSampler:
    """The 1 Hz GPU reader the daemon ticks: NVML, else the smi loop, else nothing (one warning)."""

    def __init__(self, warn: Warn, source: str = "auto") -> None:
        if source not in SOURCES:
            raise ValueError(f"GPU source {source!r}: expected one of {', '.join(SOURCES)}")
        self.warn = warn
        self.faults = NvFaults(warn)
        """Every NVML call's failure, reported once per call name per NV_WARN_EVERY_S (not every tick)."""
        self.nvml = load_nvml(warn) if source in ("auto", "nvml") else None
        self.loop: SmiLoop | None = None
        self.source: str | None = None
        self._nvml_read_mono = float("-inf")
        if self.nvml is not None:
            self.source = "nvml"
            self.count = int(self.nvml.nvmlDeviceGetCount())
            return
        smi = smi_path() if source in ("auto", "nvidia-smi") else None
        if source == "none":
            warn("gpu", "GPU sampling is off (--gpu-source none)")
            return
        if smi is None:
            warn(
                "gpu",
                f"no GPU tooling on this box for GPU source {source!r} (nvidia-ml-py not importable, "
                "nvidia-smi not on PATH): no GPU samples will be recorded",
            )
            return
        if source == "auto":
            warn(
                "nvml",
                "NVML unavailable (install nvidia-ml-py on the box for sub-millisecond samples); "
                "sampling with one long-running nvidia-smi -lms process",
            )
        self.source = "nvidia-smi"
        self.loop = SmiLoop(warn, smi)
        self.loop.start()

    def read(self) -> list[GpuReading]:
        if self.nvml is not None:
            self._nvml_read_mono = time.monotonic()
            return [nvml_gpu(self.nvml, i, faults=self.faults) for i in range(self.count)]
        if self.loop is not None:
            return self.loop.read()
        return []

    @property
    def read_mono(self) -> float | None:
        """When the oldest reading the last non-empty ``read`` returned was taken (monotonic; -inf before the
        first); None: this box has no GPU source, so there is nothing to wait for."""
        if self.nvml is not None:
            return self._nvml_read_mono
        if self.loop is not None:
            return self.loop.read_mono
        return None

    def processes(self) -> list[GpuHolder]:
        """Compute processes on the GPUs now (for the kill's memory-release check)."""
        if self.nvml is not None:
            return nvml_processes(self.nvml, self.faults)
        if self.loop is not None:
            return smi_processes(self.warn, smi=self.loop.smi)
        return []

    def close(self) -> None:
        if self.loop is not None:
            self.loop.stop()


def sample_once(warn: Warn, source: str = "auto") -> tuple[str | None, list[GpuReading]]:
    """(source, one gpu_sample row per GPU) without a daemon: for checking a real box by hand."""
    nvml = load_nvml(warn) if source in ("auto", "nvml") else None
    if nvml is not None:
        faults = NvFaults(warn)
        return "nvml", [nvml_gpu(nvml, i, faults=faults) for i in range(nvml.nvmlDeviceGetCount())]
    if smi_path() is None or source not in ("auto", "nvidia-smi"):
        warn("gpu", "no GPU tooling on this box (nvidia-ml-py not importable, nvidia-smi not on PATH)")
        return None, []
    rows = smi_query(["index", *SAMPLE_FIELDS.values(), THROTTLE_FIELDS[0]], warn)
    return "nvidia-smi", [s for s in map(_sample_from_row, rows) if s is not None]
