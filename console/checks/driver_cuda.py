"""Driver and CUDA: will the serving environment's CUDA initialise on this host's driver?

Campaign rule 8: on an RTX 5090 host with a 575 driver, the cu130 image's forward-compatibility shim made
every launch die with CUDA error 804, because forward compatibility works on data-centre GPUs only. The
evidence is judged in order of authority: ``cuInit(0)`` run inside the exact serving environment is
definitive; the minimum-driver table explains why; a consumer GPU with compat libraries on the loader
path is refused before launch even when cuInit was not run.
"""

from __future__ import annotations

from typing import Any

from agents.protocol import ProbeReport, ServingEnv
from console.checks.min_driver import MAJOR_FLOOR, MIN_DRIVER
from console.checks.probe_view import gpus, no_gpu_tooling, version_tuple
from console.checks.verdict import FAIL, OK, WARN, Verdict, VerdictName

CHECK = "driver"
NO_SERVING_ENV: ServingEnv = {
    "prefix": None,
    "python": None,
    "torch_cuda": None,
    "vllm_version": None,
    "cuinit": None,
    "cuinit_name": None,
    "libcuda_path": None,
    "compat_libs": [],
    "cuda_driver_version": None,
    "error": None,
}
"""What a probe without a serving environment says of it: nothing (every reader below treats None as unknown)."""

CUINIT_CODES: dict[int, tuple[str, str]] = {
    802: (
        "CUDA_ERROR_SYSTEM_NOT_READY",
        "the system is not ready for CUDA: on NVSwitch systems the fabric manager is not running; "
        "start nvidia-fabricmanager (same version as the driver) and probe again",
    ),
    803: (
        "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
        "an older forward-compatibility libcuda shadows the newer host driver; take the cuda/compat "
        "directory off LD_LIBRARY_PATH (and out of ldconfig) in the serving environment",
    ),
    804: (
        "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
        "forward-compatibility libraries are loaded but this GPU does not support them (consumer cards "
        "such as the RTX 5090); the write-up lost every launch on a 575-driver RTX 5090 host to this with a "
        "cu130 image; use an image built for the host driver's CUDA or a host with a newer driver",
    ),
    100: (
        "CUDA_ERROR_NO_DEVICE",
        "no CUDA device is visible in the serving environment (CUDA_VISIBLE_DEVICES empty, or a "
        "container started without GPUs)",
    ),
    999: ("CUDA_ERROR_UNKNOWN", "the driver reported an unknown error; check dmesg for Xid messages"),
}


def is_consumer(gpu_name: str | None) -> bool:
    """GeForce and TITAN cards: forward compatibility is not supported on them (NVIDIA compat guide)."""
    name = (gpu_name or "").lower()
    return "geforce" in name or "titan" in name


def newest_cuda_for(driver: str) -> str | None:
    """The newest CUDA release in the table whose minimum driver this host meets."""
    have = version_tuple(driver)
    fits = [c for c, floor in MIN_DRIVER.items() if version_tuple(floor) <= have]
    return max(fits, key=version_tuple) if fits else None


def driver_vs_cuda(driver: str, cuda: str) -> tuple[VerdictName, str, dict[str, Any]]:
    have = version_tuple(driver)
    major = version_tuple(cuda)[0]
    floor = MIN_DRIVER.get(".".join(str(p) for p in version_tuple(cuda)[:2]))
    major_floor = MAJOR_FLOOR.get(major)
    numbers = {
        "driver": driver,
        "cuda": cuda,
        "min_driver": floor,
        "major_floor": major_floor,
        "newest_cuda_for_driver": newest_cuda_for(driver),
    }
    if floor is None and major_floor is None:
        return (
            WARN,
            (
                f"serving environment built for CUDA {cuda}, which the minimum-driver table does not "
                f"know; check NVIDIA's release notes against driver {driver}"
            ),
            numbers,
        )
    if major_floor is not None and have < version_tuple(major_floor):
        best = numbers["newest_cuda_for_driver"]
        fix = f"use an image built for CUDA {best} or older" if best else "use an older CUDA image"
        return (
            FAIL,
            (
                f"host driver {driver} is older than {major_floor}, the minimum for any CUDA {major}.x; "
                f"the serving environment is built for CUDA {cuda}, so it can only start through "
                f"forward-compatibility libraries (data-centre GPUs only); {fix}, or a host with driver "
                f">= {floor or major_floor}"
            ),
            numbers,
        )
    if floor is not None and have < version_tuple(floor):
        return (
            WARN,
            (
                f"host driver {driver} is below {floor}, CUDA {cuda}'s own minimum; it runs under "
                f"minor-version compatibility but features that need the newer driver (PTX JIT of "
                f"newer code) fail; prefer driver >= {floor}"
            ),
            numbers,
        )
    need = floor or major_floor
    return OK, f"driver {driver} >= {need} needed by CUDA {cuda}", numbers


def check_driver_cuda(probe: ProbeReport) -> list[Verdict]:
    if no_gpu_tooling(probe):
        return [Verdict(CHECK, OK, "no NVIDIA GPU on this box: no driver/CUDA pairing to check", {})]
    env = probe.get("serving_env") or NO_SERVING_ENV
    driver = probe.get("driver_version")
    cuda = env.get("torch_cuda")
    names = sorted({g.get("name") or "?" for g in gpus(probe)})
    compat = _compat_libs(env)
    base = {
        "driver": driver,
        "cuda_driver_version": probe.get("cuda_driver_version"),
        "torch_cuda": cuda,
        "gpu_names": names,
        "serving_env": env.get("prefix"),
        "compat_libs": compat,
        "libcuda_path": env.get("libcuda_path"),
        "cuinit": env.get("cuinit"),
    }
    code = env.get("cuinit")
    findings = [
        _driver_finding(driver, cuda, env, base),
        _cuinit_finding(code, cuda, env, base),
        _consumer_compat_finding(names, compat, code, base),
    ]
    problems = [v for v in findings if v is not None and v.verdict != OK]
    if problems:
        return problems
    return [Verdict(CHECK, OK, "; ".join(v.reason for v in findings if v is not None), base)]


def _compat_libs(env: ServingEnv) -> list[str]:
    """The forward-compatibility libraries on the loader path, counting a libcuda loaded from a compat dir."""
    compat = list(env.get("compat_libs") or [])
    libcuda = env.get("libcuda_path")
    if libcuda and "/compat/" in libcuda and libcuda not in compat:
        compat.append(libcuda)
    return compat


def _driver_finding(driver: str | None, cuda: str | None, env: ServingEnv, base: dict[str, Any]) -> Verdict:
    """The host driver judged against the CUDA the serving environment was built for."""
    if driver is None:
        return Verdict(
            CHECK,
            WARN,
            "host driver version not readable from the probe; run `nvidia-smi` on the box",
            base,
        )
    if cuda is None:
        why, fix = _unknown_cuda_cause(env)
        return Verdict(CHECK, WARN, f"CUDA of the serving environment unknown ({why}); {fix}", base)
    try:
        verdict, text, numbers = driver_vs_cuda(driver, cuda)
    except ValueError as exc:
        return Verdict(CHECK, WARN, f"cannot compare driver and CUDA: {exc}", base)
    return Verdict(CHECK, verdict, text, {**base, **numbers})


def _unknown_cuda_cause(env: ServingEnv) -> tuple[str, str]:
    """Why the serving environment's CUDA is unknown, and what to do about it."""
    if error := env.get("error"):
        return error, "fix the serving env so torch's CUDA and cuInit can be checked before a launch"
    if env.get("prefix"):
        return (
            f"the Python in {env['prefix']} reports no torch CUDA build (torch missing or a CPU build)",
            "point the box's serving env at the environment that will serve (`--serving-env PREFIX`)",
        )
    return (
        "no serving environment is configured for this box",
        "set the box's serving env (`campaign box add --serving-env PREFIX`) so torch's CUDA and "
        "cuInit can be checked before a launch",
    )


def _cuinit_finding(
    code: int | None, cuda: str | None, env: ServingEnv, base: dict[str, Any]
) -> Verdict | None:
    """cuInit(0) in the serving environment, the definitive evidence; its absence matters only when the
    serving environment's CUDA is known (otherwise that is already the warning)."""
    if isinstance(code, int) and code != 0:
        name, meaning = CUINIT_CODES.get(
            code, (env.get("cuinit_name") or "unknown", "see the CUDA driver API")
        )
        return Verdict(
            CHECK, FAIL, f"cuInit(0) in the serving environment returned {code} ({name}): {meaning}", base
        )
    if code == 0:
        return Verdict(CHECK, OK, "cuInit(0) = 0 in the serving environment", base)
    if cuda is not None:
        return Verdict(
            CHECK,
            WARN,
            "cuInit(0) was not run in the serving environment "
            f"({env.get('error') or 'no result'}); the driver table is the only evidence",
            base,
        )
    return None


def _consumer_compat_finding(
    names: list[str], compat: list[str], code: int | None, base: dict[str, Any]
) -> Verdict | None:
    """Refuse compat libraries on a consumer GPU before launch, even when cuInit was not run; a cuInit
    that already returned 804 says the same and is enough."""
    if any(is_consumer(n) for n in names) and compat and not (isinstance(code, int) and code == 804):
        return Verdict(
            CHECK,
            FAIL,
            f"consumer GPU ({', '.join(names)}) with forward-compatibility libraries on the loader path "
            f"({', '.join(compat)}): CUDA refuses them on consumer cards (error 804); remove them from "
            "LD_LIBRARY_PATH / unset VLLM_ENABLE_CUDA_COMPATIBILITY, or use an image matching the host driver",
            base,
        )
    return None
