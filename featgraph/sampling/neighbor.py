"""GraphSAGE-style neighbour sampling into bipartite blocks, DGL's mini-batch layout, with PyG's flat form.

Hop ``h`` (hop 0 starts at the seeds) draws up to ``fanouts[h]`` in-neighbours of every frontier vertex; its
block is a bipartite ``Graph`` whose destinations are the frontier and whose sources are the frontier (a
prefix) followed by the vertices it reached first, in order of first appearance. The next hop's frontier is
this block's sources, so a layer reading the block's source rows finds its destinations' rows first, and
each block's local ids are a prefix of the input block's. Sampling and relabelling run in featgraph's
compiled code (``kernel.py``).
"""

from __future__ import annotations

import numbers
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

import torch

from ..graph import Graph
from ..native import toolchain
from . import kernel
from .dgl_view import DGLBlockView

SEED_LIMIT = 2**63  # seeds travel to the compiled code as int64
FANOUT_LIMIT = 2**31  # fan-outs travel as int64 and multiply the frontier's size: kept far from wrapping


@dataclass(eq=False)
class Block(DGLBlockView):
    """One hop's bipartite block: ``graph`` (destinations = the first ``graph.num_dst_nodes`` sources, CSR
    built in), the global id of each source ``n_id`` and the global edge id of each block edge ``e_id``
    (block edge order). A layer runs as ``layer(h, block.graph)`` with ``h`` holding the rows of ``n_id``;
    its output rows are the destinations, ``n_id[: graph.num_dst_nodes]``. Unpacks as ``(graph, n_id, e_id)``;
    DGL's block interface (``srcdata[dgl.NID]``, ``num_dst_nodes()``, ``local_scope()``...) comes from
    ``DGLBlockView``."""

    graph: Graph
    n_id: torch.Tensor
    e_id: torch.Tensor

    def __iter__(self) -> Iterator[Any]:
        return iter((self.graph, self.n_id, self.e_id))

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Block:
        """The block on ``device``, its graph's CSR (built by the sampler) and self-loop graph with it."""
        move = partial(torch.Tensor.to, device=device, non_blocking=non_blocking)
        return Block(self.graph.to(device, non_blocking), move(self.n_id), move(self.e_id))

    def pin_memory(self) -> Block:
        """The block in page-locked memory, for non-blocking copies to a GPU."""
        return Block(self.graph.pin_memory(), self.n_id.pin_memory(), self.e_id.pin_memory())

    def astype(self, idtype: torch.dtype) -> Block:
        """The block with its ids (``n_id``, ``e_id``) of ``idtype``, as DGL's ``astype`` (itself where they are)."""
        if self.n_id.dtype == idtype:
            return self
        return Block(self.graph, self.n_id.to(idtype), self.e_id.to(idtype))


class EdgeIndexBatch(NamedTuple):
    """PyG's ``NeighborLoader`` layout: one ``edge_index`` (row 0 sources, row 1 destinations) over the
    union of all hops, in local ids of ``n_id`` (seeds first, then vertices in the order hops reached them);
    ``e_id`` the global id of each edge; the first ``batch_size`` vertices are the seeds."""

    edge_index: torch.Tensor
    n_id: torch.Tensor
    e_id: torch.Tensor
    batch_size: int


@dataclass(frozen=True)
class MiniBatch:
    """Blocks ordered as a model consumes them: ``blocks[0]`` the input layer's (the last hop), ``blocks[-1]``
    the seeds' (hop 0)."""

    blocks: list[Block]
    seeds: torch.Tensor

    @property
    def input_nodes(self) -> torch.Tensor:
        """Global ids of the vertices whose features the first layer reads (``blocks[0]``'s sources; the seeds
        where there are no hops)."""
        return self.blocks[0].n_id if self.blocks else self.seeds

    @property
    def batch_size(self) -> int:
        return self.seeds.numel()

    def to_edge_index(self) -> EdgeIndexBatch:
        """The flat form: each vertex's sampled in-edges once, from the hop that first expanded it (the seeds
        at hop 0, a vertex first reached at hop ``h`` at hop ``h + 1``), as PyG samples. A block re-samples
        its prefix of earlier destinations, so those rows are left out; a block's rows are its CSR, so the
        rest is a suffix of its edges."""
        edges, edge_ids = [], []
        expanded = 0  # destinations of the previous hop: already expanded
        for block in reversed(self.blocks):
            indptr, sources, _ = block.graph.csr()
            start = int(indptr[expanded])
            counts = indptr[expanded + 1 :] - indptr[expanded:-1]
            dst = torch.repeat_interleave(torch.arange(expanded, block.graph.num_dst_nodes), counts)
            edges.append(torch.stack([sources[start:], dst]))
            edge_ids.append(block.e_id[start:])
            expanded = block.graph.num_dst_nodes
        if not edges:  # no hops: the seeds alone
            return EdgeIndexBatch(torch.zeros(2, 0, dtype=torch.int64), self.seeds, self.seeds[:0], self.batch_size)
        return EdgeIndexBatch(torch.cat(edges, dim=1), self.input_nodes, torch.cat(edge_ids), self.batch_size)


def checked_fanouts(fanouts: Any, name: str = "fanouts") -> tuple[int, ...]:
    """Per-hop neighbour counts (``name`` is the caller's argument): a list of ints from 0 to
    ``FANOUT_LIMIT - 1``, or -1 (every neighbour); empty for no hops (the seeds alone, as PyG's
    ``num_neighbors=[]``)."""
    if isinstance(fanouts, (str, bytes)) or not isinstance(fanouts, Sequence):
        raise ValueError(f"{name} must be a list of per-hop neighbour counts, got {fanouts!r}")
    for fanout in fanouts:
        if isinstance(fanout, bool) or not isinstance(fanout, numbers.Integral) or not -1 <= fanout < FANOUT_LIMIT:
            raise ValueError(
                f"{name} must hold ints from 0 to 2**31 - 1 or -1 (every neighbour), got {fanout!r} in {fanouts!r}"
            )
    return tuple(int(f) for f in fanouts)


def _checked_weight(weight: Any, num_edges: int) -> torch.Tensor:
    """``weight`` as a float64 copy in user edge order: a real per-edge tensor, finite and non-negative, or a
    bool one (DGL's sampling ``mask``), which becomes weights 1 and 0: the edges marked False are never drawn,
    the others uniformly, with or without replacement alike."""
    tensor = torch.as_tensor(weight)
    if tensor.is_complex():
        raise TypeError(f"weight must hold real numbers or bools, got dtype {tensor.dtype}")
    if tensor.shape != (num_edges,):
        raise ValueError(f"weight must have one entry per edge, shape ({num_edges},), got {tuple(tensor.shape)}")
    tensor = tensor.detach().to(device="cpu", dtype=torch.float64)
    if not bool(torch.isfinite(tensor).all()):
        raise ValueError("weight holds non-finite values (nan or inf)")
    if bool((tensor < 0).any()):
        raise ValueError(f"weight holds negative values (smallest {tensor.min().item()}); weights are >= 0")
    return tensor


def row_scaled(weight: torch.Tensor, indptr: torch.Tensor) -> torch.Tensor:
    """CSR-ordered weights divided by their row's largest, so a row's draws are the same while its running
    sums stay below its degree (weights near the float64 maximum would overflow them) and no weight is
    subnormal relative to its row (the keys -log(u) / w of draws without replacement would all be infinite);
    a positive weight stays positive (at least the smallest normal float64), so -1 still keeps every one."""
    rows = torch.repeat_interleave(torch.arange(indptr.numel() - 1), indptr.diff())
    row_max = torch.zeros(indptr.numel() - 1, dtype=weight.dtype).scatter_reduce(0, rows, weight, "amax")
    scaled = weight / torch.where(row_max > 0, row_max, 1.0)[rows]
    return torch.where(weight > 0, scaled.clamp_min(torch.finfo(weight.dtype).tiny), 0.0)


def checked_ids(values: Any, limit: int, name: str, item: str, scope: str, empty: str | None) -> torch.Tensor:
    """``values`` (the argument ``name``) as a fresh int64 CPU vector of ``item`` ids below ``limit`` (``scope``
    says of what); empty only where ``empty`` is None, else refused with ``empty`` as the reason."""
    tensor = torch.as_tensor(values)
    if tensor.dim() != 1:
        raise ValueError(f"{name} must be 1-D, got shape {tuple(tensor.shape)}")
    if tensor.numel() == 0:  # before the dtype: torch.as_tensor([]) is float32
        if empty is None:
            return torch.zeros(0, dtype=torch.int64)
        raise ValueError(f"{name} is empty: {empty}")
    if tensor.dtype == torch.bool or tensor.is_floating_point() or tensor.is_complex():
        raise TypeError(f"{name} must hold integer {item} ids, got dtype {tensor.dtype}")
    tensor = tensor.to(device="cpu", dtype=torch.int64, copy=True)
    low, high = int(tensor.min()), int(tensor.max())
    if low < 0 or high >= limit:
        raise ValueError(f"{name} holds {item} id {low if low < 0 else high}, out of range for {scope}")
    return tensor


def checked_seeds(seeds: Any, num_nodes: int, owner: str = "a graph", allow_empty: bool = False) -> torch.Tensor:
    """``seeds`` as a fresh int64 CPU vector of distinct vertex ids of ``owner`` (``num_nodes`` vertices; a
    graph, or a node type of a typed graph); empty only where ``allow_empty``."""
    empty = None if allow_empty else "a mini-batch needs at least one seed vertex"
    tensor = checked_ids(seeds, num_nodes, "seeds", "vertex", f"{owner} of {num_nodes} vertices", empty)
    if tensor.numel() == 0:
        return tensor
    unique = torch.unique(tensor)
    if unique.numel() != tensor.numel():
        counts = torch.bincount(torch.searchsorted(unique, tensor))
        raise ValueError(
            f"seeds holds vertex {int(unique[counts.argmax()])} more than once: a block's destinations are "
            "distinct vertices"
        )
    return tensor


def excluded_positions(csr: Any, graph: Graph, exclude_edges: Any, threads: int) -> torch.Tensor | None:
    """``exclude_edges`` (ids of ``graph``'s edges, whose ``csr`` the sampler draws from) as the sorted CSR
    positions the compiled hops leave out; None where there are none."""
    if exclude_edges is None:
        return None
    ids = checked_ids(exclude_edges, graph.num_edges, "exclude_edges", "edge", f"{graph.num_edges} edges", None)
    if ids.numel() == 0:
        return None
    return kernel.csr_positions(csr, ids, graph.coo()[1][ids], threads)


def _checked_seed(seed: int | None) -> int:
    if seed is None:  # from torch's generator, so torch.manual_seed reproduces a run
        return int(torch.randint(0, SEED_LIMIT - 1, (1,)))
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= seed < SEED_LIMIT:
        raise ValueError(f"seed must be an int from 0 to 2**63 - 1 or None, got {seed!r}")
    return int(seed)


class NeighborSampler:
    """Samples mini-batches of bipartite blocks from ``graph`` (one vertex set, on the CPU).

    ``fanouts[h]``: in-neighbours drawn per vertex at hop ``h`` (hop 0 from the seeds, PyG's
    ``num_neighbors`` order; ``blocks[-1 - h]`` is its block), -1 for all of them. Draws are uniform without
    replacement by default, with replacement when ``replace``; with a per-edge ``weight`` (user edge order,
    non-negative) each draw picks an edge with probability proportional to its weight, so zero-weight edges
    are never drawn (and ``-1`` keeps the positive ones); a bool ``weight`` is DGL's sampling mask (edges marked
    False are never drawn, the others uniformly). ``num_threads`` defaults to the CPU kernels' count.
    Each block's graph comes with its CSR in the kernels' index type; its CSC, which only a gradient with
    respect to the block's source rows reads (never the input layer's features), is built on first use.
    ``self_loops``: each block's graph also comes with its looped graph (``graph.with_self_loops()``, its CSR
    carried over from the block's without a sort) and that graph's CSC, for layers that add self loops
    (GATConv, which transforms its sources before aggregating, so every layer's backward reads it): made here,
    which a loader runs in its background thread, rather than in the training step.
    A batch depends only on the seeds and ``seed``. Calls from several threads may share a sampler: they
    take turns in the compiled hops, whose relabelling map is the sampler's.
    """

    def __init__(
        self,
        graph: Graph,
        fanouts: Sequence[int],
        replace: bool = False,
        weight: Any | None = None,
        num_threads: int | None = None,
        self_loops: bool = False,
    ) -> None:
        if not isinstance(graph, Graph):
            raise TypeError(f"graph must be a featgraph Graph, got {type(graph).__name__}")
        if graph.is_bipartite:
            raise ValueError(
                f"graph is bipartite ({graph.num_src_nodes} sources, {graph.num_dst_nodes} destinations): "
                "sampling needs one vertex set, since each hop's sources become the next hop's destinations"
            )
        if graph.device.type != "cpu":
            raise ValueError(f"graph is on {graph.device}; the neighbour sampler runs on the CPU")
        if not isinstance(replace, bool):
            raise TypeError(f"replace must be a bool, got {replace!r}")
        if not isinstance(self_loops, bool):
            raise TypeError(f"self_loops must be a bool, got {self_loops!r}")
        self.graph = graph
        self.fanouts = checked_fanouts(fanouts)
        self.replace = replace
        self.self_loops = self_loops
        self.num_threads = None if num_threads is None else toolchain.checked_threads(num_threads, "num_threads")
        self._csr = graph.csr()
        self._weights = None
        if weight is not None:
            csr_weight = row_scaled(_checked_weight(weight, graph.num_edges)[self._csr.edge_ids], self._csr.indptr)
            self._weights = kernel.weight_tables(self._csr.indptr, csr_weight, replace, self._threads())
        self._local, self._lock = self._scratch()

    def _scratch(self) -> tuple[torch.Tensor, threading.Lock]:
        """The relabelling map (all unclaimed) and the lock the compiled hops take turns under."""
        return torch.full((self.graph.num_src_nodes,), kernel.UNCLAIMED, dtype=torch.int64), threading.Lock()

    def __getstate__(self) -> dict:
        """The sampler without its map and lock: a copy in another process (a loader's worker) makes its own,
        rather than sharing the map another process writes."""
        return {k: v for k, v in self.__dict__.items() if k not in ("_local", "_lock")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._local, self._lock = self._scratch()

    def _threads(self) -> int:
        return self.num_threads if self.num_threads is not None else toolchain.num_threads()

    @torch.compiler.disable  # builds Graphs from data-dependent sizes: a compiled step runs it eagerly
    def sample(self, seeds: Any, seed: int | None = None, exclude_edges: Any = None) -> MiniBatch:
        """The mini-batch of ``seeds`` (distinct vertex ids): one block per fan-out. ``seed`` fixes the draws
        (None: drawn from torch's generator); the same seeds and seed give the same batch on any number of
        threads. ``exclude_edges``: edge ids (the graph's user order) no hop draws, as DGL's
        ``sample_neighbors(exclude_edges=...)``: a vertex draws among its other in-edges, as if these were not
        in the graph (a link-prediction batch leaving out its own positives). ``torch.compile`` never traces
        into it: a compiled training step that samples runs the sampler eagerly (one graph break) and
        compiles the model after it."""
        seeds = checked_seeds(seeds, self.graph.num_src_nodes)
        seed = _checked_seed(seed)
        threads = self._threads()
        excluded = excluded_positions(self._csr, self.graph, exclude_edges, threads)
        weight = self.graph.edge_weight
        blocks, frontier = [], seeds
        for hop, fanout in enumerate(self.fanouts):
            with self._lock:
                drawn = kernel.sample_hop(
                    self._csr, frontier, fanout, self.replace, self._weights, self._local, seed, hop, threads, excluded
                )
            edge_weight = None if weight is None else weight[drawn.edge_ids]
            num_src = drawn.node_ids.numel()
            # the CSR in the kernels' index type comes with the block (made here, in a loader's background
            # thread, rather than in the training step that runs it); the CSC is built where a gradient needs it
            block_graph = Graph.from_csr(
                drawn.indptr, drawn.sources, num_src, edge_weight, check=False, edge_index=drawn.edge_index,
                narrow_csr=drawn.narrow_csr,
            )  # fmt: skip
            block_graph.csr(block_graph.index_dtype)
            if self.self_loops:
                looped = block_graph.with_self_loops()
                looped.csc(looped.index_dtype)
            blocks.append(Block(block_graph, drawn.node_ids, drawn.edge_ids))
            frontier = drawn.node_ids
        return MiniBatch(blocks[::-1], seeds)
