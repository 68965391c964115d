"""Datasets: bundled real graphs (Cora, Citeseer, SNAP/Newman topologies) and seeded synthetic ones (among
them graphs of ogbn-products', ogbn-mag's and the RGCN entity datasets' shapes with planted labels)."""

from .catalog import DatasetInfo, available, describe, load
from .dataset import Dataset
from .planted import ENTITY_SHAPES, EntityDataset, TypedDataset, entity_by_name, entity_like, mag_like, products_like
from .synthetic import rand100k, reddit_sized, rmat, uniform

__all__ = [
    "ENTITY_SHAPES", "Dataset", "DatasetInfo", "EntityDataset", "TypedDataset", "available", "describe",
    "entity_by_name", "entity_like", "load", "mag_like", "products_like", "rand100k", "reddit_sized", "rmat",
    "uniform",
]  # fmt: skip
