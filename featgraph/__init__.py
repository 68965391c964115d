"""featgraph: a sparse-kernel backend for GNN systems.

Generalized SpMM (vertex-wise aggregation) and SDDMM (edge-wise computation) with user-defined
functions fused into one kernel per op, on a ``Graph`` built from PyG's ``edge_index`` (bipartite graphs
too); a compiled neighbour sampler (``sampling``) and loaders (``loader``) for mini-batch training.
"""

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from . import datasets, loader, ops, sampling, te
from .graph import Graph, HeteroGraph
from .schedule import Schedule
from .templates import SDDMMParams, SpMMParams, default_target
from .tuning import sddmm, spmm, tune

try:
    __version__ = version("featgraph")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+source"

__all__ = [
    "Graph",
    "HeteroGraph",
    "Schedule",
    "SDDMMParams",
    "SpMMParams",
    "__version__",
    "datasets",
    "default_target",
    "loader",
    "nn",
    "ops",
    "sampling",
    "sddmm",
    "spmm",
    "te",
    "tune",
]


def __getattr__(name: str) -> Any:
    """``featgraph.nn`` on first use: its layers are built on PyG's classes, so importing featgraph (its graphs,
    expression language, templates, ops, sampler and loaders) never needs PyG."""
    if name == "nn":
        return importlib.import_module(".nn", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
