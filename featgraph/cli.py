"""The ``featgraph`` command (also ``python -m featgraph``)."""

from __future__ import annotations

import argparse

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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="featgraph", description="sparse-kernel backend for GNN systems")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="versions, usable backends, threads").set_defaults(run=_info)
    sub.add_parser("datasets", help="list the datasets featgraph.datasets.load accepts").set_defaults(run=_datasets)
    from .training import command

    demo = sub.add_parser("demo", help="the main job: train GCN and GAT on Cora with featgraph and with PyG")
    command.add_demo_arguments(demo)
    demo.set_defaults(run=command.demo)
    train = sub.add_parser("train", help="full-graph node classification on a bundled dataset")
    command.add_arguments(train)
    train.set_defaults(run=command.run)
    bench = sub.add_parser("bench", help="benchmarks against baselines in the same run").add_subparsers(
        dest="suite", required=True
    )
    from .bench import kernels

    kernel_bench = bench.add_parser("kernels", help="SpMM/SDDMM kernel table (GCN, max, MLP, attention)")
    kernels.add_arguments(kernel_bench)
    kernel_bench.set_defaults(run=kernels.run)
    from .bench import training as training_bench

    train_bench = bench.add_parser("train", help="seconds per epoch and peak memory: featgraph, PyG, DGL")
    training_bench.add_arguments(train_bench)
    train_bench.set_defaults(run=training_bench.run)
    from .bench import accuracy

    accuracy_bench = bench.add_parser("accuracy", help="test accuracy over seeds: featgraph, PyG, the papers")
    accuracy.add_arguments(accuracy_bench)
    accuracy_bench.set_defaults(run=accuracy.run)
    args = parser.parse_args(argv)
    args.run(args)
