"""The one ``vllm bench serve`` command line the suite and the benchmarks run against a completions server:
random prompts of a fixed size, every request at once up to a concurrency (``--request-rate inf``), answers
of exactly the asked length (``--ignore-eos``), and its result saved as JSON where the caller reads it."""

from __future__ import annotations

from pathlib import Path


def bench_serve_argv(
    python: Path,
    base_url: str,
    model: str,
    tokenizer: Path,
    *,
    input_len: int,
    output_len: int,
    prompts: int,
    concurrency: int,
    result_dir: Path,
    result_filename: str | None = None,
    seed: int | None = None,
    detailed: bool = False,
    extra: tuple[str, ...] = (),
) -> list[str]:
    """``seed`` None keeps vLLM's default (0: the same prompts every run); ``detailed`` saves per-request lists."""
    return [
        str(python),
        "-m",
        "vllm.entrypoints.cli.main",
        "bench",
        "serve",
        "--backend",
        "vllm",
        "--base-url",
        base_url,
        "--endpoint",
        "/v1/completions",
        "--model",
        model,
        "--tokenizer",
        str(tokenizer),
        "--dataset-name",
        "random",
        "--random-input-len",
        str(input_len),
        "--random-output-len",
        str(output_len),
        "--num-prompts",
        str(prompts),
        "--max-concurrency",
        str(concurrency),
        "--request-rate",
        "inf",
        "--ignore-eos",
        *extra,
        "--disable-tqdm",
        "--save-result",
        *(["--save-detailed"] if detailed else []),
        "--result-dir",
        str(result_dir),
        *(["--result-filename", result_filename] if result_filename else []),
        *(["--seed", str(seed)] if seed is not None else []),
    ]
