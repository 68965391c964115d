"""The ``featgraph`` command's parser: one subcommand per front end."""

from __future__ import annotations

import argparse

import torch


def _info(_: argparse.Namespace) -> None:
    from .. import __version__
    from ..native import toolchain

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
    from ..datasets import describe

    print(describe())


def _add(subparsers: argparse._SubParsersAction, name: str, summary: str, add_arguments, run) -> None:
    """One subcommand: its parser, its arguments, the function that runs it."""
    parser = subparsers.add_parser(name, help=summary)
    add_arguments(parser)
    parser.set_defaults(run=run)


def main(argv: list[str] | None = None) -> None:
    from ..bench import (
        accuracy,
        compile_time,
        dense_floor,
        dgl_bench,
        feasibility,
        gpu_check,
        hetero,
        kernels,
        memmap,
        output_pool,
        overhead,
        pyg_examples,
        pyg_inputs,
        pyg_tests,
        rgcn_training,
        sensitivity,
        sparse_features,
        suite,
        tc_fill,
    )
    from ..bench import distributed as distributed_bench
    from ..bench import dropout as dropout_bench
    from ..bench import gpu as gpu_bench
    from ..bench import grouped_mm as grouped_mm_bench
    from ..bench import hetero_minibatch as hetero_minibatch_bench
    from ..bench import linkpred as linkpred_bench
    from ..bench import minibatch as minibatch_bench
    from ..bench import profile as profile_bench
    from ..bench import sampling as sampling_bench
    from ..bench import training as training_bench
    from ..bench import tuning as tuning_bench
    from . import train

    parser = argparse.ArgumentParser(prog="featgraph", description="sparse-kernel backend for GNN systems")
    sub = parser.add_subparsers(dest="command", required=True)
    no_arguments = lambda _: None  # noqa: E731
    _add(sub, "info", "versions, usable backends, threads", no_arguments, _info)
    _add(sub, "datasets", "list the datasets featgraph.datasets.load accepts", no_arguments, _datasets)
    demo_help = "the main job: train GCN and GAT on Cora with featgraph and with PyG"
    _add(sub, "demo", demo_help, train.add_demo_arguments, train.demo)
    train_help = "node classification (--task link: link prediction) on a bundled dataset"
    _add(sub, "train", train_help, train.add_arguments, train.run)
    bench = sub.add_parser("bench", help="benchmarks against baselines in the same run").add_subparsers(
        dest="suite", required=True
    )
    for name, module, summary in (
        ("kernels", kernels, "SpMM/SDDMM kernel table (GCN, max, MLP, attention)"),
        ("compile", compile_time, "seconds to compile a new CPU kernel: headers parsed against precompiled"),
        ("train", training_bench, "seconds per epoch and peak memory: featgraph, PyG, DGL"),
        ("profile", profile_bench, "a training epoch's time per operator, eager against compiled, CPU or GPU"),
        ("minibatch", minibatch_bench, "mini-batch sampling and training seeds/s on products-like: vs PyG, DGL"),
        ("linkpred", linkpred_bench, "mini-batch link-prediction edges/s on products-like: vs PyG's layers, DGL"),
        ("sampling", sampling_bench, "neighbour sampling seeds/s on R-MAT: featgraph, vectorised torch, DGL"),
        ("distributed", distributed_bench, "epoch time, halo bytes, edge cut over 1-4 processes; N-machine model"),
        ("accuracy", accuracy, "test accuracy over seeds: featgraph, PyG, the papers"),
        ("tuning", tuning_bench, "heuristic default against tuned configuration, per kernel row"),
        ("sensitivity", sensitivity, "partition x tile heat map and density sweep (paper's Fig. 14, Table V)"),
        ("feasibility", feasibility, "the gather-bound speed targets against this machine's random-row gather rate"),
        ("dense-floor", dense_floor, "GraphConv's epoch with the aggregation taken out, against PyG's epoch"),
        ("dropout", dropout_bench, "featgraph's hashed-mask dropout against torch's, forward + backward"),
        ("grouped-mm", grouped_mm_bench, "segment_mm on the GPU in one launch against torch.mm per segment"),
        ("sparse-features", sparse_features, "ops.linear over bag-of-words features' nonzeros against F.linear"),
        ("hetero", hetero, "RGCNConv, RGATConv or HGTConv forward + backward on typed graphs: featgraph against PyG's"),
        ("hetero-minibatch", hetero_minibatch_bench, "typed sampling and to_hetero training steps on mag-like"),
        ("memmap", memmap, "mini-batch training on memory-mapped features: resident memory against in-memory"),
        ("rgcn-train", rgcn_training, "RGCN training epochs on RGCN-dataset-shaped graphs: featgraph, PyG, DGL"),
        ("dgl", dgl_bench, "DGL's example workloads under DGL's API: DGL's kernels against featgraph.dgl.use()"),
        ("output-pool", output_pool, "CPU outputs fresh in 4 KiB or huge pages or recycled: fill, SpMM, GCN"),
        ("overhead", overhead, "one op or layer call on 1k-100k edges: featgraph's kernels, fixed cost, PyG"),
        ("pyg-inputs", pyg_inputs, "CPU time to build featgraph's Graph and formats from PyG's edge inputs"),
        ("pyg-tests", pyg_tests, "PyG's own layer test files (--tests DIR) with PyG's layers and with featgraph's"),
        ("pyg-examples", pyg_examples, "PyG's Planetoid example scripts (--examples DIR): PyG's layers, featgraph's"),
        ("tc-fill", tc_fill, "tensor-core tile fill and bytes per edge, each graph as given and reordered"),
        ("gpu", gpu_bench, "Triton kernels vs cuSPARSE, PyG, DGL on the paper's graphs at full size, GPU memory"),
        ("gpu-check", gpu_check, "the prepared device check: GPU tests, kernels, training, compile; results in --out"),
        ("all", suite, "the paper's tables and figures on this machine: report.md, PNGs, JSON"),
    ):
        _add(bench, name, summary, module.add_arguments, module.run)
    args = parser.parse_args(argv)
    args.run(args)
