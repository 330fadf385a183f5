"""Recipes: model serving profiles, arms, workload shapes and sweep lists, loaded from ``recipes/*.toml``.

The shipped recipes are the data-only ``recipes`` package; the operator's own (``$CAMPAIGN_RECIPES``, else
``~/.config/campaign-console/recipes/``) are layered on top by ``load_catalog``.

    catalog = load_catalog()
    findings = lint(catalog, "qwen3.8-27b-nvfp4-b12x", box)
    r = resolve(catalog, "qwen3.8-27b-nvfp4-b12x", box)   # r.replicas[i].argv / .env / .gpus

The format is documented in ``recipes/README.md``.
"""

from console.recipes.boxspec import box_spec
from console.recipes.lint import RULES, lint, lint_catalog
from console.recipes.load import RecipeError, load_catalog, recipe_source, shipped_recipe_dir
from console.recipes.model import (
    Arm,
    BoxSpec,
    Catalog,
    Finding,
    KernelPair,
    MoeEvidence,
    Profile,
    ServingProfile,
    Shape,
    Sweep,
)
from console.recipes.resolve import Replica, ResolvedArm, ResolveError, generic_box, resolve

__all__ = [
    "RULES",
    "Arm",
    "BoxSpec",
    "Catalog",
    "Finding",
    "KernelPair",
    "MoeEvidence",
    "Profile",
    "RecipeError",
    "Replica",
    "ResolveError",
    "ResolvedArm",
    "ServingProfile",
    "Shape",
    "Sweep",
    "box_spec",
    "generic_box",
    "lint",
    "lint_catalog",
    "load_catalog",
    "recipe_source",
    "resolve",
    "shipped_recipe_dir",
]
