"""Full-graph node classification: train with Adam, keep the epoch with the best validation accuracy, report
its test accuracy, time per epoch (forward + backward + optimizer step) and peak memory; save and reload."""

from __future__ import annotations

import contextlib
import resource
import statistics
import time
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

import torch
import torch.nn.functional as F

from ..datasets import Dataset, entity_by_name, load
from ..progress import Progress
from .models import RELATIONAL_MODELS, NodeClassifier, Preset, preset


@dataclass(frozen=True)
class Task:
    """A labelled graph with its split, features as ``normalized_features`` gives them; a typed graph also has
    each edge's type (``edge_type``, below ``num_relations``)."""

    name: str
    x: torch.Tensor
    edge_index: torch.Tensor
    y: torch.Tensor
    num_classes: int
    train_idx: torch.Tensor
    val_idx: torch.Tensor
    test_idx: torch.Tensor
    edge_type: torch.Tensor | None = None
    num_relations: int = 0

    @property
    def graph(self) -> tuple[torch.Tensor, ...]:
        """What a model reads beside the features: ``(edge_index,)``, or ``(edge_index, edge_type)``."""
        return (self.edge_index,) if self.edge_type is None else (self.edge_index, self.edge_type)

    def to(self, device: torch.device | str) -> Task:
        """The task with its tensors on ``device`` (features, edges, labels and splits copied once)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return replace(self, **{k: v.to(device) for k, v in values.items() if isinstance(v, torch.Tensor)})


@dataclass(frozen=True)
class Metrics:
    """What a training run reports: accuracies at the best validation epoch, epoch times and peak memory."""

    val_acc: float  # at the best validation epoch
    test_acc: float  # at the best validation epoch
    epoch_seconds: float  # median over the epochs after the first (which compiles kernels)
    first_epoch_seconds: float
    peak_rss_mb: float  # the process's peak resident memory so far
    best_epoch: int
    epochs: int

    def to_dict(self) -> dict[str, float | int]:
        """The metrics as a plain dict (for ``--json``)."""
        return asdict(self)


PRECISIONS = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


class MixedPrecision:
    """Training in ``precision`` ("fp32", "bf16", "fp16"): the model's forward and loss under ``torch.autocast``
    in that dtype (the ops' dtypes as ``featgraph.ops.precision`` says; weights, gradients and the optimiser's
    state stay float32), and for fp16, whose small gradients underflow, the loss scaled by a ``GradScaler``."""

    def __init__(self, precision: str = "fp32", device_type: str = "cpu") -> None:
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {tuple(PRECISIONS)}, got {precision!r}")
        self.dtype, self.device_type = PRECISIONS[precision], device_type
        self.scaler = torch.amp.GradScaler(device_type, enabled=precision == "fp16")

    def autocast(self) -> contextlib.AbstractContextManager:
        """The region the forward and the loss run in: autocast, or nothing for fp32."""
        if self.dtype == torch.float32:
            return contextlib.nullcontext()
        return torch.autocast(self.device_type, dtype=self.dtype)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The input features in the autocast dtype, cast once: the first layer's matmul would cast them on
        every forward (a copy of the whole feature matrix per epoch), and its rounding is the same."""
        return x if self.dtype == torch.float32 else x.to(self.dtype)

    def step(self, loss: torch.Tensor, optimizer: torch.optim.Optimizer) -> None:
        """Backward from ``loss`` and one optimiser step (unscaled first where the loss was scaled)."""
        self.scaler.scale(loss).backward()
        self.scaler.step(optimizer)
        self.scaler.update()


def labelled_dataset(dataset: str) -> Dataset:
    """The bundled dataset, which must have labels and a train/validation/test split."""
    data = load(dataset)
    if data.labels is None or data.train_idx is None:
        raise ValueError(
            f"dataset {dataset!r} has no labels and split; node classification needs a labelled dataset "
            "(cora, citeseer, products-like, products-like-small)"
        )
    return data


def normalized_features(features: torch.Tensor) -> torch.Tensor:
    """Rows scaled to sum 1 (PyG's ``NormalizeFeatures``) where the features are non-negative, as the citation
    graphs' bags of words; signed features (products-like's) are returned as they are, since a row's sum
    there is no size to divide by."""
    if bool((features < 0).any()):
        return features
    return features / features.sum(1, keepdim=True).clamp(min=1)


def node_task(dataset: str) -> Task:
    """The bundled dataset as a node-classification task; only datasets with labels and a split qualify. A
    generated RGCN entity dataset ("aifb-like", "am-like-0.1", ...) is a typed task; a fifth of its training
    nodes validate, as Schlichtkrull et al. split theirs."""
    typed = entity_by_name(dataset)
    if typed is not None:
        held = typed.train_idx.numel() // 5
        return Task(
            typed.name, typed.x, typed.graph.graph.edge_index, typed.y, typed.num_classes, typed.train_idx[held:],
            typed.train_idx[:held], typed.test_idx, typed.graph.etype, typed.graph.num_relations,
        )  # fmt: skip
    data = labelled_dataset(dataset)
    return Task(
        data.name,
        normalized_features(data.features),
        data.edge_index,
        data.labels,
        data.num_classes,
        data.train_idx,
        data.val_idx,
        data.test_idx,
    )


def build(model: str, task: Task, config: Preset, backend: str, dropout: str | None = None) -> NodeClassifier:
    """A fresh ``NodeClassifier`` of ``model`` sized for ``task``, with ``backend``'s layers and ``dropout``'s
    dropout (by default the backend's own). A relational model needs a typed task and the others an untyped
    one."""
    if (model in RELATIONAL_MODELS) != (task.edge_type is not None):
        if task.edge_type is None:
            raise ValueError(f"model {model!r} reads edge types: train it on a typed dataset (aifb-like, ...)")
        raise ValueError(
            f"dataset {task.name!r} is typed: train it with a relational model ({', '.join(RELATIONAL_MODELS)}); "
            f"{model!r} reads no edge types"
        )
    return NodeClassifier(model, task.x.shape[1], task.num_classes, config, backend, dropout, task.num_relations)


@torch.no_grad()
def evaluate(net: torch.nn.Module, task: Task, precision: MixedPrecision | None = None) -> tuple[float, float]:
    """(validation accuracy, test accuracy), the forward in ``precision`` (float32 by default)."""
    net.eval()
    with (precision or MixedPrecision()).autocast():
        logits = net(task.x, *task.graph)
    return split_accuracies(logits, task.y, task.val_idx, task.test_idx)


def split_accuracies(logits: torch.Tensor, labels: torch.Tensor, *splits: torch.Tensor) -> tuple[float, ...]:
    """The share of each split's vertices whose highest logit is their label."""
    predicted = logits.argmax(1)
    return tuple(float((predicted[idx] == labels[idx]).float().mean()) for idx in splits)


def fit(
    net: torch.nn.Module, task: Task, config: Preset, seed: int = 0, progress: bool = True, precision: str = "fp32"
) -> Metrics:
    """Train for ``config.epochs`` in ``precision`` (``MixedPrecision``); ``net`` ends with the weights of its
    best validation epoch."""
    torch.manual_seed(seed)
    mixed = MixedPrecision(precision, task.x.device.type)
    task = replace(task, x=mixed.features(task.x))
    optimizer = torch.optim.Adam(net.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    sync = torch.cuda.synchronize if task.x.device.type == "cuda" else (lambda: None)
    times: list[float] = []
    best = (-1.0, 0.0, 0)  # val, test, epoch
    best_state = None
    bar = Progress(config.epochs, f"{task.name}") if progress else None
    for epoch in range(config.epochs):
        start = time.perf_counter()
        net.train()
        optimizer.zero_grad()
        with mixed.autocast():
            loss = F.cross_entropy(net(task.x, *task.graph)[task.train_idx], task.y[task.train_idx])
        mixed.step(loss, optimizer)
        sync()  # an epoch's time includes its queued GPU work
        times.append(time.perf_counter() - start)
        val, test = evaluate(net, task, mixed)
        if val > best[0]:
            best, best_state = (val, test, epoch), {k: v.detach().clone() for k, v in net.state_dict().items()}
        if bar is not None:
            bar.update(status=f"loss {loss.item():.3f} val {val:.3f} {times[-1] * 1e3:.1f} ms/epoch")
    if bar is not None:
        bar.__exit__()
    if best_state is not None:
        net.load_state_dict(best_state)
    steady = times[1:] or times
    return Metrics(
        val_acc=best[0],
        test_acc=best[1],
        epoch_seconds=statistics.median(steady) if steady else 0.0,
        first_epoch_seconds=times[0] if times else 0.0,
        peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        best_epoch=best[2],
        epochs=config.epochs,
    )


def save(path: str | Path, net: NodeClassifier, task: Task, config: Preset, backend: str) -> None:
    """Weights plus what it takes to rebuild the model: name, dataset, hyper-parameters, backend."""
    meta = {"model": net.model, "dataset": task.name, "config": asdict(config), "backend": backend}
    torch.save({"meta": meta, "state_dict": net.state_dict()}, path)


def load_model(path: str | Path) -> tuple[NodeClassifier, Task, dict]:
    """The saved model rebuilt on its dataset, ready for ``evaluate``."""
    saved = torch.load(path, weights_only=True)
    meta = saved["meta"]
    task = node_task(meta["dataset"])
    net = build(meta["model"], task, preset(meta["model"], **meta["config"]), meta["backend"])
    net.load_state_dict(saved["state_dict"])
    return net, task, meta
