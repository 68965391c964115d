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

from ..graph import Compressed, Graph
from ..graph.graph import GraphRef

try:
    from torch_geometric import EdgeIndex
except ImportError:  # featgraph's core runs without PyG
    EdgeIndex = None

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
    if EdgeIndex is not None and isinstance(edges, EdgeIndex):
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
    if EdgeIndex is not None and isinstance(edges, EdgeIndex):
        edges = edges.as_tensor()
    if edges.layout != torch.strided or edges.data_ptr() == 0:
        return id(edges)
    return edges.data_ptr(), tuple(edges.shape), edges.stride(), edges.dtype, edges.device


def _parts(edges: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The tensors that define the edges: an edge_index's two rows, a sparse tensor's indices and values."""
    if EdgeIndex is not None and isinstance(edges, EdgeIndex):
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
        x_src, x_dst = _SharedPrefix.apply(x_src, graph.num_dst_nodes)
    return x_src, x_dst, graph


class _SharedPrefix(torch.autograd.Function):
    """``(x, x[:n])``: a block's sources and, as their first rows, its destinations. The backward adds the
    destinations' gradient into a copy of the sources' (n rows), where slicing pads it with zeros to x's
    size and then sums two full-size gradients."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:  # noqa: D102
        ctx.set_materialize_grads(False)
        ctx.n, ctx.shape = n, x.shape
        return x.view_as(x), x[:n]

    @staticmethod
    def backward(ctx, grad_all: torch.Tensor | None, grad_prefix: torch.Tensor | None):  # noqa: D102
        if grad_prefix is None:
            return grad_all, None
        grad = grad_prefix.new_zeros(ctx.shape) if grad_all is None else grad_all.clone()
        grad[: ctx.n] += grad_prefix
        return grad, None


def _from_tensor(edges: torch.Tensor, num_nodes: Sizes) -> Graph:
    """A Graph of ``edges`` in their own order. Edges that come grouped (an ``EdgeIndex`` sorted by row or column,
    a sparse CSR, CSC or coalesced COO ``adj_t``) keep their compressed arrays as the graph's CSR or CSC: a few
    linear passes (copy, range and order checks), no sort."""
    num_src, num_dst = num_nodes if isinstance(num_nodes, tuple) else (num_nodes, num_nodes)
    if EdgeIndex is not None and isinstance(edges, EdgeIndex):
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
