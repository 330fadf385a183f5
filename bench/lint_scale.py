"""Benchmark: loading and linting a recipe catalog as its arm count doubles (it must grow linearly).

What ``campaign recipe lint`` does, in process: ``load_catalog`` (TOML, key lines, checks) then
``lint_catalog`` (every rule on every arm). The catalog is generated: eight profiles, N arms spread over
them (kernels, layout keys, free flags, env), one sweep listing every other arm and one with kernel pairs
per profile. Each size is run in the same process; the figure that matters is the ratio of the time per
doubling, about 2 when the work is linear and 4 when it is quadratic (it was: 4,000 arms took a minute).

    python bench/lint_scale.py [--arms 1000 2000 4000 8000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from console.recipes import lint_catalog, load_catalog  # noqa: E402

PROFILES = 8


def profiles() -> str:
    return "\n".join(
        f"""
[profiles."p{i}"]
checkpoint = "org/Model-{i}-NVFP4"
served_model_name = "model-{i}"
architecture = "qwen3"
quantization = "nvfp4"
quantizer = "modelopt"
weights_gb = {10 + i}.5
reasoning = true
moe = {"true" if i % 2 else "false"}

[profiles."p{i}".serving]
reasoning_parser = "qwen3"
thinking_default = true
sampling = {{ temperature = 0.6, top_p = 0.95, top_k = 20 }}

[profiles."p{i}".flags]
"--enable-prefix-caching" = true
"""
        for i in range(PROFILES)
    )


def arms(n: int) -> str:
    out = []
    for i in range(n):
        out.append(f"""
[arms."a{i}"]
profile = "p{i % PROFILES}"
linear_backend = "b12x"
moe_backend = "marlin"
tensor_parallel = {1 + i % 2}
max_num_seqs = {64 + i % 512}
max_model_len = 8192

[arms."a{i}".flags]
"--seed" = {i}
"--allowed-origins" = ["a", "b"]

[arms."a{i}".env]
VLLM_CPU_KVCACHE_SPACE = "{1 + i % 4}"
""")
    return "".join(out)


def sweeps(n: int) -> str:
    listed = ", ".join(f'"a{i}"' for i in range(0, n, 2))
    out = [f'[sweeps."half"]\narms = [{listed}]\n']
    for p in range(PROFILES):
        out.append(
            f'[sweeps."pairs-{p}"]\nbase = "a{p}"\npairs = [{{ moe = "marlin" }}, {{ moe = "triton" }}]\n'
        )
    return "\n".join(out)


def measure(folder: Path, repeat: int) -> tuple[float, float, int]:
    """Best-of-``repeat`` seconds for load and for lint, and the number of findings."""
    loads, lints, findings = [], [], 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        catalog = load_catalog([folder])
        t1 = time.perf_counter()
        findings = len(lint_catalog(catalog))
        t2 = time.perf_counter()
        loads.append(t1 - t0)
        lints.append(t2 - t1)
    return min(loads), min(lints), findings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--arms", type=int, nargs="+", default=[1000, 2000, 4000, 8000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{'arms':>7} {'load s':>8} {'lint s':>8} {'us/arm':>8} {'x per doubling':>15} {'findings':>9}")
    previous: tuple[int, float] | None = None
    with tempfile.TemporaryDirectory(prefix="lint-scale-") as tmp:
        for n in sorted(args.arms):
            folder = Path(tmp) / str(n)
            folder.mkdir()
            (folder / "profiles.toml").write_text(profiles())
            (folder / "arms.toml").write_text(arms(n))
            (folder / "sweeps.toml").write_text(sweeps(n))
            load_s, lint_s, findings = measure(folder, args.repeat)
            total = load_s + lint_s
            ratio = ""
            if previous is not None:
                # Normalised to one doubling, whatever the step between the sizes asked for.
                ratio = f"{(total / previous[1]) ** (1 / math.log2(n / previous[0])):.2f}"
            print(f"{n:>7} {load_s:>8.3f} {lint_s:>8.3f} {total / n * 1e6:>8.1f} {ratio:>15} {findings:>9}")
            previous = (n, total)


if __name__ == "__main__":
    main()
