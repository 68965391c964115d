"""DGL graph indexes as featgraph graphs, converted once per index object and forgotten with it.

DGL hands its kernels a ``HeteroGraphIndex`` (``gidx``), an immutable handle that a ``DGLGraph`` keeps for its
lifetime (``local_scope`` shares it), so converting it on every call would redo the CSR build each layer.
The index supports weak references but not hashing, so the cache is keyed by ``id`` and each entry is
evicted by its weak reference's callback when DGL frees the index: graphs are never leaked. DGL's
``update_all`` and ``apply_edges`` pass a relation slice (``g[etype]._graph``), a new index on every call over
the same edge arrays; those are found again by the arrays' addresses among the last ``SLICES`` graphs, whose
edge arrays the cache holds so no address is reused while its entry lives.
"""

from __future__ import annotations

import collections
import threading
import weakref
from typing import Any

import torch

from ..graph import Graph

_CACHE: dict[int, tuple[weakref.ref, Graph]] = {}
SLICES = 32
# (source address, destination address, edges, sources, destinations) -> (the edge arrays, kept alive; graph)
_BY_ARRAYS: collections.OrderedDict[tuple, tuple[tuple[torch.Tensor, torch.Tensor], Graph]] = collections.OrderedDict()
_LOCK = threading.Lock()


def _evict(key: int, ref: weakref.ref) -> None:
    """Drop ``key``'s entry if it is still the one ``ref`` belongs to (an id can be reused after a free)."""
    with _LOCK:
        entry = _CACHE.get(key)
        if entry is not None and entry[0] is ref:
            del _CACHE[key]


def _edges(gidx: Any) -> tuple[torch.Tensor, torch.Tensor, int | tuple[int, int]]:
    """A one-edge-type index's src and dst in DGL's edge-id order and its vertex count (a pair where the edge
    type joins two node types: blocks)."""
    if gidx.number_of_etypes() != 1:
        raise ValueError(f"expected a graph index with one edge type, got {gidx.number_of_etypes()}")
    src_type, dst_type = gidx.metagraph.find_edge(0)
    src, dst, _ = gidx.edges(0, "eid")
    num_src, num_dst = gidx.number_of_nodes(src_type), gidx.number_of_nodes(dst_type)
    return src, dst, (num_src if src_type == dst_type else (num_src, num_dst))


def convert(gidx: Any) -> Graph:
    """The featgraph ``Graph`` of a one-edge-type graph index: src and dst in DGL's edge-id order (so edge data
    rows line up), bipartite ``(num_src, num_dst)`` where the edge type joins two node types (blocks)."""
    src, dst, num_nodes = _edges(gidx)
    return Graph(src, dst, num_nodes)


def graph_of(gidx: Any) -> Graph:
    """``convert(gidx)``, built on the first call for this index object (or for another index over the same
    edge arrays: a relation slice) and remembered while it lives."""
    key = id(gidx)
    with _LOCK:
        entry = _CACHE.get(key)
        if entry is not None and entry[0]() is gidx:
            return entry[1]
    src, dst, num_nodes = _edges(gidx)
    arrays = (src.data_ptr(), dst.data_ptr(), src.numel(), num_nodes, src.dtype, src.device)
    with _LOCK:
        found = _BY_ARRAYS.get(arrays)
        if found is not None:
            _BY_ARRAYS.move_to_end(arrays)
    graph = found[1] if found is not None else Graph(src, dst, num_nodes)
    ref = weakref.ref(gidx, lambda r, key=key: _evict(key, r))
    with _LOCK:
        _CACHE[key] = (ref, graph)
        if found is None and src.numel():  # an empty graph's arrays have no address to find it by
            _BY_ARRAYS[arrays] = ((src, dst), graph)
            while len(_BY_ARRAYS) > SLICES:
                _BY_ARRAYS.popitem(last=False)
    return graph


def cached_count() -> int:
    """How many graph indexes have a featgraph graph remembered (for checking that none leak)."""
    with _LOCK:
        return len(_CACHE)


def clear() -> None:
    """Forget every remembered graph."""
    with _LOCK:
        _CACHE.clear()
        _BY_ARRAYS.clear()
