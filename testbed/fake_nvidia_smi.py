"""A fake ``nvidia-smi`` that answers from a GPU fixture (docs/contracts.md) built from real captures.

Why: the agent's GPU code must run against nvidia-smi's real behaviour (CSV with units, ``nounits``,
``[N/A]`` placeholders, an unknown field failing the whole query with rc 2, ``-lms`` looping until
killed, ANSI escapes in ``topo -m``) on machines without a GPU. Valid field names come from the real
driver's ``--help-query-gpu`` capture, so a field the driver would reject is rejected here too.

A fixture may list ``invalid_fields``: names this driver rejects although the H200 driver knows them
(drivers add and deprecate fields, e.g. ``kmd_version`` on 595+). Installed on a box's PATH as ``nvidia-smi`` by ``install(bin_dir, fixture)``; the fixture path is read
from ``FAKE_NVIDIA_SMI_FIXTURE`` (the wrapper sets it unless the environment already does).

Processes it is told about: a fixture's memory readings are fixed, so a server started on the box would
hold nothing. A test server (testbed/fake_engine.py with ``FAKE_ENGINE_GPU_MIB``) tells it with
``tell(gpus, used_mib)``: a file under ``$HOME/.fake-nvidia-smi/`` (the box user's HOME, which the agent and
the servers it starts share). While that process lives (its pid, with the start time it had), it is listed
by ``--query-compute-apps`` and its memory is added to ``memory.used`` of its GPUs, as a real driver shows a
serving engine; once it exits it is gone from both, as a real driver frees the memory of a dead process.

Changes a test makes mid-run: ``control({0: {"enforced.power.limit": "350.00 W", "power.limit": "350.00 W",
"clocks_event_reasons.active": "0x0000000000000004"}})`` (run as the box user, e.g. over ssh:
``python3 -c 'from testbed.fake_nvidia_smi import control; control({...})'``, or by writing the same JSON,
GPU index as a string key, to ``$HOME/.fake-nvidia-smi/control.values`` of the box user) makes every later
answer, including the next row of a running ``-lms`` loop, read those fields of those GPUs with these values
(any ``--query-gpu`` field name, values as the fixture writes them); ``control({})`` returns to the fixture.
The file is re-read on every query, so the change lands at the moment the test chooses (within one period).
Throttle reasons use the real bitmask (0x1 GPU idle, 0x4 software power cap, 0x8 hardware slowdown, 0x20
software thermal slowdown, 0x40 hardware thermal slowdown: nvidia-smi -q's "Clocks Event Reasons").
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HELP_QUERY_GPU = (
    Path(__file__).resolve().parent.parent
    / "tests"
    / "fixtures"
    / "nvidia-smi"
    / "h200"
    / "smi_help_query_gpu.txt"
)
_LOCAL_HELP = (
    Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "gpus" / "smi_help_query_gpu.txt"
)
APP_FIELDS = {
    "timestamp",
    "gpu_name",
    "gpu_bus_id",
    "gpu_serial",
    "gpu_uuid",
    "pid",
    "process_name",
    "used_gpu_memory",
    "used_memory",
}
FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "gpus"


def install(bin_dir: Path, fixture: Path | str) -> Path:
    """Write an executable ``nvidia-smi`` wrapper into bin_dir that answers from ``fixture``."""
    fixture = Path(fixture)
    if not fixture.is_absolute() and not fixture.exists():
        fixture = FIXTURES / (fixture.name if fixture.suffix == ".json" else f"{fixture.name}.json")
    bin_dir.mkdir(parents=True, exist_ok=True)
    wrapper = bin_dir / "nvidia-smi"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'FAKE_NVIDIA_SMI_FIXTURE="${{FAKE_NVIDIA_SMI_FIXTURE:-{fixture.resolve()}}}"\n'
        "export FAKE_NVIDIA_SMI_FIXTURE\n"
        f'exec {sys.executable} {Path(__file__).resolve()} "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper


def variant(fixture: str, dest: Path, gpus: int | None = None) -> Path:
    """A copy of ``fixture`` (a name under tests/fixtures/gpus) with its first ``gpus`` cards and no foreign
    processes, their memory freed: a clean box of the same kind, written to ``dest``."""
    fx = json.loads((FIXTURES / f"{fixture}.json").read_text())
    fx["gpus"] = fx["gpus"][:gpus] if gpus is not None else fx["gpus"]
    held = {int(p["gpu"]) for p in fx.get("processes", [])}
    for g in fx["gpus"]:
        if int(g["index"]) in held:
            g["memory.used"] = "0 MiB"
    fx["processes"] = []
    fx["source"] = f"{fx.get('source', fixture)} (variant: {len(fx['gpus'])} GPU(s), no foreign process)"
    dest.write_text(json.dumps(fx))
    dest.chmod(0o644)
    return dest


def valid_fields() -> dict[str, str]:
    """Every name ``--query-gpu`` accepts (aliases included) -> its canonical name."""
    path = HELP_QUERY_GPU if HELP_QUERY_GPU.exists() else _LOCAL_HELP
    names: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line.startswith('"'):
            quoted = re.findall(r'"([^"]+)"', line)
            for name in quoted:
                names[name] = quoted[0]
    return names


def _told_dir() -> Path:
    return Path(os.environ.get("HOME", "/nonexistent")) / ".fake-nvidia-smi"


def _start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks (``/proc/PID/stat`` field 22); None when it is gone or a zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] == "Z" else int(fields[19])


def tell(gpus: list[int], used_mib: float, name: str | None = None) -> Path:
    """Tell the fake that this process holds ``used_mib`` MiB on each of ``gpus`` while it lives."""
    folder = _told_dir()
    folder.mkdir(mode=0o700, exist_ok=True)
    pid = os.getpid()
    path = folder / f"{pid}.json"
    tmp = folder / f"{pid}.json.tmp"
    tmp.write_text(
        json.dumps(
            {
                "pid": pid,
                "start_ticks": _start_ticks(pid),
                "gpus": gpus,
                "used_mib": used_mib,
                "name": name or sys.executable,
            }
        )
    )
    os.replace(tmp, path)
    return path


def control(values: dict[int, dict[str, str]]) -> Path:
    """Make later answers read ``values`` ({gpu index: {field: value}}) over the fixture (module docstring)."""
    folder = _told_dir()
    folder.mkdir(mode=0o700, exist_ok=True)
    path = folder / "control.values"
    tmp = folder / "control.tmp"
    tmp.write_text(json.dumps({str(k): v for k, v in values.items()}))
    os.replace(tmp, path)
    return path


def controlled() -> dict[str, dict[str, str]]:
    """The values a test set with ``control``, by GPU index as a string; {} when none (or unreadable)."""
    try:
        values: dict[str, dict[str, str]] = json.loads((_told_dir() / "control.values").read_text())
    except (OSError, ValueError):
        return {}
    return values


def told() -> list[dict[str, Any]]:
    """The live processes the fake was told about (a dead one, or a reused pid, is not listed)."""
    out = []
    for path in sorted(_told_dir().glob("*.json")):
        try:
            entry = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if _start_ticks(int(entry["pid"])) == entry["start_ticks"]:
            out.append(entry)
    return out


def _pick(value: Any, tick: int) -> str:
    """A fixture value; a list means the value changes over time (one entry per sample)."""
    if isinstance(value, list):
        return str(value[tick % len(value)])
    return str(value)


def _unit(raw: str) -> str | None:
    m = re.fullmatch(r"-?[\d.]+ (\S+)", raw)
    return m.group(1) if m else None


def _strip_unit(raw: str) -> str:
    return raw.split(" ", maxsplit=1)[0] if _unit(raw) else raw


class Fake:
    def __init__(self, fixture: dict[str, Any]) -> None:
        self.fx = fixture
        self.tick = 0

    def gpus(self, select: list[int] | None) -> list[dict[str, Any]]:
        gpus = self.fx["gpus"]
        return [g for g in gpus if select is None or int(g["index"]) in select]

    def gpu_value(
        self,
        gpu: dict[str, Any],
        field: str,
        canonical: str,
        told: list[dict[str, Any]],
        overrides: dict[str, dict[str, str]] | None = None,
    ) -> str:
        mine = (overrides or {}).get(str(gpu["index"]), {})
        for key in (field, canonical):
            if key in mine:
                return str(mine[key])
        if field == "timestamp":
            return datetime.now(UTC).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
        if field == "driver_version":
            version: str = gpu.get("driver_version", self.fx["driver_version"])
            return version
        for key in (field, canonical):
            if key in gpu:
                raw = _pick(gpu[key], self.tick)
                if canonical == "memory.used":
                    held = sum(float(t["used_mib"]) for t in told if int(gpu["index"]) in t["gpus"])
                    raw = f"{float(_strip_unit(raw)) + held:.0f} MiB" if held else raw
                return raw
        return "[N/A]"

    def query(self, fields: list[str], fmt: set[str], select: list[int] | None) -> str:
        known = valid_fields()
        unknown = set(self.fx.get("invalid_fields", []))  # fields this (older/newer) driver does not know
        for f in fields:
            if f not in known or f in unknown:
                return f'Field "{f}" is not a valid field to query.\n\n'
        now_told, overrides = told(), controlled()
        rows = [
            [self.gpu_value(g, f, known[f], now_told, overrides) for f in fields] for g in self.gpus(select)
        ]
        return self._csv(fields, rows, fmt)

    def apps(self, fields: list[str], fmt: set[str]) -> str:
        for f in fields:
            if f not in APP_FIELDS:
                return f'Field "{f}" is not a valid field to query.\n\n'
        by_index = {int(g["index"]): g for g in self.fx["gpus"]}
        rows = []
        running = [
            {"gpu": g, "pid": t["pid"], "name": t["name"], "used_memory": f"{float(t['used_mib']):.0f} MiB"}
            for t in told()
            for g in t["gpus"]
        ]
        for p in [*self.fx.get("processes", []), *running]:
            g = by_index.get(int(p["gpu"]), {})
            source = {
                "pid": str(p["pid"]),
                "process_name": p["name"],
                "used_memory": p["used_memory"],
                "used_gpu_memory": p["used_memory"],
                "gpu_uuid": _pick(g.get("uuid", "[N/A]"), 0),
                "gpu_bus_id": _pick(g.get("pci.bus_id", "[N/A]"), 0),
                "gpu_name": _pick(g.get("name", "[N/A]"), 0),
                "gpu_serial": "[N/A]",
                "timestamp": datetime.now(UTC).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3],
            }
            rows.append([source[f] for f in fields])
        return self._csv(fields, rows, fmt)

    def _csv(self, fields: list[str], rows: list[list[str]], fmt: set[str]) -> str:
        out = []
        if "noheader" not in fmt:
            header = []
            for i, f in enumerate(fields):
                unit = _unit(rows[0][i]) if rows else None
                header.append(f"{f} [{unit}]" if unit and "nounits" not in fmt else f)
            out.append(", ".join(header))
        for row in rows:
            out.append(", ".join(_strip_unit(v) if "nounits" in fmt else v for v in row))
        return "".join(line + "\n" for line in out)

    def banner(self) -> str:
        fx = self.fx
        now = datetime.now(UTC).strftime("%a %b %d %H:%M:%S %Y")
        lines = [
            f"{now}       ",
            "+" + "-" * 89 + "+",
            f"| NVIDIA-SMI {fx['driver_version']:<22} Driver Version: {fx['driver_version']:<14} "
            f"CUDA Version: {fx['cuda_version']:<9}|",
            "+-----------------------------------------+------------------------+----------------------+",
        ]
        for g in fx["gpus"]:
            draw = _strip_unit(_pick(g.get("power.draw", "0 W"), self.tick)).split(".")[0]
            cap = _strip_unit(_pick(g.get("enforced.power.limit", "0 W"), 0)).split(".")[0]
            lines.append(
                f"| {g['index']:>3}  {_pick(g.get('name', ''), 0):<36}|   {_pick(g.get('pci.bus_id', ''), 0)} Off |"
                "                    0 |"
            )
            lines.append(
                f"| N/A   {_pick(g.get('temperature.gpu', '0'), 0)}C    {_pick(g.get('pstate', 'P0'), 0)}"
                f"             {draw}W / {cap}W |  {_strip_unit(_pick(g.get('memory.used', '0 MiB'), 0))}MiB / "
                f"{_strip_unit(_pick(g.get('memory.total', '0 MiB'), 0))}MiB |      "
                f"{_strip_unit(_pick(g.get('utilization.gpu', '0 %'), 0))}%      Default |"
            )
        lines.append(
            "+-----------------------------------------+------------------------+----------------------+"
        )
        return "\n".join(lines) + "\n"

    def full_query(self) -> str:
        fx = self.fx
        out = [
            "",
            "==============NVSMI LOG==============",
            "",
            f"{'Driver Version':<55}: {fx['driver_version']}",
            f"{'CUDA Version':<55}: {fx['cuda_version']}",
            "",
            f"{'Attached GPUs':<55}: {len(fx['gpus'])}",
        ]
        for g in fx["gpus"]:
            out.append(f"GPU {_pick(g.get('pci.bus_id', ''), 0)}")
            for label, key in (
                ("Product Name", "name"),
                ("GPU UUID", "uuid"),
                ("Current Power Limit", "power.limit"),
                ("Default Power Limit", "power.default_limit"),
                ("Min Power Limit", "power.min_limit"),
                ("Max Power Limit", "power.max_limit"),
            ):
                out.append(f"    {label:<51}: {_pick(g.get(key, 'N/A'), self.tick).strip('[]')}")
        return "\n".join(out) + "\n"


def _opt(args: list[str], *names: str) -> str | None:
    for i, a in enumerate(args):
        for n in names:
            if a == n and i + 1 < len(args):
                return args[i + 1]
            if a.startswith(n + "="):
                return a.split("=", 1)[1]
    return None


def main(args: list[str]) -> int:
    fixture = json.loads(Path(os.environ["FAKE_NVIDIA_SMI_FIXTURE"]).read_text())
    fake = Fake(fixture)
    select_raw = _opt(args, "-i", "--id")
    select = [int(x) for x in select_raw.split(",")] if select_raw else None
    if args[:1] == ["topo"]:
        sys.stdout.write(fixture.get("topo", ""))
        return 0
    if "-q" in args or "--query" in args:
        sys.stdout.write(fake.full_query())
        return 0
    fmt = set((_opt(args, "--format") or "csv").split(","))
    gpu_fields = _opt(args, "--query-gpu")
    app_fields = _opt(args, "--query-compute-apps")
    loop_ms = _opt(args, "-lms", "--loop-ms")
    loop_s = _opt(args, "-l", "--loop")
    period = int(loop_ms) / 1000 if loop_ms else (float(loop_s) if loop_s else None)
    if app_fields:
        text = fake.apps(app_fields.split(","), fmt)
        sys.stdout.write(text)
        return 2 if text.startswith("Field ") else 0
    if gpu_fields:
        fields = gpu_fields.split(",")
        first = True
        while True:
            text = fake.query(fields, fmt if first else fmt | {"noheader"}, select)
            sys.stdout.write(text)
            sys.stdout.flush()
            if text.startswith("Field "):
                return 2
            if period is None:
                return 0
            first = False
            fake.tick += 1
            time.sleep(period)
    if args:
        print(f"Invalid combination of input arguments: {' '.join(args)}", file=sys.stderr)
        return 2
    sys.stdout.write(fake.banner())
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (BrokenPipeError, KeyboardInterrupt):
        sys.exit(0)


def build_libcuda(fixture: Path | str, out_dir: Path) -> Path:
    """Compile testbed/fake_libcuda.c with the fixture's cuInit result and CUDA version.

    Returns the directory to put on ``LD_LIBRARY_PATH``; it is a ``.../compat`` directory when the
    fixture says forward-compat libraries are on the loader path, as on a misconfigured box.
    """
    import subprocess

    fx = json.loads(Path(fixture if Path(fixture).exists() else FIXTURES / f"{fixture}.json").read_text())
    major, minor = (int(x) for x in str(fx["cuda_version"]).split(".")[:2])
    lib_dir = out_dir / ("cuda-13/compat" if fx.get("compat_libs") else "lib")
    lib_dir.mkdir(parents=True, exist_ok=True)
    source = Path(__file__).resolve().parent / "fake_libcuda.c"
    subprocess.run(
        [
            "gcc",
            "-shared",
            "-fPIC",
            f"-DFAKE_CUINIT={int(fx.get('cuinit', 0))}",
            f"-DFAKE_CUDA_VERSION={major * 1000 + minor * 10}",
            "-o",
            str(lib_dir / "libcuda.so.1"),
            str(source),
        ],
        check=True,
        capture_output=True,
    )
    return lib_dir
