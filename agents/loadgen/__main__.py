import sys

from agents.loadgen.cli import main

raise SystemExit(main(sys.argv[1:]))
