"""The agent's built-in shapes (``agents/loadgen/shapes.py``) must say what ``recipes/shapes.toml`` says.

They are two tables on purpose: the agent is stdlib-only and runs on a box without the recipes folder,
so it cannot read the console's TOML. The console always sends explicit lengths with a bench, but an
operator running the load generator by hand on the box gets the built-in table, and a row measured
under a name must mean the same workload whichever side named it.
"""

from __future__ import annotations

from agents.loadgen.shapes import SHAPES
from console.recipes import load_catalog


def test_every_built_in_shape_matches_the_recipes() -> None:
    recipes = load_catalog().shapes
    assert set(SHAPES) <= set(recipes), (
        f"built into the agent but not in recipes/: {set(SHAPES) - set(recipes)}"
    )
    for name, built_in in SHAPES.items():
        r = recipes[name]
        assert (built_in.input_len, built_in.output_len, built_in.prefix_len) == (
            r.input_len,
            r.output_len,
            r.prefix_len,
        ), f"shape {name}: agents/loadgen/shapes.py and recipes/shapes.toml disagree"
