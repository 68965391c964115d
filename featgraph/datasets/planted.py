"""Graphs with labels planted for a GNN to find: ogbn-products' shape for mini-batch training at scale, and
typed ones for relational models: the RGCN entity datasets' shapes (``entity_like``) and ogbn-mag's
(``mag_like``).

ogbn-products (Hu et al., NeurIPS 2020; Amazon co-purchases) has 2,449,029 vertices, 61,859,140 edges,
100 features, 47 classes, power-law degrees and a sales-rank split of 8% / 1.6% / 90.4%. Its data cannot be
downloaded here, so ``products_like`` draws a graph of that shape: every vertex gets a class (class sizes
skewed as Zipf's law) and a power-law weight (Chung-Lu: its expected degree); each undirected edge joins a
vertex drawn by weight to one of its own class with probability ``homophily`` (else to any vertex), also
drawn by weight, and is stored in both directions. Features are the class's centroid plus noise, so a
model on features alone is far from perfect while neighbours, mostly of the same class, add the evidence a
GNN uses. Same arguments, same dataset, on every machine.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import torch

from ..graph import Graph, HeteroGraph
from .dataset import Dataset

PRODUCTS_NODES = 2_449_029
PRODUCTS_EDGES = 61_859_140  # directed, both directions of every undirected edge
PRODUCTS_FEATURES = 100
PRODUCTS_CLASSES = 47
SPLIT = (0.08, 0.016)  # train, validation; the rest is the test set
DEGREE_EXPONENT = 2.1  # of the weight's Pareto tail: in-degrees follow it
FEATURE_NOISE = 5.0  # per feature, beside standard-normal centroids: features alone place about a third


def products_like(scale: float = 1.0, seed: int = 0, homophily: float = 0.8) -> Dataset:
    """ogbn-products' shape times ``scale`` (vertices and edges; 1.0: the full 2.4M vertices and 62M edges),
    with labels, features and a train/validation/test split."""
    if not 0 < scale <= 1:
        raise ValueError(f"scale must be in (0, 1], got {scale}")
    if not 0 <= homophily <= 1:
        raise ValueError(f"homophily must be in [0, 1], got {homophily}")
    gen = torch.Generator().manual_seed(seed)
    n = max(PRODUCTS_CLASSES, round(PRODUCTS_NODES * scale))
    pairs = max(1, round(PRODUCTS_EDGES * scale) // 2)
    class_weight = 1.0 / torch.arange(1, PRODUCTS_CLASSES + 1, dtype=torch.float64)
    labels = torch.multinomial(class_weight, n, replacement=True, generator=gen)
    labels[:PRODUCTS_CLASSES] = torch.arange(PRODUCTS_CLASSES)  # every class present
    weight = torch.rand(n, generator=gen, dtype=torch.float64).pow(-1.0 / (DEGREE_EXPONENT - 1.0))
    weight.clamp_(max=n**0.5)  # no vertex joins more than a square root's share
    # each vertex's expected number of edge ends (stubs), rounded at random; stubs listed class by class,
    # so a draw by weight is one uniform pick among all stubs, or among one class's
    expected = weight * (pairs / float(weight.sum()))
    stubs = (expected.floor() + (torch.rand(n, generator=gen, dtype=torch.float64) < expected.frac())).long()
    by_class = torch.sort(labels, stable=True).indices
    ends = torch.repeat_interleave(by_class, stubs[by_class])
    per_class = torch.zeros(PRODUCTS_CLASSES + 1, dtype=torch.int64)
    per_class[1:] = torch.cumsum(torch.bincount(labels, weights=stubs.double(), minlength=PRODUCTS_CLASSES), 0).long()
    u = ends[torch.randint(0, ends.numel(), (pairs,), generator=gen)]
    v = ends[torch.randint(0, ends.numel(), (pairs,), generator=gen)]
    c = labels[u]
    lo, size = per_class[c], per_class[c + 1] - per_class[c]
    same = (torch.rand(pairs, generator=gen) < homophily) & (size > 0)
    pick = lo[same] + (torch.rand(int(same.sum()), generator=gen, dtype=torch.float64) * size[same]).long()
    v[same] = ends[pick]
    src, dst = torch.cat([u, v]), torch.cat([v, u])
    del u, v
    graph = Graph(src, dst, n)
    del src, dst  # the graph holds its own copy
    centroids = torch.randn(PRODUCTS_CLASSES, PRODUCTS_FEATURES, generator=gen)
    features = centroids[labels] + FEATURE_NOISE * torch.randn(n, PRODUCTS_FEATURES, generator=gen)
    order = torch.randperm(n, generator=gen)
    train, val = round(SPLIT[0] * n), round(SPLIT[1] * n)
    return Dataset(
        f"products-like-{scale:g}" if scale != 1 else "products-like",
        graph,
        features,
        labels=labels,
        num_classes=PRODUCTS_CLASSES,
        train_idx=order[:train].sort().values,
        val_idx=order[train : train + val].sort().values,
        test_idx=order[train + val :].sort().values,
    )


# the RGCN entity-classification datasets (Schlichtkrull et al., 2018): nodes, edges, relations, classes
ENTITY_SHAPES = {
    "aifb": (8_285, 58_086, 90, 4),
    "mutag": (23_644, 148_454, 46, 2),
    "bgs": (333_845, 1_832_398, 206, 2),
    "am": (1_666_764, 11_976_642, 266, 11),
}
ENTITY_FEATURES = 16
ENTITY_LABELLED = 0.1  # the share of nodes with a label, half of them for training
ENTITY_SIGNAL = 0.9  # the share of a relation's edges whose source follows the planted rule


def relation_sizes(relations: int, edges: int, minimum: int = 0) -> torch.Tensor:
    """Edges per relation as real typed graphs skew them: relation ``r``'s share falls off as ``1 / (r + 1)`` (a
    few large relations, many small ones), each at least ``minimum``, relation 0 taking the rounding so the
    sizes sum to ``edges``."""
    share = 1.0 / torch.arange(1, relations + 1, dtype=torch.float64)
    sizes = (share / share.sum() * edges).floor().to(torch.int64).clamp_(min=minimum)
    sizes[0] += edges - int(sizes.sum())
    return sizes


@dataclass
class EntityDataset:
    """A typed graph (one node type, ``relations`` edge types) with node features, labels and split."""

    name: str
    graph: HeteroGraph
    x: torch.Tensor
    y: torch.Tensor
    num_classes: int
    train_idx: torch.Tensor
    test_idx: torch.Tensor


def entity_by_name(name: str, seed: int = 0) -> EntityDataset | None:
    """The entity dataset a name such as "aifb-like" or "am-like-0.1" (shape, then scale) stands for, as
    ``entity_like`` names them; None for any other name."""
    match = re.fullmatch(r"([a-z]+)-like(?:-([0-9.]+))?", name)
    if match is None or match.group(1) not in ENTITY_SHAPES:
        return None
    try:
        scale = float(match.group(2) or 1)
    except ValueError:
        raise ValueError(f"dataset {name!r}: the scale after '{match.group(1)}-like-' must be a number") from None
    return entity_like(match.group(1), scale, seed)


def entity_like(shape: str, scale: float = 1.0, seed: int = 0) -> EntityDataset:
    """A graph of the RGCN entity dataset ``shape`` ("aifb", "mutag", "bgs", "am") times ``scale`` (nodes and
    edges; the relations stay), with labels a relational model can find. Relation ``r`` holds a share of the
    edges falling off as ``1 / (r + 1)`` (a few large relations, many small ones, as in the real ones); a
    node's class is planted in its in-edges: along relation ``r`` nine in ten of its in-neighbours come from
    class ``(class + r) % classes``, so which relations bring which classes tells its class, while its 16
    features (the class's centroid under noise) say little on their own."""
    if shape not in ENTITY_SHAPES:
        raise ValueError(f"shape must be one of {tuple(ENTITY_SHAPES)}, got {shape!r}")
    if not 0 < scale <= 1:
        raise ValueError(f"scale must be in (0, 1], got {scale}")
    nodes, edges, relations, classes = ENTITY_SHAPES[shape]
    gen = torch.Generator().manual_seed(seed)
    n, e = max(classes, round(nodes * scale)), max(relations, round(edges * scale))
    labels = torch.randint(0, classes, (n,), generator=gen)
    labels[:classes] = torch.arange(classes)  # every class present
    by_class = torch.sort(labels, stable=True).indices
    starts = torch.zeros(classes + 1, dtype=torch.int64)
    starts[1:] = torch.cumsum(torch.bincount(labels, minlength=classes), 0)
    sizes = relation_sizes(relations, e, minimum=1)
    relation = torch.repeat_interleave(torch.arange(relations), sizes)
    dst = torch.randint(0, n, (e,), generator=gen)
    src = torch.randint(0, n, (e,), generator=gen)
    planted = torch.rand(e, generator=gen) < ENTITY_SIGNAL
    source_class = (labels[dst[planted]] + relation[planted]) % classes
    lo, size = starts[source_class], starts[source_class + 1] - starts[source_class]
    src[planted] = by_class[lo + (torch.rand(int(planted.sum()), generator=gen) * size).long()]
    parts = zip(src.split(sizes.tolist()), dst.split(sizes.tolist()), strict=True)  # edges come in relation order
    data = {("entity", f"r{r}", "entity"): part for r, part in enumerate(parts)}
    centroids = torch.randn(classes, ENTITY_FEATURES, generator=gen)
    features = centroids[labels] + 3.0 * torch.randn(n, ENTITY_FEATURES, generator=gen)
    labelled = torch.randperm(n, generator=gen)[: max(2, round(ENTITY_LABELLED * n))]
    half = labelled.numel() // 2
    return EntityDataset(
        f"{shape}-like-{scale:g}" if scale != 1 else f"{shape}-like", HeteroGraph(data, {"entity": n}), features,
        labels, classes, labelled[:half].sort().values, labelled[half:].sort().values,
    )  # fmt: skip


# ogbn-mag (Hu et al., 2020; Microsoft Academic Graph): node counts, edge counts per edge type, paper features,
# venue classes and the time-based split's sizes
MAG_NODES = {"paper": 736_389, "author": 1_134_649, "institution": 8_740, "field_of_study": 59_965}
MAG_EDGES = {
    ("author", "writes", "paper"): 7_145_660,
    ("paper", "cites", "paper"): 5_416_271,
    ("paper", "has_topic", "field_of_study"): 7_505_078,
    ("author", "affiliated_with", "institution"): 1_043_998,
}
MAG_FEATURES = 128
MAG_CLASSES = 349
MAG_SPLIT = (629_571, 64_879)  # train, validation; the rest (41,939 papers) is the test set


@dataclass
class TypedDataset:
    """A typed graph with features per node type (``x``: types without features are left out), labels of
    the ``target`` node type and a split of its nodes."""

    name: str
    graph: HeteroGraph
    x: dict[str, torch.Tensor]
    target: str
    y: torch.Tensor
    num_classes: int
    train_idx: torch.Tensor
    val_idx: torch.Tensor
    test_idx: torch.Tensor

    def to_pyg(self) -> Any:
        """The dataset as PyG's ``HeteroData`` (PyG needed): features, counts, edges, ``y`` and the split as
        masks on the target type, as PyG's ``OGB_MAG`` lays it out."""
        from torch_geometric.data import HeteroData

        data = HeteroData()
        for node_type, count in self.graph.num_nodes_dict.items():
            data[node_type].num_nodes = count
            if node_type in self.x:
                data[node_type].x = self.x[node_type]
        for edge_type, edge_index in self.graph.to_edge_index_dict().items():
            data[edge_type].edge_index = edge_index
        store = data[self.target]
        store.y = self.y
        for split, idx in (("train", self.train_idx), ("val", self.val_idx), ("test", self.test_idx)):
            store[f"{split}_mask"] = torch.zeros(self.y.numel(), dtype=torch.bool).index_fill_(0, idx, True)
        return data


def _by_weight(
    weight: torch.Tensor, labels: torch.Tensor, classes: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(vertices sorted by class, their running weight sums, each class's [start, end) of those sums): one
    uniform draw in a class's (or the whole) range, searched in the running sums, picks a vertex by weight."""
    order = torch.sort(labels, stable=True).indices
    running = torch.cumsum(weight[order], 0)
    ends = running[torch.cumsum(torch.bincount(labels, minlength=classes), 0) - 1]
    starts = torch.cat([running.new_zeros(1), ends[:-1]])
    return order, running, torch.stack([starts, ends], 1)


def _draw(table: tuple, classes: torch.Tensor | None, count: int, gen: torch.Generator) -> torch.Tensor:
    """``count`` vertices drawn by weight: the i-th from class ``classes[i]`` (None: from all vertices)."""
    order, running, spans = table
    if classes is None:
        low, high = torch.zeros(count, dtype=torch.float64), running[-1].expand(count)
    else:
        low, high = spans[classes, 0], spans[classes, 1]
    point = low + torch.rand(count, generator=gen, dtype=torch.float64) * (high - low)
    return order[torch.searchsorted(running, point).clamp_(max=order.numel() - 1)]


def mag_like(scale: float = 1.0, seed: int = 0, homophily: float = 0.7) -> TypedDataset:
    """ogbn-mag's shape times ``scale`` (every node and edge count; 1.0: 1.9M nodes, 21M edges in four edge
    types): papers, authors, institutions and fields of study, 128 paper features and 349 paper classes.
    Every node has a class (skewed as Zipf's law) and a power-law weight; each edge draws its source by
    weight and, with probability ``homophily``, its destination by weight among its source's class (else among
    all), so citations, co-authors and topics carry a paper's class, while the features (the class's centroid
    under noise) alone place few papers."""
    if not 0 < scale <= 1:
        raise ValueError(f"scale must be in (0, 1], got {scale}")
    if not 0 <= homophily <= 1:
        raise ValueError(f"homophily must be in [0, 1], got {homophily}")
    gen = torch.Generator().manual_seed(seed)
    class_weight = 1.0 / torch.arange(1, MAG_CLASSES + 1, dtype=torch.float64)
    labels, tables = {}, {}
    for node_type, full in MAG_NODES.items():
        n = max(MAG_CLASSES, round(full * scale))
        labels[node_type] = torch.multinomial(class_weight, n, replacement=True, generator=gen)
        labels[node_type][:MAG_CLASSES] = torch.arange(MAG_CLASSES)  # every class present in every type
        weight = torch.rand(n, generator=gen, dtype=torch.float64).pow(-1.0 / (DEGREE_EXPONENT - 1.0))
        tables[node_type] = _by_weight(weight.clamp_(max=n**0.5), labels[node_type], MAG_CLASSES)
    edges = {}
    for (src_type, rel, dst_type), full in MAG_EDGES.items():
        count = max(1, round(full * scale))
        src = _draw(tables[src_type], None, count, gen)
        dst = _draw(tables[dst_type], None, count, gen)
        same = torch.rand(count, generator=gen) < homophily
        dst[same] = _draw(tables[dst_type], labels[src_type][src[same]], int(same.sum()), gen)
        edges[(src_type, rel, dst_type)] = torch.stack([src, dst])
    graph = HeteroGraph(edges, {t: labels[t].numel() for t in MAG_NODES})
    y = labels["paper"]
    centroids = torch.randn(MAG_CLASSES, MAG_FEATURES, generator=gen)
    x = centroids[y] + FEATURE_NOISE * torch.randn(y.numel(), MAG_FEATURES, generator=gen)
    order = torch.randperm(y.numel(), generator=gen)
    train = round(MAG_SPLIT[0] / MAG_NODES["paper"] * y.numel())
    val = round(MAG_SPLIT[1] / MAG_NODES["paper"] * y.numel())
    return TypedDataset(
        f"mag-like-{scale:g}" if scale != 1 else "mag-like", graph, {"paper": x}, "paper", y, MAG_CLASSES,
        order[:train].sort().values, order[train : train + val].sort().values, order[train + val :].sort().values,
    )  # fmt: skip
