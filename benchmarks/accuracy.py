"""Accuracy parity table (same as ``featgraph bench accuracy``); see featgraph/bench/accuracy.py.

python benchmarks/accuracy.py --seeds 5 --json results/accuracy.json
"""

import sys

from featgraph.cli import main

if __name__ == "__main__":
    main(["bench", "accuracy", *sys.argv[1:]])
