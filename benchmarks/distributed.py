"""Distributed full-graph training: epoch time, halo bytes and edge cut, and a model of N machines (same as
``featgraph bench distributed``); see featgraph/bench/distributed.py.

python benchmarks/distributed.py [--scale 0.02] [--threads 2] --json results/distributed.json
"""

import sys

from featgraph.cli import main

if __name__ == "__main__":
    main(["bench", "distributed", *sys.argv[1:]])
