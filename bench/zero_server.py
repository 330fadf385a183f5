"""The zero-cost OpenAI-compatible streaming server (testbed/zero_server.py, which the suite runs too), as a
benchmark script: the load generator's ceiling is measured against it.

    python bench/zero_server.py [--port 0] [--processes N] [--cpus 1,2,3] [--model NAME] [--itl-ms X]

Prints ``listening on http://127.0.0.1:PORT`` once ready. Binds 127.0.0.1 only.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from testbed.zero_server import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
