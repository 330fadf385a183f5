"""Arms that span several boxes through vLLM's own multi-node serving: the plan of head and workers.

WHY a plan of its own and not more replicas: a multi-box arm is ONE server whose ranks sit on several
boxes, so its argv differ per box (the head serves the API, the others run headless ranks or Ray nodes)
and must agree with each other (sizes, ranks, the head's address). An arm says ``nodes = N``
(docs/multinode.md):

- ``data_parallel`` > 1: vLLM's data parallel across nodes. The ranks split evenly, ``data_parallel / N``
  on each box, each of ``tensor_parallel`` cards. The head runs ``vllm serve ... --data-parallel-size D
  --data-parallel-size-local L --data-parallel-address HEAD --data-parallel-rpc-port P``; box i runs the
  same with ``--headless --data-parallel-start-rank i*L``.
- ``data_parallel`` 1: one pipeline stage per box, ``tensor_parallel`` cards each, which vLLM runs through
  Ray: ``ray start --head`` on the head, ``ray start --address HEAD:PORT`` on the others, then ``vllm serve
  ... --pipeline-parallel-size N --distributed-executor-backend ray`` on the head.

Every server still binds its API to 127.0.0.1 (reached through the SSH tunnel). The only other addresses
in any argv are the inter-node ones the plan itself writes, each taken from a box's registered address
(the host the console reaches it by); ``address_problem`` refuses the rest and ``plan`` checks every argv
it built once more (``argv_problem``), as resolve does for one box (console/recipes/guard.py says why).
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from console.recipes.guard import env_problem, flag_problem, listen_problem, value_problem
from console.recipes.model import Arm, BoxSpec, Catalog, Profile, ServingProfile
from console.recipes.resolve import LOOPBACK, ResolveError, effective_arm, server_args

DP_RPC_PORT = 13345
"""The head's data-parallel RPC port (the port of vLLM's multi-node data-parallel example)."""
RAY_PORT = 6379
"""The Ray head's GCS port (Ray's default)."""

PLAN_FLAGS = {
    "--headless": "the plan runs the non-head boxes headless",
    "--data-parallel-size-local": "the plan splits data_parallel evenly over the arm's nodes",
    "--data-parallel-start-rank": "the plan numbers each box's first rank",
    "--data-parallel-rank": "the plan numbers the ranks (external load balancing is not planned)",
    "--data-parallel-backend": "the plan runs data parallel with vLLM's mp backend",
    "--data-parallel-hybrid-lb": "the head balances over every rank",
    "--data-parallel-external-lb": "the head balances over every rank",
    "--pipeline-parallel-size": "a Ray arm runs one pipeline stage per box: set nodes",
    "--distributed-executor-backend": "the plan chooses Ray where vLLM needs it",
    "--nnodes": "set the arm's nodes",
    "--node-rank": "the plan numbers the boxes",
    "--api-server-count": "the head runs one API server on the port the console assigns",
}
"""vLLM options the plan writes for a multi-box arm: its recipe may not set them as free flags."""

RAY_FLAGS = frozenset(
    (
        "--block",
        "--disable-usage-stats",
        "--head",
        "--port",
        "--node-ip-address",
        "--include-dashboard",
        "--address",
    )
)
"""The options of the ``ray start`` argv the plan writes; no other reaches a Ray node."""
ADDRESS_FLAGS = ("--data-parallel-address", "--node-ip-address", "--address")
"""Where a planned argv names an inter-node address (vLLM's head address, Ray's node and head addresses)."""


def mode(arm: Arm) -> str:
    """``dp``: data parallel across nodes; ``ray``: one pipeline stage per node, joined by Ray."""
    return "dp" if arm.data_parallel > 1 else "ray"


def node_gpus(arm: Arm) -> int:
    """Cards one box of the arm uses: its share of the ranks times tensor_parallel (one stage under Ray)."""
    if arm.nodes > 1 and mode(arm) == "dp":
        return arm.data_parallel // arm.nodes * arm.tensor_parallel
    return arm.gpus_per_server if arm.nodes == 1 else arm.tensor_parallel


def weight_shards(arm: Arm) -> int:
    """Over how many cards the weights split: TP x (DP under expert parallel), or TP x stages under Ray."""
    if arm.nodes > 1 and mode(arm) == "ray":
        return arm.tensor_parallel * arm.nodes
    return arm.tensor_parallel * (arm.data_parallel if arm.expert_parallel else 1)


def arm_layout_problem(arm: Arm) -> str | None:
    """Why an arm's ``nodes`` cannot be laid out, or None; the loader refuses it at the key, naming the arm."""
    if arm.nodes == 1:
        return None
    if arm.replicas not in (None, 1):
        return (
            f"it spans {arm.nodes} boxes as one server and sets replicas {arm.replicas}: a multi-box arm has "
            "one head; remove replicas"
        )
    if arm.data_parallel > 1 and arm.data_parallel % arm.nodes:
        return (
            f"data_parallel {arm.data_parallel} does not split evenly over {arm.nodes} boxes; make "
            "data_parallel a multiple of nodes"
        )
    for name in arm.flags:
        problem = flag_problem(name, PLAN_FLAGS)
        if problem:
            return f"it spans {arm.nodes} boxes: {problem}"
    return None


@dataclass(frozen=True)
class PlanBox:
    """A box as the plan needs it: what resolve knows of it, and the address it is registered by."""

    spec: BoxSpec
    address: str | None


def address_problem(box: PlanBox) -> str | None:
    """Why a box's registered address cannot carry the arm's inter-node traffic, or None.

    An IP address, since vLLM's head binds its RPC port on it and Ray binds its node there; never an
    unspecified or multicast one (0.0.0.0 would open the port on every interface)."""
    if box.address is None:
        return (
            f"box {box.spec.name} has no registered address: a multi-box arm's boxes are registered by the "
            f"address the others reach (`campaign box add {box.spec.name} --ssh USER@IP`)"
        )
    try:
        ip = ipaddress.ip_address(box.address)
    except ValueError:
        return (
            f"box {box.spec.name} is registered by {box.address!r}, not an IP address: vLLM binds the head's "
            "RPC port on it; register the box by its IP on the network its peers share"
        )
    if ip.is_unspecified or ip.is_multicast:
        return (
            f"box {box.spec.name}'s address {box.address} is not one host's: register the box by its own IP"
        )
    return None


@dataclass(frozen=True)
class Process:
    """One process of the plan on one box; launched by that box's agent like a replica.

    ``headless``: it serves no HTTP API (a headless rank, a Ray node), so its agent counts it serving
    while it runs; the arm serves when the head's API answers, which vLLM opens once every rank joined."""

    box: str
    role: str
    """``head`` (vLLM's API), ``worker`` (headless data-parallel ranks), ``ray-head``, ``ray-worker``."""
    argv: list[str]
    env: dict[str, str]
    gpus: list[int]
    port: int
    """The API port: the head's own, and the arm's on every other process (what the launch row records)."""
    headless: bool
    start_rank: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "box": self.box,
            "role": self.role,
            "argv": self.argv,
            "env": self.env,
            "gpus": self.gpus,
            "port": self.port,
            "headless": self.headless,
            "start_rank": self.start_rank,
        }


@dataclass(frozen=True)
class MultiNodePlan:
    """Every process of a multi-box arm, in launch order (a kill goes in reverse)."""

    arm: str
    mode: str
    boxes: list[str]
    model: str
    served_model_name: str
    head_address: str
    inter_node_port: int
    """The data-parallel RPC port (``dp``) or the Ray head's port (``ray``)."""
    tensor_parallel: int
    data_parallel: int
    expert_parallel: bool
    processes: list[Process]
    profile: ServingProfile

    @property
    def head(self) -> Process:
        """The process serving the API: the arm's readiness and its load generator's target."""
        return next(p for p in self.processes if p.role == "head")

    @property
    def recipe_hash(self) -> str:
        """sha256 of every process's {box, role, argv, env, gpus}: equal hashes mean identical launches."""
        body = [
            {"box": p.box, "role": p.role, "argv": p.argv, "env": p.env, "gpus": p.gpus}
            for p in self.processes
        ]
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()

    def to_dict(self) -> dict[str, Any]:
        return {
            "arm": self.arm,
            "mode": self.mode,
            "boxes": self.boxes,
            "model": self.model,
            "served_model_name": self.served_model_name,
            "head_address": self.head_address,
            "inter_node_port": self.inter_node_port,
            "tensor_parallel": self.tensor_parallel,
            "data_parallel": self.data_parallel,
            "expert_parallel": self.expert_parallel,
            "argv": self.head.argv,
            "env": self.head.env,
            "processes": [p.to_dict() for p in self.processes],
            "profile": self.profile.to_dict(),
            "recipe_hash": self.recipe_hash,
        }


def generic_boxes(arm: Arm) -> list[PlanBox]:
    """Stand-ins for showing a multi-box arm without its boxes: the cards one node needs, placeholder addresses."""
    need = node_gpus(arm)
    return [
        PlanBox(
            BoxSpec(
                name=f"(node {i})",
                gpu_count=0 if need == 1 else need,
                model_root="<model_root>",
                generic=True,
            ),
            f"<node {i} address>",
        )
        for i in range(arm.nodes)
    ]


def _node_gpus(arm: Arm, box: BoxSpec) -> list[int]:
    need = node_gpus(arm)
    if box.gpu_count == 0:
        if arm.device == "gpu" and not box.generic:
            raise ResolveError(
                f"arm {arm.name!r} runs on GPUs and box {box.name} has none measured",
                f"`campaign check {box.name}` probes its GPUs",
            )
        return []
    if need > box.gpu_count:
        raise ResolveError(
            f"arm {arm.name!r} needs {need} GPUs on each of its {arm.nodes} boxes; box {box.name} has "
            f"{box.gpu_count}"
        )
    return list(range(need))


def _model(arm: Arm, checkpoint: str, local: bool, box: BoxSpec) -> str:
    if not local:
        return checkpoint
    if not box.model_root:
        raise ResolveError(
            f"arm {arm.name!r} serves the local checkpoint {checkpoint!r}, but box {box.name} has no "
            f"model_root; set it with `campaign box set {box.name} --model-root DIR`"
        )
    return f"{box.model_root.rstrip('/')}/{checkpoint}"


def _bin(box: BoxSpec, name: str) -> str:
    return f"{box.serving_env.rstrip('/')}/bin/{name}" if box.serving_env else name


def argv_problem(process: Process, own: str, head: str, owned: dict[str, str]) -> str | None:
    """Why a planned argv could listen or connect anywhere but where the plan put it, or None.

    vLLM argv: ``listen_problem`` with the plan's own binding flags as the only ones allowed. Every argv: an
    address flag names the head's registered address (``--data-parallel-address``, ``--address``) or the
    box's own (``--node-ip-address``), and no element is read as an option it is not."""
    argv = process.argv
    for flag, value in zip(argv, argv[1:], strict=False):
        if flag in ADDRESS_FLAGS:
            want = own if flag == "--node-ip-address" else head
            got = value.rsplit(":", 1)[0].strip("[]") if flag == "--address" else value
            if got != want:
                return f"{flag} {value}: not the registered address {want} of the box it names"
    if process.role in ("head", "worker"):
        return listen_problem(argv[2:], owned)
    odd = [x for x in argv[1:] if x.startswith("-") and x not in RAY_FLAGS]
    if odd:
        return f"ray argv element {odd[0]!r} is not an option the plan writes"
    return next(filter(None, (value_problem(x) for x in argv[1:] if x not in RAY_FLAGS)), None)


def _check_boxes(a: Arm, boxes: Sequence[PlanBox]) -> None:
    """As many distinct boxes as the arm's nodes, each registered by an address its peers can reach."""
    names = [b.spec.name for b in boxes]
    if len(boxes) != a.nodes or len(set(names)) != len(names):
        raise ResolveError(
            f"arm {a.name!r} spans {a.nodes} boxes; {len(boxes)} given ({', '.join(names) or 'none'})",
            f"name {a.nodes} distinct boxes, the head first: --box B1 --box B2 ...",
        )
    if all(b.spec.generic for b in boxes):
        return
    problem = next(filter(None, map(address_problem, boxes)), None)
    if problem:
        raise ResolveError(f"arm {a.name!r}: {problem}")
    loopback = [ipaddress.ip_address(str(b.address)).is_loopback for b in boxes]
    if any(loopback) and not all(loopback):
        raise ResolveError(
            f"arm {a.name!r}: boxes {', '.join(names)} mix loopback and other addresses; a box registered "
            "by 127.0.0.1 is reached through this machine and cannot reach another box's head"
        )


@dataclass(frozen=True)
class _Builder:
    """What every process of one plan shares: the arm, its flags and environment, the head and the ports."""

    arm: Arm
    profile: Profile
    head: str
    port: int
    base_port: int
    flags: list[str]
    env: dict[str, str]

    def _serve(self, box: BoxSpec) -> list[str]:
        model = _model(self.arm, self.profile.checkpoint, self.profile.local, box)
        return [_bin(box, "vllm"), "serve", model, "--served-model-name", self.profile.served_name]

    def node(self, i: int, b: PlanBox) -> Process:
        """Box ``i``'s process: a data-parallel head or headless worker, or a Ray head or node."""
        gpus = _node_gpus(self.arm, b.spec)
        env = self.env | ({"CUDA_VISIBLE_DEVICES": ",".join(map(str, gpus))} if gpus else {})
        name, api = b.spec.name, ["--host", LOOPBACK, "--port", str(self.base_port)]
        if mode(self.arm) == "dp":
            local = self.arm.data_parallel // self.arm.nodes
            dp = ["--data-parallel-size-local", str(local), "--data-parallel-address", self.head]
            dp += ["--data-parallel-rpc-port", str(self.port)]
            if i == 0:
                return Process(
                    name,
                    "head",
                    self._serve(b.spec) + api + dp + self.flags,
                    env,
                    gpus,
                    self.base_port,
                    False,
                    0,
                )
            ranks = ["--headless", "--data-parallel-start-rank", str(i * local)]
            argv = self._serve(b.spec) + ranks + dp + self.flags
            return Process(name, "worker", argv, env, gpus, self.base_port, True, i * local)
        ray = [_bin(b.spec, "ray"), "start", "--block", "--disable-usage-stats"]
        if i == 0:
            ray += [
                "--head",
                "--port",
                str(self.port),
                "--node-ip-address",
                self.head,
                "--include-dashboard",
                "false",
            ]
        else:
            head = f"[{self.head}]" if ":" in self.head else self.head  # an IPv6 address in brackets
            ray += ["--address", f"{head}:{self.port}", "--node-ip-address", str(b.address)]
        return Process(name, "ray-head" if i == 0 else "ray-worker", ray, env, gpus, self.base_port, True)

    def ray_serve(self, b: PlanBox, env: dict[str, str]) -> Process:
        """The API on the Ray head: one pipeline stage per box, Ray as the executor."""
        pp = ["--pipeline-parallel-size", str(self.arm.nodes), "--distributed-executor-backend", "ray"]
        api = ["--host", LOOPBACK, "--port", str(self.base_port)]
        return Process(
            b.spec.name, "head", self._serve(b.spec) + api + pp + self.flags, env, [], self.base_port, False
        )

    def owned(self, p: Process) -> dict[str, str]:
        """The binding flags a planned vLLM argv may carry, in its order, with their planned values."""
        owned = {"--host": LOOPBACK, "--port": str(self.base_port)} if p.role == "head" else {}
        if mode(self.arm) == "dp":
            owned |= {"--data-parallel-address": self.head, "--data-parallel-rpc-port": str(self.port)}
        return owned


def plan(
    catalog: Catalog,
    arm: str | Arm,
    boxes: Sequence[PlanBox],
    base_port: int = 8100,
    inter_node_port: int | None = None,
) -> MultiNodePlan:
    """The head and workers of a multi-box arm on ``boxes`` (the first is the head); nothing is sent."""
    a, profile = effective_arm(catalog, arm)
    if a.nodes == 1:
        raise ResolveError(
            f"arm {a.name!r} runs on one box", f"`campaign recipe show {a.name} --box BOX` shows its replicas"
        )
    _check_boxes(a, boxes)
    problem = next(filter(None, (flag_problem(f, PLAN_FLAGS) for f in {**profile.flags, **a.flags})), None)
    env = {**profile.env, **a.env}
    problem = problem or next(filter(None, map(env_problem, env)), None)
    if problem:
        raise ResolveError(f"arm {a.name!r} spans {a.nodes} boxes: {problem}")
    port = inter_node_port or (DP_RPC_PORT if mode(a) == "dp" else RAY_PORT)
    if not (0 < base_port < 65536 and 0 < port < 65536):
        raise ResolveError(f"ports {base_port} and {port}: out of range 1-65535")
    flags = [part for flag, values in server_args(a, profile) for part in (flag, *values)]
    build = _Builder(a, profile, str(boxes[0].address), port, base_port, flags, env)
    processes = [build.node(i, b) for i, b in enumerate(boxes)]
    if mode(a) == "ray":
        processes.append(build.ray_serve(boxes[0], processes[0].env))
    addresses = {b.spec.name: str(b.address) for b in boxes}
    for p in processes:
        problem = argv_problem(p, addresses[p.box], build.head, build.owned(p))
        if problem:
            raise ResolveError(f"arm {a.name!r} on {p.box} ({p.role}): {problem}")
    return MultiNodePlan(
        arm=a.name,
        mode=mode(a),
        boxes=[b.spec.name for b in boxes],
        model=_model(a, profile.checkpoint, profile.local, boxes[0].spec),
        served_model_name=profile.served_name,
        head_address=build.head,
        inter_node_port=port,
        tensor_parallel=a.tensor_parallel,
        data_parallel=a.data_parallel,
        expert_parallel=a.expert_parallel,
        processes=processes,
        profile=profile.serving,
    )
