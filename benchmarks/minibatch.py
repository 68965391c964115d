"""Mini-batch training throughput (same as ``featgraph bench minibatch``); see featgraph/bench/minibatch.py.

python benchmarks/minibatch.py [--scale 1.0] [--threads 2] --json results/minibatch.json
"""

import sys

from featgraph.cli import main

if __name__ == "__main__":
    main(["bench", "minibatch", *sys.argv[1:]])
