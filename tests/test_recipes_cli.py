"""`campaign recipe lint|list|show` end to end through the CLI entry point, with a real state.db."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from console.cli import main
from console.store import Box, Store
from ops.demo import build_demo
from tests.test_recipes import ON_5090, PROFILE, write


def out_json(capsys: pytest.CaptureFixture[str]) -> Any:
    return json.loads(capsys.readouterr().out)


def test_lint_shipped_recipes_passes_with_documented_findings(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["recipe", "lint"]) == 0
    out = capsys.readouterr().out
    assert (
        "R1-nvfp4-linear-backend error qwen3.8-27b-nvfp4-auto:" in out
        and "(expected: shipped on purpose)" in out
    )
    assert "R2-compressed-tensors-nvfp4 warn qwen3.8-27b-nvfp4-redhat-auto:" in out
    assert "17 errors (17 expected)" in out


def test_lint_exits_1_on_an_error_and_names_rule_arm_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path, "p.toml", PROFILE)
    write(tmp_path, "a.toml", '[arms.a]\nprofile = "p"\n\n[arms.a.flags]\n"--moe-backnd" = "marlin"\n')
    assert main(["recipe", "lint", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "a.toml:1: R1-nvfp4-linear-backend error a: NVFP4 checkpoint" in out
    assert "a.toml:5: R8-vllm-flag error a: unknown vLLM 0.32.0 flag '--moe-backnd'" in out
    assert main(["recipe", "lint", "--json", str(tmp_path)]) == 1
    assert {f["rule_id"] for f in out_json(capsys)} == {"R1-nvfp4-linear-backend", "R8-vllm-flag"}


def test_lint_refuses_bad_recipe_files_with_file_line_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path, "p.toml", PROFILE)
    write(tmp_path, "glm.toml", '# x\n[arms.x]\nprofile = "p"\nmoe_backnd = "marlin"\n')
    assert main(["recipe", "lint", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "glm.toml:4: arm 'x': unknown key 'moe_backnd' (did you mean 'moe_backend'?)" in err
    assert main(["recipe", "lint", str(tmp_path / "nope")]) == 1
    assert "no such recipe file or directory" in capsys.readouterr().err


def test_list_json_has_every_arm_with_argv(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["recipe", "list", "--json"]) == 0
    rows = out_json(capsys)
    by_arm = {r["arm"]: r for r in rows}
    assert "tiny-cpu" in by_arm and "glm-5.3-flash-dp4-ep" in by_arm
    for r in rows:
        assert {"arm", "model", "argv", "env", "tensor_parallel", "findings"} <= set(r)
        assert isinstance(r["argv"], list) and r["argv"][1] == "serve"
    assert by_arm["deepseek-v4-flash-tp4"]["tensor_parallel"] == 4
    assert by_arm["deepseek-v4-flash-tp4"]["env"]["VLLM_DSV4_OPROJ_SM120_FALLBACK"] == "1"
    assert main(["recipe", "list"]) == 0
    table = capsys.readouterr().out
    assert "qwen3.8-27b-nvfp4-auto" in table and "1 error" in table and "per-card TP1" in table


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = tmp_path / "state.db"
    with Store(path) as store:
        store.boxes.add(
            Box(
                name="pro-a",
                host="203.0.113.7",
                ssh_user="root",
                serving_env="/opt/vllm",
                model_root="/models",
            )
        )
        store.boxes.add(Box(name="fresh", host="203.0.113.8", ssh_user="root"))
        gpu = {"index": 0, "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "mem_total_mib": 97887.0}
        probe = {
            "gpus": [{**gpu, "index": i} for i in range(4)],
            "topology": {"nvlink_all": False, "links": {}},
        }
        with store.atomic() as d:
            d.table("probes").insert(
                {"box": "pro-a", "t_ms": 1, "console_t_ms": 1, "data": json.dumps(probe)}
            )
    return str(path)


def test_show_on_a_probed_box(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--db", db, "recipe", "show", "qwen3.8-27b-nvfp4-b12x", "--box", "pro-a", "--json"]) == 0
    shown = out_json(capsys)
    assert [r["gpus"] for r in shown["replicas"]] == [[0], [1], [2], [3]]
    assert shown["argv"][0] == "/opt/vllm/bin/vllm" and shown["findings"] == []
    assert main(["--db", db, "recipe", "show", "gpt-oss-120b-tp4", "--box", "pro-a"]) == 0
    out = capsys.readouterr().out
    assert "lint     R4-tp-without-nvlink warn: TP4 on pro-a (no NVLink)" in out
    assert "argv (quoted for reading; launched as a list) /opt/vllm/bin/vllm serve openai/gpt-oss-120b" in out
    assert '"top_p": 1.0' in out


def test_show_refusals(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--db", db, "recipe", "show", "deepseek-v4-flash-tp4", "--box", "fresh"]) == 1
    out = capsys.readouterr().out
    assert "box rules R4 and R10 not run: no GPUs known for box fresh" in out
    assert "cannot resolve: arm 'deepseek-v4-flash-tp4' needs 4 GPUs" in out
    assert main(["--db", db, "recipe", "show", "qwen3.8-27b-nvfp4-b12", "--box", "pro-a"]) == 2
    assert "did you mean qwen3.8-27b-nvfp4-b12x" in capsys.readouterr().err
    assert main(["--db", db, "recipe", "show", "tiny-cpu", "--box", "ghost"]) == 2
    assert "no box named 'ghost'" in capsys.readouterr().err


def test_lint_on_a_box_adds_layout_rules(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    # Exit 1 only for the arms laid out for an 8-card box: pro-a has 4 GPUs.
    assert main(["--db", db, "recipe", "lint", "--box", "pro-a", "--json"]) == 1
    errors = {f["arm"] for f in out_json(capsys) if f["severity"] == "error" and not f["expected"]}
    assert errors == ON_5090
    assert main(["--db", db, "recipe", "lint", "--box", "pro-a"]) == 1
    out = capsys.readouterr().out
    assert "R4-tp-without-nvlink warn gpt-oss-120b-tp4:" in out
    assert "R10-fits-memory warn minimax-m3-tp4: weight size unknown" in out
    assert out.rstrip().endswith("; box rules R4 and R10 on box pro-a, GPUs from pro-a's latest probe")
    assert main(["--db", db, "recipe", "lint", "--box", "fresh"]) == 0
    out = capsys.readouterr().out
    assert "R4-" not in out and "R10-" not in out and "on box fresh" not in out  # it ran no box rule
    assert out.rstrip().endswith(
        "; box rules R4 and R10 not run: no GPUs known for box fresh (no probe, and none "
        "in its inventory; `campaign check fresh` probes it)"
    )
    assert main(["--db", db, "recipe", "lint", "--box", "fresh", "--json"]) == 0
    assert "box rules R4 and R10 not run" in capsys.readouterr().err  # stdout stays JSON


def test_lint_on_an_imported_seed_box_uses_its_inventory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The write-up's boxes were never probed here, but the inventory knows their cards: 96 GB and 32 GB."""
    db = tmp_path / "state.db"
    with Store(db) as store:
        build_demo(store)
    # Exit 1: the arms laid out for the 8-card box need more GPUs than this one has; the models beyond the node
    # are refused with the figures (shipped to show it, so expected).
    assert main(["--db", str(db), "recipe", "lint", "--box", "seed-pro6000-600w", "--json"]) == 1
    errors = {f["arm"]: f for f in out_json(capsys) if f["severity"] == "error"}
    assert {a for a, f in errors.items() if not f["expected"] and a in ON_5090} == ON_5090
    assert errors["glm-5.3-flash-tp8"]["reason"].startswith("arm 'glm-5.3-flash-tp8' needs 8 GPUs")
    assert errors["kimi-k3-w4a4-tp4"]["reason"].startswith(
        "1400 GB of weights does not fit 4 x 96 GB (344 GB usable on all of seed-pro6000-600w)"
    )
    assert main(["--db", str(db), "recipe", "lint", "--box", "seed-pro6000-600w"]) == 1
    out = capsys.readouterr().out
    inventory = (
        "GPUs from seed-pro6000-600w's inventory ('4x RTX PRO 6000 Blackwell Server Edition 96GB, 600 W'; "
        "never probed)"
    )
    assert "R4-tp-without-nvlink warn gpt-oss-120b-tp4: TP4 on seed-pro6000-600w (NVLink not probed)" in out
    assert out.rstrip().endswith(f"; box rules R4 and R10 on box seed-pro6000-600w, {inventory}")
    assert main(["--db", str(db), "recipe", "lint", "--box", "seed-5090x8-400w"]) == 1
    out = capsys.readouterr().out
    # 61 GB fits a 96 GB card and not a 32 GB one (campaign rule 10): one replica per card is refused there.
    assert "R10-fits-memory error gpt-oss-120b-replicas: 61 GB of weights over 1 card(s)" in out
    assert "GPUs from seed-5090x8-400w's inventory ('8x RTX 5090 32GB, 400 W'; never probed)" in out
    assert "R10-fits-memory error gpt-oss-120b-tp4" not in out
    # The TP8 arms the write-up queued there fit: 167 / 8 and 198 / 8 GB per 32 GB card, and rule 6 is met.
    assert main(["--db", str(db), "recipe", "lint", "--box", "seed-5090x8-400w", "--json"]) == 1
    tp8 = [f for f in out_json(capsys) if f["arm"] in ("deepseek-v4-flash-tp8", "glm-5.3-flash-tp8")]
    assert not [f for f in tp8 if f["severity"] == "error"], tp8
    show = ["recipe", "show", "deepseek-v4-flash-tp8", "--box", "seed-5090x8-400w", "--json"]
    assert main(["--db", str(db), *show]) == 0
    shown = out_json(capsys)
    assert shown["gpus"] == [list(range(8))] and "--no-enable-flashinfer-autotune" in shown["argv"]
    assert shown["env"]["VLLM_DSV4_OPROJ_SM120_FALLBACK"] == "1"
