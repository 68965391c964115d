"""The ``featgraph`` command (also ``python -m featgraph``)."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch


def _info(_: argparse.Namespace) -> None:
    from . import __version__
    from .backends import toolchain

    compiler = toolchain.cxx_version()
    print(f"featgraph {__version__}")
    print(f"torch     {torch.__version__}")
    print(f"cpu       {'usable: ' + compiler if compiler else 'not usable: no C++ compiler (install g++)'}")
    triton, cuda = toolchain.triton_available(), toolchain.cuda_available()
    gpu = (
        "usable"
        if triton and cuda
        else f"not usable (triton {'found' if triton else 'missing'}, CUDA GPU {'found' if cuda else 'missing'})"
    )
    print(f"gpu       {gpu}")
    print(f"threads   {toolchain.num_threads()}")


def _datasets(_: argparse.Namespace) -> None:
    from .datasets import describe

    print(describe())


def _best_ms(fn: Callable[[], torch.Tensor], repeat: int = 5) -> float:
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times) * 1e3


def _demo(args: argparse.Namespace) -> None:
    from .datasets import load

    data = load(args.dataset)
    g, x = data.graph, data.features
    print(data)
    start = time.perf_counter()
    csr = g.csr()
    g.csc()
    g.edge_order("hilbert")
    tc = g.tc_translation()
    print(
        f"formats built in {(time.perf_counter() - start) * 1e3:.1f} ms: CSR/CSC {csr.indptr.numel() - 1} rows, "
        f"{tc.num_blocks} tensor-core blocks in {tc.num_windows} windows"
    )
    # sum aggregation over in-edges, from featgraph's CSR, against torch.sparse (MKL)
    row_of_edge = torch.repeat_interleave(torch.arange(g.num_nodes), g.in_degrees())
    ours = lambda: torch.zeros_like(x).index_add_(0, row_of_edge, x[csr.indices])  # noqa: E731
    adjacency = torch.sparse_csr_tensor(csr.indptr, csr.indices, torch.ones(g.num_edges), (g.num_nodes,) * 2)
    baseline = lambda: torch.sparse.mm(adjacency, x)  # noqa: E731
    err = (ours() - baseline()).abs().max().item()
    timings = f"featgraph CSR {_best_ms(ours):.2f} ms, torch.sparse {_best_ms(baseline):.2f} ms"
    print(f"sum aggregation, d={x.shape[1]}: {timings}, max |diff| {err:.2e}")
    if err > 1e-4:
        raise SystemExit("demo aggregation disagrees with torch.sparse")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="featgraph", description="sparse-kernel backend for GNN systems")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="versions, usable backends, threads").set_defaults(run=_info)
    sub.add_parser("datasets", help="list the datasets featgraph.datasets.load accepts").set_defaults(run=_datasets)
    demo = sub.add_parser("demo", help="load a bundled graph, build formats, aggregate against torch.sparse")
    demo.add_argument("--dataset", default="cora")
    demo.set_defaults(run=_demo)
    bench = sub.add_parser("bench", help="benchmarks against baselines in the same run").add_subparsers(
        dest="suite", required=True
    )
    from .bench import kernels

    kernel_bench = bench.add_parser("kernels", help="SpMM/SDDMM kernel table (GCN, max, MLP, attention)")
    kernels.add_arguments(kernel_bench)
    kernel_bench.set_defaults(run=kernels.run)
    args = parser.parse_args(argv)
    args.run(args)
