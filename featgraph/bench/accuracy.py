"""``featgraph bench accuracy``: accuracy parity with PyG and with the papers on the Planetoid splits.

Per seed both models start from the same initial weights (PyG's, loaded into featgraph's model) and train
with the same hyper-parameters; featgraph's uses its own dropout, so the trajectories differ as two seeds
would. Reports mean and standard deviation of the test accuracy at the best validation epoch.

``--minibatch`` compares instead featgraph's full-graph training with its mini-batch training (the same
two-layer model and hyper-parameters, sampled blocks from ``BlockLoader``, best validation epoch by
layer-wise inference), the check that sampling costs no accuracy. ``--precision bf16`` (or fp16) compares
featgraph's float32 training with its training under autocast in that precision, from the same initial weights
and seed (``training.loop.MixedPrecision``)."""

from __future__ import annotations

import argparse
import statistics

import torch

from ..training import build, fit, minibatch, node_task, preset
from ..training.loop import PRECISIONS, labelled_dataset
from .report import machine, write_json

PUBLISHED = {("gcn", "cora"): 0.815, ("gcn", "citeseer"): 0.703, ("gat", "cora"): 0.830, ("gat", "citeseer"): 0.725}


def accuracies(model: str, dataset: str, seeds: list[int], epochs: int | None) -> dict[str, list[float]]:
    """Test accuracy per seed for featgraph and PyG."""
    task = node_task(dataset)
    config = preset(model, epochs=epochs)
    result: dict[str, list[float]] = {"featgraph": [], "pyg": []}
    for seed in seeds:
        torch.manual_seed(seed)
        theirs, ours = build(model, task, config, "pyg"), build(model, task, config, "featgraph")
        ours.load_state_dict(theirs.state_dict())
        for name, net in (("featgraph", ours), ("pyg", theirs)):
            result[name].append(fit(net, task, config, seed, progress=False).test_acc)
    return result


def precision_accuracies(
    model: str, dataset: str, seeds: list[int], epochs: int | None, precision: str
) -> dict[str, list[float]]:
    """Test accuracy per seed of featgraph's model trained in float32 and in ``precision``, each seed from the
    same initial weights."""
    task = node_task(dataset)
    config = preset(model, epochs=epochs)
    result: dict[str, list[float]] = {"fp32": [], precision: []}
    for seed in seeds:
        torch.manual_seed(seed)
        nets = {"fp32": build(model, task, config, "featgraph"), precision: build(model, task, config, "featgraph")}
        nets[precision].load_state_dict(nets["fp32"].state_dict())
        for name, net in nets.items():
            result[name].append(fit(net, task, config, seed, progress=False, precision=name).test_acc)
    return result


def minibatch_accuracies(
    model: str, dataset: str, seeds: list[int], epochs: int | None, fanouts: list[int], batch_size: int
) -> dict[str, list[float]]:
    """Test accuracy per seed of featgraph's full-graph and mini-batch training of the same model."""
    task, data = node_task(dataset), labelled_dataset(dataset)
    config = preset(model, epochs=epochs)
    result: dict[str, list[float]] = {"full-graph": [], "mini-batch": []}
    for seed in seeds:
        torch.manual_seed(seed)
        result["full-graph"].append(fit(build(model, task, config, "featgraph"), task, config, seed, False).test_acc)
        torch.manual_seed(seed)
        net = minibatch.SampledClassifier(model, task.x.shape[1], task.num_classes, 2, config, "featgraph")
        metrics = minibatch.fit(net, data, fanouts, batch_size, config, seed, False, select_on_validation=True)
        result["mini-batch"].append(metrics.test_acc)
    return result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--models", nargs="+", help="default gcn sage gat (sage gat with --minibatch)")
    parser.add_argument("--datasets", nargs="+", default=["cora", "citeseer"])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--epochs", type=int, help="override the presets' epochs (tests)")
    parser.add_argument("--json", metavar="PATH", help="write every row as JSON")
    parser.add_argument(
        "--minibatch",
        action="store_true",
        help="compare featgraph's full-graph training with its mini-batch training instead (models sage, gat)",
    )
    parser.add_argument("--fanout", type=minibatch.fanout_list, default=[10, 10], help="with --minibatch (10,10)")
    parser.add_argument("--batch-size", type=minibatch.positive_int, default=32, help="with --minibatch (32)")
    parser.add_argument(
        "--precision",
        choices=[p for p in PRECISIONS if p != "fp32"],
        help="compare featgraph's float32 training with its training under autocast in this precision instead",
    )


def run(args: argparse.Namespace) -> list[dict]:
    if args.minibatch and args.precision:
        raise ValueError("--precision and --minibatch are two comparisons: give one of them")
    columns = ("full-graph", "mini-batch") if args.minibatch else ("featgraph", "pyg")
    columns = ("fp32", args.precision) if args.precision else columns
    print(f"machine: {machine()}; {args.seeds} seeds, test accuracy at the best validation epoch")
    if args.precision:
        print(f"featgraph's layers; {args.precision}: forward and loss under autocast, float32 weights and Adam")
        print(f"| dataset | model | fp32 | {args.precision} | {args.precision} - fp32 (pp) | published |")
    elif args.minibatch:
        fanout = ",".join(map(str, args.fanout))
        print(f"featgraph's layers; mini-batch: fan-out {fanout}, batch {args.batch_size}")
        print("| dataset | model | full-graph | mini-batch | mini-batch - full-graph (pp) | published |")
    else:
        print("| dataset | model | featgraph | PyG | featgraph - PyG (pp) | published |")
    print("|---|---|---|---|---|---|")
    rows = []
    models = args.models or (["sage", "gat"] if args.minibatch else ["gcn", "sage", "gat"])
    for dataset in args.datasets:
        for model in models:
            seeds = list(range(args.seeds))
            if args.precision:
                acc = precision_accuracies(model, dataset, seeds, args.epochs, args.precision)
            elif args.minibatch:
                acc = minibatch_accuracies(model, dataset, seeds, args.epochs, args.fanout, args.batch_size)
            else:
                acc = accuracies(model, dataset, seeds, args.epochs)
            mean = {k: statistics.mean(v) for k, v in acc.items()}
            std = {k: statistics.pstdev(v) for k, v in acc.items()}
            published = PUBLISHED.get((model, dataset))
            cells = [f"{100 * mean[k]:.1f} ± {100 * std[k]:.1f}" for k in columns]
            minuend, subtrahend = columns[::-1] if args.minibatch or args.precision else columns
            gap = 100 * (mean[minuend] - mean[subtrahend])
            reference = f"{100 * published:.1f}" if published else "-"
            print(f"| {dataset} | {model} | {cells[0]} | {cells[1]} | {gap:+.1f} | {reference} |", flush=True)
            rows.append({"dataset": dataset, "model": model, "accuracies": acc, "published": published})
    write_json(args.json, rows)
    return rows
