"""Training-epoch table (same as ``featgraph bench train``); see featgraph/bench/training.py.

python benchmarks/train.py --json results/train.json
"""

import sys

from featgraph.cli import main

if __name__ == "__main__":
    main(["bench", "train", *sys.argv[1:]])
