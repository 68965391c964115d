"""Same as ``featgraph bench gpu``; see featgraph/bench/gpu.py. Needs a CUDA GPU for real timings.

python benchmarks/gpu.py --help
"""

import sys

from featgraph.cli import main

if __name__ == "__main__":
    main(["bench", "gpu", *sys.argv[1:]])
