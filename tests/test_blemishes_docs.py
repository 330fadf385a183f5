"""Documentation that must agree with the code and the data beside it: the sweep's prompt default is the
constant the bench uses, and the seed data's README names exactly the files that ship with it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from console.cli import main
from console.service.runs import PROMPTS_PER_STREAM

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT / "ops" / "data" / "seed"

NAMED = re.compile(r"`([\w./-]+)`")
"""A name in backticks: ``arms.tsv`` (a file of the seed directory), ``console/economics/`` (a path from the
repository root), or a word that is neither (``state.db``, the database the demo builds)."""
DATA = (".tsv", ".toml", ".csv", ".json")
"""What a data file of the seed directory is named like."""


def test_sweep_run_help_states_the_prompt_default_the_code_uses(capsys: pytest.CaptureFixture[str]) -> None:
    """The sweep benches with ``prompts=None``, which console/service/runs.py turns into PROMPTS_PER_STREAM x C;
    the help said 4 x C while the code ran 8 x C."""
    with pytest.raises(SystemExit) as done:
        main(["sweep", "run", "--help"])
    assert done.value.code == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert f"prompts per bench (default: {PROMPTS_PER_STREAM} x concurrency)" in help_text
    assert "4 x" not in help_text


def _named(text: str) -> set[str]:
    return set(NAMED.findall(text))


def _claims(name: str) -> bool:
    """The README says this is a file: a path in the repository, or a data file of the seed directory."""
    return "/" in name or name.endswith(DATA)


def _exists(name: str) -> bool:
    return (ROOT / name).exists() if "/" in name else (SEED / name).is_file()


def test_seed_readme_names_every_seed_file_and_only_files_that_exist() -> None:
    """ops/data/seed/README.md named ``economics_reference.tsv``, which never shipped; a data file added to the
    directory without a line in the README is as stale the other way."""
    named = _named((SEED / "README.md").read_text(encoding="utf-8"))
    missing = sorted(n for n in named if _claims(n) and not _exists(n))
    assert not missing, f"ops/data/seed/README.md names files that do not exist: {missing}"
    data = sorted(p.name for p in SEED.iterdir() if p.is_file() and p.name != "README.md")
    assert data, "ops/data/seed holds no data files"
    unnamed = [n for n in data if n not in named]
    assert not unnamed, f"ops/data/seed holds files its README does not name: {unnamed}"


def test_cost_model_comments_name_files_that_exist() -> None:
    """cost_model.toml's header says which table the tests check it against; that file must be there."""
    comments = "\n".join(
        line for line in (SEED / "cost_model.toml").read_text(encoding="utf-8").splitlines() if "#" in line
    )
    names = set(re.findall(r"\b[\w-]+\.(?:tsv|toml)\b", comments))
    assert "econ_cost_bases.tsv" in names
    assert all((SEED / n).is_file() for n in names), sorted(n for n in names if not (SEED / n).is_file())
