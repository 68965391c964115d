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


PYG_EDGE_KEYS = ("adj", "adj_t", "edge_index")  # in the order PyG's sampler prefers them (``to_csc``)


def pyg_edge_key(store: Any) -> str | None:
    """Which of PyG's edge storages ``store`` (a ``Data`` or one edge type's store of a ``HeteroData``) holds:
    ``adj`` (``A[src, dst]``), ``adj_t`` (``A[dst, src]``, as ``ToSparseTensor`` writes it) or ``edge_index``,
    the first of them that PyG's sampler reads; None where it holds none."""
    for key in PYG_EDGE_KEYS:
        if getattr(store, key, None) is not None:
            return key
    return None


def is_torch_sparse_tensor(matrix: Any) -> bool:
    """A ``torch_sparse.SparseTensor``, recognised by its methods (torch_sparse is never imported)."""
    return not isinstance(matrix, torch.Tensor) and all(hasattr(matrix, name) for name in ("coo", "sparse_sizes"))


def sparse_entries(matrix: Any, what: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """The (row, column, value) of each stored entry of a sparse matrix, in its stored order: a torch sparse
    COO (uncoalesced too), CSR or CSC tensor or a ``torch_sparse.SparseTensor`` (value None where it has none)."""
    if is_torch_sparse_tensor(matrix):
        row, col, value = matrix.coo()
        if len(tuple(matrix.sparse_sizes())) != 2:
            raise ValueError(f"{what}: expected a 2-D sparse matrix, got sizes {tuple(matrix.sparse_sizes())}")
    elif isinstance(matrix, torch.Tensor) and matrix.layout in (torch.sparse_coo, torch.sparse_csr, torch.sparse_csc):
        if matrix.dim() != 2 or matrix.sparse_dim() != 2:
            raise ValueError(f"{what}: expected a 2-D sparse matrix, got shape {tuple(matrix.shape)}")
        if matrix.layout == torch.sparse_coo:
            (row, col), value = matrix._indices(), matrix._values()
        elif matrix.layout == torch.sparse_csr:
            row, col, value = _expanded(matrix.crow_indices()), matrix.col_indices(), matrix.values()
        else:
            row, col, value = matrix.row_indices(), _expanded(matrix.ccol_indices()), matrix.values()
    else:
        layout = matrix.layout if isinstance(matrix, torch.Tensor) else type(matrix).__name__
        raise TypeError(
            f"{what}: expected a torch sparse COO, CSR or CSC tensor or a torch_sparse SparseTensor, got {layout}"
        )
    if value is not None and value.dim() != 1:
        raise ValueError(f"{what}: expected one value per entry, got values of shape {tuple(value.shape)}")
    return row.long(), col.long(), value


def _expanded(indptr: torch.Tensor) -> torch.Tensor:
    """The compressed dimension's index of each entry of a CSR (CSC) tensor: its row (column) ids."""
    return torch.repeat_interleave(torch.arange(indptr.numel() - 1, device=indptr.device), indptr.diff())


def sparse_shape(matrix: Any) -> tuple[int, int]:
    """The (rows, columns) of a torch sparse tensor or a ``torch_sparse.SparseTensor``."""
    return tuple(int(n) for n in (matrix.sparse_sizes() if is_torch_sparse_tensor(matrix) else matrix.shape[:2]))


def pyg_edges(store: Any, what: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, tuple[int, int] | None]:
    """``(src, dst, values, (num_src, num_dst))`` of the edges ``store`` holds (``pyg_edge_key``), in their
    stored order, which PyG's per-edge values follow: the sparse matrix's entries (its values; an ``adj_t``
    transposed) or the ``edge_index``'s columns (no values, no sizes)."""
    key = pyg_edge_key(store)
    if key is None:
        raise ValueError(f"{what}: holds no edges (no edge_index, adj_t or adj)")
    matrix = getattr(store, key)
    if key == "edge_index":
        if isinstance(matrix, torch.Tensor) and matrix.layout != torch.strided:
            raise TypeError(f"{what}.edge_index: expected a (2, E) tensor, got a {matrix.layout} tensor (use adj_t)")
        return matrix[0], matrix[1], None, None
    row, col, value = sparse_entries(matrix, f"{what}.{key}")
    rows, cols = sparse_shape(matrix)
    return (col, row, value, (cols, rows)) if key == "adj_t" else (row, col, value, (rows, cols))


def from_pyg(data: Any) -> dict[str, Any]:
    """A PyG ``Data``: its edges (``pyg_edges``: ``edge_index``, or a sparse ``adj_t`` or ``adj``), ``num_nodes``
    and ``edge_weight`` if set, else a sparse matrix's values unless all of them are 1."""
    src, dst, values, _ = pyg_edges(data, "data")
    weight = getattr(data, "edge_weight", None)
    if weight is None and values is not None and values.is_floating_point() and not bool((values == 1).all()):
        weight = values
    return {"src": src, "dst": dst, "num_nodes": data.num_nodes, "edge_weight": weight}


def from_dgl(dgl_graph: Any) -> dict[str, Any]:
    """A DGL graph: homogeneous, or bipartite (a block from DGL's samplers, or a graph whose edges run from some
    vertex types to others: ``is_unibipartite``), which becomes a bipartite ``Graph`` of DGL's source and
    destination counts. Several edge types are merged as ``dgl.to_homogeneous`` merges them: each vertex type's
    ids after those of the types before it (DGL's type order; sources and destinations apart where bipartite),
    the relations one after another in DGL's edge type order. DGL's edge ids, relation by relation, become the
    user edge order."""
    bipartite = dgl_graph.is_block or dgl_graph.is_unibipartite
    src_types, dst_types = (dgl_graph.srctypes, dgl_graph.dsttypes) if bipartite else (dgl_graph.ntypes,) * 2
    src_offsets, num_src = _offsets([dgl_graph.num_src_nodes(t) for t in src_types])
    dst_offsets, num_dst = _offsets([dgl_graph.num_dst_nodes(t) for t in dst_types])
    srcs, dsts = [], []
    for etype in dgl_graph.canonical_etypes:
        src_type, _, dst_type = etype
        src, dst = dgl_graph.edges(etype=etype, order="eid")
        srcs.append(_shifted(src, src_offsets[src_types.index(src_type)]))
        dsts.append(_shifted(dst, dst_offsets[dst_types.index(dst_type)]))
    num_nodes: int | tuple[int, int] = (num_src, num_dst) if bipartite else num_src
    src, dst = (srcs[0], dsts[0]) if len(srcs) == 1 else (torch.cat(srcs), torch.cat(dsts))
    return {"src": src, "dst": dst, "num_nodes": num_nodes, "edge_weight": None}


def _offsets(counts: list[int]) -> tuple[list[int], int]:
    """Each type's first id where the types' ids follow one another in order, and the total count."""
    offsets = np.cumsum([0, *counts]).tolist()
    return offsets[:-1], offsets[-1]


def _shifted(ids: torch.Tensor, offset: int) -> torch.Tensor:
    return ids + offset if offset else ids


def is_dgl_graph(obj: Any) -> bool:
    """Whether ``obj`` is a ``DGLGraph`` (a graph, a block or a relation slice), without importing DGL: where DGL
    was never imported, nothing is one."""
    dgl = sys.modules.get("dgl")
    graph_class = getattr(dgl, "DGLGraph", None)
    return graph_class is not None and isinstance(obj, graph_class)


def stub_dgl_graphbolt() -> bool:
    """Stand an empty module in for DGL's graphbolt before DGL is first imported (see ``import_dgl``), so that
    whatever imports DGL in this process next (a test runner unpickling a DGL warning, for one) succeeds.
    Returns whether DGL is installed."""
    if importlib.util.find_spec("dgl") is None:
        return False
    if "dgl" not in sys.modules:
        sys.modules.setdefault("dgl.graphbolt", types.ModuleType("dgl.graphbolt"))
    return True


def import_dgl() -> Any | None:
    """DGL if it is installed and importable, else None.

    DGL 2.1 (the newest Linux wheel) ships no graphbolt library for torch 2.13 and fails at import, while
    its graphs and ``dgl.ops`` do not need graphbolt; so graphbolt is stubbed out before the import.
    """
    if not stub_dgl_graphbolt():
        return None
    try:
        return importlib.import_module("dgl")
    except Exception:  # noqa: BLE001 - a broken install counts as absent
        return None
