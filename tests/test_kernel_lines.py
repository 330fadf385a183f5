"""Kernel selection lines (campaign rule 1): real vLLM lines parsed into (layer kind, kernel), log noise
refused, and what an arm asked for checked against what the engine used (``kernel_fallback``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agents.loglines import (
    AS_REQUESTED,
    FALLBACK,
    KERNEL_NAMES,
    NOT_REPORTED,
    KernelRecord,
    backend_covers,
    check_kernels,
    kernel_category,
    kernel_fallback,
    kernel_records,
    parse_kernel_line,
    requested_backends,
)

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "tests" / "fixtures" / "vllm_logs"


def _fixture(name: str) -> list[str]:
    return [line for line in (LOGS / name).read_text().splitlines() if line and not line.startswith("#")]


KERNEL_LINES = [tuple(row.split("\t")) for row in _fixture("kernel-lines.tsv")]


@pytest.mark.parametrize(("kind", "kernel", "scope", "line"), KERNEL_LINES)
def test_every_captured_kernel_line_gives_its_layer_kind_and_kernel(
    kind: str, kernel: str, scope: str, line: str
) -> None:
    assert parse_kernel_line(line) == KernelRecord(kind, kernel, "" if scope == "-" else scope, line)
    assert kernel_category(line) == kind


@pytest.mark.parametrize("line", _fixture("kernel-noise.txt"))
def test_log_noise_is_never_a_kernel_line(line: str) -> None:
    assert parse_kernel_line(line) is None and kernel_category(line) is None


def test_the_cpu_vllm_logs_name_exactly_the_kernels_the_engine_chose() -> None:
    def records(name: str) -> list[tuple[str, str]]:
        return [(r.kind, r.kernel) for r in kernel_records((LOGS / name).read_text().splitlines())]

    # A dense model on CPU: vLLM names no kernel at all (the CPU attention backend is not logged).
    assert records("cpu-llama-serving.log") == []
    assert records("cpu-moe-auto-serving.log") == [
        ("moe", "CPU"),
        ("other", "MoEPrepareAndFinalizeNoDPEPModular"),
        ("moe", "CPUUnquantizedExperts"),
    ]
    assert records("cpu-moe-backend-refused.log") == []  # the refusal's traceback names no selection


def test_a_line_logged_twice_by_two_workers_is_one_record() -> None:
    line = "({} pid=1) INFO 12-02 [__init__.py:1240] Using B12xNvFp4LinearKernel for NVFP4 GEMM"
    assert len(kernel_records([line.format("Worker_TP0"), line.format("Worker_TP1")])) == 1


# -- what the arm asked for ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "env", "asked"),
    [
        (["vllm", "serve", "/m"], {}, ("auto", "auto", "auto")),
        (
            [
                "vllm",
                "serve",
                "/m",
                "--kernel-config.linear_backend",
                "b12x",
                "--kernel-config.moe_backend",
                "marlin",
            ],
            {},
            ("b12x", "marlin", "auto"),
        ),
        (
            [
                "vllm",
                "serve",
                "/m",
                "--linear-backend=flashinfer_b12x",
                "--moe-backend",
                "FLASHINFER-CUTLASS",
            ],
            {},
            ("flashinfer_b12x", "flashinfer_cutlass", "auto"),
        ),
        (
            ["vllm", "serve", "/m", "--kernel-config", '{"moe_backend": "triton", "linear_backend": "b12x"}'],
            {},
            ("b12x", "triton", "auto"),
        ),
        (["vllm", "serve", "/m", "--attention-backend", "flash_attn"], {}, ("auto", "auto", "FLASH_ATTN")),
        (
            ["vllm", "serve", "/m", "--attention-config.backend=TRITON_ATTN"],
            {},
            ("auto", "auto", "TRITON_ATTN"),
        ),
        (
            ["vllm", "serve", "/m", "--attention-config", '{"backend": "FLASHINFER"}'],
            {},
            ("auto", "auto", "FLASHINFER"),
        ),
        (["vllm", "serve", "/m"], {"VLLM_ATTENTION_BACKEND": "FLASHINFER"}, ("auto", "auto", "FLASHINFER")),
        (
            ["vllm", "serve", "/m", "--attention-backend", "TRITON_ATTN"],
            {"VLLM_ATTENTION_BACKEND": "FLASHINFER"},
            ("auto", "auto", "TRITON_ATTN"),
        ),  # the flag wins over the old variable
        (
            ["vllm", "serve", "/m", "--moe-backend", "triton", "--kernel-config.moe_backend", "marlin"],
            {},
            ("auto", "marlin", "auto"),
        ),  # the last one wins, as in vLLM's parser
        (["vllm", "serve", "/m", "--kernel-config", "{not json"], {}, ("auto", "auto", "auto")),
        (["vllm", "serve", "/m", "--moe-backend"], {}, ("auto", "auto", "auto")),  # a flag without its value
    ],
)
def test_the_backends_an_arm_asks_for(
    argv: list[str], env: dict[str, str], asked: tuple[str, str, str]
) -> None:
    assert requested_backends(argv, env) == dict(zip(("linear", "moe", "attention"), asked, strict=True))


def test_the_argv_resolve_writes_is_read_back() -> None:
    from console.recipes import BoxSpec, load_catalog, resolve

    catalog = load_catalog()
    for arm in catalog.arms.values():
        if not (arm.linear_backend or arm.moe_backend):
            continue
        box = BoxSpec(name="b", gpu_count=8, model_root="/models", serving_env="/env")
        replica = resolve(catalog, arm.name, box).replicas[0]
        asked = requested_backends(replica.argv, replica.env)
        assert (asked["linear"], asked["moe"]) == (arm.linear_backend or "auto", arm.moe_backend or "auto"), (
            arm.name
        )


def test_every_backend_in_the_table_is_one_the_pinned_vllm_accepts() -> None:
    accepted = json.loads((ROOT / "console" / "recipes" / "vllm_flags.json").read_text())["kernel_backends"]
    assert set(KERNEL_NAMES["linear"]) <= set(accepted["linear_backend"])
    assert set(KERNEL_NAMES["moe"]) <= set(accepted["moe_backend"])


# -- asked against used --------------------------------------------------------------------------------


def _records(*lines: str) -> list[KernelRecord]:
    return kernel_records(lines)


NVFP4_B12X = "INFO [__init__.py:1240] Using B12xNvFp4LinearKernel for NVFP4 GEMM"
NVFP4_FI_B12X = "INFO [__init__.py:1196] Using FlashInferB12xNvFp4LinearKernel for NVFP4 GEMM"
NVFP4_AUTO = "INFO [__init__.py:1240] Using FlashInferCuteDslNvFp4W4A16LinearKernel for NVFP4 GEMM"
FP8_ATTN_CUTLASS = (
    "INFO [__init__.py:797] Selected CutlassFP8ScaledMMLinearKernel for CompressedTensorsW8A8Fp8"
)
FP8_B12X = "INFO [__init__.py:758] Selected B12xFp8BlockScaledMMKernel for Fp8LinearMethod"
MOE_FI_CUTLASS = (
    "INFO [nvfp4.py:203] Using 'FLASHINFER_CUTLASS' NvFp4 MoE backend out of potential backends: "
    "['FLASHINFER_CUTLASS', 'MARLIN']."
)
MOE_MARLIN_MXFP4 = "INFO [mxfp4.py:352] Using 'MARLIN' Mxfp4 MoE backend."
MOE_MARLIN_OLD = "INFO [mxfp4.py:166] Using Marlin backend"
MOE_MARLIN_EXPERTS = "INFO [mxfp4.py:2224] Using MarlinExperts"
MOE_B12X = "Using 'B12X_MXFP4' Mxfp4 MoE backend"
MOE_B12X_EXPERTS = "Using W4A4B12xExperts"
MOE_TRITON_UNQUANT = (
    "INFO [unquantized.py:212] Using TRITON Unquantized MoE backend out of potential backends: "
    "['FlashInfer TRTLLM', 'FlashInfer CUTLASS', 'TRITON', 'BATCHED_TRITON']."
)
MOE_FI_CUTLASS_UNQUANT = (
    "INFO [unquantized.py:213] Using FlashInfer CUTLASS Unquantized MoE backend out of "
    "potential backends: ['FlashInfer TRTLLM', 'FlashInfer CUTLASS', 'TRITON']."
)
ATTN_FLASHINFER = (
    "INFO [cuda.py:368] Using FLASHINFER attention backend out of potential backends: ['FLASHINFER']."
)
ATTN_FA_OLD = "INFO 03-23 05:01:14 [cuda.py:215] Using Flash Attention backend on V1 engine."
VIT_FLASH = "INFO [cuda.py:424] Using backend AttentionBackendEnum.FLASH_ATTN for vit attention"


def _check(asked: dict[str, str], *lines: str) -> dict[str, tuple[str, tuple[str, ...]]]:
    return {c.kind: (c.status, c.other_than_requested) for c in check_kernels(asked, _records(*lines))}


def test_the_seeds_w4a4_kernels_are_what_b12x_and_flashinfer_b12x_ask_for() -> None:
    assert _check({"linear": "b12x"}, NVFP4_B12X)["linear"] == (AS_REQUESTED, ())
    assert _check({"linear": "b12x"}, FP8_B12X)["linear"] == (AS_REQUESTED, ())  # the FP8 checkpoint's kernel
    assert _check({"linear": "flashinfer_b12x"}, NVFP4_FI_B12X)["linear"] == (AS_REQUESTED, ())
    # the two are different kernels: one asked for and the other used is a fallback
    assert _check({"linear": "b12x"}, NVFP4_FI_B12X)["linear"] == (
        FALLBACK,
        ("FlashInferB12xNvFp4LinearKernel",),
    )
    assert _check({"linear": "flashinfer_b12x"}, NVFP4_B12X)["linear"] == (
        FALLBACK,
        ("B12xNvFp4LinearKernel",),
    )


def test_a_w4a16_dequant_kernel_under_auto_is_as_asked_and_under_b12x_is_a_fallback() -> None:
    assert _check({"linear": "auto"}, NVFP4_AUTO)["linear"] == (AS_REQUESTED, ())
    assert _check({"linear": "b12x"}, NVFP4_AUTO)["linear"] == (
        FALLBACK,
        ("FlashInferCuteDslNvFp4W4A16LinearKernel",),
    )


def test_fp8_attention_projections_on_another_kernel_are_a_fallback_even_beside_b12x() -> None:
    # campaign rule 2: a compressed-tensors NVFP4 build has FP8 attention the b12x kernel refuses
    [linear, _, _] = check_kernels({"linear": "b12x"}, _records(NVFP4_B12X, FP8_ATTN_CUTLASS))
    assert linear.status == FALLBACK and linear.used == (
        "B12xNvFp4LinearKernel",
        "CutlassFP8ScaledMMLinearKernel",
    )
    assert linear.other_than_requested == ("CutlassFP8ScaledMMLinearKernel",)


@pytest.mark.parametrize(
    ("moe", "lines", "expected"),
    [
        ("flashinfer_cutlass", (MOE_FI_CUTLASS,), AS_REQUESTED),
        ("flashinfer_cutlass", (MOE_FI_CUTLASS_UNQUANT,), AS_REQUESTED),
        ("marlin", (MOE_MARLIN_MXFP4, MOE_MARLIN_EXPERTS), AS_REQUESTED),
        ("marlin", (MOE_MARLIN_OLD,), AS_REQUESTED),
        ("b12x", (MOE_B12X, MOE_B12X_EXPERTS), AS_REQUESTED),
        ("triton", (MOE_TRITON_UNQUANT,), AS_REQUESTED),
        ("marlin", (MOE_FI_CUTLASS,), FALLBACK),
        ("triton", (MOE_FI_CUTLASS_UNQUANT,), FALLBACK),
        ("flashinfer_cutlass", (MOE_TRITON_UNQUANT,), FALLBACK),
        ("b12x", (MOE_MARLIN_MXFP4,), FALLBACK),
        ("auto", (MOE_FI_CUTLASS,), AS_REQUESTED),
        ("marlin", (), NOT_REPORTED),
    ],
)
def test_moe_backends(moe: str, lines: tuple[str, ...], expected: str) -> None:
    assert _check({"moe": moe}, *lines)["moe"][0] == expected


def test_attention_backends_old_and_new_wording() -> None:
    assert _check({"attention": "FLASHINFER"}, ATTN_FLASHINFER)["attention"] == (AS_REQUESTED, ())
    assert _check({"attention": "FLASH_ATTN"}, ATTN_FA_OLD)["attention"] == (AS_REQUESTED, ())
    assert _check({"attention": "FLASH_ATTN"}, ATTN_FLASHINFER)["attention"] == (FALLBACK, ("FLASHINFER",))
    # the vision encoder's attention is another stage: it is neither what was asked nor a fallback
    assert _check({"attention": "TRITON_ATTN"}, VIT_FLASH)["attention"] == (NOT_REPORTED, ())
    assert backend_covers("attention", "FLASH_ATTN_MLA", "FLASH_ATTN") is False  # a name, not a prefix


def test_a_whole_launch_log_checked_against_its_argv() -> None:
    lines = [row[3] for row in KERNEL_LINES[:7]]  # the vLLM 0.19.2 server started with moe flashinfer_cutlass
    argv = ["vllm", "serve", "RedHatAI/Qwen3.6-35B-A3B-NVFP4", "--moe-backend", "flashinfer_cutlass"]
    checks = check_kernels(requested_backends(argv, {}), kernel_records(lines))
    assert [(c.kind, c.requested, c.status, c.used) for c in checks] == [
        ("linear", "auto", AS_REQUESTED, ("FlashInferCutlassNvFp4LinearKernel",)),
        ("moe", "flashinfer_cutlass", AS_REQUESTED, ("FLASHINFER_CUTLASS",)),
        ("attention", "auto", AS_REQUESTED, ("FLASHINFER",)),
    ]
    assert not kernel_fallback(checks)
    pinned = check_kernels(requested_backends([*argv, "--linear-backend", "b12x"], {}), kernel_records(lines))
    assert kernel_fallback(pinned) and pinned[0].other_than_requested == (
        "FlashInferCutlassNvFp4LinearKernel",
    )


def test_nothing_reported_is_not_a_fallback() -> None:
    log = (LOGS / "cpu-llama-serving.log").read_text().splitlines()
    checks = check_kernels({"linear": "b12x", "moe": "auto", "attention": "auto"}, kernel_records(log))
    assert [c.status for c in checks] == [NOT_REPORTED] * 3 and not kernel_fallback(checks)
