"""A graph of ogbn-products' shape with labels planted for a GNN to find: for mini-batch training at scale.

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

import torch

from ..graph import Graph
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
