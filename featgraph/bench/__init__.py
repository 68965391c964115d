"""Benchmarks runnable as ``featgraph bench ...``: measured against baselines in the same run."""
