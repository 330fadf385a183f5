"""Hostile and pathological recipes: nothing a recipe writes moves a server off loopback or carries a
secret, and a file built to exhaust the loader is refused with one line naming it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from console.recipes import BoxSpec, RecipeError, ResolveError, generic_box, load_catalog, resolve
from console.recipes.guard import BINDING_FLAGS, listen_problem
from console.recipes.load import MAX_DEPTH, MAX_FILE_BYTES
from console.recipes.model import FlagValue
from console.recipes.vllm_flags import known_flags
from tests.test_recipes import PRO, PROFILE, catalog_of, write

SMUGGLED = ["example.com", "--host", "0.0.0.0", "--port", "18999"]


def _refused(tmp_path: Path, arm_body: str, profile: str = PROFILE) -> RecipeError:
    write(tmp_path, "p.toml", profile)
    write(tmp_path, "a.toml", f'[arms.a]\nprofile = "p"\nlinear_backend = "b12x"\n{arm_body}\n')
    with pytest.raises(RecipeError) as err:
        load_catalog([tmp_path])
    assert "\n" not in str(err.value) and err.value.file.endswith(".toml")
    return err.value


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        # The case: a list value carries --host and --port past the check on flag names.
        (
            f'"--allowed-media-domains" = {json.dumps(SMUGGLED)}',
            "value '--host' starts with '-': vLLM would read it as a flag",
        ),
        ('"--api-key" = "--host=0.0.0.0"', "value '--host=0.0.0.0' starts with '-'"),
        ('"--chat-template" = "-dpa"', "value '-dpa' starts with '-'"),
        ('"--allowed-origins" = ["a", "--"]', "value '--' starts with '-'"),
        ('"--host=0.0.0.0" = true', "is not a long flag"),
        # argparse accepts unambiguous prefixes: vLLM 0.32 reads --ho as --host.
        ('"--ho" = "0.0.0.0"', "'--ho' is read by vLLM as '--host'"),
        ('"--hos" = "0.0.0.0"', "'--hos' is read by vLLM as '--host'"),
        ('"--po" = 18999', "is read by vLLM as '--port'"),
        ('"--host.x" = "0.0.0.0"', "'--host.x' is read by vLLM as '--host'"),
        ('"--served_model_name" = "x"', "read by vLLM as '--served-model-name'"),
        ('"--kernel_config.linear_backend" = "marlin"', "read by vLLM as '--kernel-config'"),
        ('"--max-num-seq" = 4', "read by vLLM as '--max-num-seqs'"),
        ('"--uds" = "/tmp/s"', "'--uds' may not be set as a free flag"),
        ('"--config" = "/tmp/x.yaml"', "a YAML config can set any flag, --host and --port included"),
        ('"--data-parallel-address" = "0.0.0.0"', "may not be set as a free flag"),
        ('"--kv-events-config.endpoint" = "tcp://*:5557"', "its ZMQ publisher listens on tcp://*:5557"),
        ('"--port" = 18999', "'--port' may not be set as a free flag: resolve assigns ports"),
        # Lookalikes of '-' and of letters are not flags at all (argparse only knows ASCII '-').
        ('"\u2013\u2013host" = "0.0.0.0"', "is not a long flag"),
        ('"--h\u043est" = "0.0.0.0"', "is not a long flag"),
        ('"--chat-template" = "a\\u0000b"', "holds a NUL character"),
    ],
)
def test_flags_that_would_rebind_or_smuggle_are_refused_at_their_line(
    tmp_path: Path, flags: str, needle: str
) -> None:
    e = _refused(tmp_path, f"[arms.a.flags]\n{flags}")
    assert needle in e.message and e.line == 5, str(e)


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ('VLLM_HOST_IP = "0.0.0.0"', "chooses where vLLM listens or connects"),
        ('MASTER_ADDR = "10.0.0.1"', "chooses where vLLM listens"),
        ('VLLM_PORT = "18999"', "chooses where vLLM listens"),
        ('HF_TOKEN = "hf_x"', "looks like a secret, and a recipe's environment is stored in state.db"),
        ('VLLM_API_KEY = "k"', "looks like a secret"),
        ('S3_SECRET_ACCESS_KEY = "k"', "looks like a secret"),
        ('X = "a\\u0000b"', "holds a NUL character"),
    ],
)
def test_env_that_rebinds_or_carries_a_secret_is_refused(tmp_path: Path, env: str, needle: str) -> None:
    e = _refused(tmp_path, f"[arms.a.env]\n{env}")
    assert needle in e.message and e.line == 5, str(e)


def test_names_with_escapes_are_refused(tmp_path: Path) -> None:
    """A quoted key with an escape (a newline) is no flag or variable name; the error points at its table."""
    e = _refused(tmp_path, '[arms.a.flags]\n"--seed\\n" = 1')
    assert "'--seed\\n' is not a long flag" in e.message and e.line == 4
    e = _refused(tmp_path, '[arms.a.env]\n"X\\n" = "1"')
    assert "'X\\n' is not an environment variable name" in e.message and e.line == 4


def test_ordinary_values_that_look_odd_still_load(tmp_path: Path) -> None:
    c = catalog_of(
        tmp_path,
        """
        [arms.a]
        profile = "p"
        linear_backend = "b12x"
        [arms.a.flags]
        "--seed" = -1
        "--max-logprobs" = "-1"
        "--chat-template" = "a --host 0.0.0.0 b"
        "--allowed-media-domains" = ["\u2013\u2013host", "0.0.0.0"]
        "--grpc" = true
        [arms.a.env]
        VLLM_SHARED_EXPERTS_STREAM_TOKEN_THRESHOLD = "256"
        """,
    )
    argv = resolve(c, "a", PRO).replicas[0].argv
    assert argv[argv.index("--seed") + 1] == "-1" and "a --host 0.0.0.0 b" in argv
    assert argv.count("--host") == 1 and argv[argv.index("--host") + 1] == "127.0.0.1"


@pytest.mark.parametrize(
    ("profile_change", "needle"),
    [
        (('checkpoint = "org/Model-NVFP4"', 'checkpoint = "--config=/tmp/x.yaml"'), "'checkpoint': value"),
        (('served_model_name = "model"', 'served_model_name = "-x"'), "'served_model_name': value '-x'"),
        (('reasoning_parser = "qwen3"', 'reasoning_parser = "--host=0.0.0.0"'), "'reasoning_parser': value"),
    ],
)
def test_profile_values_that_become_argv_elements_are_checked(
    tmp_path: Path, profile_change: tuple[str, str], needle: str
) -> None:
    e = _refused(tmp_path, "", profile=PROFILE.replace(*profile_change))
    assert needle in e.message and "would read it as a flag" in e.message


def test_resolve_checks_every_element_whatever_built_the_arm(tmp_path: Path) -> None:
    """An arm changed after loading, or a box's model_root, cannot get past resolve either."""
    c = catalog_of(tmp_path, '[arms.a]\nprofile = "p"\nlinear_backend = "b12x"\n')
    c.arms["a"] = replace(c.arms["a"], flags={"--allowed-media-domains": SMUGGLED})
    with pytest.raises(
        ResolveError,
        match=r"arm 'a' on pro-a: the server would listen where the console did not "
        r"put it \(--host 0\.0\.0\.0; --port 18999\)",
    ):
        resolve(c, "a", PRO)
    cases: list[dict[str, FlagValue]] = [
        {"--ho": "0.0.0.0"},
        {"--kv-events-config.endpoint": "tcp://*:1"},
        {"--x": ["-dpa", "0.0.0.0"]},
    ]
    for flags in cases:
        c.arms["a"] = replace(c.arms["a"], flags=flags)
        with pytest.raises(ResolveError, match="arm 'a' on pro-a: "):
            resolve(c, "a", PRO)
    c.arms["a"] = replace(c.arms["a"], flags={}, env={"VLLM_HOST_IP": "0.0.0.0"})
    with pytest.raises(ResolveError, match="'VLLM_HOST_IP' chooses where vLLM listens"):
        resolve(c, "a", PRO)
    local = replace(c.profiles["p"], local=True)
    c.profiles["p"] = local
    c.arms["a"] = replace(c.arms["a"], env={})
    with pytest.raises(ResolveError, match="argv element '--host=0.0.0.0/org/Model-NVFP4'|would listen"):
        resolve(c, "a", BoxSpec("b", 1, model_root="--host=0.0.0.0"))


def test_the_shipped_catalog_passes_the_listen_check() -> None:
    c = load_catalog()
    for name in (n for n, a in c.arms.items() if a.nodes == 1):  # a multi-box plan checks its own argv
        rep = resolve(c, name, generic_box(c, name)).replicas[0]
        assert listen_problem(rep.argv[2:], {"--host": "127.0.0.1", "--port": str(rep.port)}) is None, name


def test_no_legitimate_vllm_flag_is_mistaken_for_a_binding_one() -> None:
    """Only flags vLLM would read as a binding flag are refused: an exact flag is never an abbreviation."""
    flags = known_flags().flags
    assert set(BINDING_FLAGS) <= set(flags)
    assert "--grpc" in flags and "--grpc-port".startswith("--grpc")
    for flag in flags:
        args = [flag] if not flags[flag]["takes_value"] else [flag, "1"]
        problem = listen_problem(
            ["m", "--host", "127.0.0.1", "--port", "1", *args], {"--host": "127.0.0.1", "--port": "1"}
        )
        assert (problem is None) == (flag not in BINDING_FLAGS), flag


# -- pathological files ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        "x = " + "[" * 5000 + "]" * 5000,  # tomllib recurses per level: RecursionError before
        "x = " + "{a = " * 5000 + "1" + "}" * 5000,
        "[profiles.p.serving.chat_template_kwargs]\n"
        + ".".join(["a"] * 3000)
        + " = 1",  # json.dumps recursed
        "x = " + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1),
    ],
)
def test_deeply_nested_toml_is_refused_with_one_line(tmp_path: Path, body: str) -> None:
    write(tmp_path, "deep.toml", body + "\n")
    with pytest.raises(RecipeError) as err:
        load_catalog([tmp_path / "deep.toml"])
    assert str(err.value) == (
        f"{err.value.file}: tables or arrays nested more than {MAX_DEPTH} deep, the limit "
        "for a recipe (the shipped ones need four; see recipes/README.md)"
    )
    assert err.value.file.endswith("deep.toml")


def test_nesting_at_the_limit_loads_and_one_deeper_does_not(tmp_path: Path) -> None:
    def profile(
        levels: int,
    ) -> str:  # profiles.p.serving, then `levels` tables: the deepest is 3 + levels down
        kwargs = "{a = " * levels + "1" + "}" * levels
        return PROFILE.replace(
            "thinking_default = true", f"thinking_default = true\nchat_template_kwargs = {kwargs}"
        )

    c = catalog_of(
        tmp_path, '[arms.a]\nprofile = "p"\nlinear_backend = "b12x"\n', profile=profile(MAX_DEPTH - 3)
    )
    assert "--default-chat-template-kwargs" in resolve(c, "a", PRO).replicas[0].argv
    with pytest.raises(RecipeError, match=f"nested more than {MAX_DEPTH} deep"):
        catalog_of(tmp_path, '[arms.a]\nprofile = "p"\n', profile=profile(MAX_DEPTH - 2))


def test_an_oversized_file_is_refused_unread(tmp_path: Path) -> None:
    big = tmp_path / "big.toml"
    with big.open("w") as f:
        f.write("# padding\n" * (MAX_FILE_BYTES // 10 + 1))
    with pytest.raises(
        RecipeError, match=r"big\.toml: larger than 16 MiB, the limit for one recipe file; split it"
    ):
        load_catalog([big])
