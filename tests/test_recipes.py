"""Recipes: loading with precise errors, resolving onto boxes, and every lint rule firing and not firing."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from console.recipes import (
    RULES,
    BoxSpec,
    Catalog,
    Finding,
    KernelPair,
    MoeEvidence,
    RecipeError,
    ResolveError,
    box_spec,
    lint,
    lint_catalog,
    load_catalog,
    resolve,
)
from console.recipes.toml_lines import key_lines
from console.store import Box
from console.store.checks import as_probe

PROFILE = """
[profiles.p]
checkpoint = "org/Model-NVFP4"
served_model_name = "model"
architecture = "qwen3"
quantization = "nvfp4"
quantizer = "modelopt"
weights_gb = 17.9
reasoning = true

[profiles.p.serving]
reasoning_parser = "qwen3"
thinking_default = true
sampling = { temperature = 1.0, top_p = 0.95, top_k = 20, min_p = 0.0 }
"""

PRO = BoxSpec("pro-a", 4, "NVIDIA RTX PRO 6000", 97887, False, "/opt/vllm", "/models")
NVL = BoxSpec("h200", 4, "NVIDIA H200", 143771, True, None, "/models")
RTX5090 = BoxSpec("rtx", 8, "NVIDIA GeForce RTX 5090", 32607, False, None, None)
CPU = BoxSpec("local", 0, serving_env="/opt/cpu", model_root="/srv/models")


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def catalog_of(tmp_path: Path, arms: str, profile: str = PROFILE, sweeps: str = "") -> Catalog:
    write(tmp_path, "profiles.toml", profile)
    write(tmp_path, "arms.toml", arms)
    if sweeps:
        write(tmp_path, "sweeps.toml", sweeps)
    return load_catalog([tmp_path])


def rules(findings: Iterable[Finding]) -> list[str]:
    return [f.rule_id for f in findings]


# -- loading ---------------------------------------------------------------------------------------


# Every model the write-up served or put on its roster, and its reasoning parser as the write-up's per-family list
# names it (None: the list names none for it).
ROSTER = {
    "Qwen3.8-27B": "qwen3",
    "Qwen3.8-Flash-Next": "qwen3",
    "Qwen3.6-35B-A3B": "qwen3",
    "gpt-oss-20b": "openai_gptoss",
    "gpt-oss-120b": "openai_gptoss",
    "gemma-4-26B-A4B": "gemma4",
    "Muse-Glimmer-30B": "muse_glimmer",
    "DeepSeek-V4-Flash": "deepseek_v4",
    "GLM-5.3-Flash": "glm45",
    "Nemotron-3.5-Lightning-30B": "nemotron_v3",
    "Nemotron-3-Super-120B": "nemotron_v3",
    "Laguna-S-2.1": "poolside_v1",
    "Hy3": "hy_v3",
    "Ling-3.0-flash": "ling3",
    "Step-3.7-Flash": "step3p5",
    "Inkling": "inkling",
    "MiMo-V2.5": "mimo",
    "MiniMax-M3": "minimax_m3",
    "Ornith-1.5-397B": None,
    "K2-Horizon-375B-A23B": None,
}
# What the write-up states, by model: thinking defaults ('How to serve a model'), sampling, weight sizes.
SEED_THINKING = {
    "Hy3": False,
    "gemma-4-26B-A4B": False,
    "Qwen3.8-27B": True,
    "Qwen3.6-35B-A3B": True,
    "Inkling": True,
    "MiniMax-M3": True,
    "Nemotron-3.5-Lightning-30B": True,
    "Nemotron-3-Super-120B": True,
    "Ling-3.0-flash": True,
    "Ornith-1.5-397B": True,
}
SEED_SAMPLING = {
    "Qwen3.8-27B": {"temperature": 1.0, "top_p": 0.95, "top_k": 20, "min_p": 0.0},
    "gemma-4-26B-A4B": {"temperature": 0.0, "top_k": 64},
    "Ling-3.0-flash": {"temperature": 0.85},
    "Hy3": {"temperature": 0.9, "top_p": 1.0},
}
SEED_WEIGHTS = {
    "qwen3.8-27b-nvfp4-gittensor": 17.9,
    "qwen3.8-27b-fp8": 29.0,
    "gpt-oss-120b": 61.0,
    "glm-5.3-flash-nvfp4": 198.0,
    "glm-5.3-flash-fp8": 330.0,
    "deepseek-v4-flash": 167.0,
    "k2-horizon-375b-a23b-fp8": 375.0,
}


def test_every_model_of_the_seed_roster_has_a_profile_served_the_vendors_way() -> None:
    c = load_catalog()
    for model, parser in ROSTER.items():
        profiles = [
            p
            for p in c.profiles.values()
            if p.checkpoint.lower().endswith(
                (
                    model.lower(),
                    model.lower() + "-nvfp4",
                    model.lower() + "-fp8",
                    model.lower() + "-mxfp4",
                    model.lower() + "-it",
                )
            )
        ]
        assert profiles, model
        for p in profiles:
            assert p.serving.reasoning_parser == parser, p.name
            assert p.serving.source, p.name
            if parser is None:
                assert "reasoning" in p.serving.source and "not in the write-up" in p.serving.source, p.name
            if model in SEED_THINKING:
                assert p.serving.thinking_default is SEED_THINKING[model], p.name
            if model in SEED_SAMPLING:
                assert p.serving.sampling == SEED_SAMPLING[model], p.name
    for name, gb in SEED_WEIGHTS.items():
        assert c.profiles[name].weights_gb == gb
    quants = {(p.quantization, p.quantizer) for p in c.profiles.values() if "Qwen3.8-27B" in p.checkpoint}
    assert {
        ("bf16", "vendor"),
        ("fp8", "vendor"),
        ("nvfp4", "modelopt"),
        ("nvfp4", "compressed-tensors"),
        ("nvfp4", "qat"),
    } <= quants


def test_shipped_shapes_and_sweeps() -> None:
    c = load_catalog()
    router, promptopt = c.shapes["router"], c.shapes["promptopt"]
    assert (router.input_len, router.output_len, router.prefix_len) == (1024, 128, 0)
    assert (promptopt.prefix_len, promptopt.input_len, promptopt.output_len) == (3072, 512, 256)
    assert {"router", "promptopt", "judge", "short", "rollout"} <= set(c.shapes)
    assert list(c.sweeps["deepseek-v4-flash-moe"]) == ["deepseek-v4-flash-tp4", "deepseek-v4-flash-dp4-ep"]


def test_what_the_seed_does_not_state_is_said_not_invented() -> None:
    """A value missing from a profile is named in its source as not in the write-up, never silently absent."""
    for p in load_catalog().profiles.values():
        if p.local:
            continue  # the test model
        source = p.serving.source or ""
        missing = {
            "sampling": not p.serving.sampling,
            "thinking default": p.reasoning and p.serving.thinking_default is None,
            "weight size": p.weights_gb is None,
            "tool parser": p.serving.tool_call_parser is None,
        }
        for what, absent in missing.items():
            if absent:
                assert what in source and "not in the write-up" in source, (p.name, what)


ON_5090 = {"deepseek-v4-flash-tp8", "glm-5.3-flash-tp8", "qwen3.8-27b-fp8-tp2"}
"""Arms laid out for the write-up's 8-card 32 GB box (TP8, TP2 x 4): more GPUs than a 4-card box has."""


def test_shipped_recipes_lint_clean_except_documented(tmp_path: Path) -> None:
    c = load_catalog()
    for f in lint_catalog(c):
        if f.severity == "error":
            assert f.expected, f
    for name in c.arms:
        for f in lint(c, name, RTX5090 if name in ON_5090 else PRO):
            if f.severity == "error":
                assert f.expected, f
    expected = {(f.arm, f.rule_id) for f in lint_catalog(c) if f.expected}
    # R3: NVFP4-expert arms pin the MoE backend the write-up measured; here they launch once a sweep measured it.
    # R1 / R6 / R7: arms the write-up ran against a rule, shipped under its row names (recipes/arms/seed-rows.toml).
    assert expected == {
        ("qwen3.8-27b-nvfp4-auto", "R1-nvfp4-linear-backend"),
        ("qwen3.8-flash-next-tp4-marlin-auto", "R1-nvfp4-linear-backend"),
        ("qwen3.8-flash-next-tp4-marlin-auto", "R3-moe-backend-unswept"),
        ("qwen3.8-flash-next-tp4-marlin-b12x", "R3-moe-backend-unswept"),
        ("glm-5.3-flash-dp2-tp2-ep-marlin", "R3-moe-backend-unswept"),
        ("glm-5.3-flash-dp2-tp2-ep-eager-marlin", "R3-moe-backend-unswept"),
        ("glm-5.3-flash-dp2tp2-ep-eager-marlin", "R3-moe-backend-unswept"),
        ("glm-5.3-flash-dp4-flashinfer-b12x-moe", "R3-moe-backend-unswept"),
        ("gemma-4-26b-a4b-nvfp4-auto", "R1-nvfp4-linear-backend"),
        ("qwen3.8-27b-nvfp4-qat-auto", "R1-nvfp4-linear-backend"),
        ("nemotron-3-super-120b", "R1-nvfp4-linear-backend"),
        ("qwen3.6-35b-a3b-nvfp4", "R3-moe-backend-unswept"),
        ("muse-glimmer-30b-nvfp4", "R3-moe-backend-unswept"),
        ("nemotron-3.5-lightning-30b-nvfp4", "R3-moe-backend-unswept"),
        ("qwen3.8-flash-next-tp-fp8kv", "R1-nvfp4-linear-backend"),
        ("qwen3.8-flash-next-tp-fp8kv", "R6-arch-flags"),
        ("ornith-1.5-397b", "R7-reasoning-parser"),
    }


def test_unknown_key_names_file_line_and_key(tmp_path: Path) -> None:
    write(tmp_path, "p.toml", PROFILE)
    write(
        tmp_path,
        "glm.toml",
        """
        # comment

        [arms."x"]
        profile = "p"
        moe_backnd = "marlin"
        """,
    )
    with pytest.raises(RecipeError) as err:
        load_catalog([tmp_path])
    e = err.value
    assert str(e) == f"{e.file}:6: arm 'x': unknown key 'moe_backnd' (did you mean 'moe_backend'?)"
    assert e.file.endswith("glm.toml") and e.line == 6 and e.key == "arms.x.moe_backnd"


@pytest.mark.parametrize(
    ("body", "line", "needle"),
    [
        ('tensor_parallel = "4"', 3, "'tensor_parallel' must be an integer >= 1, got '4'"),
        ("tensor_parallel = 0", 3, "'tensor_parallel' must be an integer >= 1"),
        ("enforce_eager = 1", 3, "'enforce_eager' must be true or false"),
        ('moe_backend = "trtion"', 3, "'moe_backend' = 'trtion' is not one of: "),
        ('kv_cache_dtype = "fp9"', 3, "'kv_cache_dtype' = 'fp9' is not one of"),
        ("replicas = true", 3, "'replicas' must be an integer >= 1"),
        ('expected_findings = ["R1"]', 3, "unknown rule id 'R1' (rules: R1-nvfp4-linear-backend, "),
        ('[arms.a.env]\nCUDA_VISIBLE_DEVICES = "0"', 4, "may not be set in a recipe"),
        ("[arms.a.env]\nVLLM_X = 1", 4, 'must be a string (quote it: VLLM_X = "1")'),
        ('[arms.a.flags]\n"--host" = "0.0.0.0"', 4, "'--host' may not be set as a free flag: resolve binds"),
        ('[arms.a.flags]\n"--block-size" = 16', 4, "use block_size"),
        ('[arms.a.flags]\n"--x y" = 1', 4, "is not a long flag"),
        ('[arms.a.flags]\n"--x" = {a = 1}', 4, "a flag value must be a string, number, boolean or list"),
    ],
)
def test_wrong_types_and_values_are_errors_at_their_line(
    tmp_path: Path, body: str, line: int, needle: str
) -> None:
    write(tmp_path, "p.toml", PROFILE)
    write(tmp_path, "a.toml", f'[arms.a]\nprofile = "p"\n{body}\n')
    with pytest.raises(RecipeError) as err:
        load_catalog([tmp_path])
    assert needle in str(err.value)
    assert err.value.line == line and err.value.file.endswith("a.toml")


def test_malformed_toml_reports_its_line(tmp_path: Path) -> None:
    write(tmp_path, "bad.toml", '[arms.a]\nprofile = "p"\nflags = [\n')
    with pytest.raises(RecipeError, match=r"bad\.toml:\d+: malformed TOML: ") as err:
        load_catalog([tmp_path / "bad.toml"])
    assert err.value.line == 3
    write(tmp_path, "bad.toml", '[arms.a]\nprofile = "p" "q"\n')
    with pytest.raises(
        RecipeError, match=r"bad\.toml:2: malformed TOML: Expected newline or end of document"
    ):
        load_catalog([tmp_path / "bad.toml"])


def test_missing_profile_and_sweep_references(tmp_path: Path) -> None:
    write(tmp_path, "p.toml", PROFILE)
    write(tmp_path, "a.toml", '[arms.a]\nprofile = "pp"\n')
    with pytest.raises(
        RecipeError, match=r"a\.toml:2: arm 'a': no profile named 'pp' \(did you mean 'p'\?\)"
    ):
        load_catalog([tmp_path])
    write(tmp_path, "a.toml", '[arms.a]\nprofile = "p"\n')
    write(tmp_path, "s.toml", '[sweeps.s]\narms = ["a", "b"]\n')
    with pytest.raises(RecipeError, match=r"s\.toml:1: sweep 's': no arm named 'b'"):
        load_catalog([tmp_path])


def test_duplicates_across_files_and_unknown_sections(tmp_path: Path) -> None:
    write(tmp_path, "p.toml", PROFILE)
    write(tmp_path, "q.toml", PROFILE)
    with pytest.raises(RecipeError, match=r"q\.toml:2: profile 'p' is already defined at .*p\.toml:2"):
        load_catalog([tmp_path])
    (tmp_path / "q.toml").unlink()
    write(tmp_path, "r.toml", '[arm.a]\nprofile = "p"\n')
    with pytest.raises(
        RecipeError, match=r"r\.toml:1: recipe file: unknown key 'arm' \(did you mean 'arms'\?\)"
    ):
        load_catalog([tmp_path])


def test_profile_requirements(tmp_path: Path) -> None:
    write(tmp_path, "p.toml", PROFILE.replace('quantizer = "modelopt"\n', ""))
    with pytest.raises(RecipeError, match=r"p\.toml:2: profile 'p': missing required key 'quantizer'"):
        load_catalog([tmp_path])
    write(tmp_path, "p.toml", PROFILE.replace("top_k = 20", 'top_k = "20"'))
    with pytest.raises(RecipeError, match="'top_k' must be a number"):
        load_catalog([tmp_path])
    write(tmp_path, "p.toml", PROFILE.replace("min_p = 0.0", "min_q = 0.0"))
    with pytest.raises(RecipeError, match="unknown key 'min_q' .did you mean 'min_p'"):
        load_catalog([tmp_path])
    write(
        tmp_path,
        "p.toml",
        PROFILE.replace('checkpoint = "org/Model-NVFP4"', 'checkpoint = "../x"\nlocal = true'),
    )
    with pytest.raises(
        RecipeError, match="a local checkpoint is a directory name under the box's model_root"
    ):
        load_catalog([tmp_path])


def test_no_recipe_files(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match="no \\*.toml recipe files found"):
        load_catalog([tmp_path])
    with pytest.raises(RecipeError, match="no such recipe file or directory"):
        load_catalog([tmp_path / "missing.toml"])


def test_key_lines_handles_quoted_dotted_keys_and_multiline_strings() -> None:
    text = '[arms."a.b"]\nprofile = "p"\ns = """\nx = 1\n"""\n[arms."a.b".env]\nK = "v"\n'
    lines = key_lines(text)
    assert lines[("arms", "a.b")] == 1
    assert lines[("arms", "a.b", "profile")] == 2
    assert ("arms", "a.b", "x") not in lines
    assert lines[("arms", "a.b", "env", "K")] == 7


# -- resolving ---------------------------------------------------------------------------------------


def test_replicas_one_per_card_with_distinct_ports(tmp_path: Path) -> None:
    c = catalog_of(tmp_path, '[arms.a]\nprofile = "p"\nlinear_backend = "b12x"\n')
    r = resolve(c, "a", PRO, base_port=9000)
    assert [rep.gpus for rep in r.replicas] == [[0], [1], [2], [3]]
    assert [rep.port for rep in r.replicas] == [9000, 9001, 9002, 9003]
    assert [rep.env["CUDA_VISIBLE_DEVICES"] for rep in r.replicas] == ["0", "1", "2", "3"]
    for rep in r.replicas:
        i = rep.argv.index("--host")
        assert rep.argv[i + 1] == "127.0.0.1" and rep.argv.count("--host") == 1
        assert rep.argv[0] == "/opt/vllm/bin/vllm"
    assert resolve(c, "a", NVL).replicas[0].argv[0] == "vllm"
    assert resolve(c, "a", PRO, gpus=[2, 3]).replicas[1].env["CUDA_VISIBLE_DEVICES"] == "3"
    assert len(r.recipe_hash) == 64 and r.recipe_hash != resolve(c, "a", PRO).recipe_hash
    assert r.recipe_hash == resolve(c, "a", PRO, base_port=9000).recipe_hash


def test_layouts_that_do_not_fit_are_refused(tmp_path: Path) -> None:
    c = catalog_of(
        tmp_path,
        """
        [arms.tp8]
        profile = "p"
        linear_backend = "b12x"
        tensor_parallel = 8
        [arms.two]
        profile = "p"
        linear_backend = "b12x"
        replicas = 2
        tensor_parallel = 2
        """,
    )
    with pytest.raises(ResolveError, match="needs 8 GPUs .* box pro-a offers 4"):
        resolve(c, "tp8", PRO)
    with pytest.raises(ResolveError, match="box local has none"):
        resolve(c, "two", CPU)
    single = catalog_of(
        tmp_path,
        """
        [arms.cpu2]
        profile = "p"
        device = "cpu"
        replicas = 2
        [arms.gpu1]
        profile = "p"
        """,
    )
    assert [(rep.gpus, rep.port) for rep in resolve(single, "cpu2", CPU, base_port=9000).replicas] == [
        ([], 9000),
        ([], 9001),
    ]  # a box without GPUs runs a CPU arm's replicas on its CPUs, each on its own port
    with pytest.raises(ResolveError, match="runs on GPUs and box local has none measured"):
        resolve(single, "gpu1", CPU)  # a GPU arm is refused there before anything starts
    assert [rep.gpus for rep in resolve(c, "two", RTX5090).replicas] == [[0, 1], [2, 3]]
    with pytest.raises(ResolveError, match="each usable once"):
        resolve(c, "two", PRO, gpus=[0, 0, 1, 2])
    with pytest.raises(ResolveError, match="no arm named 'tp9'; did you mean tp8"):
        resolve(c, "tp9", PRO)


def test_cpu_box_gets_one_replica_and_no_cuda_devices() -> None:
    c = load_catalog()
    r = resolve(c, "tiny-cpu", CPU)
    assert len(r.replicas) == 1 and r.replicas[0].gpus == []
    assert "CUDA_VISIBLE_DEVICES" not in r.replicas[0].env
    assert r.replicas[0].argv[:3] == ["/opt/cpu/bin/vllm", "serve", "/srv/models/tiny-llama"]
    with pytest.raises(ResolveError, match="has no model_root; set it with"):
        resolve(c, "tiny-cpu", BoxSpec("bare", 0))


def test_free_flags_merge_override_and_lists(tmp_path: Path) -> None:
    profile = PROFILE + '\n[profiles.p.flags]\n"--enable-prefix-caching" = true\n"--seed" = 1\n'
    c = catalog_of(
        tmp_path,
        """
        [arms.a]
        profile = "p"
        linear_backend = "b12x"
        [arms.a.flags]
        "--enable-prefix-caching" = false
        "--seed" = 7
        "--allowed-origins" = ["a", "b"]
        """,
        profile=profile,
    )
    argv = resolve(c, "a", PRO).replicas[0].argv
    assert "--enable-prefix-caching" not in argv
    assert argv[argv.index("--seed") + 1] == "7"
    assert argv[argv.index("--allowed-origins") :][:3] == ["--allowed-origins", "a", "b"]


def test_shell_metacharacters_stay_one_element_and_never_reach_a_shell(tmp_path: Path) -> None:
    """A hostile flag value is one argv element; running the argv executes no shell at all."""
    canary = tmp_path / "pwned"
    hostile = f"$(touch {canary}); touch {canary} | cat `touch {canary}` && echo '\"' > {canary}"
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    c = catalog_of(
        recipes,
        f"""
        [arms.a]
        profile = "p"
        linear_backend = "b12x"
        [arms.a.flags]
        "--chat-template" = {json.dumps(hostile)}
        """,
    )
    env_dir = tmp_path / "venv"
    (env_dir / "bin").mkdir(parents=True)
    fake = env_dir / "bin" / "vllm"
    dump = tmp_path / "argv.json"
    fake.write_text(
        f"#!{sys.executable}\nimport json, sys\njson.dump(sys.argv[1:], open({str(dump)!r}, 'w'))\n"
    )
    fake.chmod(0o755)
    box = BoxSpec("b", 1, serving_env=str(env_dir))
    rep = resolve(c, "a", box).replicas[0]
    assert rep.argv[rep.argv.index("--chat-template") + 1] == hostile
    subprocess.run(rep.argv, env={**rep.env, "PATH": "/usr/bin:/bin"}, check=True, timeout=30)
    assert json.loads(dump.read_text()) == rep.argv[1:]
    assert not canary.exists()


def test_serving_profile_puts_top_k_and_min_p_in_extra_body() -> None:
    c = load_catalog()
    r = resolve(c, "qwen3.8-27b-nvfp4-b12x", PRO)
    top, extra = r.profile.request_params()
    assert top == {"temperature": 1.0, "top_p": 0.95}
    assert extra == {"top_k": 20, "min_p": 0.0}
    gemma = c.profiles["gemma-4-26b-a4b"].serving
    assert gemma.thinking_default is False and gemma.reasoning_parser == "gemma4"
    assert gemma.request_params() == ({"temperature": 0.0}, {"top_k": 64})


def test_chat_template_kwargs_reach_server_and_request(tmp_path: Path) -> None:
    profile = PROFILE + "chat_template_kwargs = { enable_thinking = false }\n"
    c = catalog_of(tmp_path, '[arms.a]\nprofile = "p"\nlinear_backend = "b12x"\n', profile=profile)
    argv = resolve(c, "a", PRO).replicas[0].argv
    assert argv[argv.index("--default-chat-template-kwargs") + 1] == '{"enable_thinking":false}'
    assert c.profiles["p"].serving.request_params()[1]["chat_template_kwargs"] == {"enable_thinking": False}


def test_sweep_variant_swaps_kernels_and_counts_as_swept() -> None:
    c = load_catalog()
    sweep = c.sweeps["deepseek-v4-flash-moe"]
    assert KernelPair(None, "marlin") in sweep.pairs and sweep.base == "deepseek-v4-flash-dp4-ep"
    v = c.variant(sweep.base, KernelPair(None, "flashinfer_b12x"), sweep=sweep.name)
    assert v.name == "deepseek-v4-flash-dp4-ep@auto+flashinfer_b12x"
    argv = resolve(c, v, PRO).replicas[0].argv
    assert argv[argv.index("--kernel-config.moe_backend") + 1] == "flashinfer_b12x"
    assert "R3-moe-backend-unswept" not in rules(lint(c, v, PRO, sweep=sweep.name))  # the sweep measures it


def test_box_spec_from_store_row_and_probe() -> None:
    box = Box(name="pro-a", serving_env="/opt/vllm", model_root="/models")
    gpu = {"index": 0, "name": "NVIDIA H200", "mem_total_mib": 143771.0}
    probe = as_probe({"gpus": [gpu, {**gpu, "index": 1}], "topology": {"nvlink_all": True}})
    spec = box_spec(box, probe)
    assert (spec.gpu_count, spec.gpu_name, spec.gpu_mem_mib, spec.nvlink) == (
        2,
        "NVIDIA H200",
        143771.0,
        True,
    )
    assert (spec.serving_env, spec.model_root) == ("/opt/vllm", "/models")
    assert box_spec(box, None).gpu_count == 0 and box_spec(box, None).gpus_from is None
    assert box_spec(box, as_probe({"gpus": [gpu], "topology": {"nvlink_all": True}})).nvlink is False
    assert spec.gpus_from == "probe" and spec.gpus_basis == "pro-a's latest probe"


def test_box_spec_from_the_inventory_of_a_box_never_probed() -> None:
    """The write-up's boxes: the inventory's count and card size stand in for a probe, and say so."""
    seed = Box(name="seed-5090", gpu_summary="8x RTX 5090 32GB, 400 W")
    spec = box_spec(seed, None)
    assert (spec.gpu_count, spec.gpu_name, spec.gpus_from, spec.nvlink) == (
        8,
        "RTX 5090 32GB",
        "inventory",
        False,
    )
    assert spec.gpu_mem_mib is not None and spec.gpu_mem_mib < 32607  # under what the card reports: errs safe
    assert spec.gpus_basis == "seed-5090's inventory ('8x RTX 5090 32GB, 400 W'; never probed)"
    gpu = {"index": 0, "name": "NVIDIA GeForce RTX 5090", "mem_total_mib": 32607.0}
    assert box_spec(seed, as_probe({"gpus": [gpu]})).gpus_from == "probe"  # a probe wins over the listing
    probed_summary = Box(name="b", gpu_summary="4x NVIDIA RTX PRO 6000 Blackwell Server Edition, 600 W")
    assert box_spec(probed_summary, None).gpu_mem_mib is None  # no size in it: R10 checks the count only
    assert box_spec(Box(name="c", gpu_summary="no GPU info"), None).gpu_count == 0


# -- lint rules: each fires, and does not fire on the right configuration ---------------------------------


def test_every_rule_has_a_test_below() -> None:
    source = Path(__file__).read_text()
    for rule_id in RULES:
        assert source.count(f'"{rule_id}"') >= 2, rule_id


def test_r1_nvfp4_linear_backend(tmp_path: Path) -> None:
    c = catalog_of(
        tmp_path,
        """
        [arms.auto]
        profile = "p"
        [arms.cutlass]
        profile = "p"
        linear_backend = "cutlass"
        [arms.b12x]
        profile = "p"
        linear_backend = "b12x"
        [arms.fib12x]
        profile = "p"
        linear_backend = "flashinfer_b12x"
        """,
    )
    for arm in ("auto", "cutlass"):
        (f,) = [f for f in lint(c, arm) if f.rule_id == "R1-nvfp4-linear-backend"]
        assert (
            f.severity == "error"
            and f.blocking
            and "campaign rule 1" in f.reason
            and f.file is not None
            and f.file.endswith("arms.toml")
        )
    for arm in ("b12x", "fib12x"):
        assert "R1-nvfp4-linear-backend" not in rules(lint(c, arm))
    bf16 = PROFILE.replace('quantization = "nvfp4"', 'quantization = "bf16"')
    c = catalog_of(tmp_path, '[arms.auto]\nprofile = "p"\n', profile=bf16)
    assert "R1-nvfp4-linear-backend" not in rules(lint(c, "auto"))


def test_r2_compressed_tensors_nvfp4(tmp_path: Path) -> None:
    ct = PROFILE.replace('quantizer = "modelopt"', 'quantizer = "compressed-tensors"\npublisher = "RedHatAI"')
    c = catalog_of(tmp_path, '[arms.a]\nprofile = "p"\n', profile=ct)
    found = lint(c, "a")
    assert rules(found) == ["R2-compressed-tensors-nvfp4"]
    assert (
        found[0].severity == "warn"
        and "RedHatAI" in found[0].reason
        and found[0].key == "profiles.p.quantizer"
    )
    c = catalog_of(tmp_path, '[arms.a]\nprofile = "p"\nlinear_backend = "b12x"\n')
    assert "R2-compressed-tensors-nvfp4" not in rules(lint(c, "a"))


MOE = PROFILE.replace("reasoning = true", "reasoning = true\nmoe = true").replace(
    'quantization = "nvfp4"', 'quantization = "mxfp4"\nquant_scope = "experts"'
)


def test_r3_moe_backend_unswept(tmp_path: Path) -> None:
    arms = '[arms.a]\nprofile = "p"\nmoe_backend = "flashinfer_cutlass"\n[arms.b]\nprofile = "p"\n'
    c = catalog_of(tmp_path, arms, profile=MOE)
    (f,) = [f for f in lint(c, "a") if f.rule_id == "R3-moe-backend-unswept"]
    assert f.severity == "warn" and f.line == 3 and "no state.db" in f.reason  # MXFP4 experts: a warning
    assert "R3-moe-backend-unswept" not in rules(lint(c, "b"))
    c = catalog_of(tmp_path, arms, profile=MOE, sweeps='[sweeps.s]\narms = ["a"]\n')
    (f,) = [f for f in lint(c, "a") if f.rule_id == "R3-moe-backend-unswept"]  # a sweep that never ran
    assert "`campaign sweep run s --box BOX`" in f.reason
    assert "R3-moe-backend-unswept" not in rules(lint(c, "a", sweep="s"))  # that sweep's own launch
    assert "R3-moe-backend-unswept" in rules(lint(c, "a", sweep="other"))
    measured = MoeEvidence(served={"p": frozenset({"flashinfer_cutlass"})})
    assert "R3-moe-backend-unswept" not in rules(lint(c, "a", evidence=measured))
    assert "R3-moe-backend-unswept" in rules(
        lint(c, "a", evidence=MoeEvidence(served={"q": measured.served["p"]}))
    )


def test_r3_nvfp4_experts_pinned_without_a_measurement_is_an_error(tmp_path: Path) -> None:
    """The write-up: flashinfer_cutlass, right for gpt-oss, is refused outright by four-bit experts with group-16
    scales; eleven arms died on it in one night. A listing sweep does not excuse it, a measurement does."""
    nvfp4 = MOE.replace('quantization = "mxfp4"', 'quantization = "nvfp4"')
    c = catalog_of(
        tmp_path,
        '[arms.a]\nprofile = "p"\nmoe_backend = "flashinfer_cutlass"\n',
        profile=nvfp4,
        sweeps='[sweeps.s]\narms = ["a"]\n',
    )
    (f,) = [f for f in lint(c, "a") if f.rule_id == "R3-moe-backend-unswept"]
    assert f.severity == "error" and f.blocking and "NVFP4 experts" in f.reason
    refused = MoeEvidence(
        refused={"p": frozenset({"flashinfer_cutlass"})}, accepted={"p": frozenset({"marlin"})}
    )
    (f,) = [f for f in lint(c, "a", evidence=refused) if f.rule_id == "R3-moe-backend-unswept"]
    assert "saw the engine refuse it" in f.reason
    assert (
        rules(lint(c, replace(c.arms["a"], moe_backend="marlin"), evidence=refused)) == []
    )  # named as accepted


def test_r4_tp_without_nvlink(tmp_path: Path) -> None:
    c = catalog_of(tmp_path, '[arms.tp4]\nprofile = "p"\nlinear_backend = "b12x"\ntensor_parallel = 4\n')
    (f,) = [f for f in lint(c, "tp4", PRO) if f.rule_id == "R4-tp-without-nvlink"]
    assert f.severity == "warn" and "no NVLink" in f.reason and "17.9 GB" in f.reason
    assert "R4-tp-without-nvlink" not in rules(lint(c, "tp4", NVL))
    assert "R4-tp-without-nvlink" not in rules(lint(c, "tp4"))
    big = PROFILE.replace("weights_gb = 17.9", "weights_gb = 198.0")
    c = catalog_of(
        tmp_path, '[arms.tp4]\nprofile = "p"\nlinear_backend = "b12x"\ntensor_parallel = 4\n', profile=big
    )
    assert "R4-tp-without-nvlink" not in rules(lint(c, "tp4", PRO))
    c = load_catalog()
    assert "R4-tp-without-nvlink" in rules(lint(c, "gpt-oss-120b-tp4", PRO))
    assert "R4-tp-without-nvlink" not in rules(lint(c, "gpt-oss-120b-tp4", RTX5090))


def test_r5_tp_flashinfer_autotune(tmp_path: Path) -> None:
    c = catalog_of(
        tmp_path,
        """
        [arms.tp2]
        profile = "p"
        linear_backend = "b12x"
        tensor_parallel = 2
        [arms.forced]
        profile = "p"
        linear_backend = "b12x"
        tensor_parallel = 2
        [arms.forced.flags]
        "--enable-flashinfer-autotune" = true
        [arms.tp1]
        profile = "p"
        linear_backend = "b12x"
        [arms.tp1.flags]
        "--enable-flashinfer-autotune" = true
        """,
    )
    assert "--no-enable-flashinfer-autotune" in resolve(c, "tp2", PRO).replicas[0].argv
    assert "R5-tp-flashinfer-autotune" not in rules(lint(c, "tp2"))
    (f,) = [f for f in lint(c, "forced") if f.rule_id == "R5-tp-flashinfer-autotune"]
    assert f.severity == "error" and "hangs forever" in f.reason
    assert "--no-enable-flashinfer-autotune" not in resolve(c, "tp1", PRO).replicas[0].argv
    assert "R5-tp-flashinfer-autotune" not in rules(lint(c, "tp1"))


@pytest.mark.parametrize(
    ("architecture", "defaults", "bad", "good", "needle"),
    [
        ("qwen4exp", {}, 'kv_cache_dtype = "fp8_e4m3"', 'kv_cache_dtype = "auto"', "rejects an fp8 KV cache"),
        ("minimax_m3", {"block_size": 128}, "enforce_eager = false", "enforce_eager = true", "enforce_eager"),
        ("minimax_m3", {"enforce_eager": True}, "block_size = 16", "block_size = 128", "block_size 128"),
        ("inkling", {}, "block_size = 16", "enforce_eager = true", "Inkling needs enforce_eager"),
        ("glm5_next", {}, "block_size = 16", "block_size = 1024", "block_size 1024"),
        (
            "deepseek_v4",
            {},
            "max_num_seqs = 8",
            '[arms.a.env]\nVLLM_DSV4_OPROJ_SM120_FALLBACK = "1"',
            "VLLM_DSV4",
        ),
    ],
)
def test_r6_arch_flags(
    tmp_path: Path, architecture: str, defaults: dict[str, Any], bad: str, good: str, needle: str
) -> None:
    profile = PROFILE.replace('architecture = "qwen3"', f'architecture = "{architecture}"').replace(
        'quantization = "nvfp4"', 'quantization = "bf16"'
    )
    if defaults:
        profile += "\n[profiles.p.defaults]\n" + "\n".join(
            f"{k} = {json.dumps(v)}" for k, v in defaults.items()
        )
    c = catalog_of(tmp_path, f'[arms.a]\nprofile = "p"\n{bad}\n', profile=profile)
    (f,) = [f for f in lint(c, "a") if f.rule_id == "R6-arch-flags"]
    assert f.severity == "error" and needle in f.reason and "campaign rule 6" in f.reason
    c = catalog_of(tmp_path, f'[arms.a]\nprofile = "p"\n{good}\n', profile=profile)
    assert "R6-arch-flags" not in rules(lint(c, "a"))


def test_r6_profile_defaults_satisfy_and_arms_can_break_them() -> None:
    c = load_catalog()
    assert "R6-arch-flags" not in rules(lint(c, "minimax-m3-tp4"))
    assert "R6-arch-flags" not in rules(lint(c, "glm-5.3-flash-dp4-ep"))
    broken = c.arms["glm-5.3-flash-dp4-ep"]
    assert "R6-arch-flags" in rules(lint(c, replace(broken, block_size=64)))


def test_r7_reasoning_parser(tmp_path: Path) -> None:
    no_parser = PROFILE.replace('reasoning_parser = "qwen3"\n', "")
    c = catalog_of(tmp_path, '[arms.a]\nprofile = "p"\nlinear_backend = "b12x"\n', profile=no_parser)
    (f,) = [f for f in lint(c, "a") if f.rule_id == "R7-reasoning-parser"]
    assert f.severity == "error" and "chain-of-thought" in f.reason
    c = catalog_of(
        tmp_path,
        '[arms.a]\nprofile = "p"\nlinear_backend = "b12x"\n',
        profile=no_parser.replace("reasoning = true", "reasoning = false"),
    )
    assert "R7-reasoning-parser" not in rules(lint(c, "a"))
    c = catalog_of(tmp_path, '[arms.a]\nprofile = "p"\nlinear_backend = "b12x"\n')
    assert "R7-reasoning-parser" not in rules(lint(c, "a"))


@pytest.mark.parametrize(
    ("flags", "needle", "key"),
    [
        ('"--moe-backnd" = "marlin"', "unknown vLLM 0.32.0 flag '--moe-backnd'", "arms.a.flags.--moe-backnd"),
        (
            '"--enforce-eagre" = true',
            "unknown vLLM 0.32.0 flag '--enforce-eagre'",
            "arms.a.flags.--enforce-eagre",
        ),
        ('"--seed" = true', "'--seed' needs a value", "arms.a.flags.--seed"),
        (
            '"--enable-prefix-caching" = "yes"',
            "is a switch and takes no value",
            "arms.a.flags.--enable-prefix-caching",
        ),
        ('"--all2all-backend" = "NOPE"', "does not accept 'NOPE'", "arms.a.flags.--all2all-backend"),
        ('"--kernel-config.moe_backend2" = "x"', None, None),
    ],
)
def test_r8_vllm_flag(tmp_path: Path, flags: str, needle: str | None, key: str | None) -> None:
    c = catalog_of(tmp_path, f'[arms.a]\nprofile = "p"\nlinear_backend = "b12x"\n[arms.a.flags]\n{flags}\n')
    found = [f for f in lint(c, "a") if f.rule_id == "R8-vllm-flag"]
    if needle is None:  # sub-keys of a config flag other than the kernel backends are vLLM's to check
        assert found == []
        return
    (f,) = found
    assert f.severity == "error" and needle in f.reason and f.key == key and f.line == 5


def test_a_parser_vllm_does_not_register_is_refused_at_load(tmp_path: Path) -> None:
    for key, bad in (("reasoning_parser", "qwen4"), ("tool_call_parser", "qwen3_xm")):
        profile = PROFILE.replace(
            'reasoning_parser = "qwen3"',
            f'{key} = "{bad}"' + ('\nreasoning_parser = "qwen3"' if key != "reasoning_parser" else ""),
        )
        with pytest.raises(RecipeError) as err:
            catalog_of(tmp_path, '[arms.a]\nprofile = "p"\nlinear_backend = "b12x"\n', profile=profile)
        assert (
            f"profiles.toml:12: profile 'p' serving: '{key}' = '{bad}' is not one of the parsers vLLM 0.32.0 "
            "registers: " in str(err.value)
        )
    c = catalog_of(
        tmp_path, '[arms.a]\nprofile = "p"\nlinear_backend = "b12x"\n[arms.a.flags]\n"--seed" = 3\n'
    )
    assert "R8-vllm-flag" not in rules(lint(c, "a"))


def test_r9_vendor_profile(tmp_path: Path) -> None:
    bare = PROFILE.replace("thinking_default = true\n", "").replace(
        "sampling = { temperature = 1.0, top_p = 0.95, top_k = 20, min_p = 0.0 }\n", ""
    )
    c = catalog_of(tmp_path, '[arms.a]\nprofile = "p"\nlinear_backend = "b12x"\n', profile=bare)
    found = [f for f in lint(c, "a") if f.rule_id == "R9-vendor-profile"]
    assert len(found) == 2 and all(f.severity == "warn" for f in found)
    assert {"sampling" in found[0].reason, "thinking_default" in found[1].reason} == {True}
    c = catalog_of(tmp_path, '[arms.a]\nprofile = "p"\nlinear_backend = "b12x"\n')
    assert "R9-vendor-profile" not in rules(lint(c, "a"))


def test_r10_fits_memory(tmp_path: Path) -> None:
    big = PROFILE.replace("weights_gb = 17.9", "weights_gb = 61.0")
    arms = """
        [arms.tp1]
        profile = "p"
        linear_backend = "b12x"
        [arms.tp4]
        profile = "p"
        linear_backend = "b12x"
        tensor_parallel = 4
        [arms.tp16]
        profile = "p"
        linear_backend = "b12x"
        tensor_parallel = 16
        """
    c = catalog_of(tmp_path, arms, profile=big)
    (f,) = [f for f in lint(c, "tp1", RTX5090) if f.rule_id == "R10-fits-memory"]
    assert f.severity == "error" and "61 GB" in f.reason and "32 GB cards" in f.reason
    assert "R10-fits-memory" not in rules(lint(c, "tp4", RTX5090))
    assert "R10-fits-memory" not in rules(lint(c, "tp1", PRO))
    assert "R10-fits-memory" not in rules(lint(c, "tp1"))
    assert "R10-fits-memory" not in rules(lint(c, "tp1", CPU))
    (f,) = [f for f in lint(c, "tp16", PRO) if f.rule_id == "R10-fits-memory"]
    assert "needs 16 GPUs" in f.reason and f.blocking
    c = catalog_of(tmp_path, arms, profile=big.replace("weights_gb = 61.0\n", ""))
    (f,) = [f for f in lint(c, "tp1", PRO) if f.rule_id == "R10-fits-memory"]
    assert f.severity == "warn" and "weight size unknown" in f.reason
    shipped = load_catalog()
    assert "R10-fits-memory" not in rules(lint(shipped, "glm-5.3-flash-fp8-tp4", PRO))
    rtx4 = BoxSpec("rtx4", 4, "NVIDIA GeForce RTX 5090", 32607)
    assert "R10-fits-memory" in rules(lint(shipped, "glm-5.3-flash-fp8-tp4", rtx4))


def test_expected_findings_still_block() -> None:
    c = load_catalog()
    (f,) = lint(c, "qwen3.8-27b-nvfp4-auto")
    assert f.expected and f.blocking and f.rule_id == "R1-nvfp4-linear-backend"
    assert f.to_dict()["expected"] is True


def test_r11_drafter_baseline(tmp_path: Path) -> None:
    spec = """'{"method":"ngram","num_speculative_tokens":3}'"""
    other = PROFILE.replace("profiles.p", "profiles.q").replace("org/Model-NVFP4", "org/Other-NVFP4")
    c = catalog_of(
        tmp_path,
        f"""
        [arms.base]
        profile = "p"
        [arms.good]
        profile = "p"
        baseline = "base"
        flags = {{ "--speculative-config" = {spec} }}
        [arms.orphan]
        profile = "p"
        flags = {{ "--speculative-config" = {spec} }}
        [arms.on-spec]
        profile = "p"
        baseline = "good"
        flags = {{ "--speculative-config" = {spec} }}
        [arms.other-model]
        profile = "q"
        [arms.cross]
        profile = "p"
        baseline = "other-model"
        flags = {{ "--speculative-config" = {spec} }}
        [arms.wider]
        profile = "p"
        max_num_seqs = 64
        [arms.two-changes]
        profile = "p"
        max_num_seqs = 128
        baseline = "wider"
        flags = {{ "--speculative-config" = {spec} }}
        [arms.plain-with-baseline]
        profile = "p"
        baseline = "base"
        """,
        profile=PROFILE + other,
    )

    def r11(arm: str) -> list[str]:
        return [f.reason for f in lint(c, arm) if f.rule_id == "R11-drafter-baseline"]

    assert r11("good") == [] and r11("base") == []
    assert r11("orphan") == [
        "drafter arm orphan has no baseline: name its non-speculative control arm as `baseline`: "
        "the same arm without the speculative config"
    ]
    assert r11("on-spec")[0].startswith("baseline good is itself a drafter arm")
    assert r11("cross")[0].startswith("baseline other-model serves org/Other-NVFP4, not org/Model-NVFP4")
    assert r11("two-changes")[0].startswith("baseline wider differs from two-changes in --max-num-seqs,")
    assert r11("plain-with-baseline")[0].startswith("arm plain-with-baseline sets a baseline but no")
    with pytest.raises(RecipeError, match="no arm named 'nowhere' to be its baseline"):
        catalog_of(tmp_path, '[arms.x]\nprofile = "p"\nbaseline = "nowhere"\n')


def test_shipped_drafter_arms_name_clean_baselines() -> None:
    shipped = load_catalog()
    drafters = sorted(a.name for a in shipped.arms.values() if a.speculative_config is not None)
    assert drafters == [
        "deepseek-v4-flash-tp4-b12x-dspark",
        "deepseek-v4-flash-tp4-dspark",
        "gemma-4-26b-a4b-mtp",
        "glm-5.3-flash-tp4-mtp",
        "laguna-s-2.1-dflash",
        "nemotron-3.5-lightning-30b-dspark",
        "qwen3.8-27b-bf16-dflash2",
        "qwen3.8-27b-dflash2",
        "tiny-cpu-ngram",
    ]
    assert shipped.arms["tiny-cpu-ngram"].baseline == "tiny-cpu"
    for name in drafters:
        assert "R11-drafter-baseline" not in rules(lint(shipped, name)), name
