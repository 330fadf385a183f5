"""Setup intent: build a box's serving environment from the lock (``campaign box setup NAME``).

WHY this order: the write-up lost every launch on a 575-driver RTX 5090 host to CUDA error 804 after the cu130
stack was in place, so the driver is judged against the lock's CUDA (console/checks/driver_cuda.py, on a fresh
probe) before anything is installed; and its image shipped a FlashInfer cubin that did not match, so the kernel
binaries are compared with FlashInfer's own version after installing. The box runs ``uv`` through its agent
(agents/uv.py), one argv list per step; an env already at the lock's versions is left as it is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from agents.protocol import UvArgs, UvResult
from console.checks.driver_cuda import driver_vs_cuda, newest_cuda_for
from console.checks.min_driver import MIN_DRIVER
from console.checks.verdict import FAIL
from console.errors import InputError
from console.recipes.requirement import REPORTED
from console.recipes.serving_lock import CUBIN_OF, ServingLock, check_url, load_lock, normalise
from console.service.base import ServiceError, reaching
from console.service.checks import CheckIntents

UV_STEP_TIMEOUT_S = 1800.0
"""One ``uv pip install`` of the vLLM stack downloads gigabytes; the link waits a little longer than uv may run."""
_PLAIN_PATH = re.compile(r"^/[A-Za-z0-9._/+@-]+$")


@dataclass(frozen=True)
class SetupOutcome:
    """What ``box setup`` did (or, dry, would do): ``action`` is installed, unchanged or planned; ``steps``
    the uv argv lists run or planned; ``versions`` what the env reports for each locked package."""

    box: str
    env_dir: str
    action: str
    cuda: str
    driver: str
    steps: tuple[tuple[str, ...], ...]
    versions: dict[str, str]

    def __str__(self) -> str:
        said = {
            "installed": "installed the locked serving environment",
            "unchanged": "already at the lock's versions; nothing changed",
            "planned": "would run the steps below (dry run; nothing installed)",
        }[self.action]
        return f"box {self.box}: {self.env_dir}: {said} (driver {self.driver}, CUDA {self.cuda})"


class SetupIntents(CheckIntents):
    async def setup_box(
        self,
        name: str,
        *,
        env_dir: str | None = None,
        index: str | None = None,
        lock_path: str | None = None,
        dry_run: bool = False,
        progress: Callable[[str], None] | None = None,
    ) -> SetupOutcome:
        """Probe the box, refuse a driver that cannot run the lock's CUDA, then install the lock's pins with uv
        (skipped when the env already reports them), check the kernel binaries and set the box's serving env.

        ``index`` (a flat directory or page of wheels) replaces every index of the lock: the box installs from
        it alone, offline. Nothing is installed on a refusal.
        """
        box = self.store.boxes.get(name)
        lock = load_lock(Path(lock_path) if lock_path else None)
        target = env_dir or box.serving_env
        if target is None:
            raise InputError(
                f"box {name}: no serving env to set up", "give --env-dir PATH (an absolute path on the box)"
            )
        if not _PLAIN_PATH.match(target) or ".." in PurePosixPath(target).parts:
            raise InputError(
                f"--env-dir {target!r}: not a plain absolute path",
                "use '/', letters, digits and '._+@-' (no '..')",
            )
        if index is not None:
            check_url(index, "--index")
        say = progress or (lambda _line: None)
        say(f"probing box {name} ...")
        driver = _driver_for(name, lock, await self.probe(name))
        python = f"{target}/bin/python"
        installed = await self._versions(name, python)
        plan = _plan(lock, target, python, index, fresh=installed is None)
        if installed is not None and _differences(lock, installed) == []:
            _check_kernels(name, lock, installed)
            self.store.boxes.update(name, serving_env=target, serving_versions=_engine(installed))
            return SetupOutcome(name, target, "unchanged", lock.cuda, driver, (), installed)
        if dry_run:
            return SetupOutcome(name, target, "planned", lock.cuda, driver, plan, installed or {})
        for n, step in enumerate(plan, 1):
            what = " ".join(a for a in step if "==" in a) or step[-1]
            say(f"box {name}: step {n}/{len(plan)}: uv {' '.join(step[:2])} {what} ...")
            result = await self._uv(name, list(step))
            if result["rc"] != 0:
                last = (result["stderr"].strip().splitlines() or ["(no output)"])[-1]
                raise ServiceError(
                    f"box {name}: uv {' '.join(step[:2])} exited {result['rc']}: {last}",
                    "fix the index or the lock and run `campaign box setup` again (finished steps are kept)",
                )
        installed = await self._versions(name, python) or {}
        missing = _differences(lock, installed)
        if missing:
            raise ServiceError(
                f"box {name}: after installing, {'; '.join(missing)}", "check the index and retry"
            )
        _check_kernels(name, lock, installed)
        self.store.boxes.update(name, serving_env=target, serving_versions=_engine(installed))
        return SetupOutcome(name, target, "installed", lock.cuda, driver, plan, installed)

    async def _uv(self, name: str, argv: list[str]) -> UvResult:
        link = await self.link(name)
        args: UvArgs = {"args": argv, "timeout_s": UV_STEP_TIMEOUT_S}
        with reaching(name):
            return await link.command("uv", args, answer=UvResult, timeout=UV_STEP_TIMEOUT_S + 60)

    async def _versions(self, name: str, python: str) -> dict[str, str] | None:
        """What the env's python has installed (normalised names); None when there is no env there yet."""
        result = await self._uv(name, ["pip", "list", "--python", python, "--format", "json"])
        if result["rc"] != 0:
            return None
        try:
            rows: list[dict[str, Any]] = json.loads(result["stdout"])
            return {normalise(str(r["name"])): str(r["version"]) for r in rows}
        except (ValueError, KeyError, TypeError) as exc:
            raise ServiceError(f"box {name}: uv pip list printed no package list ({exc})") from exc


def _driver_for(name: str, lock: ServingLock, probe: Any) -> str:
    """The box's driver, refused (error 804) when it cannot run the lock's CUDA: the one driver table's rule."""
    driver = probe.get("driver_version")
    if not driver:
        raise InputError(
            f"box {name}: the probe found no NVIDIA driver; the lock needs CUDA {lock.cuda} "
            f"(driver >= {MIN_DRIVER[lock.cuda]})",
            "install the driver (nvidia-smi must answer on the box), then run setup again",
        )
    verdict, _text, _numbers = driver_vs_cuda(driver, lock.cuda)
    if verdict == FAIL:
        newest = newest_cuda_for(driver) or "none in the table"
        raise InputError(
            f"box {name}: driver {driver} supports CUDA {newest}, the lock needs CUDA {lock.cuda} "
            f"(driver >= {MIN_DRIVER[lock.cuda]}); every launch would die with CUDA error 804; nothing installed",
            f"upgrade the box's driver, or set up with a lock built for CUDA {newest} (--lock FILE)",
        )
    return str(driver)


def _plan(
    lock: ServingLock, target: str, python: str, index: str | None, *, fresh: bool
) -> tuple[tuple[str, ...], ...]:
    """The uv argv lists: a venv when there is none, the packages from the indexes, then the cubin alone."""
    if index is not None:
        main: list[str] = ["--no-index", "--find-links", index]
        cubin = main
    else:
        main = ["--index-url", lock.index_url, "--index-strategy", "unsafe-best-match"]
        main += [a for url in lock.extra_index_urls for a in ("--extra-index-url", url)]
        cubin = ["--index-url", lock.cubin_index_url]
    steps: list[tuple[str, ...]] = [("venv", target)] if fresh else []
    steps.append(("pip", "install", "--python", python, *main, *lock.specs(lock.packages)))
    steps.append(("pip", "install", "--python", python, "--no-deps", *cubin, *lock.specs(lock.cubin)))
    return tuple(steps)


def _engine(installed: dict[str, str]) -> str:
    """The engine stack's versions as kept with the box (the ones the probe reports, console/checks/serving_env.py)."""
    return json.dumps({n: v for n, v in sorted(installed.items()) if n in REPORTED})


def _differences(lock: ServingLock, installed: dict[str, str]) -> list[str]:
    return [
        f"{n} is {installed.get(n, 'not installed')}, the lock pins {v}"
        for n, v in lock.pins.items()
        if installed.get(n) != v
    ]


def _check_kernels(name: str, lock: ServingLock, installed: dict[str, str]) -> None:
    """The kernel binaries match: each FlashInfer binary package at FlashInfer's version, torch built for the
    lock's CUDA (its local tag, ``+cu130``). A mismatch is the write-up's image cubin: one line, both versions."""
    for binary, owner in CUBIN_OF.items():
        have, want = installed.get(binary), installed.get(owner)
        if binary in lock.pins and have != want:
            raise ServiceError(
                f"box {name}: kernel binaries mismatch: {binary} {have} but {owner} {want}",
                f"pin {binary} to {want} in the lock and run setup again",
            )
    torch = installed.get("torch", "")
    tag = "cu" + lock.cuda.replace(".", "")
    if "torch" in lock.pins and torch.partition("+")[2] != tag:
        raise ServiceError(
            f"box {name}: torch {torch} is not built for CUDA {lock.cuda} ({tag})",
            "pin torch to a +" + tag + " build in the lock and run setup again",
        )
