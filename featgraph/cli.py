"""The ``featgraph`` command (also ``python -m featgraph``)."""

from __future__ import annotations

import argparse
import time

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


def _demo(args: argparse.Namespace) -> None:
    from . import te
    from .bench.measure import best_ms
    from .datasets import load
    from .templates import spmm

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
    # GCN aggregation (sum of in-neighbour features) as a fused featgraph kernel, against torch.sparse (MKL)
    n, d = g.num_nodes, x.shape[1]
    XV = te.placeholder((n, d), name="XV")
    kernel = spmm(g, lambda src, dst, eid: te.compute((d,), lambda i: XV[src, i]), "sum")
    adjacency = g.adjacency()
    err = (kernel(XV=x) - torch.sparse.mm(adjacency, x)).abs().max().item()
    ours, theirs = best_ms(lambda: kernel(XV=x)), best_ms(lambda: torch.sparse.mm(adjacency, x))
    print(f"GCN aggregation, d={d}: featgraph {ours:.2f} ms, torch.sparse {theirs:.2f} ms ({theirs / ours:.1f}x)")
    print(f"max |featgraph - torch.sparse| = {err:.2e}")
    if err > 1e-3:
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
