"""Benchmarks, each run as a script from the repository root (``python bench/x.py``): each puts the root on
``sys.path`` first, so ``bench.*``, ``testbed.*`` and the product import as packages."""
