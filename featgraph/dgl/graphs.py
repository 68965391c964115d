"""DGL graph indexes as featgraph graphs, converted once per index object and forgotten with it.

DGL hands its kernels a ``HeteroGraphIndex`` (``gidx``), an immutable handle that a ``DGLGraph`` keeps for its
lifetime (``local_scope`` shares it), so converting it on every call would redo the CSR build each layer.
The index supports weak references but not hashing, so the cache is keyed by ``id`` and each entry is
evicted by its weak reference's callback when DGL frees the index: graphs are never leaked.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from ..graph import Graph

_CACHE: dict[int, tuple[weakref.ref, Graph]] = {}
_LOCK = threading.Lock()


def _evict(key: int, ref: weakref.ref) -> None:
    """Drop ``key``'s entry if it is still the one ``ref`` belongs to (an id can be reused after a free)."""
    with _LOCK:
        entry = _CACHE.get(key)
        if entry is not None and entry[0] is ref:
            del _CACHE[key]


def convert(gidx: Any) -> Graph:
    """The featgraph ``Graph`` of a one-edge-type graph index: src and dst in DGL's edge-id order (so edge data
    rows line up), bipartite ``(num_src, num_dst)`` where the edge type joins two node types (blocks)."""
    if gidx.number_of_etypes() != 1:
        raise ValueError(f"expected a graph index with one edge type, got {gidx.number_of_etypes()}")
    src_type, dst_type = gidx.metagraph.find_edge(0)
    src, dst, _ = gidx.edges(0, "eid")
    num_src, num_dst = gidx.number_of_nodes(src_type), gidx.number_of_nodes(dst_type)
    num_nodes: int | tuple[int, int] = num_src if src_type == dst_type else (num_src, num_dst)
    return Graph(src, dst, num_nodes)


def graph_of(gidx: Any) -> Graph:
    """``convert(gidx)``, built on the first call for this index object and remembered while it lives."""
    key = id(gidx)
    with _LOCK:
        entry = _CACHE.get(key)
        if entry is not None and entry[0]() is gidx:
            return entry[1]
    graph = convert(gidx)
    ref = weakref.ref(gidx, lambda r, key=key: _evict(key, r))
    with _LOCK:
        _CACHE[key] = (ref, graph)
    return graph


def cached_count() -> int:
    """How many graph indexes have a featgraph graph remembered (for checking that none leak)."""
    with _LOCK:
        return len(_CACHE)


def clear() -> None:
    """Forget every remembered graph."""
    with _LOCK:
        _CACHE.clear()
