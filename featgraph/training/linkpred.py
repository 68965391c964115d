"""Link prediction (``featgraph train --task link``): hold out a share of a graph's edges, train a GraphSAGE
encoder and a pair decoder to tell the remaining edges from random vertex pairs, and score the held-out edges
by AUC (against one random pair each) and by Hits@K and MRR (each ranked among random destinations for its
source).

The encoder is written once against a layer namespace (``models.layers``): featgraph's layers or PyG's, with
the same parameter names, so one state dict loads into either. The decoder scores each (source, destination)
pair: with featgraph's layers through featgraph's fused SDDMM over the pairs taken as a graph (``gsddmm``'s
"dot", or "mul" before an MLP), so the gathered ``[pairs, d]`` rows of the dot decoder never exist; with
PyG's as PyG's examples do, ``(h[src] * h[dst]).sum(-1)``.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F

from ..datasets import Dataset, load
from ..graph import Graph
from ..loader import LinkNeighborLoader
from ..ops import gsddmm
from ..progress import Progress
from ..sampling import Block
from .loop import normalized_features
from .minibatch import DEFAULT_BATCH_SIZE, DEFAULT_FANOUTS
from .models import Preset, conv_layer, layers

DATASETS = ("cora", "citeseer", "products-like-small")
DECODERS = ("dot", "mlp")
NEGATIVES = ("binary", "triplet")  # link_loader's draws: a random pair, or a random destination for the source
VAL_SHARE, TEST_SHARE = 0.05, 0.1  # PyG's link-prediction example's RandomLinkSplit
HITS_K = 50
RANK_NEGATIVES = 1000  # random destinations each ranked positive competes with (ogbl-citation2's count)
RANKED_POSITIVES = 2000  # at most this many held-out positives are ranked (a seeded subset): bounds the pairs
# Full-graph: PyG's link-prediction example's width and learning rate, no dropout (its model has none).
# Mini-batch: the node path's mini-batch width and learning rate (training.minibatch.OVERRIDES).
PRESETS = {
    "full": Preset(hidden=128, dropout=0.0, lr=0.01, weight_decay=0.0, epochs=100),
    "minibatch": Preset(hidden=256, dropout=0.0, lr=0.003, weight_decay=0.0, epochs=10),
}
NUM_LAYERS = 2  # full-graph; mini-batch training has one layer per fan-out entry


@dataclass(frozen=True)
class LinkTask:
    """A graph's edges split for link prediction: ``graph`` passes messages along the training edges only;
    ``train``, ``val`` and ``test`` are ``(2, N)`` positives, one direction per undirected edge."""

    name: str
    x: torch.Tensor
    graph: Graph
    train: torch.Tensor
    val: torch.Tensor
    test: torch.Tensor


def split_edges(
    name: str, x: torch.Tensor, graph: Graph, val: float = VAL_SHARE, test: float = TEST_SHARE, seed: int = 0,
    undirected: bool = True,
) -> LinkTask:  # fmt: skip
    """Hold out ``val`` and ``test`` shares of ``graph``'s edges, drawn with ``seed``. ``undirected``: the
    graph holds each edge in both directions; an edge is split once (as its ``src < dst`` direction) and a
    held-out edge leaves the message-passing graph in both. Self loops and repeated edges are candidates once;
    self loops stay in the message-passing graph, never held out."""
    for share, what in ((val, "val"), (test, "test")):
        if not 0 <= share < 1:
            raise ValueError(f"{what} share must be in [0, 1), got {share!r}")
    if val + test >= 1:
        raise ValueError(f"val + test shares must leave training edges, got {val} + {test}")
    src, dst = graph.coo()
    keep = src < dst if undirected else src != dst
    pairs = torch.unique(torch.stack([src[keep], dst[keep]]), dim=1)
    order = torch.randperm(pairs.shape[1], generator=torch.Generator().manual_seed(seed))
    num_val, num_test = int(val * pairs.shape[1]), int(test * pairs.shape[1])
    val_edges, test_edges = pairs[:, order[:num_val]], pairs[:, order[num_val : num_val + num_test]]
    train = pairs[:, order[num_val + num_test :]]
    loops = src[src == dst]
    parts = [train, train.flip(0)] if undirected else [train]
    message = torch.cat([*parts, torch.stack([loops, loops])], dim=1)
    return LinkTask(name, x, Graph(message[0], message[1], graph.num_nodes), train, val_edges, test_edges)


def link_task(dataset: str, seed: int = 0) -> LinkTask:
    """A bundled dataset (``DATASETS``) split for link prediction, features as ``normalized_features``."""
    if dataset not in DATASETS:
        raise ValueError(f"--task link trains on {', '.join(DATASETS)}; got dataset {dataset!r}")
    data: Dataset = load(dataset)
    return split_edges(data.name, normalized_features(data.features), data.graph, seed=seed)


def pair_features(h: torch.Tensor, pairs: torch.Tensor, op: str, backend: str) -> torch.Tensor:
    """``op`` ("dot": ``[P, 1]``, "mul": ``[P, d]``) of the rows of each pair's two vertices: featgraph's SDDMM
    over the pairs as a graph (``backend`` "featgraph"), or the gathered rows multiplied (``backend`` "pyg")."""
    if backend == "featgraph":
        return gsddmm(Graph(pairs[0], pairs[1], h.shape[0]), op, h, h, "u", "v")
    product = h[pairs[0]] * h[pairs[1]]
    return product.sum(-1, keepdim=True) if op == "dot" else product


class SampledGraph(NamedTuple):
    """A loader batch's flat ``edge_index`` with its per-hop counts (``NeighborLoader``'s layout: seeds first,
    then each hop's new vertices; edges hop by hop, each hop's edges into that hop's vertices)."""

    edge_index: torch.Tensor
    num_sampled_nodes: list[int]
    num_sampled_edges: list[int]

    def layer(self, hops: int) -> tuple[torch.Tensor, int, int]:
        """The edges of the first ``hops`` hops, the vertices they come from and those they reach."""
        num_src, num_dst = sum(self.num_sampled_nodes[: hops + 1]), sum(self.num_sampled_nodes[:hops])
        return self.edge_index[:, : sum(self.num_sampled_edges[:hops])], num_src, num_dst


class LinkPredictor(torch.nn.Module):
    """GraphSAGE (mean, ``num_layers`` layers of ``hidden``, ReLU between) from ``backend``'s layers, and a
    ``decoder``: "dot" (the pair's embeddings' dot product) or "mlp" (their element-wise product through two
    linear layers). ``forward`` gives a logit per pair."""

    def __init__(self, in_channels: int, hidden: int, num_layers: int, backend: str, decoder: str = "dot") -> None:
        super().__init__()
        if decoder not in DECODERS:
            raise ValueError(f"decoder must be one of {DECODERS}, got {decoder!r}")
        if isinstance(num_layers, bool) or not isinstance(num_layers, int) or num_layers < 1:
            raise ValueError(f"num_layers must be an int >= 1, got {num_layers!r}")
        nn, config = layers(backend), Preset(hidden=hidden, dropout=0.0, lr=0.0, weight_decay=0.0)
        self.backend, self.decoder = backend, decoder
        widths = [in_channels] + [hidden] * num_layers
        self.convs = torch.nn.ModuleList(
            conv_layer(nn, "sage", widths[i], hidden, config, i == num_layers - 1)[0] for i in range(num_layers)
        )
        if decoder == "mlp":
            self.mlp = torch.nn.Sequential(torch.nn.Linear(hidden, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 1))

    def encode(self, x: torch.Tensor, graph: Graph | torch.Tensor | SampledGraph | list[Block]) -> torch.Tensor:
        """Embeddings: of every vertex for a ``Graph`` or a ``(2, E)`` edge_index over ``x``'s rows (featgraph's
        layers get one ``Graph``, its formats built once for all layers; PyG's the edge_index); of the seeds
        only, for a ``SampledGraph`` whose hops match the layers or for one block per layer (``x`` the first
        block's sources' rows; ``LinkBlockLoader``'s batches)."""
        if isinstance(graph, SampledGraph):
            return self._encode_sampled(x, graph)
        if isinstance(graph, list):
            return self._encode_blocks(x, graph)
        if self.backend == "featgraph":
            edges: Graph | torch.Tensor = graph if isinstance(graph, Graph) else Graph(graph[0], graph[1], x.shape[0])
        else:
            edges = graph.edge_index if isinstance(graph, Graph) else graph
        h = x
        for depth, conv in enumerate(self.convs):
            h = self._activated(depth, conv(h, edges))
        return h

    def _encode_sampled(self, x: torch.Tensor, graph: SampledGraph) -> torch.Tensor:
        """Layer ``i`` of ``L`` over the edges of the first ``L - i`` hops, into the vertices they reach: the
        rows a later layer reads, as a bipartite graph whose destinations are its first sources."""
        if len(graph.num_sampled_edges) != len(self.convs):
            raise ValueError(f"expected one sampled hop per layer ({len(self.convs)}), got {graph.num_sampled_edges}")
        h = x
        for depth, conv in enumerate(self.convs):
            edge_index, num_src, num_dst = graph.layer(len(self.convs) - depth)
            if self.backend == "featgraph":
                out = conv(h[:num_src], Graph(edge_index[0], edge_index[1], (num_src, num_dst)))
            else:
                out = conv((h[:num_src], h[:num_dst]), edge_index, size=(num_src, num_dst))
            h = self._activated(depth, out)
        return h

    def _encode_blocks(self, x: torch.Tensor, blocks: list[Block]) -> torch.Tensor:
        """Layer ``i`` on block ``i``, into its destinations (the next block's sources)."""
        if len(blocks) != len(self.convs):
            raise ValueError(f"expected one block per layer ({len(self.convs)}), got {len(blocks)}")
        h = x
        for depth, (conv, block) in enumerate(zip(self.convs, blocks, strict=True)):
            num_src, num_dst = block.graph.num_src_nodes, block.graph.num_dst_nodes
            if self.backend == "featgraph":
                out = conv(h, block.graph)
            else:
                out = conv((h, h[:num_dst]), torch.stack(block.graph.coo()), size=(num_src, num_dst))
            h = self._activated(depth, out)
        return h

    def _activated(self, depth: int, h: torch.Tensor) -> torch.Tensor:
        """ReLU after every layer but the last."""
        return h if depth == len(self.convs) - 1 else F.relu(h)

    def decode(self, h: torch.Tensor, pairs: torch.Tensor) -> torch.Tensor:
        """One logit per ``(2, P)`` pair of ``h``'s rows."""
        if self.decoder == "dot":
            return pair_features(h, pairs, "dot", self.backend).squeeze(-1)
        return self.mlp(pair_features(h, pairs, "mul", self.backend)).squeeze(-1)

    def forward(self, x: torch.Tensor, graph: Graph | torch.Tensor, pairs: torch.Tensor) -> torch.Tensor:
        return self.decode(self.encode(x, graph), pairs)


def auc(positive: torch.Tensor, negative: torch.Tensor) -> float:
    """Area under the ROC curve: the chance a positive's score beats a negative's, ties counting half
    (the Mann-Whitney statistic from average ranks)."""
    if positive.numel() == 0 or negative.numel() == 0:
        raise ValueError("AUC needs at least one positive and one negative score")
    scores = torch.cat([positive.flatten(), negative.flatten()]).double()
    values, inverse, counts = torch.unique(scores, return_inverse=True, return_counts=True)
    ends = counts.cumsum(0).double()
    average_rank = ends - (counts.double() - 1) / 2  # 1-based rank, averaged over each group of ties
    rank_sum = float(average_rank[inverse[: positive.numel()]].sum())
    p, n = positive.numel(), negative.numel()
    return (rank_sum - p * (p + 1) / 2) / (p * n)


def ranks(positive: torch.Tensor, negatives: torch.Tensor) -> torch.Tensor:
    """Each positive's rank among its row of ``negatives`` (``[P]`` against ``[P, n]``): 1 plus the negatives
    above it plus half those tied (OGB's mean of the optimistic and pessimistic ranks)."""
    above = (negatives > positive[:, None]).sum(1).double()
    tied = (negatives == positive[:, None]).sum(1).double()
    return 1 + above + tied / 2


def hits_at(rank: torch.Tensor, k: int) -> float:
    """The share of positives ranked in the top ``k``."""
    return float((rank <= k).double().mean())


def mrr(rank: torch.Tensor) -> float:
    """Mean reciprocal rank."""
    return float((1 / rank).mean())


@dataclass(frozen=True)
class EvalPairs:
    """A held-out split's pairs to score: its positives with one random pair each (AUC), and a seeded subset
    of at most ``RANKED_POSITIVES`` positives, each with ``negatives`` random destinations for its source
    (Hits@K, MRR). Random pairs are not checked against the graph (as ``sampling.NegativeSampling``)."""

    positive: torch.Tensor  # (2, P)
    negative: torch.Tensor  # (2, P)
    ranked: torch.Tensor  # (R,) positions in ``positive``
    destinations: torch.Tensor  # (R, negatives)

    @classmethod
    def draw(cls, positive: torch.Tensor, num_nodes: int, seed: int, negatives: int = RANK_NEGATIVES) -> EvalPairs:
        generator = torch.Generator().manual_seed(seed)
        negative = torch.randint(num_nodes, positive.shape, generator=generator)
        ranked = torch.randperm(positive.shape[1], generator=generator)[:RANKED_POSITIVES].sort().values
        destinations = torch.randint(num_nodes, (ranked.numel(), negatives), generator=generator)
        return cls(positive, negative, ranked, destinations)

    def ranking_pairs(self) -> torch.Tensor:
        """``(2, R * negatives)``: each ranked positive's source with each of its random destinations."""
        sources = self.positive[0, self.ranked][:, None].expand_as(self.destinations)
        return torch.stack([sources.flatten(), self.destinations.flatten()])


@torch.no_grad()
def evaluate(
    net: LinkPredictor, task: LinkTask, pairs: EvalPairs, k: int = HITS_K, ranking: bool = True
) -> dict[str, float]:
    """AUC of ``pairs`` and, with ``ranking``, Hits@``k`` and MRR; the embeddings from the whole
    message-passing graph."""
    net.eval()
    h = net.encode(task.x, task.graph)
    positive = net.decode(h, pairs.positive)
    scores = {"auc": auc(positive, net.decode(h, pairs.negative))}
    if ranking:
        negatives = net.decode(h, pairs.ranking_pairs()).view(pairs.destinations.shape)
        rank = ranks(positive[pairs.ranked], negatives)
        scores.update(hits=hits_at(rank, k), mrr=mrr(rank))
    return scores


@dataclass(frozen=True)
class LinkMetrics:
    """What a link-prediction run reports: the held-out scores at the best validation AUC's epoch, epoch
    times and peak memory."""

    val_auc: float
    test_auc: float
    test_hits: float  # Hits@hits_k
    test_mrr: float
    hits_k: int
    epoch_seconds: float  # median over the epochs after the first (which compiles kernels); the first if alone
    first_epoch_seconds: float
    peak_rss_mb: float  # the process's peak resident memory so far
    best_epoch: int
    epochs: int
    batches_per_epoch: int

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)


Step = tuple[torch.Tensor, Graph | SampledGraph, torch.Tensor, torch.Tensor]  # x, graph, pairs, labels


def full_graph_steps(task: LinkTask, seed: int) -> Iterator[list[Step]]:
    """Per epoch one step on the whole message-passing graph: the training positives and as many fresh
    uniform random pairs (seeded), labelled 1 and 0."""
    generator = torch.Generator().manual_seed(seed)
    count = task.train.shape[1]
    labels = torch.cat([torch.ones(count), torch.zeros(count)])
    while True:
        negative = torch.randint(task.graph.num_nodes, (2, count), generator=generator)
        yield [(task.x, task.graph, torch.cat([task.train, negative], dim=1), labels)]


def link_loader(
    graph: Graph, x: torch.Tensor, positives: torch.Tensor, fanouts: list[int], batch_size: int, seed: int,
    prefetch: int = 2, negatives: str = "binary",
) -> LinkNeighborLoader:  # fmt: skip
    """featgraph's ``LinkNeighborLoader`` on the message-passing ``graph`` with rows ``x``, over the ``(2, N)``
    training ``positives`` with one negative each: ``negatives`` "binary", a uniform random pair; "triplet",
    the positive's source with a uniform random destination (as DGL's per-source uniform sampler draws)."""
    return LinkNeighborLoader(
        Dataset("link", graph, x), fanouts, edge_label_index=positives, neg_sampling=negatives,
        batch_size=batch_size, shuffle=True, seed=seed, prefetch=prefetch,
    )  # fmt: skip


def loader_steps(loader: LinkNeighborLoader) -> Iterator[Iterator[Step]]:
    """Per epoch the loader's batches as steps: the sampled subgraph's rows and edges, the seed pairs
    (positives, then negatives) and their labels."""
    while True:
        yield (batch_step(b) for b in loader)


def batch_step(batch: Any) -> Step:
    """A ``link_loader`` batch as a training step: its rows, its ``SampledGraph``, the pairs (positives, then
    negatives, in batch ids) and their labels, from its binary or its triplet layout."""
    if getattr(batch, "src_index", None) is None:
        return batch.x, sampled_graph(batch), batch.edge_label_index, batch.edge_label
    sources = torch.cat([batch.src_index, batch.src_index])
    pairs = torch.stack([sources, torch.cat([batch.dst_pos_index, batch.dst_neg_index])])
    labels = torch.cat([torch.ones(batch.src_index.numel()), torch.zeros(batch.dst_neg_index.numel())])
    return batch.x, sampled_graph(batch), pairs, labels


def sampled_graph(batch: Any) -> SampledGraph:
    """A ``LinkNeighborLoader`` batch's edges and per-hop counts."""
    return SampledGraph(batch.edge_index, batch.num_sampled_nodes, batch.num_sampled_edges)


def fit(
    net: LinkPredictor,
    task: LinkTask,
    config: Preset,
    seed: int = 0,
    progress: bool = True,
    fanouts: list[int] | None = None,
    batch_size: int = 1024,
    k: int = HITS_K,
) -> LinkMetrics:
    """Train ``net`` for ``config.epochs`` with binary cross-entropy on positives against random pairs:
    full-graph (``fanouts`` None) or in mini-batches of ``batch_size`` positives from ``link_loader``.
    After each epoch the validation AUC is measured; ``net`` ends with the best epoch's weights, whose test
    scores are reported."""
    torch.manual_seed(seed)
    if fanouts is None:
        epochs_of_steps: Iterator = full_graph_steps(task, seed)
        batches = 1
    else:
        loader = link_loader(task.graph, task.x, task.train, fanouts, batch_size, seed)
        epochs_of_steps, batches = loader_steps(loader), len(loader)
    val_pairs = EvalPairs.draw(task.val, task.graph.num_nodes, seed + 1)
    optimizer = torch.optim.Adam(net.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    times: list[float] = []
    best: tuple[float, int, dict[str, torch.Tensor] | None] = (-1.0, 0, None)
    with Progress(config.epochs * batches, f"{task.name} link", enabled=progress) as bar:
        for epoch in range(config.epochs):
            start = time.perf_counter()
            net.train()
            for x, graph, pairs, labels in next(epochs_of_steps):
                optimizer.zero_grad()
                loss = F.binary_cross_entropy_with_logits(net(x, graph, pairs), labels)
                loss.backward()
                optimizer.step()
                bar.update(status=f"loss {loss.item():.3f}")
            times.append(time.perf_counter() - start)
            val_auc = evaluate(net, task, val_pairs, ranking=False)["auc"]
            if val_auc > best[0]:
                best = (val_auc, epoch, {name: v.detach().clone() for name, v in net.state_dict().items()})
    if best[2] is not None:
        net.load_state_dict(best[2])
    test = evaluate(net, task, EvalPairs.draw(task.test, task.graph.num_nodes, seed + 2), k)
    steady = times[1:] or times
    return LinkMetrics(
        val_auc=best[0],
        test_auc=test["auc"],
        test_hits=test["hits"],
        test_mrr=test["mrr"],
        hits_k=k,
        epoch_seconds=statistics.median(steady) if steady else 0.0,
        first_epoch_seconds=times[0] if times else 0.0,
        peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        best_epoch=best[1],
        epochs=config.epochs,
        batches_per_epoch=batches,
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--task",
        choices=("node", "link"),
        default="node",
        help="node classification (default) or link prediction: GraphSAGE with a pair decoder on "
        f"{', '.join(DATASETS)}, scored by AUC, Hits@{HITS_K} and MRR on held-out edges",
    )
    parser.add_argument("--decoder", choices=DECODERS, help="with --task link: the pair decoder (default dot)")


def _refusals(args: argparse.Namespace) -> list[tuple[str, bool, str]]:
    """Node-classification options ``--task link`` does not take: (flag, whether it was given, why)."""
    return [
        ("--model", args.model not in (None, "sage"), "link prediction trains GraphSAGE"),
        ("--heads", args.heads is not None, "GraphSAGE has no heads"),
        ("--aggr", args.aggr not in (None, "mean"), "the link encoder is GraphSAGE-mean"),
        ("--dropout", args.dropout is not None, "the link encoder has no dropout"),
        ("--precision", args.precision != "fp32", "link prediction trains in fp32"),
        ("--device", args.device != "cpu", "link prediction trains on the CPU"),
        ("--distributed", bool(args.distributed), "link prediction trains in one process"),
        ("--save", args.save is not None, "link prediction trains and evaluates in one run"),
        ("--load", args.load is not None, "link prediction trains and evaluates in one run"),
        ("--eval-storage", args.eval_storage != "float32", "link evaluation keeps float32 rows"),
    ]


def run(args: argparse.Namespace) -> dict[str, float | int]:
    """``featgraph train --task link``: split, train, evaluate, print the summary line; the metrics as a dict.
    Options of node classification that link prediction does not take are refused by name."""
    for flag, given, reason in _refusals(args):
        if given:
            raise ValueError(f"{flag} is not supported with --task link: {reason}")
    if not args.minibatch and (args.fanout or args.batch_size):
        raise ValueError("--fanout and --batch-size apply to --minibatch training")
    task = link_task(args.dataset, args.seed)
    mode = "minibatch" if args.minibatch else "full"
    overrides = {"epochs": args.epochs, "hidden": args.hidden, "lr": args.lr, "weight_decay": args.weight_decay}
    config = replace(PRESETS[mode], **{key: value for key, value in overrides.items() if value is not None})
    fanouts = (args.fanout or list(DEFAULT_FANOUTS)) if args.minibatch else None
    batch_size = args.batch_size or DEFAULT_BATCH_SIZE
    torch.manual_seed(args.seed)
    num_layers = len(fanouts) if fanouts else NUM_LAYERS
    net = LinkPredictor(task.x.shape[1], config.hidden, num_layers, args.backend, args.decoder or "dot")
    m = fit(net, task, config, args.seed, not args.quiet, fanouts, batch_size)
    how = f"mini-batch, fan-out {','.join(map(str, fanouts))}, batch {batch_size}" if fanouts else "full-graph"
    print(
        f"sage link ({args.backend}, {net.decoder} decoder, {how}) on {task.name}: val AUC {m.val_auc:.4f} "
        f"test AUC {m.test_auc:.4f} Hits@{m.hits_k} {m.test_hits:.4f} MRR {m.test_mrr:.4f} (epoch {m.best_epoch} of "
        f"{m.epochs}), {m.epoch_seconds * 1e3:.1f} ms/epoch ({m.batches_per_epoch} batches), "
        f"peak RSS {m.peak_rss_mb:.0f} MB"
    )
    return m.to_dict()
