import sys

from agents.tripwire.cli import main

raise SystemExit(main(sys.argv[1:]))
