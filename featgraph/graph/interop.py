"""Adapters from other graph libraries to ``Graph`` constructor arguments.

PyG, DGL and networkx are optional: each adapter only touches the object it is given, so featgraph
imports without them.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import Any

import numpy as np
import torch


def from_scipy(matrix: Any, weighted: bool) -> dict[str, Any]:
    """Entry (i, j) of ``A`` is the edge j -> i, so aggregation at row i is ``(A @ X)[i]``."""
    import scipy.sparse as sp

    if not sp.issparse(matrix):
        raise TypeError(f"expected a scipy sparse matrix, got {type(matrix).__name__}")
    rows, cols = matrix.shape
    if rows != cols:
        raise ValueError(f"adjacency must be square, got shape {matrix.shape}")
    coo = matrix.tocoo()
    weight = None
    if weighted:
        data = np.asarray(coo.data)
        weight = torch.from_numpy(data.astype(np.float64 if data.dtype == np.float64 else np.float32))
    return {
        "src": torch.from_numpy(np.asarray(coo.col, dtype=np.int64)),
        "dst": torch.from_numpy(np.asarray(coo.row, dtype=np.int64)),
        "num_nodes": rows,
        "edge_weight": weight,
    }


def from_networkx(nx_graph: Any, weight: str | None) -> dict[str, Any]:
    """Nodes must be the integers 0..n-1; an undirected edge {u, v} becomes u -> v and v -> u."""
    num_nodes = nx_graph.number_of_nodes()
    if set(nx_graph.nodes) != set(range(num_nodes)):
        raise ValueError(
            "networkx graph nodes must be the integers 0..n-1; relabel with nx.convert_node_labels_to_integers"
        )
    edges = list(nx_graph.edges(data=True))
    src = [u for u, _, _ in edges]
    dst = [v for _, v, _ in edges]
    values = [attrs.get(weight, 1.0) for _, _, attrs in edges] if weight else None
    if not nx_graph.is_directed():
        src, dst = src + dst, dst + src
        values = values + values if values is not None else None
    return {
        "src": torch.tensor(src, dtype=torch.int64),
        "dst": torch.tensor(dst, dtype=torch.int64),
        "num_nodes": num_nodes,
        "edge_weight": None if values is None else torch.tensor(values, dtype=torch.float32),
    }


def from_pyg(data: Any) -> dict[str, Any]:
    """A PyG ``Data``: its ``edge_index``, ``num_nodes`` and, if set, ``edge_weight``."""
    edge_index = data.edge_index
    return {
        "src": edge_index[0],
        "dst": edge_index[1],
        "num_nodes": data.num_nodes,
        "edge_weight": getattr(data, "edge_weight", None),
    }


def from_dgl(dgl_graph: Any) -> dict[str, Any]:
    """A DGL graph with one edge type: homogeneous, or bipartite (a block from DGL's samplers, or a graph whose
    edges run from one vertex type to another), which becomes a bipartite ``Graph`` of DGL's source and
    destination counts. DGL's edge ids become the user edge order."""
    if len(dgl_graph.canonical_etypes) != 1:
        raise ValueError(
            "only DGL graphs with one edge type are supported (homogeneous, a block or a bipartite graph), got "
            f"edge types {dgl_graph.canonical_etypes}"
        )
    src, dst = dgl_graph.edges(order="eid")
    if dgl_graph.is_block or dgl_graph.is_unibipartite:
        num_nodes: int | tuple[int, int] = (dgl_graph.num_src_nodes(), dgl_graph.num_dst_nodes())
    else:
        num_nodes = dgl_graph.num_nodes()
    return {"src": src, "dst": dst, "num_nodes": num_nodes, "edge_weight": None}


def import_dgl() -> Any | None:
    """DGL if it is installed and importable, else None.

    DGL 2.1 (the newest Linux wheel) ships no graphbolt library for torch 2.13 and fails at import, while
    its graphs and ``dgl.ops`` do not need graphbolt; so graphbolt is stubbed out before the import.
    """
    if importlib.util.find_spec("dgl") is None:
        return None
    if "dgl" not in sys.modules:
        sys.modules.setdefault("dgl.graphbolt", types.ModuleType("dgl.graphbolt"))
    try:
        return importlib.import_module("dgl")
    except Exception:  # noqa: BLE001 - a broken install counts as absent
        return None
