"""The CPU output pool (``featgraph/backends/cpu/buffers.py``) on and off, alternated in one process.

python benchmarks/output_pool.py [--dims 128 256 512] [--threads 2] [--repeat 7]

Rows: filling a fresh n x d float32 tensor against a pooled one (the page-fault cost alone), the GCN
aggregation (SpMM) and GCN forward + backward, each with the pool off (every output fresh from malloc) and
on. Best of ``--repeat`` runs, the two settings interleaved so a noisy neighbour hits both alike.
"""

import argparse

import torch

from featgraph.backends.cpu import buffers
from featgraph.bench.kernels import GRAPHS, bench_gcn_train, op_kernel
from featgraph.bench.report import machine
from featgraph.timing import interleaved_best_ms

POOL_ON = 1 << 40  # no practical bound on kept memory while measuring


def interleaved(fn, repeat: int) -> tuple[float, float]:
    """Best ms of ``fn`` with the pool off and on, the settings alternating run by run."""

    def under(bound: int):
        def run():
            buffers.POOL.max_free_bytes = bound
            return fn()

        return run

    times = interleaved_best_ms({"off": under(0), "on": under(POOL_ON)}, repeat, warmup=0)
    buffers.release()
    return times["off"], times["on"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dims", type=int, nargs="+", default=[128, 256, 512])
    parser.add_argument("--graphs", nargs="+", default=list(GRAPHS), choices=list(GRAPHS))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"machine: {machine()}; {args.threads} threads")
    print("| graph | d | work | pool off ms | pool on ms | off / on |\n|---|---|---|---|---|---|")
    for name in args.graphs:
        g = GRAPHS[name](1.0)
        for d in args.dims:
            x = torch.randn(g.num_nodes, d)
            spmm = op_kernel("gcn", g, d, args.threads)
            work = {
                "fill an n x d output": lambda shape=x.shape: buffers.empty(shape, torch.float32).fill_(1.0),
                "GCN aggregation (SpMM)": lambda spmm=spmm, x=x: spmm(XV=x),
                "GCN forward + backward": bench_gcn_train(g, d, args.threads)["featgraph"],
            }
            for label, fn in work.items():
                fn()  # compile and warm up outside the timing
                off, on = interleaved(fn, args.repeat)
                print(f"| {name} | {d} | {label} | {off:.2f} | {on:.2f} | {off / on:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
