"""Data only: the shipped recipes (profiles/, arms/, shapes.toml, sweeps.toml), no code.

It is a package so the recipes travel inside the wheel and are found the way ``import`` finds them
(``importlib.resources.files("recipes")`` in ``console/recipes/load.py``), never by a path into a source
tree. The format is documented in ``recipes/README.md``.
"""
