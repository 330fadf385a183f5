"""The serving env's attention backends, read from its vLLM's source (agents/attention_backends.py), and the
check and launch that refuse an arm whose ``--attention-backend`` that vLLM lacks.

The real file is the CPU vLLM 0.32 env's ``vllm/v1/attention/backends/registry.py`` (testbed/vllm_env.py):
read there by the probe with the env's own Python, and copied into an sshd box's serving env, where the real
agent probe reads it over SSH as on a GPU box. Nothing of vLLM is imported or run.
"""

from __future__ import annotations

import json
import shutil
import string
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents.attention_backends import REGISTRY, backend_names
from agents.probe import serving_env
from console.store import Store
from testbed import vllm_env
from testbed.fleet_fixtures import fleet_store, sshd_farm
from testbed.sshd import SshdFarm
from tests.support.cli import run_cli
from tests.test_serving_env import _box, site_packages

__all__ = ["fleet_store", "sshd_farm"]

NAMES = st.text(string.ascii_uppercase + "_0123456789", min_size=1, max_size=20).filter(
    lambda s: s[0].isalpha()
)


def enum_source(members: list[str], before: str = "") -> str:
    body = "".join(f'    {m} = "vllm.v1.attention.backends.x.{m.title()}Backend"\n' for m in members)
    return (
        "from enum import Enum\n\n"
        f"{before}\n"
        "class AttentionBackendEnum(Enum):\n"
        '    """All supported attention backends."""\n\n'
        f"{body or '    pass'}\n"
        "    def get_class(self):\n        return None\n"
    )


@given(st.lists(NAMES, unique=True, max_size=30), st.sampled_from(["", "X = 1", "class Other:\n    A = 1\n"]))
def test_every_member_of_the_enum_is_read_and_nothing_else(members: list[str], before: str) -> None:
    assert backend_names(enum_source(members, before)) == members


@given(st.text(max_size=400))
def test_any_text_gives_names_or_unknown_never_an_exception(text: str) -> None:
    got = backend_names(text)
    assert got is None or all(isinstance(n, str) for n in got)


@given(st.lists(NAMES, unique=True, min_size=1, max_size=10), st.integers(1, 40))
def test_a_cut_off_registry_is_unknown(members: list[str], keep: int) -> None:
    source = enum_source(members)
    cut = source[: source.index("class AttentionBackendEnum") + keep]
    assert backend_names(cut + "(") is None


def test_a_file_without_the_enum_is_unknown() -> None:
    assert backend_names("class Other(Enum):\n    FLASH_ATTN = 'x'\n") is None


def real_registry() -> Path:
    env = vllm_env.ensure()
    return next((env.prefix / "lib").glob(f"python3*/site-packages/vllm/{REGISTRY}"))


def test_the_probe_reads_the_cpu_vllm_0_32_backends_without_importing_it() -> None:
    env = vllm_env.ensure()
    got = serving_env(str(env.python))
    backends = got.get("attention_backends")
    assert backends is not None, got
    # The CPU build's own backend, and the sparse-MLA SM120 one recipes/arms/glm-5.3-flash.toml names.
    assert {"CPU_ATTN", "FLASH_ATTN", "FLASHINFER_MLA_SPARSE_SM120"} <= set(backends)
    assert backends == backend_names(real_registry().read_text())


def _arm_recipes(tmp_path: Path, backend: str) -> Path:
    recipes = tmp_path / "recipes"
    recipes.mkdir(exist_ok=True)
    (recipes / "backend.toml").write_text(
        f"""
[profiles.backend]
checkpoint = "org/Backend-Model"
architecture = "qwen3"
quantization = "bf16"
quantizer = "vendor"
weights_gb = 1.0

[arms.backend-tp1]
profile = "backend"
replicas = 1
flags = {{ "--attention-backend" = "{backend}" }}
"""
    )
    return recipes


def _verdicts(out: str) -> list[dict[str, object]]:
    return [v for v in json.loads(out)["verdicts"] if v["numbers"].get("attention_backend")]


@pytest.mark.sshd
@pytest.mark.timeout(300)
def test_an_arm_naming_a_backend_the_envs_vllm_lacks_is_refused_by_check_and_launch(
    sshd_farm: SshdFarm,
    fleet_store: Store,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    box, env = _box(sshd_farm, fleet_store)
    # The box and its env are the session's (tests/test_serving_env.py shares them): take the vLLM source
    # back out after, or a later test there would find it.
    request.addfinalizer(lambda: shutil.rmtree(site_packages(env) / "vllm", ignore_errors=True))
    db = tmp_path / "state.db"

    # No vLLM source in the env: unknown, a warning, never a refusal.
    monkeypatch.setenv("CAMPAIGN_RECIPES", str(_arm_recipes(tmp_path, "CPU_ATTN")))
    code, out, err = run_cli(db, "check", box.name, "--arm", "backend-tp1", "--json")
    (unknown,) = _verdicts(out)
    assert unknown["verdict"] == "warn" and "(unknown)" in str(unknown["reason"]), unknown

    # The real CPU vLLM 0.32 registry.py in the box's env, read over SSH by the agent's probe.
    target = site_packages(env) / "vllm" / REGISTRY
    target.parent.mkdir(parents=True)
    shutil.copyfile(real_registry(), target)
    code, out, err = run_cli(db, "check", box.name, "--arm", "backend-tp1", "--json")
    (has,) = _verdicts(out)
    assert has["verdict"] == "ok" and "CPU_ATTN" in str(has["reason"]), has

    monkeypatch.setenv("CAMPAIGN_RECIPES", str(_arm_recipes(tmp_path, "NO_SUCH_ATTN")))
    code, out, err = run_cli(db, "check", box.name, "--arm", "backend-tp1")
    assert code == 1, out + err
    line = (
        f"box {box.name}: arm backend-tp1 asks for attention backend NO_SUCH_ATTN, which the vLLM 0.32.0 in "
        f"the serving env {env} does not have"
    )
    assert line in out, out
    code, out, err = run_cli(db, "launch", "backend-tp1", "--box", box.name, "--no-wait")
    assert code == 1 and line in err.splitlines()[-1], err
    assert fleet_store.scalar("SELECT count(*) FROM launches") == 0
