import sys

from agents.kldiff.cli import main

raise SystemExit(main(sys.argv[1:]))
