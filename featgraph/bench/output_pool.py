"""``featgraph bench output-pool``: the CPU output pool (``featgraph/backends/cpu/buffers.py``) off and on,
alternated in one process.

Rows: filling a fresh n x d float32 tensor against a pooled one (the page-fault cost alone), the GCN
aggregation (SpMM) and GCN forward + backward, each with the pool off (every output fresh from malloc) and
on. Best of ``--repeat`` runs, the two settings interleaved so a noisy neighbour hits both alike."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch

from ..backends.cpu import buffers
from ..timing import interleaved_best_ms
from .kernels import GRAPHS, bench_gcn_train, op_kernel
from .report import Table, add_common_arguments, each_graph, machine, write_json

POOL_ON = 1 << 40  # no practical bound on kept memory while measuring
TABLE = Table({
    "graph": "graph", "d": "d", "work": "work", "pool off ms": "pool_off_ms:.2f", "pool on ms": "pool_on_ms:.2f",
    "off / on": lambda r: f"{r.off_over_on:.2f}x",
})  # fmt: skip


@dataclass
class Row:
    graph: str
    d: int
    work: str
    pool_off_ms: float
    pool_on_ms: float
    off_over_on: float


def off_and_on_ms(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Best ms of ``fn`` with the pool off and on, the settings alternating run by run; the pool's bound as it
    was afterwards, its kept buffers released."""
    bound_before = buffers.POOL.max_free_bytes

    def under(bound: int) -> Callable[[], object]:
        def run() -> object:
            buffers.POOL.max_free_bytes = bound
            return fn()

        return run

    try:
        times = interleaved_best_ms({"off": under(0), "on": under(POOL_ON)}, repeat, warmup=0)
    finally:
        buffers.POOL.max_free_bytes = bound_before
        buffers.release()
    return times["off"], times["on"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--graphs", nargs="+", default=list(GRAPHS), choices=list(GRAPHS))
    parser.add_argument("--dims", type=int, nargs="+", default=[128, 256, 512])
    add_common_arguments(parser, repeat=7, threads=2, scale=1.0)


def run(args: argparse.Namespace) -> list[Row]:
    torch.set_num_threads(args.threads)
    print(f"machine: {machine()}; {args.threads} threads")
    rows = []
    for name, g in each_graph(args.graphs, GRAPHS, args.scale, TABLE.header):
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
                off, on = off_and_on_ms(fn, args.repeat)
                rows.append(Row(name, d, label, off, on, off / on))
                print(TABLE.rows(rows[-1:]), flush=True)
    write_json(args.json, [asdict(r) for r in rows], threads=args.threads)
    return rows
