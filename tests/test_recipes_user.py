"""The operator's own recipes layer on top of the shipped ones: ``$CAMPAIGN_RECIPES``, else ~/.config.

Same layout as the shipped ``recipes`` package: a user file at the same relative path replaces the
shipped file, and a user profile, arm, shape or sweep replaces the shipped one of the same name.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from console.cli import main
from console.recipes import RecipeError, load_catalog, shipped_recipe_dir

ROOT = Path(__file__).resolve().parent.parent

MY_ARM = '[arms."my-tiny"]\nprofile = "tiny-llama"\nmax_model_len = 512\n'
# The shipped tiny-llama profile (recipes/profiles/tiny.toml) with another checkpoint.
MY_PROFILE = """
[profiles."tiny-llama"]
checkpoint = "my-tiny-llama"
local = true
architecture = "llama"
quantization = "bf16"
quantizer = "vendor"
weights_gb = 0.0034
"""


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    return path


@pytest.fixture
def user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty folder named by $CAMPAIGN_RECIPES."""
    path = tmp_path / "mine"
    path.mkdir()
    monkeypatch.setenv("CAMPAIGN_RECIPES", str(path))
    return path


def test_shipped_recipes_come_from_the_recipes_package() -> None:
    import recipes

    assert shipped_recipe_dir() == Path(recipes.__file__).parent
    assert {"tiny-cpu", "qwen3.8-27b-nvfp4-b12x"} <= set(load_catalog([shipped_recipe_dir()]).arms)


def test_a_user_arm_is_listed_with_its_source(user: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mine = write(user / "arms", "mine.toml", MY_ARM)
    assert main(["recipe", "list", "--json"]) == 0
    rows = {r["arm"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["my-tiny"]["source"] == str(mine) and rows["my-tiny"]["argv"][1] == "serve"
    assert rows["tiny-cpu"]["source"] == "shipped"
    assert main(["recipe", "list"]) == 0
    table = capsys.readouterr().out
    line = next(x for x in table.splitlines() if x.startswith("my-tiny "))
    assert line.endswith(str(mine)) and "SOURCE" in table.splitlines()[0]


def test_a_user_profile_overrides_the_shipped_one_of_the_same_name(user: Path) -> None:
    write(user / "profiles", "mine.toml", MY_PROFILE)
    catalog = load_catalog()
    assert catalog.profiles["tiny-llama"].checkpoint == "my-tiny-llama"
    assert catalog.profiles["tiny-llama"].origin.file.endswith("mine.toml")
    assert catalog.arms["tiny-cpu"].profile == "tiny-llama"  # the shipped arm now serves the user's profile
    assert "qwen3.8-27b-nvfp4-b12x" in catalog.arms  # the rest is still shipped


def test_a_user_file_replaces_the_shipped_file_at_the_same_path(user: Path) -> None:
    write(user, "shapes.toml", "[shapes.mine]\ninput_len = 8\noutput_len = 2\n")
    assert set(load_catalog().shapes) == {"mine"}
    assert "router" in load_catalog([shipped_recipe_dir()]).shapes


def test_a_name_defined_twice_in_the_user_layer_is_still_an_error(user: Path) -> None:
    write(user / "arms", "a.toml", MY_ARM)
    write(user / "arms", "b.toml", MY_ARM)
    with pytest.raises(RecipeError, match=r"arm 'my-tiny' is already defined at .*a\.toml:1"):
        load_catalog()


def test_explicit_recipe_paths_load_only_those(user: Path) -> None:
    write(user / "arms", "mine.toml", MY_ARM)
    assert "my-tiny" not in load_catalog([shipped_recipe_dir()]).arms


def test_the_config_folder_is_the_default_user_layer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CAMPAIGN_RECIPES", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert "my-tiny" not in load_catalog().arms  # no folder there: the shipped recipes alone
    write(tmp_path / ".config" / "campaign-console" / "recipes" / "arms", "mine.toml", MY_ARM)
    assert load_catalog().arms["my-tiny"].max_model_len == 512


def test_a_missing_campaign_recipes_folder_is_one_clear_line(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    env = {"CAMPAIGN_RECIPES": str(missing), "PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-m", "console", "recipe", "list"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"campaign: {missing}: no such folder, named by $CAMPAIGN_RECIPES; create it with your own recipes "
        "(laid out like the shipped ones) or unset CAMPAIGN_RECIPES"
    ]
