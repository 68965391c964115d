"""Kernel benchmark table (same as ``featgraph bench kernels``); see featgraph/bench/kernels.py.

python benchmarks/kernels.py --graphs uniform rand100k --dims 32 64 128 256 512 --json results/kernels.json
"""

from featgraph.bench.kernels import main

if __name__ == "__main__":
    main()
