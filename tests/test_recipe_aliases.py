"""Arm aliases (``same_as``): one definition per serving configuration, a second name for it.

WHY: recipes/arms/seed-rows.toml names each row of the write-up's tables as the row does, and many rows are an arm
the recipes already ship. A copied definition drifts from its original; an alias cannot, because it has no settings
of its own. These tests hold the loader to that (every malformed alias is one line naming file, line and what to
do) and hold an alias's plan to its target's, byte for byte.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.cli import main
from console.readmodel.compare import compare
from console.recipes import BoxSpec, Catalog, RecipeError, lint, load_catalog, resolve
from console.store import Store

PRO = BoxSpec(
    "pro-a", 4, "NVIDIA RTX PRO 6000 Blackwell Server Edition", 97887, False, "/opt/vllm", "/models"
)
PROFILE = """
[profiles.p]
checkpoint = "org/Model-BF16"
architecture = "qwen3"
quantization = "bf16"
quantizer = "vendor"
weights_gb = 17.9
"""


def load(tmp_path: Path, arms: str) -> Catalog:
    (tmp_path / "profiles.toml").write_text(PROFILE)
    (tmp_path / "arms.toml").write_text(textwrap.dedent(arms))
    return load_catalog([tmp_path])


def refusal(tmp_path: Path, arms: str) -> str:
    with pytest.raises(RecipeError) as info:
        load(tmp_path, arms)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_an_alias_is_its_targets_plan_under_its_own_name(tmp_path: Path) -> None:
    catalog = load(
        tmp_path,
        """
        [arms.real]
        profile = "p"
        max_num_seqs = 64
        env = {VLLM_X = "1"}
        [arms.real.flags]
        "--enable-prefix-caching" = true

        [arms.row-name]
        same_as = "real"
        description = "the row's figures"
        """,
    )
    alias, target = catalog.arms["row-name"], catalog.arms["real"]
    assert (alias.alias_of, alias.description, target.alias_of) == ("real", "the row's figures", None)
    a, t = resolve(catalog, "row-name", PRO), resolve(catalog, "real", PRO)
    assert a.arm == "row-name" and t.arm == "real"  # a launch records the name the operator typed
    assert [(r.argv, r.env, r.gpus, r.port) for r in a.replicas] == [
        (r.argv, r.env, r.gpus, r.port) for r in t.replicas
    ]
    assert a.recipe_hash == t.recipe_hash
    assert "--max-num-seqs" in a.replicas[0].argv and a.replicas[0].env["VLLM_X"] == "1"
    assert catalog.canonical("row-name") == "real" and catalog.canonical("real") == "real"


def test_every_shipped_alias_resolves_and_lints_as_its_target() -> None:
    catalog = load_catalog()
    aliases = {n: a.alias_of for n, a in catalog.arms.items() if a.alias_of}
    assert len(aliases) == 15
    for name, target in aliases.items():
        assert catalog.arms[target].alias_of is None  # no chains ship
        a, t = resolve(catalog, name, PRO), resolve(catalog, target, PRO)
        assert [r.to_dict() for r in a.replicas] == [r.to_dict() for r in t.replicas], name
        assert a.arm == name
        key = [(f.rule_id, f.severity, f.reason, f.expected) for f in lint(catalog, target, PRO)]
        assert [(f.rule_id, f.severity, f.reason, f.expected) for f in lint(catalog, name, PRO)] == key


@pytest.mark.parametrize(
    ("arms", "error"),
    [
        (
            '[arms.a]\nsame_as = "ghost"\n',
            "arms.toml:2: alias 'a': same_as names no arm 'ghost' (`campaign recipe list` shows the arms)",
        ),
        (
            '[arms.real]\nprofile = "p"\n[arms.a]\nsame_as = "reel"\n',
            "arms.toml:4: alias 'a': same_as names no arm 'reel' (did you mean 'real'?)",
        ),
        (
            '[arms.real]\nprofile = "p"\n[arms.a]\nsame_as = "b"\n[arms.b]\nsame_as = "real"\n',
            "arms.toml:4: alias 'a': same_as 'b' is itself an alias (of 'real'); point same_as at the arm "
            "itself, 'real'",
        ),
        (
            '[arms.a]\nsame_as = "b"\n[arms.b]\nsame_as = "a"\n',
            "arms.toml:2: alias 'a': same_as forms a cycle a -> b -> a; point same_as at a real arm",
        ),
        (
            '[arms.a]\nsame_as = "a"\n',
            "arms.toml:2: alias 'a': same_as forms a cycle a -> a; point same_as at a real arm",
        ),
        (
            '[arms.real]\nprofile = "p"\n[arms.a]\nsame_as = "real"\nmax_num_seqs = 8\n',
            "arms.toml:5: arm 'a': an alias (same_as = 'real') takes no settings beside description, found "
            "'max_num_seqs'; drop it, or drop same_as and write the arm out in full",
        ),
        (
            '[arms.real]\nprofile = "p"\n[arms.a]\nsame_as = "real"\n[arms.a.flags]\n"--x" = true\n',
            "arms.toml:5: arm 'a': an alias (same_as = 'real') takes no settings beside description, found "
            "'flags'",
        ),
        ("[arms.a]\nsame_as = 3\n", "arms.toml:2: arm 'a': 'same_as' must be"),
    ],
)
def test_a_bad_alias_is_one_line_naming_where_and_what_to_do(tmp_path: Path, arms: str, error: str) -> None:
    assert error in refusal(tmp_path, arms)


def test_an_alias_shadowing_a_real_arm_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # In one folder, whichever file comes first (a TOML file itself refuses a table written twice).
    (tmp_path / "profiles.toml").write_text(PROFILE)
    for first, second in (("a.toml", "z.toml"), ("z.toml", "a.toml")):
        (tmp_path / first).write_text('[arms.real]\nprofile = "p"\n[arms.twin]\nprofile = "p"\n')
        (tmp_path / second).write_text('[arms.real]\nsame_as = "twin"\n')
        with pytest.raises(RecipeError) as info:
            load_catalog([tmp_path])
        assert str(info.value).endswith(
            f"z.toml:1: alias 'real' shadows an arm of the same name (here and at {tmp_path / 'a.toml'}:1): an "
            "alias needs a name of its own; rename one or remove one"
        ), str(info.value)
        (tmp_path / "a.toml").unlink()
        (tmp_path / "z.toml").unlink()
    # The operator's alias named like a shipped arm: refused, not a silent swap of the shipped settings.
    user = tmp_path / "user"
    user.mkdir()
    monkeypatch.setenv("CAMPAIGN_RECIPES", str(user))
    (user / "mine.toml").write_text(
        '[arms."gpt-oss-20b-replicas-marlin"]\nsame_as = "gpt-oss-20b-replicas-mxfp8"\n'
    )
    with pytest.raises(
        RecipeError, match=r"mine\.toml:1: alias 'gpt-oss-20b-replicas-marlin' shadows the arm "
    ):
        load_catalog()
    # The operator's alias of a shipped arm, and a full arm replacing a shipped alias: both fine.
    (user / "mine.toml").write_text(
        '[arms.my-name]\nsame_as = "gpt-oss-20b-replicas-marlin"\n'
        '[arms.gpt-oss-20b-marlin]\nprofile = "gpt-oss-20b"\nmax_num_seqs = 8\n'
    )
    catalog = load_catalog()
    assert catalog.arms["my-name"].alias_of == "gpt-oss-20b-replicas-marlin"
    assert catalog.arms["gpt-oss-20b-marlin"].alias_of is None
    assert catalog.arms["gpt-oss-20b-marlin"].max_num_seqs == 8


NAMES = ("a", "b", "c", "d")


@st.composite
def graphs(draw: st.DrawFn) -> list[tuple[str, str | None, bool]]:
    """Arms a..d, each a real arm (target None) or an alias of any name (``ghost`` too), perhaps with a setting."""
    return [
        (
            name,
            draw(st.none() | st.sampled_from((*NAMES, "ghost"))),
            draw(st.booleans()),
        )
        for name in NAMES
    ]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(graph=graphs())
def test_the_loader_accepts_exactly_the_well_formed_aliases(
    tmp_path: Path, graph: list[tuple[str, str | None, bool]]
) -> None:
    text = ""
    for name, target, setting in graph:
        if target is None:
            text += f'[arms.{name}]\nprofile = "p"\nmax_num_seqs = {NAMES.index(name) + 1}\n'
        else:
            text += f'[arms.{name}]\nsame_as = "{target}"\n' + ("max_num_seqs = 9\n" if setting else "")
    real = {n for n, t, _ in graph if t is None}
    problems = {
        n: (
            "takes no settings"
            if setting
            else "names no arm"
            if t not in real and t not in NAMES
            else "cycle"
            if t == n
            else "itself an alias"
            if t not in real
            else None
        )
        for n, t, setting in graph
        if t is not None
    }
    if not any(problems.values()):
        catalog = load(tmp_path, text)
        for name, target in ((n, t) for n, t, _ in graph if t is not None):
            assert catalog.arms[name].alias_of == target
            assert resolve(catalog, name, PRO).replicas == resolve(catalog, target, PRO).replicas
        return
    message = refusal(tmp_path, text)
    assert message.startswith(str(tmp_path / "arms.toml"))
    # Settings are refused as each alias is read; references once every file is in.
    if "takes no settings" in problems.values():
        assert "takes no settings beside description" in message
    assert any(
        p in message or (p == "itself an alias" and "cycle" in message) for p in problems.values() if p
    )


def test_recipe_show_list_and_lint_say_alias_of(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["recipe", "show", "gpt-oss-20b-marlin"]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert shown[0].startswith("arm      gpt-oss-20b-marlin  (")
    assert shown[1].startswith("         alias of gpt-oss-20b-replicas-marlin (")
    assert main(["recipe", "list"]) == 0
    assert "gpt-oss-20b-marlin (alias of gpt-oss-20b-replicas-marlin)" in capsys.readouterr().out
    assert main(["recipe", "list", "--json"]) == 0
    assert '"alias_of": "gpt-oss-20b-replicas-marlin"' in capsys.readouterr().out
    assert main(["recipe", "lint"]) == 0
    out = capsys.readouterr().out
    assert " gpt-oss-20b-marlin: " in out and "(alias of gpt-oss-20b-replicas-marlin)" in out
    assert "arms (15 aliases) in " in out


def test_a_drafter_row_under_an_alias_compares_with_its_baseline_under_its_alias(tmp_path: Path) -> None:
    """The demo records the DSpark row and its control under the rows' names; both are aliases, and the drafter's
    baseline is named by its target: compare pairs them as one configuration each."""
    from ops.demo import build_demo

    catalog = load_catalog()
    assert catalog.arms["deepseek-v4-flash-tp4-b12x-dspark"].baseline == "deepseek-v4-flash-tp4"
    with Store(tmp_path / "state.db") as store:
        build_demo(store)
        c = compare(
            store,
            "deepseek-v4-flash-tp4-b12x-dspark",
            "deepseek-v4-flash-tp4-b12x-256",
            shape="router",
            concurrency=256,
            catalog=catalog,
        )
        assert c is not None
        with pytest.raises(
            Exception,
            match="compares only with its baseline deepseek-v4-flash-tp4, not deepseek-v4-flash-dp4-ep-256",
        ):
            compare(
                store,
                "deepseek-v4-flash-tp4-b12x-dspark",
                "deepseek-v4-flash-dp4-ep-256",
                shape="router",
                concurrency=256,
                catalog=catalog,
            )


async def test_the_arms_view_says_alias_of_for_a_seed_row(tmp_path: Path) -> None:
    """The demo's Arms view lists the seed rows under their names; an alias's detail names the arm it is."""
    from zoneinfo import ZoneInfo

    from textual.widgets import DataTable

    from console.tui.app import ConsoleApp
    from testbed.tui_pilot import settle, table_rows, text_of

    db = tmp_path / "state.db"
    assert main(["--db", str(db), "demo"]) == 0
    app = ConsoleApp(db, local_tz=ZoneInfo("UTC"), keys_path=tmp_path / "keys.toml", refresh_s=None)
    async with app.run_test(size=(140, 42)) as pilot:
        await settle(pilot)
        await pilot.press("3")
        await settle(pilot)
        names = [r[0] for r in table_rows(app, "#arms-table")]
        assert "gpt-oss-20b-marlin" in names and not [n for n in names if "(not in recipes)" in n]
        table = app.screen.query_one("#arms-table", DataTable)
        table.move_cursor(row=names.index("gpt-oss-20b-marlin"))
        await settle(pilot)
        assert "alias of gpt-oss-20b-replicas-marlin: its settings and plan" in text_of(app, "#arms-detail")
        table.move_cursor(row=names.index("gpt-oss-20b-replicas-marlin"))
        await settle(pilot)
        assert "alias of" not in text_of(app, "#arms-detail")
