"""Logit-level divergence between two servers on identical token contexts (the write-up's kldiff).

For questions a task benchmark cannot settle (are two kernels equivalent? what does an fp8 KV cache or a
four-bit build change?), the same token ids go to both servers, each returns its top-k log-probabilities
at every position, and the next-token distributions are compared: top-1 agreement, top-5 overlap and
KL(a || b) per position. A figure means nothing alone: read it against a control pair (the same
configuration served twice), which the console does (docs/kldiff.md).
"""

from agents.kldiff.cli import main

__all__ = ["main"]
