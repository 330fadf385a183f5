import sys

from agents.specdiff.cli import main

raise SystemExit(main(sys.argv[1:]))
