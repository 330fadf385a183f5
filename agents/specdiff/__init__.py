"""Greedy sequence comparison of a speculative server against its base, read against a control (specdiff).

The write-up's box/specdiff.py asked whether speculation changes what a model says: the same prompts go
greedily (temperature 0, a fixed seed) to a server with a speculative config and to the same server
without it, and the generated token ids are compared prompt by prompt. Greedy output is not reproducible
on every stack ("its own control, the same server captured twice, matched on only 4 of 12"), so the same
run captures a control twice, and the console draws a conclusion only when the control reproduces
(docs/specdiff.md).
"""

from agents.specdiff.cli import main

__all__ = ["main"]
