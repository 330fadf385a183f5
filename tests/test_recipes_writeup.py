"""The arms the campaign write-up ran, refused or queued, as shipped recipes: each seed row names one, the TP8 arms
fit the 8x RTX 5090 box, the GLM probes are one change each, and the models beyond the node are refused on one box."""

from __future__ import annotations

import json
import tomllib

import pytest

from console.recipes import BoxSpec, Catalog, ResolvedArm, lint, load_catalog, resolve
from console.recipes.boxspec import inventory_gpus
from ops.demo import SEED_DIR, read_tsv


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


def seed_box(name: str) -> BoxSpec:
    """A seed box as `campaign recipe lint --box NAME` sees it after `campaign demo`: its inventory's GPUs."""
    boxes = tomllib.loads((SEED_DIR / "boxes.toml").read_text(encoding="utf-8"))["box"]
    summary = next(b["gpu_summary"] for b in boxes if b["name"] == name)
    listed = inventory_gpus(summary)
    assert listed is not None, summary
    count, card, mem_mib = listed
    return BoxSpec(
        name, count, card, mem_mib, serving_env="/opt/vllm", gpus_from="inventory", inventory=summary
    )


def flags(argv: list[str]) -> dict[str, tuple[str, ...]]:
    """A server argv's flags after ``serve MODEL``, each with its values."""
    out: dict[str, tuple[str, ...]] = {}
    flag = None
    for word in argv[3:]:
        if word.startswith("--"):
            flag = word
            out[flag] = ()
        else:
            assert flag is not None, argv
            out[flag] += (word,)
    return out


LAYOUT = {"--tensor-parallel-size", "--data-parallel-size", "--enable-expert-parallel", "gpus"}
"""The flags (and the GPU grouping) that make one setting: the parallel layout."""


def settings_changed(catalog: Catalog, base: str, probe: str, box: BoxSpec) -> set[str]:
    """The settings in which ``probe``'s resolved servers differ from ``base``'s: each flag, except that the
    parallel-layout flags and the GPU grouping count as the one setting 'layout', the environment as 'env'."""
    a, b = resolve(catalog, base, box), resolve(catalog, probe, box)
    fa = {**flags(a.replicas[0].argv), "gpus": tuple(str(r.gpus) for r in a.replicas)}
    fb = {**flags(b.replicas[0].argv), "gpus": tuple(str(r.gpus) for r in b.replicas)}
    del fa["--port"], fb["--port"]
    changed = {"layout" if f in LAYOUT else f for f in fa.keys() | fb.keys() if fa.get(f) != fb.get(f)}
    return changed | ({"env"} if env(a) != env(b) else set())


def env(r: ResolvedArm) -> dict[str, str]:
    """A resolved arm's environment besides the GPUs each server is given."""
    return {k: v for k, v in r.replicas[0].env.items() if k != "CUDA_VISIBLE_DEVICES"}


def test_every_seed_arm_resolves_to_a_recipe_on_its_box(catalog: Catalog) -> None:
    """The demo's Arms view lists no '(not in recipes)': each arms.tsv row names a shipped arm that lays out on
    the row's box with the row's tensor-parallel size."""
    rows = read_tsv(SEED_DIR / "arms.tsv")
    assert len(rows) >= 60
    for row in rows:
        arm, box = row.need("arm"), row.need("box")
        assert arm in catalog.arms, f"{row.where}: {arm} has no recipe"
        resolved = resolve(catalog, arm, seed_box(box))
        assert resolved.tensor_parallel == row.need("tp", int), row.where


def test_the_tp2_probes_are_the_baseline_and_one_change_each(catalog: Catalog) -> None:
    sweep = catalog.sweeps["glm-5.3-flash-tp2-probes"]
    assert sweep.arms == [
        "glm-5.3-flash-dp2-tp2-ep",
        "glm-5.3-flash-dp2-tp2-ep-eager",
        "glm-5.3-flash-dp2-tp2-ep-marlin",
        "glm-5.3-flash-dp2-tp2-ep-eager-marlin",
        "glm-5.3-flash-tp2x2-noep",
    ]
    assert sweep.base is None and sweep.pairs == []  # exactly the five arms, no kernel-pair candidates
    box = seed_box("seed-pro6000-600w-b")
    base = resolve(catalog, "glm-5.3-flash-dp2-tp2-ep", box)
    assert flags(base.replicas[0].argv)["--max-num-seqs"] == ("384",)  # 384 seqs per rank, CUDA graphs
    assert "--enforce-eager" not in flags(base.replicas[0].argv)
    eager = settings_changed(catalog, sweep.arms[0], "glm-5.3-flash-dp2-tp2-ep-eager", box)
    marlin = settings_changed(catalog, sweep.arms[0], "glm-5.3-flash-dp2-tp2-ep-marlin", box)
    noep = settings_changed(catalog, sweep.arms[0], "glm-5.3-flash-tp2x2-noep", box)
    assert (eager, marlin, noep) == ({"--enforce-eager"}, {"--kernel-config.moe_backend"}, {"layout"})
    # "both": exactly the two single changes together, nothing else
    assert (
        settings_changed(catalog, sweep.arms[0], "glm-5.3-flash-dp2-tp2-ep-eager-marlin", box)
        == eager | marlin
    )
    noep_servers = resolve(catalog, "glm-5.3-flash-tp2x2-noep", box).replicas
    assert [r.gpus for r in noep_servers] == [[0, 1], [2, 3]]
    # Without expert parallelism each TP2 server holds all 198 GB: lint says the probe would not have fit.
    r10 = [f for f in lint(catalog, "glm-5.3-flash-tp2x2-noep", box) if f.rule_id == "R10-fits-memory"]
    assert len(r10) == 1 and r10[0].expected and "99.0 GB per card" in r10[0].reason


def test_the_tp8_arms_fit_the_5090_box_as_one_server_on_eight_gpus(catalog: Catalog) -> None:
    box = seed_box("seed-5090x8-400w")
    for name in ("deepseek-v4-flash-tp8", "glm-5.3-flash-tp8"):
        errors = [f for f in lint(catalog, name, box) if f.blocking]
        assert errors == [], errors
        [server] = resolve(catalog, name, box).replicas
        assert server.gpus == list(range(8))
        argv = flags(server.argv)
        assert argv["--tensor-parallel-size"] == ("8",) and "--no-enable-flashinfer-autotune" in argv
        assert "--kernel-config.moe_backend" not in argv  # the MoE backend is swept, not pinned (rule 3)
    [ds] = resolve(catalog, "deepseek-v4-flash-tp8", box).replicas
    assert ds.env["VLLM_DSV4_OPROJ_SM120_FALLBACK"] == "1"
    [glm] = resolve(catalog, "glm-5.3-flash-tp8", box).replicas
    assert flags(glm.argv)["--block-size"] == ("1024",)
    sweep = catalog.sweeps["deepseek-v4-flash-tp8-moe"]
    assert sweep.base == "deepseek-v4-flash-tp8" and len(sweep.pairs) == 3
    # The FP8 quality row's layout: TP2 x 4 replicas on the same box.
    fp8 = resolve(catalog, "qwen3.8-27b-fp8-tp2", box)
    assert [r.gpus for r in fp8.replicas] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert not [f for f in lint(catalog, "qwen3.8-27b-fp8-tp2", box) if f.blocking]


BEYOND = {
    "kimi-k3-w4a4-tp4": ("kimi-k3-w4a4", 1400.0, "AA index 50", "(stated"),
    "glm-5.3-4bit-tp4": ("glm-5.3-4bit", 450.0, "AA index 49", "(stated)"),
    "qwen3.8-2.4t-a95b-tp4": ("qwen3.8-2.4t-a95b", 1200.0, "AA index 47", "derived, not stated"),
    "deepseek-v4-pro-0813-tp4": ("deepseek-v4-pro-0813", 825.0, "AA index 42", "derived, not stated"),
}


@pytest.mark.parametrize("arm", sorted(BEYOND))
def test_the_models_beyond_the_node_are_refused_on_one_box(catalog: Catalog, arm: str) -> None:
    profile_name, weights, index, basis = BEYOND[arm]
    profile = catalog.profiles[profile_name]
    assert profile.weights_gb == weights
    assert index in (profile.description or "") and basis in (profile.description or "")
    assert "not in the write-up" in (profile.serving.source or "")
    for box, words in (
        ("seed-pro6000-600w", "does not fit 4 x 96 GB"),
        ("seed-5090x8-400w", "does not fit 8 x 32 GB"),
    ):
        [r10] = [f for f in lint(catalog, arm, seed_box(box)) if f.rule_id == "R10-fits-memory"]
        assert r10.blocking and r10.expected
        assert r10.reason.startswith(f"{weights:g} GB of weights {words}"), r10.reason
        assert "overflows the node" in r10.reason and "several boxes" in r10.reason
    assert not [
        f for f in lint(catalog, arm) if f.rule_id == "R10-fits-memory"
    ]  # without a box: nothing to judge


def test_the_glm_perf3_levers_each_change_one_setting_of_the_qualified_layout(catalog: Catalog) -> None:
    sweep = catalog.sweeps["glm-5.3-flash-perf3"]
    assert sweep.arms[0] == "glm-5.3-flash-dp4-ep"
    box = seed_box("seed-pro6000-600w")
    changes = {arm: settings_changed(catalog, sweep.arms[0], arm, box) for arm in sweep.arms[1:]}
    assert changes == {
        "glm-5.3-flash-dp4-ep-ssm-bf16": {"--mamba-ssm-cache-dtype"},
        "glm-5.3-flash-dp4-ep-fp8kv": {"--kv-cache-dtype"},
        "glm-5.3-flash-dp4-ep-prefill32k": {"--max-num-batched-tokens"},
    }
    argv = flags(resolve(catalog, "glm-5.3-flash-dp4-ep-ssm-bf16", box).replicas[0].argv)
    assert argv["--mamba-ssm-cache-dtype"] == ("bfloat16",)
    assert flags(resolve(catalog, "glm-5.3-flash-dp4-ep-fp8kv", box).replicas[0].argv)[
        "--kv-cache-dtype"
    ] == ("fp8",)


def test_the_queued_lists_are_sweeps_of_their_arms(catalog: Catalog) -> None:
    assert catalog.sweeps["control600w"].arms == ["qwen3.8-27b-nvfp4-b12x-official-template"]
    assert catalog.sweeps["fix600w"].arms == ["qwen3.8-27b-nvfp4-redhat-b12x"]
    assert catalog.sweeps["thinkmode6000"].arms == [
        "gemma-4-26b-a4b-bf16-think-on",
        "gemma-4-26b-a4b-bf16-think-off",
    ]
    box = seed_box("seed-pro6000-600w")
    # Same weights and kernel as the measured arm; only the chat template differs.
    assert settings_changed(
        catalog, "qwen3.8-27b-nvfp4-b12x", "qwen3.8-27b-nvfp4-b12x-official-template", box
    ) == {"--chat-template"}
    redhat = resolve(catalog, "qwen3.8-27b-nvfp4-redhat-b12x", box)
    assert flags(redhat.replicas[0].argv)["--kernel-config.linear_backend"] == ("b12x",)
    assert "R2-compressed-tensors-nvfp4" in {
        f.rule_id for f in lint(catalog, "qwen3.8-27b-nvfp4-redhat-b12x")
    }
    for arm, thinking in (("gemma-4-26b-a4b-bf16-think-on", True), ("gemma-4-26b-a4b-bf16-think-off", False)):
        r = resolve(catalog, arm, box)
        assert len(r.replicas) == 4
        server = json.loads(flags(r.replicas[0].argv)["--default-chat-template-kwargs"][0])
        _, extra_body = r.profile.request_params()
        assert server == extra_body["chat_template_kwargs"] == {"enable_thinking": thinking}
        assert settings_changed(catalog, "gemma-4-26b-a4b-bf16", arm, box) == {
            "--default-chat-template-kwargs"
        }
