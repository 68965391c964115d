"""Full-graph training across processes: each rank runs the model on its part's vertices, taking its halo
rows from their owners before each layer (``halo.exchange``), and ``DistributedDataParallel`` keeps the
parameters equal. The model is ``NodeClassifier`` itself (same layers, same parameter names: a distributed
run's state dict loads into a one-process model and back); only its forward differs.

Each layer aggregates a bipartite graph, the part's in-edges from its own vertices and halo to its own
vertices, through featgraph's layers (SAGEConv and GATConv take it as a sampled block) or, for GCN, one
weighted SpMM with the normalisation of the whole graph's degrees (stored with the part). The loss is the
mean over the whole graph's training vertices (counts summed over ranks), so the gradients, and with them
losses and parameters epoch by epoch, are those of one process up to float rounding. Dropout masks are
drawn per rank, so they differ from one process's: runs are exact with dropout 0.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

from ..ops import gspmm
from ..training.models import NodeClassifier, Preset
from .halo import HaloPlan, exchange
from .store import Part

MODELS = ("gcn", "sage", "gat")  # layers that run on a part's bipartite graph


class PartClassifier(NodeClassifier):
    """``NodeClassifier`` of ``model`` run on one part: ``forward()`` gives the logits of the part's own
    vertices. Every rank must call it at the same time: the second layer's halo rows come from their owners
    (``halo.exchange``). The first layer's input rows never change, so the halo's feature rows are fetched
    once, here, and each epoch exchanges only hidden rows. The exchanges run on ``halo_group``, by default a
    new group of all ranks: on the default group they would interleave with the gradient all-reduces DDP
    starts during backward, and mismatch them. An exchange fails when a rank does not answer within
    ``timeout``."""

    def __init__(
        self,
        model: str,
        part: Part,
        num_classes: int,
        config: Preset,
        halo_group: dist.ProcessGroup | None = None,
        timeout: timedelta = dist.default_pg_timeout,
    ) -> None:
        if model not in MODELS:
            raise ValueError(f"model must be one of {MODELS} for distributed training, got {model!r}")
        super().__init__(model, part.features.shape[1], num_classes, config, "featgraph")
        self.plan = HaloPlan.of(part, dist.new_group() if halo_group is None else halo_group, timeout)
        # a plain attribute, not a buffer: DDP would broadcast rank 0's buffers over the others' parts
        self.sources = exchange(part.features, self.plan, with_own=True)  # own rows, then the halo's
        self.graph = part.graph()
        if model == "gcn":  # D^-1/2 (A + I) D^-1/2 of the whole graph, on the part's looped edges
            self.graph = self.graph.with_self_loops()
            scale = (part.degree + 1).to(part.features.dtype).rsqrt()
            src, dst = self.graph.coo()
            self.gcn_norm = (scale[src] * scale[dst]).unsqueeze(1)

    def forward(self) -> torch.Tensor:  # type: ignore[override]
        x = self.drop(self.sources, self.dropout, self.training)
        h = self.activate_and_drop(self.layer(self.conv1, x, exchanged=True))
        return self.layer(self.conv2, h, exchanged=False)

    def layer(self, conv: torch.nn.Module, rows: torch.Tensor, exchanged: bool) -> torch.Tensor:
        """One message-passing layer: ``rows`` are the part's source rows (own, then halo) where
        ``exchanged``, else its own rows, whose halo is exchanged here."""
        if self.model == "gcn":  # the linear map commutes with the aggregation: the narrower rows cross
            rows = F.linear(rows, conv.lin.weight)
        sources = rows if exchanged else exchange(rows, self.plan, with_own=True)
        if self.model == "gcn":
            out = gspmm(self.graph, "mul", "sum", sources, self.gcn_norm)
            return out if conv.bias is None else out + conv.bias
        if self.model == "sage":  # the root rows apart: their gradient then needs no zero-filled slice of the sources'
            return conv((sources, sources[: self.plan.num_own] if exchanged else rows), self.graph)
        return conv(sources, self.graph)


@dataclass(frozen=True)
class EpochRecord:
    """One epoch as every rank sees it: the loss over the whole training set, accuracies over the whole
    validation and test sets (after the step), seconds for forward, backward and step."""

    epoch: int
    loss: float
    val_acc: float
    test_acc: float
    seconds: float

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)


class EpochLoop:
    """``fit``: a trainer's ``step`` (one epoch, returning its record) until ``epochs`` have run in all, each
    record passed to ``on_epoch``; a resumed trainer continues from its next epoch."""

    epoch: int
    history: list

    def step(self) -> Any:
        raise NotImplementedError

    def fit(self, epochs: int, on_epoch: Callable[[Any], None] | None = None) -> list:
        while self.epoch < epochs:
            record = self.step()
            if on_epoch is not None:
                on_epoch(record)
        return self.history


class Trainer(EpochLoop):
    """Trains a ``PartClassifier`` wrapped in ``DistributedDataParallel`` with Adam, one step per epoch over
    the whole graph. ``state()``/``load_state()`` hold everything a resumed run needs: weights, optimiser,
    the next epoch and the history; the random state is a function of (seed, epoch, rank)."""

    def __init__(self, net: PartClassifier, part: Part, config: Preset, seed: int = 0) -> None:
        for split in ("train", "val", "test"):
            if split not in part.masks:
                raise ValueError(f"part: node classification needs a {split!r} mask, the part has {list(part.masks)}")
        if part.labels is None:
            raise ValueError("part: node classification needs labels, the part has none")
        self.net, self.part, self.config, self.seed = net, part, config, seed
        self.model = DistributedDataParallel(net)
        self.optimizer = torch.optim.Adam(net.parameters(), lr=config.lr, weight_decay=config.weight_decay)
        self.world_size = dist.get_world_size()
        self.num_train = int(global_sum(part.masks["train"].sum().double()))
        if self.num_train == 0:
            raise ValueError("part: the graph has no training vertices")
        self.epoch = 0
        self.history: list[EpochRecord] = []

    def step(self) -> EpochRecord:
        """One epoch: forward, backward, optimiser step, then evaluation."""
        torch.manual_seed(rank_seed(self.seed, self.epoch, dist.get_rank()))
        start = time.perf_counter()
        self.model.train()
        self.optimizer.zero_grad()
        train = self.part.masks["train"]
        loss_sum = F.cross_entropy(self.model()[train], self.part.labels[train], reduction="sum")
        # DDP averages the ranks' gradients: scaled so that the average is the gradient of the global mean
        (loss_sum * (self.world_size / self.num_train)).backward()
        self.optimizer.step()
        seconds = time.perf_counter() - start
        loss = float(global_sum(loss_sum.detach().double())) / self.num_train
        val, test = self.evaluate()
        record = EpochRecord(self.epoch, loss, val, test, seconds)
        self.history.append(record)
        self.epoch += 1
        return record

    @torch.no_grad()
    def evaluate(self) -> tuple[float, float]:
        """(validation accuracy, test accuracy) over the whole graph."""
        self.net.eval()
        correct = self.net().argmax(1) == self.part.labels
        masks = [self.part.masks["val"], self.part.masks["test"]]
        return global_accuracies(torch.tensor([[float(correct[m].sum()), float(m.sum())] for m in masks]))

    def state(self) -> dict:
        """What resuming needs (the same on every rank: DDP keeps weights and optimiser states equal)."""
        return {
            "state_dict": self.net.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "epoch": self.epoch,
            "history": [r.to_dict() for r in self.history],
        }

    def load_state(self, state: dict) -> None:
        self.net.load_state_dict(state["state_dict"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.epoch = state["epoch"]
        self.history = [EpochRecord(**r) for r in state["history"]]

    def summary(self) -> dict[str, float | int]:
        """Accuracies at the best validation epoch, median seconds per epoch after the first, final loss."""
        if not self.history:
            return {}
        best = max(self.history, key=lambda r: r.val_acc)
        steady = [r.seconds for r in self.history[1:]] or [self.history[0].seconds]
        return {
            "val_acc": best.val_acc,
            "test_acc": best.test_acc,
            "best_epoch": best.epoch,
            "epoch_seconds": statistics.median(steady),
            "loss": self.history[-1].loss,
            "epochs": len(self.history),
            "world_size": self.world_size,
        }


def global_accuracies(counts: torch.Tensor) -> tuple[float, ...]:
    """Accuracy per row of ``counts`` ([correct, total] per split, this rank's), over all ranks' counts."""
    return tuple(float(hit / max(total, 1.0)) for hit, total in global_sum(counts).tolist())


def global_sum(t: torch.Tensor) -> torch.Tensor:
    """``t`` summed over all ranks (a copy; ``t`` is left as it is)."""
    total = t.clone()
    dist.all_reduce(total)
    return total


def rank_seed(seed: int, epoch: int, rank: int, stream: int = 0) -> int:
    """The torch seed of one rank's epoch for one use (``stream``: dropout 0, others the caller's): a resumed
    or repeated run draws what the first drew, and no two uses share a seed."""
    return int(np.random.SeedSequence([seed, epoch, rank, stream]).generate_state(1, np.uint64)[0] >> 1)
