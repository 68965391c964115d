"""Turn a layer's graph argument (PyG ``edge_index``, a torch sparse ``adj_t`` or a ``Graph``) into a ``Graph``.

A training loop passes the same ``edge_index`` tensor every epoch; its ``Graph`` (and with it the formats,
normalisation data and compiled kernels cached on the graph) is remembered while that tensor holds the same
edges, so per-graph preprocessing happens once, not once per epoch. A tensor is found again by its memory (data
pointer, shape, strides), so featgraph's operators, given the same tensor inside compiled code, find the same
graph; an ``edge_index`` traced by ``torch.compile`` becomes a ``GraphRef`` that those operators resolve
here when they run, so tracing builds nothing. "The same edges" is
checked at every call against the graph's own copy: edits through ``.data`` or numpy do not move torch's
version counter, so the counter cannot tell. On CPU the check is one ``memcmp`` (1.5M edges, on this
2-core VM under other jobs' load: 1.9 ms alone, 3.6 ms right after a layer's OpenMP kernels, against
15-33 ms for a GCNConv forward at d=32 and 48-110 ms for its forward + backward; splitting it among
threads gained nothing next to the kernels' spinning OpenMP threads).
"""

from __future__ import annotations

import ctypes
from collections import OrderedDict
from collections.abc import Hashable

import torch

from ..graph import Graph
from ..graph.graph import GraphRef

GraphLike = torch.Tensor | Graph | GraphRef
PairTensor = torch.Tensor | tuple[torch.Tensor, torch.Tensor | None]
Sizes = int | tuple[int, int]
_REMEMBERED = 16
# the tensor's memory -> (num_nodes, its graph, what its contents must equal)
_graphs: OrderedDict[Hashable, tuple[Sizes, Graph, tuple[torch.Tensor, ...]]] = OrderedDict()
_memcmp = ctypes.CDLL(None).memcmp
_memcmp.argtypes, _memcmp.restype = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t), ctypes.c_int


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
    if edges.layout != torch.strided or edges.data_ptr() == 0:
        return id(edges)
    return edges.data_ptr(), tuple(edges.shape), edges.stride(), edges.dtype, edges.device


def _parts(edges: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The tensors that define the edges: an edge_index's two rows, a sparse tensor's indices and values."""
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
    return len(parts) == len(reference) and all(_equal(a, b) for a, b in zip(parts, reference, strict=True))


def _equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Same values: ``memcmp`` where both are contiguous CPU tensors of one dtype with their own storage, else
    ``torch.equal`` (a wrapper subclass such as PyG's ``EdgeIndex`` reports data pointer 0)."""
    if a.shape != b.shape:
        return False
    direct = a.is_contiguous() and b.is_contiguous() and a.data_ptr() != 0 and b.data_ptr() != 0
    if direct and a.dtype == b.dtype and a.device.type == b.device.type == "cpu":
        return _memcmp(a.data_ptr(), b.data_ptr(), a.numel() * a.element_size()) == 0
    return torch.equal(a, b)


def split_input(
    x: PairTensor, edges: GraphLike, size: tuple[int, int] | None = None
) -> tuple[torch.Tensor, torch.Tensor | None, Graph]:
    """A layer's ``(x_src, x_dst, graph)`` from PyG's forms: ``x`` one tensor (one vertex set; or the sources
    of a bipartite graph, whose destinations are its first rows, as in DGL's and featgraph's sampled blocks)
    or a pair ``(x_src, x_dst)`` (``x_dst`` None: the destinations' features are not given); ``size``
    PyG's ``(num_src, num_dst)``. ``x_dst`` is None only where the pair gave None."""
    pair = isinstance(x, (tuple, list))
    if pair and len(x) != 2:
        raise ValueError(f"x: expected a tensor or a pair (x_src, x_dst), got {len(x)} items")
    x_src, x_dst = x if pair else (x, None)
    if not isinstance(x_src, torch.Tensor):
        raise TypeError(f"x: expected a tensor or a pair of tensors, got {type(x_src).__name__}")
    if size is not None:
        if len(size) != 2 or size[0] != x_src.shape[0]:
            raise ValueError(f"size={tuple(size)}: expected (num_src, num_dst), num_src = x's {x_src.shape[0]} rows")
        sizes: Sizes = (int(size[0]), int(size[1]))
    elif isinstance(edges, Graph):
        sizes = (edges.num_src_nodes, edges.num_dst_nodes)
    elif pair:
        sizes = (x_src.shape[0], x_src.shape[0] if x_dst is None else x_dst.shape[0])
    else:
        sizes = x_src.shape[0]
    if isinstance(sizes, tuple) and sizes[0] == sizes[1]:
        sizes = sizes[0]
    graph = as_graph(edges, sizes)
    if x_src.shape[0] != graph.num_src_nodes:
        raise ValueError(f"x: expected {graph.num_src_nodes} rows (the graph's sources), got {x_src.shape[0]}")
    if x_dst is not None and x_dst.shape[0] != graph.num_dst_nodes:
        raise ValueError(f"x_dst: expected {graph.num_dst_nodes} rows (the destinations), got {x_dst.shape[0]}")
    if not pair:
        x_dst = x_src[: graph.num_dst_nodes]
    return x_src, x_dst, graph


def _from_tensor(edges: torch.Tensor, num_nodes: Sizes) -> Graph:
    if edges.layout == torch.strided:
        try:
            return Graph.from_edge_index(edges, num_nodes=num_nodes)
        except (TypeError, ValueError) as error:
            raise type(error)(f"edge_index: {error} (the features have {num_nodes} rows)") from error
    rows, cols = (num_nodes[1], num_nodes[0]) if isinstance(num_nodes, tuple) else (num_nodes, num_nodes)
    if edges.dim() != 2 or tuple(edges.shape) != (rows, cols):
        raise ValueError(f"a sparse adj_t must be ({rows}, {cols}) (destinations x sources), got {tuple(edges.shape)}")
    coo = edges.to_sparse_coo().coalesce()
    dst, src = coo.indices()
    values = coo.values()
    if values.requires_grad:  # a Graph keeps a detached copy: the gradient would be dropped
        raise ValueError(
            "adj_t: its values require grad, but a Graph keeps a detached copy of its weights; pass edge_index "
            "and the learnable weights as the layer's edge_weight instead"
        )
    weighted = values.is_floating_point() and not bool((values == 1).all())
    return Graph(src, dst, num_nodes, values if weighted else None)
