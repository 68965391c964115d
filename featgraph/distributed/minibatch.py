"""Distributed mini-batch training: ``DistributedDataParallel`` over a ``SampledClassifier``, each rank drawing
its batches' seeds from the training vertices its part owns and sampling their neighbourhoods with
featgraph's ``NeighborSampler``.

Every rank holds the whole graph's topology (the CSR, 12 bytes per edge at most): a sampled neighbourhood
reaches far beyond a part within two or three hops, and sampling a part's seeds from remote neighbour lists
would cost one round of requests per hop and batch, while the topology of a graph whose features overflow a
machine usually still fits (papers100M's 1.6B edges: 13 GB in int64 with int32 indices; its 128-wide float32
features: 57 GB). The feature rows come from ``feature_store``: replicated when they fit, or fetched from
their owners per batch. Batches of the same seeds and sampler seed are the one-process sampler's.

Each epoch every rank takes the same number of steps (DDP all-reduces the gradients at each): its own
training vertices shuffled and split into that many batches, the count chosen so the batches hold about
``batch_size`` seeds (fewer where a rank owns fewer training vertices), and every training vertex of the
graph is a seed once per epoch. Evaluation samples the val and test vertices the same way.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

from ..graph import Graph
from ..sampling import MiniBatch, NeighborSampler
from ..sampling.neighbor import SEED_LIMIT
from ..training.loop import node_task
from ..training.minibatch import DEFAULT_BATCH_SIZE, DEFAULT_FANOUTS, SampledClassifier
from ..training.models import Preset
from .feature_store import FeatureStore, ReplicatedFeatures
from .store import load_part
from .trainer import EpochLoop, EpochRecord, global_accuracies, global_sum, rank_seed


@dataclass(frozen=True)
class MiniBatchEpoch(EpochRecord):
    """One epoch as every rank sees it: the mean of the batches' losses over all ranks, accuracies of the
    sampled evaluation over the whole val and test sets, seconds of training, then batches per rank and the
    feature bytes this rank fetched from others."""

    batches: int
    feature_bytes: int


SPLITS = ("train", "val", "test")


class MiniBatchTrainer(EpochLoop):
    """Trains ``net`` wrapped in ``DistributedDataParallel`` with Adam on mini-batches sampled from ``graph``
    (the whole graph, in every rank) around the seeds of ``splits`` ("train", "val", "test": global ids of
    the vertices of each split this rank owns), labelled by ``labels`` (every vertex's), with the feature rows
    of ``features``. Every rank builds one and calls ``fit`` together."""

    def __init__(
        self,
        net: SampledClassifier,
        graph: Graph,
        splits: dict[str, torch.Tensor],
        labels: torch.Tensor,
        features: FeatureStore | ReplicatedFeatures,
        fanouts: list[int],
        batch_size: int,
        config: Preset,
        seed: int = 0,
    ) -> None:
        for split in SPLITS:
            if split not in splits:
                raise ValueError(f"splits: node classification needs a {split!r} split, got {list(splits)}")
        if len(fanouts) != len(net.convs):
            raise ValueError(f"fanouts must have one entry per layer ({len(net.convs)}), got {fanouts!r}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
        self.net, self.splits, self.labels, self.features = net, splits, labels, features
        self.batch_size, self.seed = batch_size, seed
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        self.sampler = NeighborSampler(graph, fanouts, self_loops=net.loops_blocks)
        self.model = DistributedDataParallel(net)
        self.optimizer = torch.optim.Adam(net.parameters(), lr=config.lr, weight_decay=config.weight_decay)
        own_train = splits["train"].numel()
        counts = torch.tensor([own_train, -own_train], dtype=torch.int64)
        dist.all_reduce(counts[:1])
        dist.all_reduce(counts[1:], dist.ReduceOp.MAX)
        total, fewest = int(counts[0]), -int(counts[1])
        if fewest == 0:
            raise ValueError(
                "a rank owns no training vertex, so it has no seeds to sample: partition into fewer parts, or "
                "with a method that spreads the training vertices (random)"
            )
        # as many steps on every rank; about batch_size seeds each, none empty
        self.train_batches = min(-(-total // (self.world_size * batch_size)), fewest)
        self.epoch = 0
        self.history: list[MiniBatchEpoch] = []

    def batches(self, split: str, count: int, epoch: int) -> list[tuple[torch.Tensor, int]]:
        """This rank's ``split`` vertices shuffled and cut into ``count`` batches of seeds, each with its
        sampler seed; a function of (seed, epoch, rank)."""
        generator = torch.Generator().manual_seed(rank_seed(self.seed, epoch, self.rank, 1 + SPLITS.index(split)))
        ids = self.splits[split]
        pieces = ids[torch.randperm(ids.numel(), generator=generator)].tensor_split(count)
        seeds = torch.randint(0, SEED_LIMIT - 1, (count,), generator=generator).tolist()
        return list(zip(pieces, seeds, strict=True))

    def sample(self, seeds: torch.Tensor, seed: int) -> tuple[MiniBatch | None, torch.Tensor]:
        """The sampled batch of ``seeds`` (None when there are none) and its input rows, fetched with every
        other rank."""
        batch = self.sampler.sample(seeds, seed) if seeds.numel() else None
        return batch, self.features.fetch(seeds[:0] if batch is None else batch.input_nodes)

    def step(self) -> MiniBatchEpoch:
        """One epoch of training, then the sampled evaluation."""
        torch.manual_seed(rank_seed(self.seed, self.epoch, self.rank))  # dropout
        fetched = self.features.bytes_received
        start = time.perf_counter()
        self.model.train()
        losses = []
        for seeds, seed in self.batches("train", self.train_batches, self.epoch):
            batch, x = self.sample(seeds, seed)
            self.optimizer.zero_grad()
            loss = F.cross_entropy(self.model(x, batch.blocks), self.labels[seeds])
            loss.backward()
            self.optimizer.step()
            losses.append(loss.detach())
        seconds = time.perf_counter() - start
        loss = float(global_sum(torch.stack(losses).sum().double())) / (self.train_batches * self.world_size)
        record = MiniBatchEpoch(
            self.epoch, loss, *self.evaluate(), seconds, self.train_batches, self.features.bytes_received - fetched
        )
        self.history.append(record)
        self.epoch += 1
        return record

    @torch.no_grad()
    def evaluate(self) -> tuple[float, float]:
        """(validation accuracy, test accuracy) over the whole graph, each vertex's logits from a sampled
        neighbourhood (the training fan-outs)."""
        self.net.eval()
        results = []
        for split in ("val", "test"):
            owned = self.splits[split].numel()
            count = torch.tensor([-(-owned // self.batch_size)])
            dist.all_reduce(count, dist.ReduceOp.MAX)  # as many fetches on every rank
            hits = 0
            for seeds, seed in self.batches(split, max(int(count), 1), self.epoch):
                batch, x = self.sample(seeds, seed)
                if batch is not None:
                    hits += int((self.net(x, batch.blocks).argmax(1) == self.labels[seeds]).sum())
            results.append(torch.tensor([float(hits), float(owned)]))
        return global_accuracies(torch.stack(results))  # type: ignore[return-value]

    def summary(self) -> dict[str, float | int]:
        """Accuracies after the last epoch, median seconds per epoch after the first, final loss."""
        if not self.history:
            return {}
        last = self.history[-1]
        steady = [r.seconds for r in self.history[1:]] or [self.history[0].seconds]
        return {
            "val_acc": last.val_acc,
            "test_acc": last.test_acc,
            "epoch_seconds": statistics.median(steady),
            "loss": last.loss,
            "epochs": len(self.history),
            "batches_per_epoch": self.train_batches,
            "feature_bytes_per_epoch": last.feature_bytes,
            "world_size": self.world_size,
        }


FEATURE_MODES = ("auto", "replicated", "fetched")
REPLICATE_LIMIT_BYTES = 2**30  # "auto" replicates feature matrices up to 1 GiB per process


def train(
    args: argparse.Namespace, model: str, config: Preset, directory: Path, rank: int, world_size: int
) -> dict[str, float | int]:
    """``featgraph train --distributed --minibatch``: every rank loads the dataset's topology and labels and
    its part from ``directory`` (rank 0 has prepared it), samples its own training vertices' batches and
    trains with the others; features replicated or fetched as ``args.features`` says ("auto": replicated up
    to ``REPLICATE_LIMIT_BYTES``). Every rank returns the same summary."""
    task = node_task(args.dataset)
    graph = Graph.from_edge_index(task.edge_index, task.x.shape[0])
    part = load_part(directory, rank, world_size, graph.fingerprint)
    owns: list = [None] * world_size
    dist.all_gather_object(owns, part.own)
    owner = torch.empty(graph.num_nodes, dtype=torch.int64)
    for k, own in enumerate(owns):
        owner[own] = k
    replicate = args.features == "replicated" or (args.features == "auto" and task.x.nbytes <= REPLICATE_LIMIT_BYTES)
    features = ReplicatedFeatures(task.x) if replicate else FeatureStore.of(part, owner)
    labels, width, num_classes = task.y, task.x.shape[1], task.num_classes
    del task  # fetching, a process keeps only its part's feature rows once the dataset has been read
    splits = {name: part.own[part.masks[name]] for name in SPLITS}
    fanouts = args.fanout or list(DEFAULT_FANOUTS)
    torch.manual_seed(args.seed)
    net = SampledClassifier(model, width, num_classes, len(fanouts), config, "featgraph")
    trainer = MiniBatchTrainer(
        net, graph, splits, labels, features, fanouts, args.batch_size or DEFAULT_BATCH_SIZE, config, args.seed
    )
    log = rank == 0 and not args.quiet

    def after_epoch(record: MiniBatchEpoch) -> None:
        if log:
            print(
                f"epoch {record.epoch}: loss {record.loss:.4f} val {record.val_acc:.4f} test {record.test_acc:.4f} "
                f"({record.batches} batches per process, {record.feature_bytes / 1e6:.1f} MB of features fetched)"
            )

    trainer.fit(config.epochs, after_epoch)
    result = trainer.summary()
    if rank == 0:
        print(
            f"{model} mini-batch on {args.dataset}, {world_size} processes, features "
            f"{'replicated' if replicate else 'fetched'}: val {result['val_acc']:.4f} test {result['test_acc']:.4f} "
            f"after {result['epochs']} epochs (sampled evaluation), {result['epoch_seconds']:.2f} s/epoch"
        )
    return result
