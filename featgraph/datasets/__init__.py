"""Datasets: bundled real graphs (Cora, Citeseer, SNAP/Newman topologies) and seeded synthetic ones (among
them a graph of ogbn-products' shape with planted labels)."""

from .catalog import DatasetInfo, available, describe, load
from .dataset import Dataset
from .planted import products_like
from .synthetic import rand100k, reddit_sized, rmat, uniform

__all__ = [
    "Dataset", "DatasetInfo", "available", "describe", "load", "products_like", "rand100k", "reddit_sized", "rmat",
    "uniform",
]  # fmt: skip
