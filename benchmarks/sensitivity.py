"""Same as ``featgraph bench sensitivity``; see featgraph/bench/sensitivity.py.

python benchmarks/sensitivity.py --help
"""

import sys

from featgraph.cli import main

if __name__ == "__main__":
    main(["bench", "sensitivity", *sys.argv[1:]])
