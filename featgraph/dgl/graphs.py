"""DGL graph indexes as featgraph graphs, converted once per index object and forgotten with it.

DGL hands its kernels a ``HeteroGraphIndex`` (``gidx``), an immutable handle that a ``DGLGraph`` keeps for its
lifetime (``local_scope`` shares it), so converting it on every call would redo the CSR build each layer.
The index supports weak references but not hashing, so the cache is keyed by ``id`` and each entry is
evicted by its weak reference's callback when DGL frees the index: graphs are never leaked. An index of
several edge types has one graph per relation (``relation_graphs``) and, for the softmax across relations,
one over all of its edges (``merged_graph``). DGL's ``update_all`` and ``apply_edges`` pass a relation slice
(``g[etype]._graph``), a new index on every call made by ``HeteroGraphIndex.get_relation_graph``; while
``featgraph.dgl.use()`` is in effect that method is wrapped (``recording_slices``) to note which index and
relation each slice was cut from, so a slice is served the graph of its parent's relation, built once and
forgotten with the parent. A graph shares DGL's int64 COO arrays (``Graph.borrowed``: DGL never writes them)
instead of copying them.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

import torch

from ..graph import Graph

T = TypeVar("T")
_CACHE: dict[tuple[int, str], tuple[weakref.ref, Any]] = {}
# id(relation slice) -> (the slice, the index it was cut from, the relation's edge type there), weakly held
_SLICES: dict[int, tuple[weakref.ref, weakref.ref, int]] = {}
_LOCK = threading.Lock()


def _forget(table: dict, key: Any, ref: weakref.ref) -> None:
    """Drop ``table[key]`` if it is still the entry ``ref`` belongs to (an id can be reused after a free)."""
    with _LOCK:
        entry = table.get(key)
        if entry is not None and entry[0] is ref:
            del table[key]


def _remembered(gidx: Any, what: str, build: Callable[[], T]) -> T:
    """``build()``, built on the first call for this index object and ``what`` and remembered while it lives."""
    key = (id(gidx), what)
    with _LOCK:
        entry = _CACHE.get(key)
        if entry is not None and entry[0]() is gidx:
            return entry[1]
    value = build()
    ref = weakref.ref(gidx, lambda r, key=key: _forget(_CACHE, key, r))
    with _LOCK:
        _CACHE[key] = (ref, value)
    return value


def _cut_from(gidx: Any, etype: int) -> tuple[Any, int]:
    """The index and edge type whose relation ``gidx``'s edge type ``etype`` is: the parent a relation slice
    was cut from, while that parent lives; else ``gidx`` itself."""
    with _LOCK:
        entry = _SLICES.get(id(gidx))
    if entry is not None and entry[0]() is gidx:
        parent = entry[1]()
        if parent is not None:
            return parent, entry[2]
    return gidx, etype


def remember_slice(relation: Any, parent: Any, etype: int) -> None:
    """Note that index ``relation`` is ``parent``'s edge type ``etype`` alone (a slice of a slice is noted
    against the first parent)."""
    parent, etype = _cut_from(parent, etype)
    key = id(relation)
    ref = weakref.ref(relation, lambda r, key=key: _forget(_SLICES, key, r))
    with _LOCK:
        _SLICES[key] = (ref, weakref.ref(parent), etype)


def recording_slices(get_relation_graph: Callable[[Any, int], Any]) -> Callable[[Any, int], Any]:
    """DGL's ``HeteroGraphIndex.get_relation_graph``, noting each slice it cuts (``remember_slice``)."""

    def get_relation_graph_recorded(self: Any, etype: int) -> Any:
        relation = get_relation_graph(self, etype)
        remember_slice(relation, self, int(etype))
        return relation

    return get_relation_graph_recorded


def _edges(gidx: Any, etype: int = 0) -> tuple[torch.Tensor, torch.Tensor, int | tuple[int, int]]:
    """Edge type ``etype``'s src and dst in DGL's edge-id order and its vertex count (a pair where the edge
    type joins two node types: blocks, relations of a heterograph)."""
    src_type, dst_type = gidx.metagraph.find_edge(etype)
    src, dst = _coo(gidx, etype)
    num_src, num_dst = gidx.number_of_nodes(src_type), gidx.number_of_nodes(dst_type)
    return src, dst, (num_src if src_type == dst_type else (num_src, num_dst))


def _coo(gidx: Any, etype: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Edge type ``etype``'s src and dst in DGL's edge-id order: DGL's COO, or where the graph is restricted to
    CSR or CSC (``g.formats("csc")``, which has no COO to give) read from that and put in edge-id order."""
    allowed = {fmt for formats in gidx.formats().values() for fmt in formats}
    if "coo" in allowed:
        src, dst, _ = gidx.edges(etype, "eid")
        return src, dst
    by_dst = "csc" in allowed
    _, _, indptr, indices, eids = gidx.adjacency_matrix_tensors(etype, by_dst, "csr")
    compressed = torch.repeat_interleave(torch.arange(indptr.numel() - 1, dtype=indptr.dtype), indptr.diff())
    stored = (indices, compressed) if by_dst else (compressed, indices)
    src, dst = (torch.empty_like(ids).index_copy_(0, eids.long(), ids) for ids in stored)
    return src, dst


def _one_edge_type(gidx: Any) -> None:
    if gidx.number_of_etypes() != 1:
        raise ValueError(f"expected a graph index with one edge type, got {gidx.number_of_etypes()}")


def relation_graph(gidx: Any, etype: int) -> Graph:
    """The graph of edge type ``etype`` of ``gidx`` (of the index it was cut from, for a relation slice),
    built once per index object."""
    owner, etype = _cut_from(gidx, etype)
    return _remembered(owner, f"relation {etype}", lambda: Graph.borrowed(*_edges(owner, etype)))


def relation_graphs(gidx: Any) -> tuple[Graph, ...]:
    """One featgraph graph per edge type of ``gidx``, in DGL's edge type order (``relation_graph``)."""
    return tuple(relation_graph(gidx, etype) for etype in range(gidx.number_of_etypes()))


def graph_of(gidx: Any) -> Graph:
    """The featgraph ``Graph`` of a one-edge-type graph index: src and dst in DGL's edge-id order (so edge data
    rows line up), bipartite ``(num_src, num_dst)`` where the edge type joins two node types (blocks); built
    on the first call for this index object (or for the index a relation slice was cut from) and remembered
    while it lives."""
    _one_edge_type(gidx)
    return relation_graph(gidx, 0)


def degrees(gidx: Any, etype: int, direction: str) -> torch.Tensor:
    """In-degrees (``direction="in"``) of edge type ``etype``'s destinations or out-degrees of its sources, in
    DGL's id type, counted from its COO: built once per index object (for a relation slice, per index it was
    cut from) and remembered while it lives."""
    if direction not in ("in", "out"):
        raise ValueError(f"direction must be 'in' or 'out', got {direction!r}")
    owner, etype = _cut_from(gidx, etype)

    def count() -> torch.Tensor:
        src, dst, sizes = _edges(owner, etype)
        num_src, num_dst = sizes if isinstance(sizes, tuple) else (sizes, sizes)
        ids, num_nodes = (dst, num_dst) if direction == "in" else (src, num_src)
        return torch.bincount(ids, minlength=num_nodes).to(ids.dtype)

    return _remembered(owner, f"{direction}-degrees {etype}", count)


def merged_graph(gidx: Any, by: str) -> Graph:
    """Every edge of ``gidx`` in one graph over all its vertices, as ``dgl.to_homogeneous`` numbers them (each
    node type's ids after those of the types before it; the edges relation after relation in DGL's edge-id
    order), reversed for ``by="src"``: a softmax over each vertex's in-edges is then the softmax across the
    relations that share it as destination (or source). Built once per index object."""
    if by not in ("dst", "src"):
        raise ValueError(f"by must be 'dst' or 'src', got {by!r}")

    def build() -> Graph:
        counts = [gidx.number_of_nodes(ntype) for ntype in range(gidx.number_of_ntypes())]
        offsets = [sum(counts[:ntype]) for ntype in range(len(counts))]
        srcs, dsts = [], []
        for etype in range(gidx.number_of_etypes()):
            src_type, dst_type = gidx.metagraph.find_edge(etype)
            src, dst = _coo(gidx, etype)
            srcs.append(src + offsets[src_type])
            dsts.append(dst + offsets[dst_type])
        src, dst = torch.cat(srcs), torch.cat(dsts)
        return Graph(src, dst, sum(counts)) if by == "dst" else Graph(dst, src, sum(counts))

    return _remembered(gidx, f"merged by {by}", build)


def cached_count() -> int:
    """How many graph indexes have featgraph graphs remembered (for checking that none leak)."""
    with _LOCK:
        return len({key[0] for key in _CACHE})


def clear() -> None:
    """Forget every remembered graph."""
    with _LOCK:
        _CACHE.clear()
        _SLICES.clear()
