"""Mini-batch node classification on large graphs (``featgraph train --minibatch``): train on sampled
neighbourhoods from featgraph's loader, evaluate every vertex with full neighbourhoods by
``layerwise_inference``, report accuracy, seconds per epoch and peak memory.

Batches come from ``BlockLoader`` (one bipartite block per layer), not ``NeighborLoader``'s flat
``edge_index``: with blocks each layer computes only the rows the next layer reads, where a flat batch runs
every layer over every sampled vertex, and a block's graph is the sampler's CSR as is, where a flat
``edge_index`` becomes a new ``Graph`` each batch. GraphSAGE (3 layers, hidden 256, fan-out 15/10/5, batch
1024) on products-like-small with featgraph's layers: 1.2 s per batch from blocks, 3.0 s from the flat form
(forward and backward, fastest of 6 batches taken in turns). PyG's layers train from the same blocks, given
each block as ``(x_src, x_dst)`` and its ``edge_index``.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time
from dataclasses import asdict, dataclass
from functools import partial

import torch
import torch.nn.functional as F

from ..datasets import Dataset
from ..graph import Graph
from ..loader import BlockLoader, layerwise_inference
from ..progress import Progress
from ..sampling import Block
from .loop import MixedPrecision, labelled_dataset, normalized_features, split_accuracies
from .models import (
    DEFAULT_DROPOUT,
    Preset,
    activate_and_drop,
    activation,
    conv_layer,
    dropout_function,
    layers,
    preset,
)

MODELS = ("sage", "gat", "gin")  # bipartite layers in featgraph and PyG (GCNConv is not, in either)
# Departures from the full-graph presets, which are tuned for one step per epoch on Cora's 140 labelled vertices:
# OGB's products baselines' width, DGL's products example's learning rate and no weight decay (with the
# presets' lr 0.01 and weight decay GraphSAGE diverges on products-like-small within two steps), and 10
# epochs, each hundreds of batches on a large graph.
OVERRIDES: dict[str, dict[str, float | int]] = {
    "sage": {"hidden": 256, "lr": 0.003, "weight_decay": 0.0, "epochs": 10},
    "gat": {"hidden": 64, "heads": 4, "lr": 0.003, "weight_decay": 0.0, "epochs": 10},
    "gin": {"hidden": 256, "lr": 0.003, "weight_decay": 0.0, "epochs": 10},
}
DEFAULT_FANOUTS = (15, 10, 5)
DEFAULT_BATCH_SIZE = 1024
STORAGE_DTYPES = {"float32": None, "bfloat16": torch.bfloat16}  # --eval-storage: None keeps the layers' float32
INFERENCE_CHUNK = 4096  # destinations per block of the evaluation: fewer, larger kernel calls than a batch's


@dataclass(frozen=True)
class MiniBatchMetrics:
    val_acc: float  # after the last epoch, every vertex evaluated with its full neighbourhood
    test_acc: float
    epoch_seconds: float  # median over the epochs after the first (which may compile kernels); the first if alone
    first_epoch_seconds: float
    inference_seconds: float  # the layer-wise evaluation of the whole graph
    peak_rss_mb: float  # the process's peak resident memory so far
    epochs: int
    batches_per_epoch: int

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)


class SampledClassifier(torch.nn.Module):
    """``model`` ("sage", "gat", "gin") as ``num_layers`` message-passing layers built from ``backend``'s
    layer namespace (``models.conv_layer``, the full-graph models' layers), with dropout before each layer
    and the model's activation between them. ``forward`` runs a mini-batch's blocks (input layer first);
    ``inference`` evaluates every vertex of a graph one layer at a time."""

    def __init__(
        self, model: str, in_channels: int, num_classes: int, num_layers: int, config: Preset, backend: str
    ) -> None:
        super().__init__()
        if model not in MODELS:
            raise ValueError(f"model must be one of {MODELS} for mini-batch training (bipartite layers), got {model!r}")
        if isinstance(num_layers, bool) or not isinstance(num_layers, int) or num_layers < 1:
            raise ValueError(f"num_layers must be an int >= 1, got {num_layers!r}")
        nn = layers(backend)
        self.model, self.backend, self.dropout = model, backend, config.dropout
        self.activation, self.drop = activation(model), dropout_function(DEFAULT_DROPOUT[backend])
        self.convs = torch.nn.ModuleList()
        width = in_channels
        for depth in range(num_layers):
            last = depth == num_layers - 1
            conv, width = conv_layer(nn, model, width, num_classes if last else config.hidden, config, last)
            self.convs.append(conv)

    @property
    def loops_blocks(self) -> bool:
        """Whether featgraph's layers here add self loops to each block (GAT), so a loader should bring each
        block's looped graph (``BlockLoader(self_loops=True)``); PyG's layers loop their ``edge_index``
        themselves."""
        return self.backend == "featgraph" and any(getattr(conv, "add_self_loops", False) for conv in self.convs)

    def layer(self, depth: int, h: torch.Tensor, block: Block) -> torch.Tensor:
        """Layer ``depth`` on ``block``: ``h`` holds its sources' rows (destinations first); the destinations'
        rows come back, activated unless it is the output layer. featgraph's layers take the block's graph;
        PyG's take the pair ``(x_src, x_dst)`` and the block's ``edge_index``."""
        out = self._convolve(depth, h, block)
        return out if depth == len(self.convs) - 1 else self.activation(out)

    def _convolve(self, depth: int, h: torch.Tensor, block: Block) -> torch.Tensor:
        conv, graph = self.convs[depth], block.graph
        if self.backend == "featgraph":
            return conv(h, graph)
        sizes = (graph.num_src_nodes, graph.num_dst_nodes)
        return conv((h, h[: graph.num_dst_nodes]), torch.stack(graph.coo()), size=sizes)

    def forward(self, x: torch.Tensor, blocks: list[Block]) -> torch.Tensor:
        """Logits of the last block's destinations (the seeds); ``x`` holds the first block's sources' rows.
        Dropout before each layer; between layers the activation and dropout in one pass where they fuse
        (``models.activate_and_drop``)."""
        if len(blocks) != len(self.convs):
            raise ValueError(f"expected one block per layer ({len(self.convs)}), got {len(blocks)}")
        h = self.drop(x, self.dropout, self.training)
        for depth, block in enumerate(blocks):
            out = self._convolve(depth, h, block)
            last = depth == len(self.convs) - 1
            h = out if last else activate_and_drop(out, self.activation, self.drop, self.dropout, self.training)
        return h

    def inference(
        self, graph: Graph, x: torch.Tensor, progress: bool = False, storage_dtype: torch.dtype | None = None
    ) -> torch.Tensor:
        """Every vertex's logits, each layer over all in-neighbours (``layerwise_inference``, hidden rows kept
        in ``storage_dtype``), in eval mode."""
        self.eval()
        device = next(self.parameters()).device
        steps = [partial(self._layer_on, device, depth) for depth in range(len(self.convs))]
        return layerwise_inference(steps, graph, x, INFERENCE_CHUNK, progress=progress, storage_dtype=storage_dtype)

    def _layer_on(self, device: torch.device, depth: int, h: torch.Tensor, block: Block) -> torch.Tensor:
        """``layer`` with the rows and the block moved to the model's device (the sampler runs on the CPU)."""
        return self.layer(depth, h.to(device, non_blocking=True), block.to(device, non_blocking=True))


def minibatch_preset(model: str, **overrides: object) -> Preset:
    """``model``'s hyper-parameters for mini-batch training: ``OVERRIDES`` on the full-graph preset, then
    ``overrides`` (None values are ignored)."""
    if model not in MODELS:
        raise ValueError(f"model must be one of {MODELS} for mini-batch training (bipartite layers), got {model!r}")
    given = {key: value for key, value in overrides.items() if value is not None}
    return preset(model, **{**OVERRIDES[model], **given})


def fit(
    net: SampledClassifier,
    dataset: Dataset,
    fanouts: list[int],
    batch_size: int,
    config: Preset,
    seed: int = 0,
    progress: bool = True,
    select_on_validation: bool = False,
    storage_dtype: torch.dtype | None = None,
    precision: str = "fp32",
    device: torch.device | str = "cpu",
) -> MiniBatchMetrics:
    """Train ``net`` for ``config.epochs`` on ``dataset``'s training vertices in batches of ``batch_size``
    seeds, ``fanouts[h]`` neighbours drawn at hop ``h`` (hop 0 from the seeds); then evaluate it on every
    vertex. Features as ``normalized_features`` gives them. With ``select_on_validation`` every epoch ends
    with an evaluation and ``net`` keeps the weights of its best validation epoch, as full-graph training's
    ``loop.fit`` does (so the two compare like for like on small graphs); otherwise only the last epoch's
    weights are evaluated, since on a large graph an evaluation costs more than an epoch. ``storage_dtype``:
    the evaluation's hidden rows between layers (``layerwise_inference``). ``precision``: training's and the
    evaluation's forward as ``loop.MixedPrecision`` runs it. ``device``: where ``net`` trains (it is moved
    there); the sampler runs on the CPU and, for a GPU, the loader pins each batch so its copy overlaps."""
    torch.manual_seed(seed)
    device = torch.device(device)
    net.to(device)
    mixed = MixedPrecision(precision, device.type)
    x = mixed.features(normalized_features(dataset.features))
    loader = BlockLoader(
        dataset.graph,
        fanouts,
        batch_size,
        input_nodes=dataset.train_idx,
        seed=seed,
        self_loops=net.loops_blocks,
        x=x,
        y=dataset.labels,
        pin_memory=device.type == "cuda",
    )
    optimizer = torch.optim.Adam(net.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    times: list[float] = []
    best: tuple[float, float, dict[str, torch.Tensor] | None] = (-1.0, 0.0, None)  # val, test, weights
    with Progress(config.epochs * len(loader), f"{dataset.name} mini-batch", enabled=progress) as bar:
        for _ in range(config.epochs):
            start = time.perf_counter()
            net.train()
            for batch in loader:
                batch = batch.to(device, non_blocking=True)
                optimizer.zero_grad()
                with mixed.autocast():
                    loss = F.cross_entropy(net(batch.x, batch.blocks), batch.y)
                mixed.step(loss, optimizer)
                bar.update(status=f"loss {loss.item():.3f}")
            times.append(time.perf_counter() - start)
            if select_on_validation:
                with mixed.autocast():
                    logits = net.inference(dataset.graph, x, storage_dtype=storage_dtype)
                val, test = split_accuracies(logits.cpu(), dataset.labels, dataset.val_idx, dataset.test_idx)
                if val > best[0]:
                    best = (val, test, {k: v.detach().clone() for k, v in net.state_dict().items()})
    if best[2] is not None:
        net.load_state_dict(best[2])
    start = time.perf_counter()
    with mixed.autocast():
        logits = net.inference(dataset.graph, x, progress, storage_dtype)
    inference_seconds = time.perf_counter() - start
    val, test = split_accuracies(logits.cpu(), dataset.labels, dataset.val_idx, dataset.test_idx)
    steady = times[1:] or times
    return MiniBatchMetrics(
        val_acc=val,
        test_acc=test,
        epoch_seconds=statistics.median(steady) if steady else 0.0,
        first_epoch_seconds=times[0] if times else 0.0,
        inference_seconds=inference_seconds,
        peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        epochs=config.epochs,
        batches_per_epoch=len(loader),
    )


def fanout_list(text: str) -> list[int]:
    """``--fanout``: comma-separated neighbours per hop, each a positive int or -1 (every neighbour)."""
    try:
        fanouts = [int(part) for part in text.split(",")]
    except ValueError:
        fanouts = []
    if not fanouts or any(f < 1 and f != -1 for f in fanouts):
        raise argparse.ArgumentTypeError(
            f"expected comma-separated neighbours per hop, each a positive int or -1 (all), got {text!r}"
        )
    return fanouts


def positive_int(text: str) -> int:
    """``--batch-size``: an int >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an int >= 1, got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--minibatch",
        action="store_true",
        help="train on sampled neighbourhoods (featgraph's BlockLoader), one layer per fan-out entry, and evaluate "
        f"every vertex layer by layer; models {', '.join(MODELS)} (default sage); hyper-parameters as "
        "featgraph.training.minibatch.OVERRIDES",
    )
    parser.add_argument(
        "--fanout",
        type=fanout_list,
        help=f"with --minibatch: neighbours per hop from the seeds, e.g. {','.join(map(str, DEFAULT_FANOUTS))} "
        "(the default); -1 takes all",
    )
    parser.add_argument(
        "--batch-size",
        type=positive_int,
        help=f"with --minibatch: seed vertices per batch (default {DEFAULT_BATCH_SIZE})",
    )
    parser.add_argument(
        "--eval-storage",
        choices=tuple(STORAGE_DTYPES),
        default="float32",
        help="with --minibatch: dtype of the hidden rows the layer-wise evaluation keeps between layers; bfloat16 "
        "halves its largest part (two vertices x width matrices: 5 GB in float32 on products-like)",
    )


def run(args: argparse.Namespace, model: str, config: Preset) -> dict[str, float | int]:
    """``featgraph train --minibatch``: train, evaluate, print the summary line; the metrics as a dict."""
    if args.save or args.load:
        raise ValueError("--save and --load are for full-graph training; --minibatch trains and evaluates in one run")
    dataset = labelled_dataset(args.dataset)
    fanouts = args.fanout or list(DEFAULT_FANOUTS)
    batch_size = args.batch_size or DEFAULT_BATCH_SIZE
    torch.manual_seed(args.seed)
    net = SampledClassifier(model, dataset.features.shape[1], dataset.num_classes, len(fanouts), config, args.backend)
    storage = STORAGE_DTYPES[args.eval_storage]
    m = fit(
        net, dataset, fanouts, batch_size, config, args.seed, not args.quiet, storage_dtype=storage,
        precision=args.precision, device=args.device,
    )  # fmt: skip
    print(
        f"{model} ({args.backend}, {args.precision}, {args.device}, mini-batch, fan-out {','.join(map(str, fanouts))}, "
        f"batch {batch_size}) on "
        f"{dataset.name}: val {m.val_acc:.4f} test {m.test_acc:.4f} after {m.epochs} epochs, "
        f"{m.epoch_seconds:.2f} s/epoch ({m.batches_per_epoch} batches), inference {m.inference_seconds:.2f} s, "
        f"peak RSS {m.peak_rss_mb:.0f} MB"
    )
    return m.to_dict()
