"""``featgraph bench accuracy``: accuracy parity with PyG and with the papers on the Planetoid splits.

Per seed both models start from the same initial weights (PyG's, loaded into featgraph's model) and train
with the same hyper-parameters; featgraph's uses its own dropout, so the trajectories differ as two seeds
would. Reports mean and standard deviation of the test accuracy at the best validation epoch."""

from __future__ import annotations

import argparse
import statistics

import torch

from ..training import build, fit, node_task, preset
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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--models", nargs="+", default=["gcn", "sage", "gat"])
    parser.add_argument("--datasets", nargs="+", default=["cora", "citeseer"])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--epochs", type=int, help="override the presets' epochs (tests)")
    parser.add_argument("--json", metavar="PATH", help="write every row as JSON")


def run(args: argparse.Namespace) -> list[dict]:
    print(f"machine: {machine()}; {args.seeds} seeds, test accuracy at the best validation epoch")
    print("| dataset | model | featgraph | PyG | featgraph - PyG (pp) | published |")
    print("|---|---|---|---|---|---|")
    rows = []
    for dataset in args.datasets:
        for model in args.models:
            acc = accuracies(model, dataset, list(range(args.seeds)), args.epochs)
            mean = {k: statistics.mean(v) for k, v in acc.items()}
            std = {k: statistics.pstdev(v) for k, v in acc.items()}
            published = PUBLISHED.get((model, dataset))
            cells = [f"{100 * mean[k]:.1f} ± {100 * std[k]:.1f}" for k in ("featgraph", "pyg")]
            gap = 100 * (mean["featgraph"] - mean["pyg"])
            reference = f"{100 * published:.1f}" if published else "-"
            print(f"| {dataset} | {model} | {cells[0]} | {cells[1]} | {gap:+.1f} | {reference} |", flush=True)
            rows.append({"dataset": dataset, "model": model, "accuracies": acc, "published": published})
    write_json(args.json, rows)
    return rows
