"""The corruption tripwire (standard library only, Python 3.10+): is this arm's output still language?

A fast kernel or a new parallel layout can silently corrupt output (the write-up's GLM DP2 x TP2 layout:
8 of 20 degenerate). Every arm is tripwired before its numbers are trusted: 20 fixed prompts through the
model's chat endpoint with the vendor's serving profile, graded on the answer, not the chain of thought.
"""

from agents.tripwire.cli import main

__all__ = ["main"]
