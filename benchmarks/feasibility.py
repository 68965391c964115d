"""Same as ``featgraph bench feasibility``; see featgraph/bench/feasibility.py.

python benchmarks/feasibility.py --help
"""

import sys

from featgraph.cli import main

if __name__ == "__main__":
    main(["bench", "feasibility", *sys.argv[1:]])
