"""Same as ``featgraph bench all``; see featgraph/bench/suite.py.

python benchmarks/all.py --help
"""

import sys

from featgraph.cli import main

if __name__ == "__main__":
    main(["bench", "all", *sys.argv[1:]])
