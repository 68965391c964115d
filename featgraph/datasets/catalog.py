"""What datasets exist and how to load one: ``available()`` and ``load(name)``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from ..graph import Graph
from . import synthetic
from .bundle import bundle_path, features_of
from .dataset import Dataset
from .planted import products_like

PLANETOID_SOURCE = "Planetoid (Yang, Cohen, Salakhutdinov, ICML 2016), MIT licence; standard GCN split"


@dataclass(frozen=True)
class DatasetInfo:
    """One catalogue entry: a dataset's name, sizes and where it comes from."""

    name: str
    num_nodes: int
    num_edges: int  # directed edges as loaded (undirected sources count each edge twice)
    num_features: int  # 0 where features are random (seeded) because the source has none
    num_classes: int
    source: str

    def row(self) -> str:
        """One line of ``describe()``'s listing: name, vertices, edges, features, classes and source."""
        features = str(self.num_features) if self.num_features else "random"
        sizes = f"{self.num_nodes:>8} {self.num_edges:>10} {features:>8} {self.num_classes:>7}"
        return f"{self.name:<16} {sizes}  {self.source}"


_CATALOG = [
    DatasetInfo("cora", 2708, 10556, 1433, 7, PLANETOID_SOURCE),
    DatasetInfo("citeseer", 3327, 9104, 3703, 6, PLANETOID_SOURCE),
    DatasetInfo("email-Enron", 36692, 367662, 0, 0, "SNAP email network (Leskovec et al. 2009), via graph-tool"),
    DatasetInfo("cond-mat-2005", 40421, 351386, 0, 0, "co-authorship (Newman), via graph-tool"),
    DatasetInfo("astro-ph", 16706, 242502, 0, 0, "co-authorship (Newman), via graph-tool"),
    DatasetInfo("as-22july06", 22963, 96872, 0, 0, "internet AS topology (Newman), via graph-tool"),
    DatasetInfo("polblogs", 1490, 19090, 0, 0, "political blogs, directed (Adamic and Glance 2005), via graph-tool"),
    DatasetInfo("karate", 34, 156, 0, 0, "Zachary's karate club (1977), via graph-tool"),
    DatasetInfo("uniform-50k", 50_000, 1_500_000, 0, 0, "synthetic: uniform random, avg in-degree 30, seed 0"),
    DatasetInfo("rand100k-small", 50_000, 2_400_000, 0, 0, "synthetic: rand-100K shape at vertex x0.5, degree x0.1"),
    DatasetInfo("rmat-16", 65_536, 1_048_576, 0, 0, "synthetic: R-MAT scale 16, edge factor 16"),
    DatasetInfo("products-like", 2_449_029, 61_859_140, 100, 47, "synthetic: ogbn-products' shape, planted labels"),
    DatasetInfo("products-like-small", 48_981, 1_237_182, 100, 47, "synthetic: products-like at scale 0.02"),
]
_BY_NAME = {info.name: info for info in _CATALOG}

_SYNTHETIC: dict[str, Callable[[int], Graph]] = {
    "uniform-50k": lambda seed: synthetic.uniform(50_000, 30, seed=seed),
    "rand100k-small": lambda seed: synthetic.rand100k(0.5, 0.1, seed=seed),
    "rmat-16": lambda seed: synthetic.rmat(16, 16, seed=seed),
}
_PLANTED: dict[str, Callable[[int], Dataset]] = {
    "products-like": lambda seed: products_like(1.0, seed=seed),
    "products-like-small": lambda seed: products_like(0.02, seed=seed),
}


def available() -> list[DatasetInfo]:
    """Every dataset ``load`` accepts, with its size and source."""
    return list(_CATALOG)


def describe() -> str:
    """The listing as a text table."""
    header = f"{'name':<16} {'nodes':>8} {'edges':>10} {'features':>8} {'classes':>7}  source"
    return "\n".join([header] + [info.row() for info in _CATALOG])


def _random_features(num_nodes: int, dim: int, seed: int) -> torch.Tensor:
    return torch.randn(num_nodes, dim, generator=torch.Generator().manual_seed(seed))


def load(name: str, feature_dim: int = 64, seed: int = 0) -> Dataset:
    """Load a dataset by name (see ``available()``).

    Cora and Citeseer come with their bag-of-words features, labels and the standard split; the
    products-like graphs with planted labels, features and ogbn-products' split sizes. The other graphs
    have no features: they get ``feature_dim`` standard-normal features drawn with ``seed``, and no
    labels. Undirected sources are loaded with both directions of every edge.
    """
    if name not in _BY_NAME:
        raise KeyError(f"unknown dataset {name!r}; available: {', '.join(_BY_NAME)}")
    if name in _PLANTED:
        return _PLANTED[name](seed)
    if name in _SYNTHETIC:
        graph = _SYNTHETIC[name](seed)
        return Dataset(name, graph, _random_features(graph.num_nodes, feature_dim, seed))
    path = bundle_path(name)
    if not path.exists():
        raise FileNotFoundError(f"bundled file {path} is missing; reinstall featgraph")
    with np.load(path) as npz:
        arrays = dict(npz)
    num_nodes = int(arrays["num_nodes"])
    src = torch.from_numpy(arrays["src"].astype(np.int64))
    dst = torch.from_numpy(arrays["dst"].astype(np.int64))
    if not bool(arrays["directed"]):
        src, dst = torch.cat([src, dst]), torch.cat([dst, src])
    graph = Graph(src, dst, num_nodes)
    if "labels" not in arrays:
        return Dataset(name, graph, _random_features(num_nodes, feature_dim, seed))
    labels = torch.from_numpy(arrays["labels"].astype(np.int64))
    return Dataset(
        name,
        graph,
        torch.from_numpy(features_of(arrays).toarray()),
        labels=labels,
        num_classes=_BY_NAME[name].num_classes,
        train_idx=torch.from_numpy(arrays["train"].astype(np.int64)),
        val_idx=torch.from_numpy(arrays["val"].astype(np.int64)),
        test_idx=torch.from_numpy(arrays["test"].astype(np.int64)),
    )
