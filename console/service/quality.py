"""Quality intents: bind a harness's per-item results to the launch they ran against, or run the harness.

``import_quality`` reads an lm-evaluation-harness or Inspect AI output file (console/quality/read.py) and
binds it to a launch of this campaign: the exact arm row (argv, environment, GPUs), its layout, the kernel
lines its engine printed and its reasoning parser travel with the run, so a score never reads as the
accuracy of another layout. A file produced against another model than the launch serves is refused.
``run_quality`` drives lm-evaluation-harness against the launch's forwarded port where it is installed,
then imports what it wrote.
"""

from __future__ import annotations

import asyncio
import hashlib
import shutil
from dataclasses import dataclass
from pathlib import Path

from console.errors import InputError, Refused
from console.quality.harness import HarnessRun
from console.quality.read import read_harness_file
from console.readmodel.quality import quality_run
from console.readmodel.records import QualityRun
from console.service.base import ServiceError, reaching
from console.service.runs import RunIntents
from console.store.conditions import join_kernel_lines
from console.store.jsonutil import dumps
from console.store.launches import ArmRecord, Launch
from console.store.quality import NewQualityRun
from console.store.served import thinking
from console.timeutil import from_ms

LM_EVAL = ("lm_eval", "lm-eval")
"""The harness's console scripts (lm-evaluation-harness installs both)."""


@dataclass(frozen=True)
class QualityImported:
    run: QualityRun
    state: str  # imported, or unchanged (the same files were already imported against this launch)


@dataclass(frozen=True)
class Layout:
    tensor_parallel: int | None
    data_parallel: int | None  # None: the arm's argv is not recorded (imported figures)
    replicas: int | None
    expert_parallel: bool | None

    @property
    def words(self) -> str | None:
        if self.tensor_parallel is None:
            return None
        words = f"TP{self.tensor_parallel}"
        words += f" x DP{self.data_parallel}" if self.data_parallel and self.data_parallel > 1 else ""
        words += " + EP" if self.expert_parallel else ""
        return words + (f", {self.replicas} replicas" if self.replicas and self.replicas > 1 else "")


def layout_of(arm: ArmRecord | None) -> Layout:
    """The arm's parallel layout from its resolved argv and GPU groups."""
    if arm is None:
        return Layout(None, None, None, None)
    if not arm.argv:
        return Layout(arm.tensor_parallel, None, len(arm.gpus), None)
    dp = arm.flag("--data-parallel-size")
    return Layout(
        arm.tensor_parallel, int(dp) if dp else 1, len(arm.gpus), "--enable-expert-parallel" in arm.argv
    )


def same_model(served: str, harness_model: str) -> bool:
    """The harness names the served model itself (lm-eval ``model=NAME``) or with a provider prefix
    (Inspect ``vllm/NAME``, ``openai/NAME``)."""
    return harness_model == served or harness_model.endswith("/" + served)


def config_key(arm: ArmRecord | None, launch: Launch, run: HarnessRun) -> str:
    """Equal for repeats of one configuration: the same resolved arm (argv, environment, GPUs), harness,
    tasks, score, model and generation settings. The box is left out: the write-up's repeats ran on two hosts."""
    key = {
        "arm": launch.arm,
        "recipe_hash": arm.recipe_hash if arm else None,
        "harness": run.harness,
        "tasks": sorted(run.tasks),
        "metric": run.metric,
        "model": run.model,
        "sampling": run.sampling,
    }
    return hashlib.sha256(dumps(key).encode()).hexdigest()


def lm_eval_argv(
    exe: str, model: str, port: int, tasks: list[str], output: Path, limit: int | None, concurrency: int
) -> list[str]:
    """lm-evaluation-harness against an OpenAI-compatible chat endpoint, every sample logged."""
    argv = [
        exe,
        "--model",
        "local-chat-completions",
        "--model_args",
        f"model={model},base_url=http://127.0.0.1:{port}/v1/chat/completions,num_concurrent={concurrency},"
        "max_retries=3,tokenized_requests=False",
        "--tasks",
        ",".join(tasks),
        "--apply_chat_template",
        "--log_samples",
        "--output_path",
        str(output),
    ]
    return argv + (["--limit", str(limit)] if limit is not None else [])


class QualityIntents(RunIntents):
    def import_quality(
        self, path: Path, launch_id: str, metric: str | None = None, force: bool = False
    ) -> QualityImported:
        """Bind the harness output at ``path`` to ``launch_id`` and store it with every item."""
        launch = self.store.launches.get(launch_id)
        if launch is None:
            raise InputError(
                f"no launch {launch_id!r} in this state.db",
                "give the launch the harness ran against (the Arms view lists them)",
            )
        run = read_harness_file(path, metric)
        arm = self.store.launches.arm_record(launch.arm_id)
        served = arm.served_model_name if arm else None
        if served and run.model and not same_model(served, run.model) and not force:
            raise InputError(
                f"{path} was produced against model {run.model!r}, but launch {launch_id} serves {served!r}",
                "give the launch it ran against, or --force to bind it anyway",
            )
        existing = self.store.quality.find(run.digest, launch_id, run.metric)
        if existing is not None:
            return QualityImported(quality_run(self.store, existing), "unchanged")
        layout = layout_of(arm)
        kernel_line = join_kernel_lines(
            line for category, line in self.store.launches.kernel_lines(launch_id) if category != "config"
        )
        t_ms = run.t_ms if run.t_ms is not None else self.store.clock()
        # The switch the harness sent; else the server's template default; else the model's own default.
        profile = self.catalog.profile_of(launch.arm)
        thought = run.thinking or thinking(
            (),
            arm.flag("--default-chat-template-kwargs") if arm else None,
            profile.serving.thinking_default if profile else None,
        )
        new = NewQualityRun(
            label=f"{launch.arm} on {launch.box}",
            harness=run.harness,
            tasks=run.tasks,
            suite=f"{run.harness}: {', '.join(sorted(run.tasks))}",
            t_ms=t_ms,
            launch_id=launch_id,
            box=launch.box,
            arm=launch.arm,
            arm_id=launch.arm_id,
            recipe_hash=arm.recipe_hash if arm else None,
            model=run.model,
            tensor_parallel=layout.tensor_parallel,
            data_parallel=layout.data_parallel,
            replicas=layout.replicas,
            expert_parallel=layout.expert_parallel,
            layout=layout.words,
            kernel_line=kernel_line,
            reasoning_parser=arm.flag("--reasoning-parser") if arm else None,
            harness_version=run.harness_version,
            metric=run.metric,
            config_key=config_key(arm, launch, run),
            sampling=run.sampling,
            thinking=thought,
            source_file=str(path),
            digest=run.digest,
            unscored=run.unscored,
            configuration=f"{layout.words or 'layout not recorded'}; kernels: {kernel_line or 'not recorded'}",
            arm_model=served or (arm.model if arm else launch.arm),
        )
        return QualityImported(
            quality_run(self.store, self.store.quality.add_run(new, run.items)), "imported"
        )

    async def run_quality(
        self,
        launch_id: str,
        tasks: list[str],
        *,
        limit: int | None = None,
        concurrency: int = 8,
        output: Path | None = None,
    ) -> QualityImported:
        """Run lm-evaluation-harness on ``tasks`` against the serving launch, then import its output."""
        exe = next((found for name in LM_EVAL if (found := shutil.which(name))), None)
        if exe is None:
            raise ServiceError(
                "lm-evaluation-harness is not installed here (no lm_eval on PATH)",
                "install it (pip install 'lm-eval[api]') or run any harness yourself and "
                "`campaign quality import FILE --launch LAUNCH`",
            )
        if not tasks:
            raise InputError("--tasks: name at least one lm-eval task, e.g. gsm8k")
        launch = self.serving_launch(launch_id)
        model = self._served_name(launch)
        if launch.port is None:
            raise ServiceError(f"launch {launch_id} has no port recorded; relaunch it")
        out = (
            output
            or self.store.path.parent
            / "quality"
            / f"{launch_id}-{from_ms(self.store.clock()):%Y%m%dT%H%M%SZ}"
        )
        out.mkdir(parents=True, exist_ok=True)
        link = await self.link(launch.box)
        with reaching(launch.box):
            port = await link.forward(launch.port)
        proc = await asyncio.create_subprocess_exec(
            *lm_eval_argv(exe, model, port, tasks, out, limit, concurrency),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        output_text, _ = await proc.communicate()
        if proc.returncode != 0:
            last = (output_text.decode(errors="replace").strip().splitlines() or ["no output"])[-1]
            raise Refused(
                f"lm_eval exited with status {proc.returncode}: {last[:300]}", f"its output is in {out}"
            )
        return self.import_quality(out, launch_id)
