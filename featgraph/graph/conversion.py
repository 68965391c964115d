"""A graph argument as users pass it (PyG's ``edge_index``, its ``EdgeIndex``, a torch sparse ``adj_t``) turned
into a ``Graph``, and the graphs remembered for the tensors they came from.

A training loop passes the same ``edge_index`` tensor every epoch; its ``Graph`` (and with it the formats,
normalisation data and compiled kernels cached on the graph) is remembered while that tensor holds the same
edges, so per-graph preprocessing happens once, not once per epoch. A tensor is found again by its memory (data
pointer, shape, strides), so featgraph's operators, given the same tensor inside compiled code, find the same
graph; an ``edge_index`` traced by ``torch.compile`` becomes a ``GraphRef`` that the operators resolve here when
they run (``resolve``), so tracing builds nothing. "The same edges" is checked at every call against the graph's
own copy: edits through ``.data`` or numpy do not move torch's version counter, so the counter cannot tell. On
CPU the check is one ``memcmp`` (1.5M edges: about 2 ms, against 15-33 ms for a GCNConv forward at d=32).
PyG is never imported here: an ``EdgeIndex`` can only exist where the caller has imported PyG.
"""

from __future__ import annotations

import ctypes
import sys
from collections import OrderedDict
from collections.abc import Hashable

import torch

from .formats import Compressed
from .graph import Graph, GraphRef

GraphLike = torch.Tensor | Graph | GraphRef
Sizes = int | tuple[int, int]
_REMEMBERED = 16
# the tensor's memory -> (num_nodes, its graph, what its contents must equal)
_graphs: OrderedDict[Hashable, tuple[Sizes, Graph, tuple[torch.Tensor, ...]]] = OrderedDict()
_memcmp = ctypes.CDLL(None).memcmp
_memcmp.argtypes, _memcmp.restype = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t), ctypes.c_int


def _is_pyg_edge_index(edges: torch.Tensor) -> bool:
    """Whether ``edges`` is PyG's ``EdgeIndex`` (only where the caller has imported PyG)."""
    pyg = sys.modules.get("torch_geometric")
    edge_index_class = getattr(pyg, "EdgeIndex", None)
    return edge_index_class is not None and isinstance(edges, edge_index_class)


def resolve(edge_index: torch.Tensor, num_src: int, num_dst: int, self_loops: bool) -> Graph:
    """The ``Graph`` an operator's graph arguments stand for (see ``GraphRef``): the graph owning that very
    tensor, else the remembered graph of a user's ``edge_index``; looped where ``self_loops``."""
    graph = Graph.owning(edge_index, num_src, num_dst)
    if graph is None:
        graph = as_graph(edge_index, num_src if num_src == num_dst else (num_src, num_dst))
    return graph.with_self_loops() if self_loops else graph


def as_graph(edges: GraphLike, num_nodes: Sizes) -> Graph | GraphRef:
    """The ``Graph`` for ``edges`` on ``num_nodes`` vertices (a pair: sources and destinations of a bipartite
    graph): an ``edge_index`` (2, E), a square torch sparse ``adj_t`` (row = destination, column = source, as
    PyG's ``SparseTensor`` path; values other than 1 become edge weights), or a ``Graph``. In code that
    ``torch.compile`` traces, an ``edge_index`` becomes a ``GraphRef`` (checked when the operators run)."""
    if isinstance(edges, GraphRef):
        return edges
    if isinstance(edges, Graph):
        sizes = num_nodes if isinstance(num_nodes, tuple) else (num_nodes, num_nodes)
        if (edges.num_src_nodes, edges.num_dst_nodes) != sizes:
            have = (edges.num_src_nodes, edges.num_dst_nodes) if edges.is_bipartite else edges.num_src_nodes
            raise ValueError(f"the graph has {have} vertices but the features have {num_nodes} rows")
        return edges
    if not isinstance(edges, torch.Tensor):
        raise TypeError(f"expected an edge_index tensor or a featgraph.Graph, got {type(edges).__name__}")
    if torch.compiler.is_compiling():
        return _traced(edges, num_nodes)
    if _is_pyg_edge_index(edges):
        _check_sparse_size(edges, num_nodes)
    key = _memory(edges)
    entry = _graphs.get(key)
    if entry is not None and entry[0] == num_nodes and _holds(edges, entry[2]):
        _graphs.move_to_end(key)
        return entry[1]
    graph = _from_tensor(edges, num_nodes)
    _graphs[key] = (num_nodes, graph, _reference(edges, graph))
    if len(_graphs) > _REMEMBERED:
        _graphs.popitem(last=False)
    return graph


def _check_sparse_size(edges: torch.Tensor, num_nodes: Sizes) -> None:
    """An ``EdgeIndex``'s ``sparse_size`` (sources, destinations), where it has one, must match the features'."""
    num_src, num_dst = num_nodes if isinstance(num_nodes, tuple) else (num_nodes, num_nodes)
    rows, cols = edges.sparse_size()
    if rows not in (None, num_src) or cols not in (None, num_dst):
        raise ValueError(
            f"edge_index: its sparse_size ({rows}, {cols}) does not match the features: expected "
            f"({num_src}, {num_dst}) (sources, destinations)"
        )


def _traced(edges: torch.Tensor, num_nodes: Sizes) -> GraphRef:
    if edges.layout != torch.strided:
        raise TypeError("under torch.compile a layer takes an edge_index or a featgraph.Graph, not a sparse adj_t")
    if edges.dim() != 2 or edges.shape[0] != 2:
        raise ValueError(f"edge_index must have shape (2, E), got {tuple(edges.shape)}")
    num_src, num_dst = num_nodes if isinstance(num_nodes, tuple) else (num_nodes, num_nodes)
    return GraphRef(edges, num_src, num_dst)


def _memory(edges: torch.Tensor) -> Hashable:
    """What finds a tensor again: its memory, shape and strides (a sparse tensor, or a wrapper subclass whose
    data pointer reads 0: the object itself); a match is confirmed by the contents, so memory that a new
    tensor reuses is never mistaken for the old."""
    if _is_pyg_edge_index(edges):
        edges = edges.as_tensor()
    if edges.layout != torch.strided or edges.data_ptr() == 0:
        return id(edges)
    return edges.data_ptr(), tuple(edges.shape), edges.stride(), edges.dtype, edges.device


def _parts(edges: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The tensors that define the edges: an edge_index's two rows, a sparse tensor's indices and values."""
    if _is_pyg_edge_index(edges):
        edges = edges.as_tensor()
    if edges.layout == torch.strided:
        return tuple(edges)
    if edges.layout == torch.sparse_coo:
        return edges._indices(), edges._values()
    compressed, plain = {
        torch.sparse_csr: (torch.Tensor.crow_indices, torch.Tensor.col_indices),
        torch.sparse_csc: (torch.Tensor.ccol_indices, torch.Tensor.row_indices),
    }[edges.layout]
    return compressed(edges), plain(edges), edges.values()


def _reference(edges: torch.Tensor, graph: Graph) -> tuple[torch.Tensor, ...]:
    """What ``_parts(edges)`` must equal for ``graph`` to stand for it: an edge_index's rows are the graph's
    own source and destination copies (nothing extra kept); a sparse tensor's parts are copied."""
    if edges.layout == torch.strided:
        return graph.coo()
    return tuple(part.detach().clone() for part in _parts(edges))


def _holds(edges: torch.Tensor, reference: tuple[torch.Tensor, ...]) -> bool:
    parts = _parts(edges)
    return len(parts) == len(reference) and all(same_values(a, b) for a, b in zip(parts, reference, strict=True))


def same_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Same values: ``memcmp`` where both are contiguous CPU tensors of one dtype with their own storage, else
    ``torch.equal`` (a wrapper subclass such as PyG's ``EdgeIndex`` reports data pointer 0)."""
    if a.shape != b.shape:
        return False
    direct = a.is_contiguous() and b.is_contiguous() and a.data_ptr() != 0 and b.data_ptr() != 0
    if direct and a.dtype == b.dtype and a.device.type == b.device.type == "cpu":
        return _memcmp(a.data_ptr(), b.data_ptr(), a.numel() * a.element_size()) == 0
    return torch.equal(a, b)


def _from_tensor(edges: torch.Tensor, num_nodes: Sizes) -> Graph:
    """A Graph of ``edges`` in their own order. Edges that come grouped (an ``EdgeIndex`` sorted by row or column,
    a sparse CSR, CSC or coalesced COO ``adj_t``) keep their compressed arrays as the graph's CSR or CSC: a few
    linear passes (copy, range and order checks), no sort."""
    num_src, num_dst = num_nodes if isinstance(num_nodes, tuple) else (num_nodes, num_nodes)
    if _is_pyg_edge_index(edges):
        return _from_pyg_edge_index(edges, num_src, num_dst)
    if edges.layout == torch.strided:
        try:
            return Graph.from_edge_index(edges, num_nodes=num_nodes)
        except (TypeError, ValueError) as error:
            raise type(error)(f"edge_index: {error} (the features have {num_nodes} rows)") from error
    if edges.dim() != 2 or tuple(edges.shape) != (num_dst, num_src):
        raise ValueError(
            f"a sparse adj_t must be ({num_dst}, {num_src}) (destinations x sources), got {tuple(edges.shape)}"
        )
    if edges.layout == torch.sparse_coo:
        edges = edges.coalesce()  # no work for a coalesced tensor: its indices are grouped by row already
        dst, src = edges.indices()
        indptr, values, group = _counting_indptr(dst, num_dst), edges.values(), "dst"
    elif edges.layout == torch.sparse_csr:
        indptr, src, values, group = edges.crow_indices(), edges.col_indices(), edges.values(), "dst"
    elif edges.layout == torch.sparse_csc:
        indptr, dst, values, group = edges.ccol_indices(), edges.row_indices(), edges.values(), "src"
    else:
        raise TypeError(f"adj_t: layout {edges.layout} is not supported (COO, CSR or CSC)")
    if values.requires_grad:  # a Graph keeps a detached copy: the gradient would be dropped
        raise ValueError(
            "adj_t: its values require grad, but a Graph keeps a detached copy of its weights; pass edge_index "
            "and the learnable weights as the layer's edge_weight instead"
        )
    if values.dim() != 1:
        raise ValueError(f"adj_t: expected one value per edge, got values of shape {tuple(values.shape)}")
    _check_indptr(indptr, values.numel(), "adj_t")
    grouped = torch.repeat_interleave(torch.arange(indptr.numel() - 1, device=indptr.device), indptr.diff())
    src, dst = (src, grouped) if group == "dst" else (grouped, dst)
    weighted = values.is_floating_point() and not bool((values == 1).all())
    try:
        return _grouped_graph(src, dst, (num_src, num_dst), values if weighted else None, group, indptr)
    except ValueError as error:
        raise ValueError(f"adj_t: {error}") from error


def _from_pyg_edge_index(edges: torch.Tensor, num_src: int, num_dst: int) -> Graph:
    """The Graph of PyG's ``EdgeIndex``. Sorted by column (its
    destinations) its order is featgraph's CSR, sorted by row its CSC: the indptr it has cached (or one counting
    pass) makes that format, and the other one comes from its cached transpose permutation where it has one
    (``fill_cache_``), else it is built on first use."""
    src, dst = edges.as_tensor()
    if edges.sort_order is None:
        return _from_tensor(edges.as_tensor(), num_src if num_src == num_dst else (num_src, num_dst))
    group = "dst" if edges.is_sorted_by_col else "src"
    keys, size = (dst, num_dst) if group == "dst" else (src, num_src)
    if keys.numel() > 1 and not bool((keys[1:] >= keys[:-1]).all()):
        raise ValueError(f"edge_index: an EdgeIndex with sort_order={edges.sort_order!r} that is not sorted so")
    indptr = edges._indptr
    if indptr is None or indptr.numel() != size + 1:
        indptr = _counting_indptr(keys, size)
    graph = _grouped_graph(src, dst, (num_src, num_dst), None, group, indptr)
    if edges._T_perm is not None and edges._T_perm.numel() == keys.numel():
        _keep_transposed(graph, edges, "csc" if group == "dst" else "csr")
    return graph


def _counting_indptr(keys: torch.Tensor, size: int) -> torch.Tensor:
    """The indptr of sorted ``keys`` over ``size`` groups, by one counting pass."""
    counts = torch.bincount(keys, minlength=size)[:size]
    return torch.cat([counts.new_zeros(1), counts.cumsum(0)])


def _check_indptr(indptr: torch.Tensor, num_edges: int, what: str) -> None:
    if indptr.dim() != 1 or indptr.numel() < 1:
        raise ValueError(f"{what}: its compressed index must be 1-D with at least one entry")
    if int(indptr[0]) != 0 or int(indptr[-1]) != num_edges or bool((indptr.diff() < 0).any()):
        raise ValueError(f"{what}: its compressed index must rise from 0 to its {num_edges} edges without falling")


def _grouped_graph(
    src: torch.Tensor,
    dst: torch.Tensor,
    sizes: tuple[int, int],
    weight: torch.Tensor | None,
    group: str,
    indptr: torch.Tensor,
) -> Graph:
    """The Graph of edges (``src``, ``dst``) in this order, which groups them by ``group`` (``"dst"``: in-edges,
    featgraph's CSR; ``"src"``: out-edges, its CSC) at ``indptr``: that format is the edges in their own order."""
    num_src, num_dst = sizes
    graph = Graph(src, dst, num_src if num_src == num_dst else sizes, weight)
    own_src, own_dst = graph.coo()
    ids = torch.arange(graph.num_edges, device=graph.device)
    name, degrees, other = ("csr", "in_deg", own_src) if group == "dst" else ("csc", "out_deg", own_dst)
    indptr = indptr.to(torch.int64).contiguous()
    graph.cached((name,), lambda: Compressed(indptr, other, ids))
    graph.cached((degrees,), lambda: indptr.diff())
    return graph


def _keep_transposed(graph: Graph, edges: torch.Tensor, name: str) -> None:
    """Make the transpose an ``EdgeIndex`` has cached (``fill_cache_``: its permutation, and the permuted
    endpoints and indptr where it keeps them) the graph's ``name`` format, if it does group the edges (one
    check). Within a group the edges keep PyG's order, which its unstable sort may have shuffled: sums agree
    to rounding."""
    own_src, own_dst = graph.coo()
    perm = edges._T_perm.to(torch.int64)
    by, other = (0, own_dst) if name == "csc" else (1, own_src)  # the endpoint grouped by, the one listed
    cached_keys, cached_other = edges._T_index[by], edges._T_index[1 - by]
    keys = cached_keys if cached_keys is not None else (own_src if by == 0 else own_dst)[perm]
    if keys.numel() > 1 and not bool((keys[1:] >= keys[:-1]).all()):
        return
    size = graph.num_src_nodes if name == "csc" else graph.num_dst_nodes
    indptr = edges._T_indptr
    if indptr is None or indptr.numel() != size + 1:
        indptr = _counting_indptr(keys, size)
    indices = cached_other.to(torch.int64, copy=True) if cached_other is not None else other[perm]
    graph.cached((name,), lambda: Compressed(indptr.to(torch.int64), indices, perm))
