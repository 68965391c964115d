"""Datasets: bundled real graphs (Cora, Citeseer, SNAP/Newman topologies) and seeded synthetic ones."""

from .catalog import DatasetInfo, available, describe, load
from .dataset import Dataset
from .synthetic import rand100k, rmat, uniform

__all__ = ["Dataset", "DatasetInfo", "available", "describe", "load", "rand100k", "rmat", "uniform"]
