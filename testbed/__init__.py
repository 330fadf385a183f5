"""What the test suite and the benchmarks both run: fake and zero-cost servers, sshd test boxes, agent
daemons, GPU fixtures, backlogs and the CPU vLLM environment. Neither ``tests`` nor ``bench`` imports the
other; both import this. Not part of the wheel (pyproject.toml's packages.find lists what ships)."""
