"""The write-up's workload shapes, built in so the load generator works on a box without the recipes folder.

``recipes/shapes.toml`` (console side) is the authority; the console passes explicit lengths when a
recipe defines a shape that is not in this table. As there, ``input_len`` excludes the shared prefix:
a request is ``prefix_len + input_len`` tokens in, ``output_len`` out.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Shape:
    name: str
    input_len: int
    output_len: int
    prefix_len: int = 0
    """Tokens of the input shared by every request of a run (prefix-cache traffic)."""


SHAPES: dict[str, Shape] = {
    s.name: s
    for s in (
        Shape("router", 1024, 128),
        Shape("promptopt", 512, 256, prefix_len=3072),
        Shape("judge", 4096, 512),
        Shape("short", 256, 64),
        Shape("rollout", 8192, 2048),
    )
}
