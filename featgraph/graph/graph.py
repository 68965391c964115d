"""``Graph``: the one graph object every featgraph kernel takes.

It holds the edges in the user's order (COO) and builds every other view on first use, once: CSR (in-edges
grouped by destination), CSC (out-edges grouped by source), degrees, a degree-sorted vertex order, the
Hilbert order of edges, 1D source partitions and the tensor-core translation. Input is validated once, here.
"""

from __future__ import annotations

import ctypes
import hashlib
import warnings
import weakref
from collections.abc import Callable
from functools import cache
from typing import Any, NamedTuple

import numpy as np
import torch

from . import interop
from .formats import Compressed, compress, groups_ascend, index_dtype_for, with_loops
from .hilbert import hilbert_edge_order
from .partition import HubPartition, SourcePartitions, partition_hubs, partition_sources, partition_sources_by_id
from .reorder import inverse_order, locality_order
from .tc_translation import TCTranslation, translate

EDGE_ORDERS = ("user", "csr", "csc", "hilbert")


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc: nothing to do
        return None


# Builds for smaller graphs (a mini-batch's blocks) skip the trim: their temporaries are small, and trimming
# after each of a training step's builds would hand back pages that the next batch faults in again.
TRIM_MIN_EDGES = 1_000_000


def release_freed_heap() -> None:
    """Hand the C heap's free pages back to the OS (glibc ``malloc_trim``). Building a format or a kernel
    frees large temporaries that glibc would otherwise keep mapped under the long-lived result, and the
    training that follows stacks its working set on top (peak memory: ``featgraph bench train``)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def _index_vector(values: Any, what: str) -> torch.Tensor:
    tensor = torch.as_tensor(values)
    if tensor.dtype == torch.bool or tensor.is_floating_point() or tensor.is_complex():
        raise TypeError(f"{what} must hold integer node ids, got dtype {tensor.dtype}")
    return tensor


# what a pickled or moved graph keeps of its cache: formats and degrees (tensors), not kernels or derived graphs
_CARRIED_CACHE = ("csr", "csc", "in_deg", "out_deg")
# a graph's own (2, E) edge tensors (the operators' token and ``edge_index``) by memory, layout and vertex
# counts -> the graph
_OWNERS: weakref.WeakValueDictionary[tuple, Graph] = weakref.WeakValueDictionary()


def _owner_key(edges: torch.Tensor, num_src: int, num_dst: int) -> tuple:
    """What finds a graph by one of its own edge tensors: the same memory read the same way, same vertex counts."""
    return edges.data_ptr(), tuple(edges.shape), edges.stride(), edges.dtype, edges.device, num_src, num_dst


class GraphRef(NamedTuple):
    """A graph as compiled code carries it: its own (2, E) edge tensor and vertex counts (and whether the
    operator is to add one self loop per vertex), which featgraph's registered operators take and resolve
    back to the ``Graph`` with its cached formats and kernels when they run. Traced code never looks inside
    a ``Graph``'s caches, so tracing runs no data-dependent Python; see ``featgraph.operator``."""

    edge_index: torch.Tensor
    num_src_nodes: int
    num_dst_nodes: int
    edge_weight: torch.Tensor | None = None
    self_loops: bool = False

    @property
    def num_edges(self) -> int | None:
        """None where self loops are still to be added: the count is known when an operator runs."""
        return None if self.self_loops else self.edge_index.shape[1]

    @property
    def num_nodes(self) -> int:
        if self.is_bipartite:
            raise ValueError("this graph is bipartite: use num_src_nodes / num_dst_nodes")
        return self.num_src_nodes

    @property
    def is_bipartite(self) -> bool:
        return self.num_src_nodes != self.num_dst_nodes

    @property
    def device(self) -> torch.device:
        return self.edge_index.device

    def in_degrees(self) -> torch.Tensor:
        """``Graph.in_degrees`` through the ``featgraph::in_degrees`` operator."""
        return torch.ops.featgraph.in_degrees(self.edge_index, self.num_src_nodes, self.num_dst_nodes, self.self_loops)

    def with_self_loops(self, fill_weight: float = 1.0) -> GraphRef:
        """``Graph.with_self_loops`` for the operator to apply (unweighted loops only)."""
        if fill_weight != 1.0:
            raise ValueError(f"compiled code adds self loops of weight 1 only, got fill_weight={fill_weight}")
        return GraphRef(self.edge_index, self.num_src_nodes, self.num_dst_nodes, None, True)


def _sizes(num_nodes: Any) -> tuple[int, int]:
    """(num_src, num_dst) from ``num_nodes``: one int for both, a pair for a bipartite graph."""
    pair = tuple(num_nodes) if isinstance(num_nodes, (tuple, list)) else (num_nodes, num_nodes)
    if len(pair) != 2 or any(isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0 for n in pair):
        raise ValueError(
            f"num_nodes must be a non-negative int or a pair (num_src, num_dst) of them, got {num_nodes!r}"
        )
    return int(pair[0]), int(pair[1])


def _check_pair(src: torch.Tensor, dst: torch.Tensor) -> None:
    if src.dim() != 1 or dst.dim() != 1 or src.shape != dst.shape:
        raise ValueError(
            f"src and dst must be 1-D of equal length, got shapes {tuple(src.shape)} and {tuple(dst.shape)}"
        )
    if src.device != dst.device:
        raise ValueError(f"src and dst on different devices: {src.device} and {dst.device}")


def _checked_sizes(src: torch.Tensor, dst: torch.Tensor, num_nodes: Any) -> tuple[int, int]:
    """(num_src, num_dst) for int64 edges ``src -> dst``: from ``num_nodes`` (one int or a pair) or the largest
    id, every id checked to be in range."""
    num_edges = src.numel()
    smallest = int(torch.minimum(src.min(), dst.min())) if num_edges else 0
    if smallest < 0:
        raise ValueError(f"negative node id {smallest} in the edges")
    largest = (int(src.max()), int(dst.max())) if num_edges else (-1, -1)
    sizes = _sizes(num_nodes) if num_nodes is not None else (max(largest) + 1,) * 2
    if sizes[0] == sizes[1]:
        if max(largest) >= sizes[0]:
            raise ValueError(f"node id {max(largest)} out of range for num_nodes={sizes[0]}")
    else:
        for role, top, size in zip(("source", "destination"), largest, sizes, strict=True):
            if top >= size:
                raise ValueError(f"{role} id {top} out of range for num_nodes={sizes} (num_src, num_dst)")
    return sizes


class Graph:
    """A directed multigraph; edge ``e`` goes ``src[e] -> dst[e]``. ``num_nodes`` is one vertex count, or a
    pair ``(num_src, num_dst)`` for a bipartite graph whose sources and destinations are separate vertex
    sets (a sampled mini-batch block: its destinations are the first ``num_dst`` of its sources).

    Messages flow along edges, so aggregation at vertex ``v`` reduces over its in-edges (PyG's
    convention: ``edge_index[0]`` is the source, ``edge_index[1]`` the destination). Self loops,
    duplicate edges and isolated vertices are kept as given.
    """

    def __init__(
        self,
        src: Any,
        dst: Any,
        num_nodes: int | tuple[int, int] | None = None,
        edge_weight: Any | None = None,
    ) -> None:
        src_t, dst_t = _index_vector(src, "src"), _index_vector(dst, "dst")
        _check_pair(src_t, dst_t)
        # one fresh (2, E) copy, so the caller's tensors are never aliased and ``edge_index`` costs nothing
        edges = torch.stack([src_t.to(torch.int64), dst_t.to(torch.int64)])
        src_t, dst_t = edges[0], edges[1]
        sizes = _checked_sizes(src_t, dst_t, num_nodes)
        self._src, self._dst = src_t, dst_t
        self._num_src, self._num_dst = sizes
        self._edge_weight = None if edge_weight is None else self._validated_weight(edge_weight)
        self._cache: dict[tuple, Any] = {}
        self._edges = self._own(edges)

    @classmethod
    def _derived(
        cls, src: torch.Tensor, dst: torch.Tensor, sizes: tuple[int, int], edge_weight: torch.Tensor | None
    ) -> Graph:
        """A graph made from this class's own (already validated, never exposed for writing) tensors:
        shares them instead of copying, so derived graphs (reverse, looped) cost no second copy."""
        graph = cls.__new__(cls)
        graph._src, graph._dst, graph._edge_weight = src, dst, edge_weight
        graph._num_src, graph._num_dst = sizes
        graph._cache = {}
        graph._edges = None  # the operators' token, made on first use (``_token``)
        return graph

    @classmethod
    def borrowed(cls, src: torch.Tensor, dst: torch.Tensor, num_nodes: int | tuple[int, int]) -> Graph:
        """A graph over int64 edge arrays that another library keeps and never writes (DGL's COO): shared, not
        copied, and trusted to hold valid ids (only their shapes are checked). Its operator token is a (2, E)
        copy in the graph's index type (half the int64 pair where ids fit int32), which edge templates read as
        their COO too. Arrays of another type are copied as ``Graph(src, dst, num_nodes)`` copies them."""
        _check_pair(src, dst)
        if src.dtype != torch.int64 or dst.dtype != torch.int64:
            return cls(src, dst, num_nodes)
        return cls._derived(src, dst, _sizes(num_nodes), None)

    def _own(self, edges: torch.Tensor) -> torch.Tensor:
        """Make ``edges`` (2, E) one of this graph's own edge tensors, which ``owning`` finds it by."""
        _OWNERS[_owner_key(edges, self._num_src, self._num_dst)] = self
        return edges

    def _token(self) -> torch.Tensor:
        """The (2, E) edge tensor featgraph's operators carry for this graph (``GraphRef``): its ``edge_index`` for
        a graph made from the caller's edges; for a graph made from others' arrays or derived from another
        graph (reversed, looped, moved, borrowed), a copy in ``index_dtype``, made on first use."""
        if self._edges is None:
            token = torch.empty((2, self.num_edges), dtype=self.index_dtype, device=self.device)
            token[0].copy_(self._src)
            token[1].copy_(self._dst)
            self._edges = self._own(token)
        return self._edges

    def __getstate__(self) -> dict:
        """The graph with its formats and degrees (a copy in another process, e.g. a loader's worker, builds the
        rest again where it needs them)."""
        state = dict(self.__dict__)
        state["_cache"] = {key: value for key, value in self._cache.items() if key[0] in _CARRIED_CACHE}
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if self._edges is not None:
            self._own(self._edges)

    @classmethod
    def owning(cls, edge_index: torch.Tensor, num_src: int, num_dst: int) -> Graph | None:
        """The live graph whose own edge tensor (its operator token or ``edge_index``) is this very tensor (same
        memory read the same way; a graph never writes it, so its caches hold), else None."""
        return _OWNERS.get(_owner_key(edge_index, num_src, num_dst))

    def _validated_weight(self, edge_weight: Any) -> torch.Tensor:
        weight = torch.as_tensor(edge_weight)
        if not weight.is_floating_point():
            raise TypeError(f"edge_weight must be a floating tensor, got dtype {weight.dtype}")
        if weight.requires_grad:  # the graph keeps a detached copy, which would drop the gradient silently
            raise ValueError(
                "edge_weight requires grad, but a Graph keeps a detached copy of its weights; pass a learnable "
                "weight to the layer or op at each call instead (GCNConv()(x, graph, edge_weight=w), "
                "ops.gcn_aggregate(graph, x, w))"
            )
        if weight.shape != (self.num_edges,):
            raise ValueError(f"edge_weight must have shape ({self.num_edges},), got {tuple(weight.shape)}")
        if weight.device != self._src.device:
            raise ValueError(f"edge_weight on {weight.device} but the edges are on {self._src.device}")
        if not bool(torch.isfinite(weight).all()):
            raise ValueError("edge_weight holds non-finite values (nan or inf)")
        return weight.detach().clone()

    # ---- constructors -------------------------------------------------------------------------
    @classmethod
    def from_edge_index(
        cls,
        edge_index: Any,
        num_nodes: int | tuple[int, int] | None = None,
        edge_weight: Any | None = None,
        size: tuple[int, int] | None = None,
    ) -> Graph:
        """From PyG's ``edge_index``: a 2 x E integer tensor, row 0 sources, row 1 destinations; ``size``
        (PyG's name) or ``num_nodes`` as a pair makes it bipartite: ``(num_src, num_dst)``."""
        index = torch.as_tensor(edge_index)
        if index.dim() != 2 or index.shape[0] != 2:
            raise ValueError(f"edge_index must have shape (2, E), got {tuple(index.shape)}")
        if size is not None and num_nodes is not None:
            raise TypeError("from_edge_index takes num_nodes or size, not both")
        return cls(index[0], index[1], num_nodes if size is None else tuple(size), edge_weight)

    @classmethod
    def from_csr(
        cls,
        indptr: torch.Tensor,
        indices: torch.Tensor,
        num_src: int,
        edge_weight: Any | None = None,
        check: bool = True,
        edge_index: torch.Tensor | None = None,
        narrow_csr: Compressed | None = None,
    ) -> Graph:
        """From a CSR of in-edges (``indptr`` over the ``len(indptr) - 1`` destinations, ``indices`` their
        sources), as a sampler builds it: the edges' user order is the CSR order, and the CSR is kept as
        the graph's own, so kernels build no format for it. ``check=False`` trusts the tensors (int64,
        contiguous, valid: featgraph's sampler builds them so) instead of checking them, and shares ``indptr``.
        ``edge_index``: the same edges as a contiguous int64 (2, E) tensor whose rows are ``indices`` and each
        edge's destination (trusted, so only with ``check=False``: featgraph's samplers write it so), which
        becomes the graph's own instead of being built from ``indptr``.
        ``narrow_csr``: the same CSR in int32 (trusted, so only with ``check=False``: featgraph's sampler writes
        it beside the int64 one), kept as the graph's int32 CSR, which kernels read."""
        if (edge_index is not None or narrow_csr is not None) and check:
            raise ValueError(
                "edge_index and narrow_csr are trusted as given (featgraph's sampler builds them): pass them with "
                "check=False"
            )
        indptr, indices = torch.as_tensor(indptr), torch.as_tensor(indices)
        if check:
            if indptr.dim() != 1 or indptr.numel() < 1 or indices.dim() != 1:
                raise ValueError("indptr must be 1-D with at least one entry and indices 1-D")
            if int(indptr[0]) != 0 or int(indptr[-1]) != indices.numel() or bool((indptr[1:] < indptr[:-1]).any()):
                raise ValueError(
                    f"indptr must rise from 0 to len(indices)={indices.numel()} without falling, got "
                    f"{indptr[0].item()}..{indptr[-1].item()}"
                )
        num_dst = indptr.numel() - 1
        counts = indptr[1:] - indptr[:-1]
        if edge_index is None:
            rows = torch.arange(num_dst, device=indptr.device)
            dst = torch.repeat_interleave(rows, counts, output_size=indices.numel())
        if check:
            graph = cls(indices, dst, (num_src, num_dst), edge_weight)
        else:
            edges = torch.stack([indices, dst]) if edge_index is None else edge_index
            graph = cls._derived(edges[0], edges[1], (num_src, num_dst), edge_weight)
            graph._edges = graph._own(edges)
        ids = torch.arange(indices.numel(), device=indptr.device)
        graph._cache[("csr",)] = Compressed(indptr.to(torch.int64).contiguous(), graph._src, ids)
        graph._cache[("in_deg",)] = counts.to(torch.int64)
        if narrow_csr is not None:
            graph._cache[("csr", torch.int32)] = narrow_csr
        return graph

    @classmethod
    def from_scipy(cls, matrix: Any, weighted: bool = True) -> Graph:
        """From a square scipy sparse matrix (any format); entry (i, j) is the edge j -> i, so row i
        aggregates its in-neighbours as in ``A @ X``. Stored values become edge weights."""
        return cls(**interop.from_scipy(matrix, weighted))

    @classmethod
    def from_networkx(cls, nx_graph: Any, weight: str | None = None) -> Graph:
        """From a networkx graph whose nodes are 0..n-1; undirected edges become two directed ones."""
        return cls(**interop.from_networkx(nx_graph, weight))

    @classmethod
    def from_pyg(cls, data: Any) -> Graph:
        """From a PyG ``Data`` (its ``edge_index``, ``num_nodes`` and ``edge_weight`` if present)."""
        return cls(**interop.from_pyg(data))

    @classmethod
    def from_dgl(cls, dgl_graph: Any) -> Graph:
        """From a DGL graph or block, keeping DGL's edge ids as the user order; several edge types are merged as
        ``dgl.to_homogeneous`` merges them (bipartite where every relation runs from some vertex types to
        others, and for blocks)."""
        return cls(**interop.from_dgl(dgl_graph))

    # ---- basic facts --------------------------------------------------------------------------
    @property
    def num_nodes(self) -> int:
        """The vertex count of a graph with one vertex set; a bipartite graph has two (``num_src_nodes``,
        ``num_dst_nodes``) and raises here."""
        if self._num_src != self._num_dst:
            raise ValueError(
                f"this graph is bipartite ({self._num_src} sources, {self._num_dst} destinations): "
                "use num_src_nodes / num_dst_nodes"
            )
        return self._num_src

    @property
    def num_src_nodes(self) -> int:
        """Rows of source (``src``-indexed) vertex data."""
        return self._num_src

    @property
    def num_dst_nodes(self) -> int:
        """Rows of destination (``dst``-indexed) vertex data, and of an aggregation's output."""
        return self._num_dst

    @property
    def is_bipartite(self) -> bool:
        """Whether sources and destinations are vertex sets of different sizes."""
        return self._num_src != self._num_dst

    @property
    def num_edges(self) -> int:
        return self._src.numel()

    @property
    def device(self) -> torch.device:
        return self._src.device

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Graph:
        """This graph on ``device`` (itself where it is there already), as PyG's ``Data.to``: the edges, weights
        and the formats and degrees already built (a sampled block's CSR, its graph with self loops) are copied
        once, so a GPU step does not sort them again; kernels are built there on first use."""
        device = torch.device(device)
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        if self.device == device:
            return self
        return self._mapped(lambda t: t.to(device, non_blocking=non_blocking))

    def pin_memory(self) -> Graph:
        """This graph with its edges and weights in page-locked memory, so ``to("cuda", non_blocking=True)``
        copies them while the host goes on (PyG's ``Data.pin_memory``)."""
        return self._mapped(torch.Tensor.pin_memory)

    def _mapped(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> Graph:
        """A graph of ``fn`` of this one's edges and weights, with ``fn`` of the formats and degrees it has built
        and of its graph with self loops, if built (kernels and other derived graphs are built again)."""
        weight = None if self._edge_weight is None else fn(self._edge_weight)
        graph = type(self)._derived(fn(self._src), fn(self._dst), (self._num_src, self._num_dst), weight)
        for key, value in self._cache.items():
            if key[0] in _CARRIED_CACHE:
                graph._cache[key] = fn(value) if isinstance(value, torch.Tensor) else type(value)(*map(fn, value))
            elif key[0] == "with_self_loops":
                graph._cache[key] = value._mapped(fn)
        return graph

    @property
    def edge_weight(self) -> torch.Tensor | None:
        return self._edge_weight

    @property
    def edge_index(self) -> torch.Tensor:
        """PyG's (2, E) int64 ``edge_index`` in the user's edge order: the graph's own tensor (read, never write),
        made once where the operators' token is in a narrower type."""
        token = self._token()
        if token.dtype == torch.int64:
            return token
        return self.cached(("edge_index",), lambda: self._own(torch.stack(self.coo())))

    def ref(self) -> GraphRef:
        """This graph as compiled code carries it into featgraph's operators (see ``GraphRef``)."""
        return GraphRef(self._token(), self._num_src, self._num_dst, self._edge_weight)

    @property
    def index_dtype(self) -> torch.dtype:
        """Index type for kernels: int32 while every id and edge offset fits, else int64."""
        return index_dtype_for(max(self._num_src, self._num_dst), self.num_edges)

    def __repr__(self) -> str:
        weighted = ", weighted" if self._edge_weight is not None else ""
        nodes = (self._num_src, self._num_dst) if self.is_bipartite else self._num_src
        return f"Graph(num_nodes={nodes}, num_edges={self.num_edges}, device={self.device}{weighted})"

    def cached(self, key: tuple, build: Callable[[], Any]) -> Any:
        """Per-graph memo: ``build()`` once per ``key``. Holds the derived formats and the compiled kernels
        that ops bind to this graph, so a training loop builds each of them once."""
        if key not in self._cache:
            self._cache[key] = build()
            if self.num_edges >= TRIM_MIN_EDGES:
                release_freed_heap()
        return self._cache[key]

    # ---- formats ------------------------------------------------------------------------------
    def coo(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(src, dst) in the user's edge order."""
        return self._src, self._dst

    def coo_row(self, row: int, index_dtype: torch.dtype) -> torch.Tensor:
        """The sources (``row`` 0) or destinations (1) in the user's edge order as ``index_dtype``: the graph's own
        array where it has one of that type (its COO, or its operator token's row), else a converted copy."""
        own = self._src if row == 0 else self._dst
        if own.dtype == index_dtype:
            return own
        if self._edges is None and index_dtype == self.index_dtype:
            self._token()  # made in this type: its rows serve
        if self._edges is not None and self._edges.dtype == index_dtype:
            return self._edges[row]
        return own.to(index_dtype).contiguous()

    def csr(self, index_dtype: torch.dtype = torch.int64, in_id_order: bool = False) -> Compressed:
        """In-edges grouped by destination: ``indices`` are sources, ``edge_ids`` user edge ids. A row lists
        its edges in id order in the int64 CSR and, on the CPU, by source in the narrower one kernels read
        (so every count of source segments shares it); ``in_id_order`` asks for id order in any type (max
        and min kernels, whose ties go to a row's first edge): a second copy only where the first is not so."""
        if not in_id_order:
            return self._compressed("csr", self._dst, self._src, self._num_dst, index_dtype)

        def by_id() -> Compressed:  # the CSR built already where its rows keep id order, else one that does
            built = self._cache.get(("csr",) if index_dtype == torch.int64 else ("csr", index_dtype))
            if built is not None and groups_ascend(built, by_edge_id=True):
                return built
            return compress(self._dst, self._src, self._num_dst, index_dtype)

        return self.cached(("csr-by-id", index_dtype), by_id)

    def csc(self, index_dtype: torch.dtype = torch.int64) -> Compressed:
        """Out-edges grouped by source: ``indices`` are destinations, ``edge_ids`` user edge ids."""
        return self._compressed("csc", self._src, self._dst, self._num_src, index_dtype)

    def _compressed(
        self, name: str, rows: torch.Tensor, cols: torch.Tensor, num_rows: int, index_dtype: torch.dtype
    ) -> Compressed:
        """Cached per index dtype; a narrow copy does not keep the int64 one alive (kernels read int32)."""
        if index_dtype == torch.int64:
            return self.cached((name,), lambda: compress(rows, cols, num_rows))

        def narrow() -> Compressed:
            full = self._cache.get((name,))
            if full is not None:  # a given CSR (a sampler's) or one built already: its order kept, no sort
                return full.to(index_dtype)
            # on the CPU each row's sources ascending: every segment count's partitions point into it
            return compress(rows, cols, num_rows, index_dtype, sort_other=rows.device.type == "cpu")

        return self.cached((name, index_dtype), narrow)

    def adjacency(self, edge_values: torch.Tensor | None = None) -> torch.Tensor:
        """The adjacency as a torch sparse CSR matrix (row = destination, column = source; 1 per edge, or
        ``edge_values`` in user edge order), so ``adjacency() @ x`` sums in-neighbour features."""
        indptr, indices, edge_ids = self.csr()
        data = torch.ones(self.num_edges, device=indptr.device) if edge_values is None else edge_values[edge_ids]
        with torch.sparse.check_sparse_tensor_invariants(False), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
            return torch.sparse_csr_tensor(indptr, indices, data, (self._num_dst, self._num_src))

    def in_degrees(self) -> torch.Tensor:
        """In-degree of every destination vertex (int64, cached)."""
        return self.cached(("in_deg",), lambda: torch.bincount(self._dst, minlength=self._num_dst))

    def out_degrees(self) -> torch.Tensor:
        """Out-degree of every source vertex (int64, cached)."""
        return self.cached(("out_deg",), lambda: torch.bincount(self._src, minlength=self._num_src))

    def has_csr(self) -> bool:
        """Whether the CSR is already built (edge-centric kernels avoid building it)."""
        return any(key[0] == "csr" for key in self._cache)

    def reverse(self) -> Graph:
        """The graph with every edge flipped (same edge ids); its CSR is this graph's CSC, shared where one
        is built already (and the other way round)."""

        def flip() -> Graph:
            flipped = Graph._derived(self._dst, self._src, (self._num_dst, self._num_src), self._edge_weight)
            for mine, theirs in (("csc", "csr"), ("csr", "csc"), ("out_deg", "in_deg"), ("in_deg", "out_deg")):
                for key, value in self._cache.items():
                    if key[0] == mine:
                        flipped._cache[(theirs, *key[1:])] = value
            return flipped

        return self.cached(("reverse",), flip)

    def self_loop_edges(self) -> torch.Tensor:
        """Ids of the self-loop edges (u -> u), in edge order."""
        return self.cached(("self_loop_edges",), lambda: (self._src == self._dst).nonzero().flatten())

    def with_self_loops(self, fill_weight: float = 1.0) -> Graph:
        """This graph's edges without its self loops, then one loop per vertex (PyG's ``remove_self_loops``
        followed by ``add_self_loops``, same edge order); loops weigh ``fill_weight`` where edges are
        weighted. A bipartite graph gets a loop on each destination ``v`` from source ``v`` (its
        destinations are the first of its sources, as in a sampled block; PyG loops the same
        ``min(num_src, num_dst)`` ids). Cached, so a layer calling it every epoch builds it once. In code
        that ``torch.compile`` traces, a ``GraphRef`` for the operators to loop instead."""
        if torch.compiler.is_compiling():
            return self.ref().with_self_loops(fill_weight)
        return self.cached(("with_self_loops", fill_weight), lambda: self._loops_replaced(fill_weight))

    def _loops_replaced(self, fill_weight: float) -> Graph:
        """The looped graph. The CSR and CSC this graph has built are carried over by ``formats.with_loops``
        without a sort (a sampled block comes with both), in the narrow index type where one is built, unless
        its rows list their sources in ascending order, which a loop appended last would break."""
        keep = self._src != self._dst
        if bool(keep.all()):
            keep = None
        num_loops = min(self._num_src, self._num_dst)
        loops = torch.arange(num_loops, dtype=self._src.dtype, device=self.device)
        src, dst, weight = self._src, self._dst, self._edge_weight
        if keep is not None:
            src, dst = src[keep], dst[keep]
            weight = None if weight is None else weight[keep]
        if weight is not None:
            weight = torch.cat([weight, torch.full((num_loops,), fill_weight, dtype=weight.dtype, device=self.device)])
        sizes = (self._num_src, self._num_dst)
        looped = Graph._derived(torch.cat([src, loops]), torch.cat([dst, loops]), sizes, weight)
        for name, degrees in (("csr", "in_deg"), ("csc", "out_deg")):
            built = [key for key in self._cache if key[0] == name]
            narrowed = [key for key in built if len(key) > 1]  # what kernels read; int64 only if alone
            for key in narrowed or built:
                if len(key) > 1 and groups_ascend(self._cache[key]):
                    continue  # rows list sources in ascending order (the graph's own build): rebuilt so on use
                looped._cache[key] = with_loops(self._cache[key], keep, num_loops)
                indptr = looped._cache[key].indptr
                looped._cache[(degrees,)] = (indptr[1:] - indptr[:-1]).to(torch.int64)
        return looped

    # ---- edge orders ----------------------------------------------------------------------------
    def edge_order(self, order: str) -> torch.Tensor:
        """User edge ids listed in the given order: ``"user"``, ``"csr"``, ``"csc"`` (those of ``csr()`` and
        ``csc()``) or ``"hilbert"`` (int64; the Hilbert order, which is kept, in ``index_dtype``: edge templates
        read it in that type)."""
        if order == "user":
            return self.cached(("user_order",), lambda: torch.arange(self.num_edges, device=self.device))
        if order == "csr":
            return self.csr().edge_ids
        if order == "csc":
            return self.csc().edge_ids
        if order == "hilbert":
            side = max(self._num_src, self._num_dst)
            return self.cached(
                ("hilbert",), lambda: hilbert_edge_order(self._src, self._dst, side).to(self.index_dtype)
            )
        raise ValueError(f"unknown edge order {order!r}; expected one of {EDGE_ORDERS}")

    def permute_edge_values(self, values: torch.Tensor, from_order: str, to_order: str) -> torch.Tensor:
        """Re-lay a per-edge tensor (first dimension E) from one edge order to another."""
        if values.shape[0] != self.num_edges:
            raise ValueError(f"per-edge tensor has {values.shape[0]} rows, graph has {self.num_edges} edges")
        if from_order == to_order:
            return values
        user = values
        if from_order != "user":
            user = torch.empty_like(values)
            user[self.edge_order(from_order)] = values
        return user if to_order == "user" else user[self.edge_order(to_order)]

    # ---- reorderings and partitions -------------------------------------------------------------
    def degree_order(self, direction: str = "in", descending: bool = True) -> torch.Tensor:
        """Vertex ids sorted by in- or out-degree (stable, ties keep id order)."""
        if direction not in ("in", "out"):
            raise ValueError(f"direction must be 'in' or 'out', got {direction!r}")
        degrees = self.in_degrees() if direction == "in" else self.out_degrees()
        return self.cached(
            ("degree_order", direction, descending),
            lambda: torch.sort(degrees, descending=descending, stable=True).indices,
        )

    def source_partitions(
        self, num_parts: int, index_dtype: torch.dtype = torch.int64, in_id_order: bool = False
    ) -> SourcePartitions:
        """Sources cut into ``num_parts`` equal id ranges, as segment pointers into the CSR of ``index_dtype``
        where its rows list their sources in ascending order (the one the graph builds on the CPU for kernels,
        ``csr(torch.int32)``), else into a copy sorted so; ``in_id_order``: a copy whose runs keep their edges
        in id order (max and min kernels). Cached per count, dtype and order; kernels read int32."""
        if in_id_order:
            return self.cached(
                ("partitions", num_parts, index_dtype, "by-id"),
                lambda: partition_sources_by_id(
                    self._src, self._dst, self._num_src, self._num_dst, num_parts, index_dtype
                ),
            )

        def build() -> SourcePartitions:
            csr = self._cache.get(("csr",)) if index_dtype == torch.int64 else self.csr(index_dtype)
            if csr is None or not groups_ascend(csr):
                csr = compress(self._dst, self._src, self._num_dst, index_dtype, sort_other=True)
            return partition_sources(csr, self._num_src, num_parts)

        return self.cached(("partitions", num_parts, index_dtype), build)

    def hubs(self, threshold: int, capacity: int) -> HubPartition:
        """Hybrid partitioning: the highest out-degree sources at or above ``threshold`` (cached)."""
        return self.cached(
            ("hubs", threshold, capacity), lambda: partition_hubs(self.out_degrees(), threshold, capacity)
        )

    def tc_translation(self, block_width: int = 8, window_rows: int = 16) -> TCTranslation:
        """TC-GNN's translation with condensed column blocks, windows of 16 destination rows (8: FlashSparse's
        8 x 1 vectors); cached per shape."""
        return self.cached(
            ("tc", block_width, window_rows),
            lambda: translate(self._src, self._dst, self._num_src, self._num_dst, block_width, window_rows),
        )

    def reordered(self, method: str = "rcm") -> tuple[Graph, torch.Tensor]:
        """This graph with its vertices renumbered in ``method``'s locality order (``graph.reorder``), and the
        order (``order[new_id] = old_id``); cached. Edges keep their order and weights, so per-edge values
        carry over unchanged; vertex rows go in as ``x[order]`` and come back as ``out[inverse_order(order)]``."""
        if self.is_bipartite:
            raise ValueError(
                f"reordered: a bipartite graph ({self._num_src} sources, {self._num_dst} destinations) has no "
                "single vertex order"
            )

        def build() -> tuple[Graph, torch.Tensor]:
            order = locality_order(self._src, self._dst, self._num_src, method)
            position = inverse_order(order)
            return Graph(position[self._src], position[self._dst], self._num_src, self._edge_weight), order

        return self.cached(("reordered", method), build)

    @property
    def fingerprint(self) -> str:
        """Stable hex digest of the structure (vertex counts and edges in user order), for on-disk caches."""

        def digest() -> str:
            h = hashlib.blake2b(digest_size=16)
            h.update(np.int64(self._num_src).tobytes())
            if self.is_bipartite:  # a square graph's digest stays what it was
                h.update(np.int64(self._num_dst).tobytes())
            h.update(self._src.cpu().numpy().tobytes())
            h.update(self._dst.cpu().numpy().tobytes())
            return h.hexdigest()

        return self.cached(("fingerprint",), digest)
