"""Recipes against the real vLLM 0.32 (CPU build): its parser accepts every shipped arm's argv, the
flag data matches it, and the tiny-cpu arm's resolved argv really serves the tiny model."""

from __future__ import annotations

import json
import urllib.request

import pytest

from console.recipes import BoxSpec, load_catalog, resolve
from console.recipes.vllm_flags import DATA
from testbed.vllm_env import VllmEnv
from testbed.vllm_server import TinyServer
from tests.support.vllm_python import run_in_vllm_env

pytestmark = pytest.mark.vllm
PRO = BoxSpec("pro-a", 4, "NVIDIA RTX PRO 6000", 97887, False, "/opt/vllm", "/models")
RTX5090 = BoxSpec("rtx5090", 8, "NVIDIA GeForce RTX 5090", 32607, False, "/opt/vllm", "/models")
ON_5090 = {"deepseek-v4-flash-tp8", "glm-5.3-flash-tp8", "qwen3.8-27b-fp8-tp2"}
"""Arms laid out for the write-up's 8-card box: resolved there, as a 4-card box cannot hold them."""

# Runs inside the vLLM venv: regenerate the flag data, and parse each argv with `vllm serve`'s own parser.
PARSE = """
import json, sys
from console.recipes.extract_vllm_flags import extract
from vllm.entrypoints.launchers.cli_args import make_arg_parser
from vllm.utils.argparse_utils import FlexibleArgumentParser
parsed = {}
for name, argv in json.load(sys.stdin).items():
    ns = make_arg_parser(FlexibleArgumentParser(prog="vllm serve")).parse_args(argv[2:])
    kc = ns.kernel_config
    parsed[name] = {"model": ns.model_tag, "host": ns.host, "port": ns.port, "tp": ns.tensor_parallel_size,
                    "dp": ns.data_parallel_size, "ep": ns.enable_expert_parallel,
                    "autotune": ns.enable_flashinfer_autotune, "served": ns.served_model_name,
                    "linear": kc.linear_backend if kc else "auto", "moe": kc.moe_backend if kc else "auto",
                    "eager": ns.enforce_eager, "block": ns.block_size, "parser": ns.reasoning_parser}
json.dump({"flags": extract(), "parsed": parsed}, sys.stdout)
"""


def test_vllm_accepts_every_shipped_arm_and_flag_data_is_current(vllm_env: VllmEnv) -> None:
    catalog = load_catalog()
    cpu = BoxSpec("local", 0, serving_env=str(vllm_env.prefix), model_root=str(vllm_env.model_root))
    one_box = [n for n, a in catalog.arms.items() if a.nodes == 1]  # multi-box plans: test_multinode_vllm.py
    argvs = {
        n: resolve(catalog, n, cpu if n == "tiny-cpu" else RTX5090 if n in ON_5090 else PRO).replicas[0].argv
        for n in one_box
    }
    result = run_in_vllm_env(vllm_env, PARSE, argvs)
    assert result["flags"] == json.loads(DATA.read_text()), (
        "regenerate vllm_flags.json (extract_vllm_flags.py)"
    )
    for name, got in result["parsed"].items():
        arm, profile = catalog.arms[name], catalog.profiles[catalog.arms[name].profile]
        assert got["host"] == "127.0.0.1" and got["port"] == 8100, name
        assert got["tp"] == arm.tensor_parallel and got["dp"] == arm.data_parallel, name
        assert got["ep"] == arm.expert_parallel, name
        assert got["linear"] == (arm.linear_backend or "auto") and got["moe"] == (
            arm.moe_backend or "auto"
        ), name
        assert got["served"] == [profile.served_name], name
        assert got["parser"] == (profile.serving.reasoning_parser or ""), name
        if arm.tensor_parallel > 1:
            assert got["autotune"] is False, name


def test_tiny_cpu_arm_serves_the_tiny_model(vllm_env: VllmEnv, tiny_server: TinyServer) -> None:
    """The session's shared server IS the shipped tiny-cpu arm, resolved on this machine and started as is."""
    box = BoxSpec("local", 0, serving_env=str(vllm_env.prefix), model_root=str(vllm_env.model_root))
    rep = resolve(load_catalog(), "tiny-cpu", box, base_port=tiny_server.port).replicas[0]
    assert tiny_server.argv == rep.argv
    assert rep.argv[0] == str(vllm_env.vllm) and rep.argv[2] == str(vllm_env.model_dir)
    with urllib.request.urlopen(tiny_server.base_url + "/v1/models", timeout=10) as r:
        assert [m["id"] for m in json.load(r)["data"]] == ["tiny-llama"]
    body = json.dumps(
        {"model": "tiny-llama", "prompt": "hello", "max_tokens": 4, "ignore_eos": True}
    ).encode()
    req = urllib.request.Request(
        tiny_server.base_url + "/v1/completions", body, {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=60) as r:
        assert json.load(r)["usage"]["completion_tokens"] == 4


HOSTILE = {
    "a list value": ["--allowed-media-domains", "example.com", "--host", "0.0.0.0", "--port", "18999"],
    "an abbreviation": ["--ho", "0.0.0.0"],
    "an = form of an abbreviation": ["--hos=0.0.0.0"],
    "a dotted key": ["--host.x", "1"],
    "a value that is a flag": ["--api-key", "k", "--port=18999"],
}
LISTEN = """
import json, sys
from vllm.entrypoints.launchers.cli_args import make_arg_parser
from vllm.utils.argparse_utils import FlexibleArgumentParser
out = {}
for name, argv in json.load(sys.stdin).items():
    ns = make_arg_parser(FlexibleArgumentParser(prog="vllm serve")).parse_args(argv)
    out[name] = [ns.host, ns.port]
json.dump(out, sys.stdout)
"""


def test_what_the_guard_refuses_really_rebinds_vllm_and_what_it_allows_does_not(vllm_env: VllmEnv) -> None:
    """vLLM's own parser: each refused tail moves the server off 127.0.0.1:8100; the allowed odd values do not."""
    from console.recipes.guard import listen_problem

    head = ["m", "--host", "127.0.0.1", "--port", "8100"]  # what follows `vllm serve`
    allowed = {
        "odd values": [
            "--seed",
            "-1",
            "--chat-template",
            "a --host 0.0.0.0 b",
            "--grpc",
            "--allowed-media-domains",
            "\u2013\u2013host",
            "0.0.0.0",
        ]
    }
    argvs = {name: head + tail for name, tail in {**HOSTILE, **allowed}.items()}
    parsed = run_in_vllm_env(vllm_env, LISTEN, argvs)
    owned = {"--host": "127.0.0.1", "--port": "8100"}
    for name in HOSTILE:
        assert parsed[name] != ["127.0.0.1", 8100], name
        assert listen_problem(argvs[name], owned) is not None, name
    assert parsed["odd values"] == ["127.0.0.1", 8100]
    assert listen_problem(argvs["odd values"], owned) is None
