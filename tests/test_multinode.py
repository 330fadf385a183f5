"""Multi-box arms: the plan of head and workers, its address rules, lint R10 over every box, the CLI.

The plan is checked against vLLM's own parser in tests/test_multinode_vllm.py; launch and kill as one
arm on real sshd boxes in tests/test_multinode_boxes.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.cli import main
from console.recipes import BoxSpec, Catalog, RecipeError, ResolveError, lint, load_catalog, resolve
from console.recipes.guard import listen_problem
from console.recipes.multinode import (
    DP_RPC_PORT,
    RAY_PORT,
    PlanBox,
    Process,
    argv_problem,
    generic_boxes,
    node_gpus,
    plan,
)
from console.store import Box, Store

PRO_GPU = ("NVIDIA RTX PRO 6000 Blackwell Server Edition", 97887.0)
PROFILE = """
[profiles."big"]
checkpoint = "org/Big-753B"
architecture = "glm5"
quantization = "nvfp4"
quantizer = "modelopt"
weights_gb = 450.0
moe = true

[profiles."big".serving]
sampling = { temperature = 1.0 }
source = "test"
"""


def pro(name: str, address: str | None, gpus: int = 4) -> PlanBox:
    return PlanBox(BoxSpec(name, gpus, PRO_GPU[0], PRO_GPU[1], False, "/opt/vllm", "/models"), address)


def catalog(tmp_path: Path, arms: str) -> Catalog:
    (tmp_path / "r.toml").write_text(PROFILE + arms)
    return load_catalog([tmp_path / "r.toml"])


DP8 = '[arms."dp8"]\nprofile = "big"\nnodes = 2\ndata_parallel = 8\nexpert_parallel = true\nlinear_backend = "b12x"\n'
TP4PP2 = '[arms."pp2"]\nprofile = "big"\nnodes = 2\ntensor_parallel = 4\nlinear_backend = "b12x"\n'


def test_data_parallel_over_two_boxes_plans_a_head_and_a_headless_worker(tmp_path: Path) -> None:
    c = catalog(tmp_path, DP8)
    p = plan(c, "dp8", [pro("a", "10.0.0.1"), pro("b", "10.0.0.2")])
    head, worker = p.processes
    common = ["--data-parallel-size-local", "4", "--data-parallel-address", "10.0.0.1"]
    common += ["--data-parallel-rpc-port", str(DP_RPC_PORT)]
    flags = [
        "--data-parallel-size",
        "8",
        "--enable-expert-parallel",
        "--kernel-config.linear_backend",
        "b12x",
    ]
    serve = ["/opt/vllm/bin/vllm", "serve", "org/Big-753B", "--served-model-name", "org/Big-753B"]
    assert head.argv == [*serve, "--host", "127.0.0.1", "--port", "8100", *common, *flags]
    assert worker.argv == [*serve, "--headless", "--data-parallel-start-rank", "4", *common, *flags]
    assert (head.box, head.role, head.headless, head.start_rank) == ("a", "head", False, 0)
    assert (worker.box, worker.role, worker.headless, worker.start_rank) == ("b", "worker", True, 4)
    assert head.gpus == worker.gpus == [0, 1, 2, 3]
    assert head.env == worker.env == {"CUDA_VISIBLE_DEVICES": "0,1,2,3"}
    assert p.head is head and p.mode == "dp" and p.head_address == "10.0.0.1"
    shown = p.to_dict()
    assert shown["argv"] == head.argv and [x["role"] for x in shown["processes"]] == ["head", "worker"]
    again = plan(c, "dp8", [pro("a", "10.0.0.1"), pro("b", "10.0.0.2")])
    assert again.recipe_hash == p.recipe_hash
    assert plan(c, "dp8", [pro("b", "10.0.0.2"), pro("a", "10.0.0.1")]).recipe_hash != p.recipe_hash


def test_a_stage_per_box_is_planned_over_ray(tmp_path: Path) -> None:
    c = catalog(tmp_path, TP4PP2)
    p = plan(c, "pp2", [pro("a", "10.0.0.1"), pro("b", "10.0.0.2")], base_port=8200)
    ray_head, ray_worker, head = p.processes
    assert [x.role for x in p.processes] == ["ray-head", "ray-worker", "head"]
    ray = "/opt/vllm/bin/ray start --block --disable-usage-stats"
    assert (
        ray_head.argv
        == f"{ray} --head --port {RAY_PORT} --node-ip-address 10.0.0.1 --include-dashboard false".split()
    )
    assert ray_worker.argv == f"{ray} --address 10.0.0.1:{RAY_PORT} --node-ip-address 10.0.0.2".split()
    assert head.box == "a" and not head.headless and ray_head.headless and ray_worker.headless
    serve = "--host 127.0.0.1 --port 8200 --pipeline-parallel-size 2 --distributed-executor-backend ray"
    serve += " --tensor-parallel-size 4 --kernel-config.linear_backend b12x --no-enable-flashinfer-autotune"
    assert head.argv[5:] == serve.split()
    assert ray_head.gpus == ray_worker.gpus == [0, 1, 2, 3]


@pytest.mark.parametrize(
    ("boxes", "message"),
    [
        ([pro("a", "10.0.0.1")], "spans 2 boxes; 1 given (a)"),
        ([pro("a", "10.0.0.1"), pro("a", "10.0.0.1")], "spans 2 boxes; 2 given (a, a)"),
        ([pro("a", None), pro("b", "10.0.0.2")], "box a has no registered address"),
        ([pro("a", "gpu-a.example"), pro("b", "10.0.0.2")], "'gpu-a.example', not an IP address"),
        ([pro("a", "0.0.0.0"), pro("b", "10.0.0.2")], "address 0.0.0.0 is not one host's"),
        ([pro("a", "127.0.0.1"), pro("b", "10.0.0.2")], "mix loopback and other addresses"),
        (
            [pro("a", "10.0.0.1"), pro("b", "10.0.0.2", gpus=2)],
            "needs 4 GPUs on each of its 2 boxes; box b has 2",
        ),
    ],
)
def test_boxes_the_plan_refuses(tmp_path: Path, boxes: list[PlanBox], message: str) -> None:
    with pytest.raises(ResolveError) as caught:
        plan(catalog(tmp_path, DP8), "dp8", boxes)
    assert message in str(caught.value)


def test_one_box_resolve_refuses_a_multi_box_arm_and_the_plan_a_one_box_arm(tmp_path: Path) -> None:
    c = catalog(tmp_path, DP8 + '[arms."one"]\nprofile = "big"\ntensor_parallel = 4\n')
    with pytest.raises(ResolveError, match="arm 'dp8' spans 2 boxes, not one box a"):
        resolve(c, "dp8", pro("a", "10.0.0.1").spec)
    with pytest.raises(ResolveError, match="arm 'one' runs on one box"):
        plan(c, "one", [pro("a", "10.0.0.1")])


@pytest.mark.parametrize(
    ("arm", "message"),
    [
        ("nodes = 2\ndata_parallel = 3\n", "data_parallel 3 does not split evenly over 2 boxes"),
        ("nodes = 2\nreplicas = 2\n", "a multi-box arm has one head; remove replicas"),
        ('nodes = 2\nflags = { "--headless" = true }\n', "'--headless' may not be set as a free flag"),
        (
            'nodes = 2\nflags = { "--data_parallel_size_l" = 2 }\n',
            "is read by vLLM as '--data-parallel-size-local'",
        ),
        ("nodes = 0\n", "'nodes' must be an integer >= 1, got 0"),
    ],
)
def test_the_loader_refuses_layouts_that_cannot_span_the_boxes(
    tmp_path: Path, arm: str, message: str
) -> None:
    with pytest.raises(RecipeError) as caught:
        catalog(tmp_path, f'[arms."x"]\nprofile = "big"\n{arm}')
    assert message in str(caught.value) and "r.toml:" in str(caught.value)


def test_a_planned_argv_naming_another_address_is_refused() -> None:
    """The plan's last word: each inter-node address in an argv is the head's, or the box's own for Ray."""
    owned = {"--data-parallel-address": "10.0.0.1", "--data-parallel-rpc-port": "13345"}
    argv = [
        "vllm",
        "serve",
        "m",
        "--headless",
        "--data-parallel-address",
        "10.0.0.9",
        "--data-parallel-rpc-port",
    ]
    worker = Process("b", "worker", [*argv, "13345"], {}, [], 8100, True, 1)
    assert argv_problem(worker, "10.0.0.2", "10.0.0.1", owned) == (
        "--data-parallel-address 10.0.0.9: not the registered address 10.0.0.1 of the box it names"
    )
    ray = Process("b", "ray-worker", ["ray", "start", "--node-ip-address", "10.0.0.1"], {}, [], 8100, True)
    assert "not the registered address 10.0.0.2" in (argv_problem(ray, "10.0.0.2", "10.0.0.1", {}) or "")
    extra = Process(
        "a", "head", ["vllm", "serve", "m", "--host", "127.0.0.1", "--port", "8100"], {}, [], 8100, False
    )
    assert "listen where the console did not put it" in (
        argv_problem(extra, "10.0.0.1", "10.0.0.1", owned) or ""
    )


def _layouts() -> st.SearchStrategy[tuple[int, int, int, bool, int]]:
    """(nodes, data_parallel, tensor_parallel, expert_parallel, cards per box) that fit."""

    def build(nodes: int, local: int, tp: int, ep: bool, spare: int) -> tuple[int, int, int, bool, int]:
        return nodes, nodes * local, tp, ep, local * tp + spare

    return st.builds(
        build,
        st.integers(2, 6),
        st.integers(0, 4),
        st.sampled_from([1, 2, 4]),
        st.booleans(),
        st.integers(0, 3),
    )


@settings(max_examples=60, deadline=None)
@given(layout=_layouts(), last_octet=st.integers(1, 200))
def test_every_layout_plans_disjoint_ranks_on_the_boxes_own_addresses(
    layout: tuple[int, int, int, bool, int], last_octet: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    nodes, dp, tp, ep, cards = layout
    dp = dp if dp > 1 else 1  # 0 or 1 local rank per box: a Ray arm, one stage per box
    arm = f'[arms."x"]\nprofile = "big"\nnodes = {nodes}\ndata_parallel = {dp}\ntensor_parallel = {tp}\n'
    arm += f"expert_parallel = {'true' if ep else 'false'}\n"
    c = catalog(tmp_path_factory.mktemp("r"), arm)
    addresses = [f"10.1.{i}.{last_octet}" for i in range(nodes)]
    boxes = [pro(f"n{i}", a, gpus=max(cards, tp, 1)) for i, a in enumerate(addresses)]
    p = plan(c, "x", boxes)
    heads = [x for x in p.processes if x.role == "head"]
    assert len(heads) == 1 and heads[0].box == "n0"
    for x in p.processes:
        own = addresses[int(x.box[1:])]
        owned = {"--host": "127.0.0.1", "--port": "8100"} if x.role == "head" else {}
        if p.mode == "dp":
            owned |= {"--data-parallel-address": addresses[0], "--data-parallel-rpc-port": str(DP_RPC_PORT)}
        assert argv_problem(x, own, addresses[0], owned) is None
        if x.role in ("head", "worker"):
            assert listen_problem(x.argv[2:], owned) is None
    if p.mode == "dp":
        local = dp // nodes
        assert [x.start_rank for x in p.processes] == [i * local for i in range(nodes)]
        assert all(len(x.gpus) == local * tp for x in p.processes)
    else:
        assert [x.role for x in p.processes] == ["ray-head", *["ray-worker"] * (nodes - 1), "head"]
        assert p.head.argv[p.head.argv.index("--pipeline-parallel-size") + 1] == str(nodes)


def _findings(c: Catalog, arm: str, boxes: list[PlanBox]) -> list[str]:
    specs = [b.spec for b in boxes]
    return [f.reason for f in lint(c, arm, boxes=specs) if f.rule_id == "R10-fits-memory"]


def test_r10_judges_the_memory_over_every_box_of_the_arm(tmp_path: Path) -> None:
    """450 GB of experts over 8 cards of two 4 x 96 GB boxes fits; over the 4 cards of one box it does not."""
    c = catalog(
        tmp_path, DP8 + TP4PP2 + '[arms."one"]\nprofile = "big"\ndata_parallel = 4\nexpert_parallel = true\n'
    )
    two = [pro("a", "10.0.0.1"), pro("b", "10.0.0.2")]
    assert _findings(c, "dp8", two) == [] and _findings(c, "pp2", two) == []
    [one] = _findings(c, "dp8", two[:1])
    assert one.startswith(
        "arm dp8 spans 2 boxes and was linted on 1 (a): 450 GB over their 4 cards is 112.5 GB"
    )
    assert "per card, over the 86.0 GB usable on a's 96 GB cards; lint it on its 2 boxes" in one
    [single] = _findings(c, "one", two[:1])
    assert single.startswith("450 GB of weights")  # the same model as a one-box arm: refused there too
    small = [
        PlanBox(BoxSpec(n, 4, "RTX 5090", 32607.0), a) for n, a in (("c", "10.0.0.3"), ("d", "10.0.0.4"))
    ]
    [over] = _findings(c, "dp8", small)
    assert over.startswith("450 GB of weights over 8 cards on 2 boxes is 56.2 GB per card, over the 28.7 GB")
    [short] = _findings(c, "dp8", [two[0], pro("b", "10.0.0.2", gpus=2)])
    assert "needs 4 GPUs on each of its 2 boxes; b has 2" in short


def test_a_stand_in_plan_shows_the_arm_without_boxes(tmp_path: Path) -> None:
    c = catalog(tmp_path, DP8)
    p = plan(c, "dp8", generic_boxes(c.arms["dp8"]))
    assert [x.box for x in p.processes] == ["(node 0)", "(node 1)"]
    assert "<node 0 address>" in p.processes[1].argv and p.processes[0].gpus == [0, 1, 2, 3]


# -- the CLI -------------------------------------------------------------------------------------------
@pytest.fixture
def db(tmp_path: Path) -> str:
    """Two boxes registered by their addresses, each probed with four 96 GB cards; one without a probe."""
    path = tmp_path / "state.db"
    probe = {
        "gpus": [{"index": i, "name": PRO_GPU[0], "mem_total_mib": PRO_GPU[1]} for i in range(4)],
        "topology": {"nvlink_all": False, "links": {}},
    }
    with Store(path) as store:
        for name, host in (("pa", "10.0.0.1"), ("pb", "10.0.0.2"), ("bare", "10.0.0.3")):
            store.boxes.add(
                Box(name=name, host=host, ssh_user="root", serving_env="/opt/vllm", model_root="/m")
            )
        with store.atomic() as d:
            for i, name in enumerate(("pa", "pb")):
                d.table("probes").insert(
                    {"box": name, "t_ms": i + 1, "console_t_ms": 1, "data": json.dumps(probe)}
                )
    return str(path)


def out_json(capsys: pytest.CaptureFixture[str]) -> Any:
    return json.loads(capsys.readouterr().out)


def test_recipe_show_prints_the_plan_per_box(
    db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "r").mkdir()
    catalog(tmp_path / "r", DP8)
    recipes = ["--recipes", str(tmp_path / "r" / "r.toml")]
    assert main(["--db", db, "recipe", "show", "dp8", "--box", "pa", "--box", "pb", *recipes]) == 0
    out = capsys.readouterr().out
    assert "boxes    pa, pb" in out
    assert f"plan     data parallel across nodes; head pa at 10.0.0.1, inter-node port {DP_RPC_PORT}" in out
    assert "0  head on pa  gpus 0,1,2,3  first rank 0" in out
    assert "1  worker on pb  gpus 0,1,2,3  first rank 4  (no HTTP API)" in out
    assert (
        "serve org/Big-753B --served-model-name org/Big-753B --headless --data-parallel-start-rank 4" in out
    )
    assert "lint     R10" not in out
    assert main(["--db", db, "recipe", "show", "dp8", "--box", "pa", "--box", "pb", "--json", *recipes]) == 0
    shown = out_json(capsys)
    assert [p["box"] for p in shown["processes"]] == ["pa", "pb"] and shown["findings"] == []
    assert main(["--db", db, "recipe", "show", "dp8", "--box", "pa", *recipes]) == 1
    out = capsys.readouterr().out
    assert "lint     R10-fits-memory error: arm dp8 spans 2 boxes and was linted on 1 (pa)" in out
    assert "cannot resolve: arm 'dp8' spans 2 boxes; 1 given (pa)" in out
    assert main(["--db", db, "recipe", "lint", "--box", "pa", "--box", "pb", *recipes[1:]]) == 0
    assert main(["--db", db, "recipe", "lint", "--box", "pa", *recipes[1:]]) == 1
    assert "R10-fits-memory error dp8: arm dp8 spans 2 boxes" in capsys.readouterr().out
    assert main(["--db", db, "recipe", "list", "--box", "pa", "--box", "pb", *recipes]) == 0
    assert "2 boxes dp TP1 DP8 EP" in capsys.readouterr().out


def test_the_shipped_multi_box_arms_plan_and_lint(capsys: pytest.CaptureFixture[str]) -> None:
    c = load_catalog()
    spanning = sorted(n for n, a in c.arms.items() if a.nodes > 1)
    assert "tiny-cpu-dp2-2node" in spanning and len(spanning) >= 2
    for name in spanning:
        arm = c.arms[name]
        boxes = [pro(f"b{i}", f"10.0.0.{i + 1}", gpus=node_gpus(arm)) for i in range(arm.nodes)]
        p = plan(c, name, boxes if arm.device == "gpu" else generic_boxes(arm))
        assert len({x.box for x in p.processes}) == arm.nodes
        if arm.device == "gpu":  # fits over its boxes, and is refused on one of them
            assert _findings(c, name, boxes) == []
            assert _findings(c, name, boxes[:1])
    assert main(["recipe", "show", "tiny-cpu-dp2-2node"]) == 0
    assert "boxes    (none: 2 stand-in nodes, argv only)" in capsys.readouterr().out


def test_a_multi_box_launch_is_refused_before_anything_is_sent(tmp_path: Path) -> None:
    """Each box's serving env (the engine patch the arm needs, judged on that box's newest probe, as a
    one-box launch judges it) refuses it, --force or not, and a plan on too few boxes; nothing reaches a box."""
    import asyncio

    from console.service import Service, ServiceError

    patched = {"found": True, "sha256": "cd" * 32, "path": "/opt/vllm/p.py", "error": None}
    cards = [{"index": i, "name": PRO_GPU[0], "mem_total_mib": PRO_GPU[1]} for i in range(4)]
    env = {"prefix": "/opt/vllm", "python": "/opt/vllm/bin/python", "error": None}
    (tmp_path / "r").mkdir()
    arms = DP8 + 'requires_patches = ["p"]\n[patches.p]\nsource = "box/p.py"\nmodule = "p"\n'
    c = catalog(tmp_path / "r", arms + TP4PP2)
    with Store(tmp_path / "state.db") as store:
        for i, name in enumerate(("pa", "pb")):
            store.boxes.add(Box(name=name, host=f"10.0.0.{i + 1}", ssh_user="root", serving_env="/opt/vllm"))
            serving = {**env, "patches": {"p": patched}} if name == "pa" else env  # pb's agent did not look
            with store.atomic() as d:
                data = json.dumps({"gpus": cards, "serving_env": serving})
                d.table("probes").insert({"box": name, "t_ms": i + 1, "console_t_ms": 1, "data": data})
        service = Service(store, catalog=c)
        mplan = service.plan_multinode("dp8", ["pa", "pb"])
        assert list(mplan.env_refusals) == ["pb"]
        assert mplan.patch_digests == {"pa": {"p": "cd" * 32}, "pb": {"p": None}}  # what each probe found
        with pytest.raises(ServiceError, match=r"arm dp8 is refused: pb: .*patch p"):
            asyncio.run(service.launch_multinode(mplan, force=True))
        lone = service.plan_multinode("pp2", ["pa", "pb"])
        assert lone.blocking == [] and lone.env_refusals == {}
        with pytest.raises(ResolveError, match="spans 2 boxes; 1 given"):
            service.plan_multinode("pp2", ["pa"])
        assert store.rows("SELECT id FROM commands") == [] and store.rows("SELECT id FROM launches") == []


RAY_PARSE = """
import json, sys
from ray.scripts.scripts import start
out = []
for argv in json.load(sys.stdin):
    p = start.make_context("ray start", argv[2:]).params
    out.append({k: p[k] for k in ("head", "block", "port", "address", "node_ip_address", "include_dashboard")})
json.dump(out, sys.stdout)
"""


def test_ray_reads_the_planned_ray_start_argv_as_planned(ray_python: Path) -> None:
    """Ray's own ``ray start`` parser (click) on the shipped Ray arm's node argv. The CPU vLLM installs no Ray:
    testbed/ray_env.py builds a Python that has it (docs/multinode.md says which was run)."""
    import subprocess

    python = str(ray_python)
    c = load_catalog()
    boxes = [pro("a", "10.0.0.1"), pro("b", "10.0.0.2")]
    nodes = [x for x in plan(c, "glm-5.3-4bit-tp4-pp2", boxes).processes if x.role.startswith("ray")]
    out = subprocess.run(
        [python, "-c", RAY_PARSE], input=json.dumps([x.argv for x in nodes]), capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-2000:]
    head, worker = json.loads(out.stdout)
    assert head == {
        "head": True,
        "block": True,
        "port": RAY_PORT,
        "address": None,
        "node_ip_address": "10.0.0.1",
        "include_dashboard": False,
    }
    assert worker["address"] == f"10.0.0.1:{RAY_PORT}" and worker["node_ip_address"] == "10.0.0.2"
    assert worker["block"] is True and worker["head"] is False
