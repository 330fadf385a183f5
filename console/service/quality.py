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
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from console.errors import InputError, Refused
from console.quality.harness import HarnessRun, digest
from console.quality.read import read_harness_file
from console.quality.suites import SUITES, house
from console.quality.suites.runner import DEFAULT_TIMEOUT_S, Caps, Client, Endpoint, ItemResult, run_items
from console.readmodel.quality import quality_run
from console.readmodel.records import QualityRun
from console.service.base import ServiceError, reaching
from console.service.runs import RunIntents
from console.store.conditions import join_kernel_lines
from console.store.jsonutil import dumps
from console.store.launches import ArmRecord, Launch
from console.store.quality import NewQualityRun, QualityItem, unscored_key
from console.store.served import thinking, thinking_setting
from console.timeutil import from_ms

LM_EVAL = ("lm_eval", "lm-eval")
"""The harness's console scripts (lm-evaluation-harness installs both)."""


@dataclass(frozen=True)
class QualityImported:
    run: QualityRun
    state: str  # imported; unchanged (the same files were already imported against this launch); ran (a house
    # suite run now); completed (its unscored items run again and merged); complete (it had none to run)


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


def config_key(
    arm: ArmRecord | None,
    launch: Launch,
    run: HarnessRun,
    caps: Caps | None = None,
    request_timeout_s: float | None = None,
) -> str:
    """Equal for repeats of one configuration: the same resolved arm (argv, environment, GPUs), harness,
    tasks, score, model and generation settings (with the caps and request timeout where the console set
    them). The box is left out: the write-up's repeats ran on two hosts."""
    key: dict[str, Any] = {
        "arm": launch.arm,
        "recipe_hash": arm.recipe_hash if arm else None,
        "harness": run.harness,
        "tasks": sorted(run.tasks),
        "metric": run.metric,
        "model": run.model,
        "sampling": run.sampling,
    }
    if caps is not None or request_timeout_s is not None:
        key |= {"caps": caps.to_json() if caps else None, "request_timeout_s": request_timeout_s}
    return hashlib.sha256(dumps(key).encode()).hexdigest()


def lm_eval_argv(
    exe: str,
    model: str,
    port: int,
    tasks: list[str],
    output: Path,
    limit: int | None,
    concurrency: int,
    *,
    gen_kwargs: Mapping[str, Any] | None = None,
    request_timeout_s: float | None = None,
) -> list[str]:
    """lm-evaluation-harness against an OpenAI-compatible chat endpoint, every sample logged; ``gen_kwargs``
    (the profile's scalar sampling fields and ``max_gen_toks``, the cap) go as ``--gen_kwargs``, the request
    timeout as the model's ``timeout`` (lm-eval's own default is 300 s; seed-gaps F20)."""
    timeout = f",timeout={request_timeout_s:g}" if request_timeout_s is not None else ""
    argv = [
        exe,
        "--model",
        "local-chat-completions",
        "--model_args",
        f"model={model},base_url=http://127.0.0.1:{port}/v1/chat/completions,num_concurrent={concurrency},"
        f"max_retries=3,tokenized_requests=False{timeout}",
        "--tasks",
        ",".join(tasks),
        "--apply_chat_template",
        "--log_samples",
        "--output_path",
        str(output),
    ]
    if gen_kwargs:
        argv += ["--gen_kwargs", ",".join(f"{k}={v}" for k, v in gen_kwargs.items())]
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
        return QualityImported(quality_run(self.store, self._bind(run, launch, path)), "imported")

    def _bind(
        self,
        run: HarnessRun,
        launch: Launch,
        path: Path,
        *,
        suite: str | None = None,
        caps: Caps | None = None,
        request_timeout_s: float | None = None,
        unscored_items: Mapping[str, str] | None = None,
    ) -> int:
        """Store ``run`` bound to ``launch``: its exact arm row, layout, kernel lines and reasoning parser."""
        arm = self.store.launches.arm_record(launch.arm_id)
        served = arm.served_model_name if arm else None
        layout = layout_of(arm)
        kernel_line = join_kernel_lines(
            line for category, line in self.store.launches.kernel_lines(launch.id) if category != "config"
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
            suite=suite or f"{run.harness}: {', '.join(sorted(run.tasks))}",
            t_ms=t_ms,
            launch_id=launch.id,
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
            config_key=config_key(arm, launch, run, caps, request_timeout_s),
            sampling=run.sampling,
            thinking=thought,
            source_file=str(path),
            digest=run.digest,
            unscored=run.unscored,
            configuration=f"{layout.words or 'layout not recorded'}; kernels: {kernel_line or 'not recorded'}",
            arm_model=served or (arm.model if arm else launch.arm),
            caps=None if caps is None else caps.to_json(),
            request_timeout_s=request_timeout_s,
            unscored_items=unscored_items,
        )
        return self.store.quality.add_run(new, run.items)

    async def run_quality(
        self,
        launch_id: str,
        tasks: list[str],
        *,
        limit: int | None = None,
        concurrency: int = 8,
        output: Path | None = None,
        cap: int | None = None,
        request_timeout_s: float | None = DEFAULT_TIMEOUT_S,
    ) -> QualityImported:
        """Run lm-evaluation-harness on ``tasks`` against the serving launch with the arm's profile sampling,
        the cap as ``max_gen_toks`` and the request timeout, then import its output. ``chat_template_kwargs``
        cannot travel in lm-eval's ``key=value`` generation settings: the server's
        ``--default-chat-template-kwargs`` (from the same profile) applies them."""
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
            *lm_eval_argv(
                exe,
                model,
                port,
                tasks,
                out,
                limit,
                concurrency,
                gen_kwargs=self._lm_eval_gen_kwargs(launch, cap),
                request_timeout_s=request_timeout_s,
            ),
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

    async def run_suite(
        self,
        launch_id: str,
        suite: str = house.NAME,
        *,
        caps: Caps | None = None,
        request_timeout_s: float = DEFAULT_TIMEOUT_S,
        concurrency: int = 8,
        output: Path | None = None,
        base_url: str | None = None,
    ) -> QualityImported:
        """Run a house suite (``seed6``) against the serving launch with its arm's vendor profile, the caps and
        the request timeout, score every answer here, and store the run bound to the launch with each item
        under its family; items that timed out or failed are stored as unscored, with why."""
        if suite not in SUITES:
            raise InputError(f"--suite {suite}: no such suite", f"the suites are: {', '.join(SUITES)}")
        caps = caps or Caps()
        launch = self.serving_launch(launch_id)
        profile = self.catalog.profile_of(launch.arm)
        top, extra = profile.serving.request_params() if profile else ({}, {})
        async with self._endpoint(launch, {**top, **extra}, request_timeout_s, base_url) as endpoint:
            client = Client(endpoint)
            window = await asyncio.to_thread(client.window) or self._arm_window(launch)
            items = await asyncio.to_thread(house.items, window, lambda m: _count(client, m))
            results = await run_items(endpoint, items, caps, window, concurrency)
        t_ms = self.store.clock()
        out = output or self._suite_file(launch.id, t_ms)
        run = _suite_run(endpoint, results, t_ms, out, window)
        unscored = {
            unscored_key(r.family, r.item_id): r.reason or "no score" for r in results if r.score is None
        }
        if not run.items:
            raise Refused(
                f"no item of {suite} was scored against launch {launch.id}: {next(iter(unscored.values()))}",
                f"every answer is in {out}; raise --request-timeout, or check the server",
            )
        run_id = self._bind(
            run,
            launch,
            out,
            suite=house.suite_label(),
            caps=caps,
            request_timeout_s=request_timeout_s,
            unscored_items=unscored,
        )
        return QualityImported(quality_run(self.store, run_id), "ran")

    async def complete_suite(
        self,
        run_id: int,
        concurrency: int = 8,
        output: Path | None = None,
        base_url: str | None = None,
    ) -> QualityImported:
        """Run again only the unscored items of house-suite run ``run_id``, against its launch under its own
        caps, timeout and request fields, and merge what they score into it (seed-gaps F20: completing the
        items a timeout dropped moved every affected row down)."""
        prior = quality_run(self.store, run_id)
        if prior.harness != HARNESS or prior.suite != house.suite_label():
            raise InputError(
                f"--complete {run_id}: quality run {run_id} is {prior.suite}, not a run of {house.suite_label()}",
                "complete a `campaign quality run LAUNCH --suite seed6` run; re-import a harness's file instead",
            )
        if not prior.unscored_items:
            return QualityImported(prior, "complete")
        assert prior.launch_id is not None  # a house-suite run is always bound to its launch
        launch = self.serving_launch(prior.launch_id)
        caps = Caps.from_json(prior.caps or {})
        timeout = prior.request_timeout_s or DEFAULT_TIMEOUT_S
        request = {k: v for k, v in prior.sampling.items() if k != WINDOW_KEY}
        async with self._endpoint(launch, request, timeout, base_url) as endpoint:
            client = Client(endpoint)
            window = prior.sampling.get(WINDOW_KEY)
            every = await asyncio.to_thread(house.items, window, lambda m: _count(client, m))
            wanted = [i for i in every if unscored_key(i.family, i.item_id) in prior.unscored_items]
            results = await run_items(endpoint, wanted, caps, window, concurrency)
        t_ms = self.store.clock()
        out = output or self._suite_file(launch.id, t_ms, f"-complete-{run_id}")
        run = _suite_run(endpoint, results, t_ms, out, window)
        still = {
            unscored_key(r.family, r.item_id): r.reason or "no score" for r in results if r.score is None
        }
        missing = set(prior.unscored_items) - {unscored_key(i.family, i.item_id) for i in wanted}
        still |= {key: f"{prior.unscored_items[key]} (no longer in {house.suite_label()})" for key in missing}
        self.store.quality.complete(run_id, run.items, still)
        return QualityImported(quality_run(self.store, run_id), "completed")

    def _lm_eval_gen_kwargs(self, launch: Launch, cap: int | None) -> dict[str, Any]:
        """The profile's scalar sampling fields, and ``max_gen_toks`` where a cap is given."""
        profile = self.catalog.profile_of(launch.arm)
        top, extra = profile.serving.request_params() if profile else ({}, {})
        fields = {k: v for k, v in {**top, **extra}.items() if isinstance(v, int | float | str)}
        return fields | ({"max_gen_toks": cap} if cap is not None else {})

    @asynccontextmanager
    async def _endpoint(
        self, launch: Launch, request: Mapping[str, Any], timeout_s: float, base_url: str | None
    ) -> AsyncIterator[Endpoint]:
        """The launch's server through the box link's forwarded port (or at ``base_url``, where the console
        reaches it directly), with the request fields to send."""
        model = self._served_name(launch)
        if base_url is not None:
            yield Endpoint(base_url, model, dict(request), timeout_s)
            return
        if launch.port is None:
            raise ServiceError(f"launch {launch.id} has no port recorded; relaunch it")
        link = await self.link(launch.box)
        with reaching(launch.box):
            port = await link.forward(launch.port)
        yield Endpoint(f"http://127.0.0.1:{port}", model, dict(request), timeout_s)

    def _arm_window(self, launch: Launch) -> int | None:
        """The arm's ``--max-model-len``, where the server does not report its window."""
        arm = self.store.launches.arm_record(launch.arm_id)
        value = arm.flag("--max-model-len") if arm else None
        return int(value) if value and value.isdigit() else None

    def _suite_file(self, launch_id: str, t_ms: int, suffix: str = "") -> Path:
        folder = self.store.path.parent / "quality"
        folder.mkdir(parents=True, exist_ok=True)
        return folder / f"{launch_id}-{house.NAME}-{from_ms(t_ms):%Y%m%dT%H%M%S%fZ}{suffix}.json"


HARNESS = "campaign"
"""The harness name of runs of the console's own suites."""
WINDOW_KEY = "max_model_len"
"""Stored with the request fields: the window the long-context items were sized to."""


def _count(client: Client, messages: house.Messages) -> int | None:
    counted = client.tokenize(messages)
    return counted[0] if counted else None


def _suite_run(
    endpoint: Endpoint, results: list[ItemResult], t_ms: int, out: Path, window: int | None
) -> HarnessRun:
    """The results as a run (scored items only), written to ``out`` first: every answer, score and reason,
    so the stored run has a file behind it like an imported one (its digest is of those bytes)."""
    data = dumps(
        {
            "suite": house.suite_label(),
            "seed": house.SEED,
            "t_ms": t_ms,
            "model": endpoint.model,
            "request": dict(endpoint.request),
            "request_timeout_s": endpoint.timeout_s,
            "max_model_len": window,
            "items": [asdict(r) for r in results],
        }
    ).encode()
    out.write_bytes(data)
    items = tuple(
        QualityItem(r.family, r.item_id, r.score, r.truncated, r.output_tokens)
        for r in results
        if r.score is not None
    )
    sampling = {**endpoint.request, WINDOW_KEY: window}
    return HarnessRun(
        harness=HARNESS,
        harness_version=house.suite_label(),
        tasks=tuple(f for f in house.FAMILIES if any(r.family == f for r in results)),
        metric="correct",
        model=endpoint.model,
        t_ms=t_ms,
        sampling=sampling,
        thinking=thinking_setting(endpoint.request),
        items=items,
        unscored=sum(r.score is None for r in results),
        files=(str(out),),
        digest=digest([(out.name, data)]),
    )
