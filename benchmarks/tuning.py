"""Same as ``featgraph bench tuning``; see featgraph/bench/tuning.py.

python benchmarks/tuning.py --help
"""

import sys

from featgraph.cli import main

if __name__ == "__main__":
    main(["bench", "tuning", *sys.argv[1:]])
