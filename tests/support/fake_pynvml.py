"""A stand-in for the ``pynvml`` module (nvidia-ml-py) whose calls can be made to fail, for machines without a GPU.

Why: agents/gpu.py must tell NVML's "no such value here" errors (read as None in silence) from a broken
binding (journaled, naming the call). The real binding only fails on real hardware, so a test puts this
module where ``load_nvml`` looks for the binding (``import pynvml``, i.e. ``sys.modules["pynvml"]``).

The error classes copy nvidia-ml-py 13.x's shape (pynvml.py, "Error Checking"): ``NVMLError(code)``
constructs the code's subclass (``NVMLError_NotSupported`` for 3...), each carrying the code as ``.value``.
Readings are an idle H200's (tests/fixtures/gpus/h200.json), in NVML's units (mW, bytes, mJ); the clocks-event
reasons 0x1 (GPU idle) and an energy counter as an H200 reads them idle (/work/shared/FACTS.md's measurement).

How a test drives it: ``binding(...).readings`` is the module's own copy of ``IDLE_H200``, read at each call,
so a test changes a reading at the moment it chooses by assigning to it, e.g.
``nvml.readings["nvmlDeviceGetPowerManagementLimit"] = 350000`` (a cap change) or
``nvml.readings["nvmlDeviceGetCurrentClocksEventReasons"] = 0x4`` (software power cap). A value that is a
callable is called with the call's arguments (the handle first): ``lambda h: energy[h.index]`` gives
each GPU its own counter.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

CODES = {
    "NVML_ERROR_UNINITIALIZED": 1,
    "NVML_ERROR_INVALID_ARGUMENT": 2,
    "NVML_ERROR_NOT_SUPPORTED": 3,
    "NVML_ERROR_NO_PERMISSION": 4,
    "NVML_ERROR_NOT_FOUND": 6,
    "NVML_ERROR_FUNCTION_NOT_FOUND": 13,
    "NVML_ERROR_GPU_IS_LOST": 15,
    "NVML_ERROR_ARGUMENT_VERSION_MISMATCH": 25,
    "NVML_ERROR_UNKNOWN": 999,
}


class NVMLError(Exception):
    _valClassMapping: dict[int, type[NVMLError]] = {}  # pynvml's own name
    value: int

    def __new__(cls, value: int) -> NVMLError:
        kind = NVMLError._valClassMapping.get(value, cls) if cls is NVMLError else cls
        obj = Exception.__new__(kind)
        obj.value = value
        return obj

    def __str__(self) -> str:
        return f"NVML Error with code {self.value}"


def _error_class(name: str, code: int) -> type[NVMLError]:
    def new(cls: type[NVMLError], *args: Any) -> NVMLError:
        return NVMLError.__new__(cls, code)

    words = name.replace("NVML_ERROR_", "").split("_")
    cls = type("NVMLError_" + "".join(w.capitalize() for w in words), (NVMLError,), {"__new__": new})
    NVMLError._valClassMapping[code] = cls
    return cls


ERROR_CLASSES = {name: _error_class(name, code) for name, code in CODES.items()}


class _Struct:
    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


IDLE_H200: dict[str, Any] = {
    "nvmlDeviceGetPowerUsage": 79180,
    "nvmlDeviceGetPowerManagementLimit": 700000,
    "nvmlDeviceGetEnforcedPowerLimit": 700000,
    "nvmlDeviceGetPowerManagementDefaultLimit": 700000,
    "nvmlDeviceGetPowerManagementLimitConstraints": (200000, 700000),
    "nvmlDeviceGetClockInfo": 345,
    "nvmlDeviceGetMaxClockInfo": 1980,
    "nvmlDeviceGetUtilizationRates": _Struct(gpu=0, memory=0),
    "nvmlDeviceGetMemoryInfo": _Struct(total=143771 * 1024 * 1024, used=0, free=143771 * 1024 * 1024),
    "nvmlDeviceGetTemperature": 36,
    "nvmlDeviceGetCurrentClocksEventReasons": 0x1,
    "nvmlDeviceGetTotalEnergyConsumption": 1_234_567_890,
    "nvmlDeviceGetCudaComputeCapability": (9, 0),
    "nvmlDeviceGetName": "NVIDIA H200",
    "nvmlDeviceGetUUID": "GPU-00000000-0000-0000-0000-000000000000",
    "nvmlDeviceGetPciInfo": _Struct(busId="00000000:00:06.0"),
    "nvmlDeviceGetComputeRunningProcesses": [],
    "nvmlSystemGetDriverVersion": "580.159.04",
    "nvmlSystemGetCudaDriverVersion": 13000,
}


def _answer(readings: dict[str, Any], name: str) -> Callable[..., Any]:
    """The call ``name`` answering from ``readings`` as it is at call time (a callable is called)."""

    def answer(*args: Any) -> Any:
        got = readings[name]
        return got(*args) if callable(got) else got

    return answer


def binding(gpus: int = 1, failing: dict[str, BaseException] | None = None) -> types.ModuleType:
    """A ``pynvml`` module over ``gpus`` idle H200s; each call named in ``failing`` raises its exception
    every time it is called. ``calls`` on the module counts the calls made, by name; ``readings`` holds the
    answers, which a test may change at any time (module docstring)."""
    failing = dict(failing or {})
    module = types.ModuleType("pynvml", "fake nvidia-ml-py (tests/support/fake_pynvml.py)")
    calls: dict[str, int] = {}

    def fn(name: str, answer: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            calls[name] = calls.get(name, 0) + 1
            if name in failing:
                raise failing[name]
            return answer(*args)

        call.__name__ = call.__qualname__ = name
        return call

    def handle(index: int) -> object:
        if not 0 <= index < gpus:
            raise NVMLError(CODES["NVML_ERROR_INVALID_ARGUMENT"])
        return _Struct(index=index)

    functions: dict[str, Callable[..., Any]] = {
        "nvmlInit": lambda: None,
        "nvmlShutdown": lambda: None,
        "nvmlDeviceGetCount": lambda: gpus,
        "nvmlDeviceGetHandleByIndex": handle,
        "nvmlSystemGetProcessName": lambda pid: f"process-{pid}",
    }
    readings = dict(IDLE_H200)
    for name in IDLE_H200:
        functions[name] = _answer(readings, name)
    for name, answer in functions.items():
        setattr(module, name, fn(name, answer))
    module.NVMLError = NVMLError  # type: ignore[attr-defined]
    for name, cls in ERROR_CLASSES.items():
        setattr(module, name, CODES[name])
        setattr(module, cls.__name__, cls)
    module.NVML_CLOCK_SM = 1  # type: ignore[attr-defined]
    module.NVML_TEMPERATURE_GPU = 0  # type: ignore[attr-defined]
    module.nvmlMemory_v2 = 0x02000028  # type: ignore[attr-defined]
    module.calls = calls  # type: ignore[attr-defined]
    module.readings = readings  # type: ignore[attr-defined]
    return module
