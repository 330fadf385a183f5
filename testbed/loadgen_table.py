"""Capture MLPerf LoadGen's early-stopping answers from its own C++ into tests/fixtures/loadgen/early_stopping.tsv.

console/tails.py ports LoadGen's early stopping; the only evidence that the port is exact is LoadGen's own
output. This compiles tests/fixtures/loadgen/harness.cc with g++ against an unpacked ``mlcommons-loadgen``
sdist (its early_stopping.cc, unchanged) and writes the table the tests read, headed by the sdist's version
and sha256 so anyone can redo it from the same bytes. Run once by hand; the suite never compiles:

    python3 -m testbed.loadgen_table /tmp/lg/mlcommons_loadgen-6.0.17 [--tarball X.tar.gz]
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "loadgen"
HARNESS = FIXTURES / "harness.cc"
TABLE = FIXTURES / "early_stopping.tsv"


def sha256(path: Path) -> str:
    """The file's sha256 in hex, as ``sha256sum`` prints it."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build_and_run(sdist: Path) -> str:
    """The harness's rows: compiled in a scratch directory, so nothing lands in the repository."""
    with tempfile.TemporaryDirectory() as scratch:
        binary = Path(scratch) / "harness"
        compile_argv = [
            "g++",
            "-O2",
            "-std=c++17",
            f"-I{sdist}",
            str(HARNESS),
            str(sdist / "early_stopping.cc"),
            "-o",
            str(binary),
        ]
        subprocess.run(compile_argv, check=True)
        return subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout


def header(sdist: Path, tarball: Path) -> str:
    """Comment lines naming what the table was made from, then the column names."""
    version = (sdist / "VERSION.txt").read_text().strip()
    return (
        f"# MLPerf LoadGen early stopping, captured from mlcommons-loadgen {version} (sdist {tarball.name},"
        f" sha256 {sha256(tarball)})\n"
        "# by testbed/loadgen_table.py compiling tests/fixtures/loadgen/harness.cc against its early_stopping.cc;"
        " d = 0, c = 0.99\n"
        "# finder p t h: fresh MinPassingQueriesFinder; seq p t h: one finder asked t = 1, 2, ...;"
        " tail p n index need: single-stream EarlyStopping (-1 = none)\n"
        "kind\tp\tx\ty\tz\n"
    )


def main(argv: list[str] | None = None) -> int:
    """Write the table; the tarball defaults to the sdist directory's name plus .tar.gz beside it."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sdist", type=Path, help="the unpacked mlcommons-loadgen sdist directory")
    parser.add_argument("--tarball", type=Path, help="the sdist archive whose sha256 heads the table")
    args = parser.parse_args(argv)
    sdist: Path = args.sdist.resolve()
    tarball: Path = args.tarball or sdist.with_name(sdist.name + ".tar.gz")
    if not (sdist / "early_stopping.cc").is_file() or not tarball.is_file():
        print(f"need {sdist}/early_stopping.cc and {tarball}", file=sys.stderr)
        return 2
    TABLE.write_text(header(sdist, tarball) + build_and_run(sdist))
    print(f"wrote {TABLE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
