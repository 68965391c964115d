"""``featgraph train`` and the main job, ``featgraph demo``: train on a bundled real dataset, report accuracy,
time per epoch and memory, next to PyG's layers trained from the same initial weights."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

import torch

from ..distributed import launch
from ..training import linkpred, minibatch
from ..training.loop import PRECISIONS, Metrics, build, evaluate, fit, load_model, node_task, save
from ..training.models import BACKENDS, HOMOGENEOUS_MODELS, MODELS, RELATIONAL_MODELS, Preset, preset


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", choices=MODELS, help="default gcn (sage with --minibatch)")
    parser.add_argument(
        "--dataset",
        default="cora",
        help="a labelled bundled dataset: cora, citeseer, products-like(-small); for --model rgcn, rgat or hgt a "
        "generated typed one: aifb-like, mutag-like, bgs-like, am-like, each at a scale as am-like-0.1",
    )
    parser.add_argument("--epochs", type=int)
    parser.add_argument("--hidden", type=int)
    parser.add_argument("--heads", type=int, help="attention heads: GAT's in the first layer, RGAT's and HGT's")
    parser.add_argument("--aggr", choices=["mean", "sum", "max", "pool"], help="GraphSAGE's aggregator")
    parser.add_argument("--lr", type=float)
    parser.add_argument("--weight-decay", type=float)
    parser.add_argument("--dropout", type=float)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backend", choices=list(BACKENDS), default="featgraph")
    parser.add_argument(
        "--precision", choices=list(PRECISIONS), default="fp32",
        help="bf16/fp16: forward and loss under torch.autocast, float32 weights and optimiser (default fp32)",
    )  # fmt: skip
    parser.add_argument("--save", metavar="PATH", help="save the trained model (best validation epoch)")
    parser.add_argument("--load", metavar="PATH", help="evaluate a saved model instead of training")
    parser.add_argument("--json", metavar="PATH", help="write the final metrics as JSON")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    add_device_argument(parser)
    minibatch.add_arguments(parser)
    linkpred.add_arguments(parser)
    launch.add_arguments(parser)


def add_device_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--device", default="cpu", help="where the model trains: cpu (default), cuda or cuda:N (a CUDA GPU)"
    )


def training_device(name: str) -> torch.device:
    """``--device`` as a torch device, refused by name where torch cannot reach it."""
    try:
        device = torch.device(name)
    except RuntimeError as err:
        raise ValueError(f"--device {name!r} is not a device torch knows: {err}") from None
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"--device must be cpu or cuda[:N], got {name!r}")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"--device {name!r}: torch sees no CUDA GPU here (torch.cuda.is_available() is False)")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ValueError(f"--device {name!r}: torch sees {torch.cuda.device_count()} CUDA GPU(s)")
    return device


def run(args: argparse.Namespace) -> dict[str, float | int]:
    device = training_device(args.device)
    if args.task == "link":
        result = linkpred.run(args)
        _write_json(args.json, result)
        return result
    if args.decoder is not None:
        raise ValueError("--decoder applies to --task link")
    if device.type != "cpu" and args.distributed:
        raise ValueError(f"--device {args.device}: --distributed training runs on the CPU (gloo)")
    if (args.distributed or args.minibatch) and args.model in RELATIONAL_MODELS:
        raise ValueError(f"--model {args.model} trains full-graph: --minibatch and --distributed take untyped models")
    if args.distributed and args.precision != "fp32":
        raise ValueError("--precision applies to full-graph and --minibatch training, not --distributed")
    if args.distributed:
        model = args.model or ("sage" if args.minibatch else "gcn")
        presets = minibatch.minibatch_preset if args.minibatch else preset
        result: dict = launch.run(args, model, _config(args, model, presets))
    elif args.minibatch:
        model = args.model or "sage"
        result = minibatch.run(args, model, _config(args, model, minibatch.minibatch_preset))
    elif args.load:
        net, task, meta = load_model(args.load)
        net, task = net.to(device), task.to(device)
        val, test = evaluate(net, task)
        result = {"val_acc": val, "test_acc": test}
        print(f"{meta['model']} ({meta['backend']}) on {task.name}: val {val:.4f} test {test:.4f}")
    else:
        if args.fanout or args.batch_size:
            raise ValueError("--fanout and --batch-size apply to --minibatch training")
        model = args.model or "gcn"
        config = _config(args, model, preset)
        task = node_task(args.dataset).to(device)
        torch.manual_seed(args.seed)
        net = build(model, task, config, args.backend).to(device)
        metrics = fit(net, task, config, args.seed, progress=not args.quiet, precision=args.precision)
        result = metrics.to_dict()
        print(f"{model} ({args.backend}, {args.precision}, {device}) on {task.name}: {_summary(metrics)}")
        if args.save:
            save(args.save, net, task, config, args.backend)
            print(f"saved to {args.save}")
    _write_json(args.json, result)
    return result


def _write_json(path: str | None, result: dict) -> None:
    """``--json``: the final metrics (from one process of a distributed run)."""
    if path and launch.writes_files():
        with open(path, "w") as f:
            json.dump(result, f, indent=1)


def _config(args: argparse.Namespace, model: str, presets: Callable[..., Preset]) -> Preset:
    """The model's hyper-parameters from ``presets`` with those given on the command line."""
    return presets(
        model, epochs=args.epochs, hidden=args.hidden, heads=args.heads, aggr=args.aggr, lr=args.lr,
        weight_decay=args.weight_decay, dropout=args.dropout,
    )  # fmt: skip


def _summary(m: Metrics) -> str:
    return (
        f"val {m.val_acc:.4f} test {m.test_acc:.4f} (epoch {m.best_epoch}), {m.epoch_seconds * 1e3:.2f} ms/epoch, "
        f"peak RSS {m.peak_rss_mb:.0f} MB"
    )


# (layers, dropout): what a PyG user runs, then what changing the import, featgraph's dropout, and both buy
DEMO_SETUPS = (("pyg", "torch"), ("featgraph", "torch"), ("pyg", "featgraph"), ("featgraph", "featgraph"))


def demo(args: argparse.Namespace) -> list[tuple[str, str, str, Metrics]]:
    """Train each model four ways from the same initial weights and seed: PyG's layers with torch's dropout
    (what a PyG user runs), featgraph's layers with torch's dropout (what changing the import buys), PyG's
    layers with featgraph's dropout (what ``featgraph.nn.Dropout`` alone buys: on small graphs torch's CPU
    dropout is most of an epoch) and featgraph's layers with featgraph's dropout; print accuracy, time per
    epoch and the ratio to PyG's. Without PyG only featgraph's layers run."""
    device = training_device(args.device)
    task = node_task(args.dataset).to(device)
    setups = [s for s in DEMO_SETUPS if s[0] == "featgraph" or _pyg_installed()]
    print(
        f"{task.name}: {task.x.shape[0]} vertices, {task.edge_index.shape[1]} edges, {task.num_classes} classes, "
        f"on {device}"
    )
    rows = []
    for model in args.models:
        config = preset(model, epochs=args.epochs)
        torch.manual_seed(args.seed)
        nets = [build(model, task, config, layers, dropout).to(device) for layers, dropout in setups]
        for net in nets[1:]:
            net.load_state_dict(nets[0].state_dict())
        for (layers, dropout), net in zip(setups, nets, strict=True):
            rows.append((model, layers, dropout, fit(net, task, config, args.seed, progress=False)))
    print("| model | layers | dropout | val acc | test acc | ms/epoch | vs PyG's layers and dropout |")
    print("|---|---|---|---|---|---|---|")
    baseline = {model: m.epoch_seconds for model, layers, dropout, m in rows if (layers, dropout) == DEMO_SETUPS[0]}
    for model, layers, dropout, m in rows:
        ratio = f"{baseline[model] / m.epoch_seconds:.2f}x" if model in baseline else "-"
        print(
            f"| {model} | {layers} | {dropout} | {m.val_acc:.3f} | {m.test_acc:.3f} | {m.epoch_seconds * 1e3:.2f} | "
            f"{ratio} |"
        )
    if len(setups) < len(DEMO_SETUPS):
        print("(PyG is not installed: pip install torch_geometric to compare)")
    return rows


def add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", default="cora")
    parser.add_argument("--models", nargs="+", choices=HOMOGENEOUS_MODELS, default=["gcn", "gat"])
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    add_device_argument(parser)


def _pyg_installed() -> bool:
    try:
        import torch_geometric  # noqa: F401
    except ImportError:
        return False
    return True
