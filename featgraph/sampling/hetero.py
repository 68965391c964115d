"""Neighbour sampling on a typed graph with a fan-out per edge type, PyG's heterogeneous ``NeighborLoader``
semantics on featgraph's compiled sampler.

Hop ``h`` expands the vertices each node type gained at hop ``h - 1`` (the seeds at hop 0): for every edge
type ``(src, rel, dst)`` it draws up to ``fanouts[edge_type][h]`` in-edges of that type for each new vertex of
type ``dst``, from the relation's own CSR (local ids), so a vertex draws its fan-out per relation. Each node
type's batch ids are its seeds first, then vertices in the order the hops reached them (edge types in the
graph's order within a hop). Every vertex is expanded once, so each sampled edge appears once. The compiled
sampler draws and relabels each relation in one pass (``kernel.sample_typed_hop``): a map per node type holds
the batch ids of the vertices already in, for the whole batch.

``sample_blocks`` gives DGL's typed blocks instead: hop ``h`` expands every vertex of the previous hop's
block's sources (each node type's destinations a prefix of its sources), one typed bipartite ``HeteroBlock``
per hop, as DGL's ``NeighborSampler.sample_blocks`` on a heterogeneous graph.

Randomness: relation ``r`` at hop ``h`` draws with the compiled sampler's stream ``h * R + r`` (R edge types),
so a vertex's draws from two relations are independent and a batch depends on the seed alone.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch

from ..graph import Graph
from ..graph.hetero import EdgeType, HeteroGraph, canonical_edge_type
from ..native import toolchain
from . import kernel
from .dgl_view import DGLHeteroBlockView
from .neighbor import _checked_seed, _checked_weight, checked_fanouts, checked_seeds, excluded_positions, row_scaled


@dataclass(frozen=True)
class HeteroMiniBatch:
    """One typed mini-batch: per node type the global-to-type ``n_id`` of its batch vertices (seeds first for
    the input type); per edge type ``edge_index`` (row 0 sources, row 1 destinations, in the two types' batch
    ids) and ``e_id`` (the sampled edges' ids within the edge type); per-hop counts as PyG gives them."""

    n_id: dict[str, torch.Tensor]
    edge_index: dict[EdgeType, torch.Tensor]
    e_id: dict[EdgeType, torch.Tensor]
    num_sampled_nodes: dict[str, list[int]]
    num_sampled_edges: dict[EdgeType, list[int]]
    input_type: str | None
    batch_size: int


@dataclass(frozen=True)
class HeteroBlock(DGLHeteroBlockView):
    """One hop's typed block, DGL's heterogeneous block: per edge type a bipartite ``Graph`` (``relation``) from
    the source type's block sources to the destination type's block destinations, CSR built in; per node type
    the global (type-local) ids of its sources, ``n_id``, whose first ``num_dst_nodes(t)`` are the
    destinations; per edge type the sampled edges' ids within the edge type, ``e_id`` (block edge order).
    ``featgraph.nn.HeteroGraphConv`` runs on it as DGL's runs on a block; DGL's block interface
    (``srcdata[dgl.NID]``, ``num_dst_nodes(ntype)``, ``block[etype]``, ``local_scope()``...) comes from
    ``DGLHeteroBlockView``."""

    relations: dict[EdgeType, Graph]
    n_id: dict[str, torch.Tensor]
    num_dst_nodes_dict: dict[str, int]
    e_id: dict[EdgeType, torch.Tensor]

    is_block = True

    @property
    def edge_types(self) -> tuple[EdgeType, ...]:
        return tuple(self.relations)

    canonical_etypes = edge_types  # DGL's name

    @property
    def node_types(self) -> tuple[str, ...]:
        return tuple(self.n_id)

    def relation(self, edge_type: EdgeType | str) -> Graph:
        """The edge type's bipartite graph (a relation name alone where one edge type has it)."""
        return self.relations[canonical_edge_type(self.edge_types, edge_type)]

    def to(self, device: torch.device | str, non_blocking: bool = False) -> HeteroBlock:
        """The block on ``device``, each graph's formats already built (the sampler's CSR) with it."""
        move = partial(torch.Tensor.to, device=device, non_blocking=non_blocking)
        return HeteroBlock(
            {et: g.to(device, non_blocking) for et, g in self.relations.items()},
            {t: move(ids) for t, ids in self.n_id.items()},
            dict(self.num_dst_nodes_dict),
            {et: move(ids) for et, ids in self.e_id.items()},
        )

    def pin_memory(self) -> HeteroBlock:
        """The block in page-locked memory, for non-blocking copies to a GPU."""
        return HeteroBlock(
            {et: g.pin_memory() for et, g in self.relations.items()},
            {t: ids.pin_memory() for t, ids in self.n_id.items()},
            dict(self.num_dst_nodes_dict),
            {et: ids.pin_memory() for et, ids in self.e_id.items()},
        )

    def astype(self, idtype: torch.dtype) -> HeteroBlock:
        """The block with its ids (``n_id``, ``e_id``) of ``idtype``, as DGL's ``astype`` (itself where they are)."""
        if all(ids.dtype == idtype for ids in self.n_id.values()):
            return self
        return HeteroBlock(
            self.relations,
            {t: ids.to(idtype) for t, ids in self.n_id.items()},
            dict(self.num_dst_nodes_dict),
            {et: ids.to(idtype) for et, ids in self.e_id.items()},
        )


@dataclass(frozen=True)
class HeteroBlocks:
    """DGL's typed mini-batch: ``blocks`` input layer first (``blocks[-1]``'s destinations are the seeds),
    ``seeds`` per node type (the types the seeds were given for, each possibly empty)."""

    blocks: list[HeteroBlock]
    seeds: dict[str, torch.Tensor]

    @property
    def input_nodes(self) -> dict[str, torch.Tensor]:
        """Per node type the global ids of the rows the first layer reads (the seeds where there are no
        hops)."""
        return self.blocks[0].n_id if self.blocks else self.seeds


def checked_typed_fanouts(fanouts: Any, edge_types: Sequence[EdgeType], name: str = "num_neighbors") -> dict:
    """Per edge type its per-hop fan-outs: one list for every edge type, or a dict keyed by edge type (every
    edge type present, each list as long as the others)."""
    if not isinstance(fanouts, Mapping):
        hops = checked_fanouts(fanouts, name)
        return {edge_type: hops for edge_type in edge_types}
    unknown = [key for key in fanouts if key not in edge_types]
    if unknown:
        raise ValueError(f"{name}: edge type(s) {unknown} are not in the graph (edge types: {list(edge_types)})")
    missing = [edge_type for edge_type in edge_types if edge_type not in fanouts]
    if missing:
        raise ValueError(f"{name}: no fan-outs for edge type(s) {missing}; give every edge type a list")
    out = {et: checked_fanouts(fanouts[et], f"{name}[{et!r}]") for et in edge_types}
    lengths = {len(hops) for hops in out.values()}
    if len(lengths) > 1:
        raise ValueError(f"{name}: the number of hops must be the same across all edge types, got {sorted(lengths)}")
    return out


class HeteroNeighborSampler:
    """Samples typed mini-batches from ``graph`` (a ``HeteroGraph`` on the CPU): ``fanouts`` is one per-hop
    list for all edge types or a dict of them per edge type (-1: every in-edge). ``replace`` draws with
    replacement; ``weights`` (a dict edge type -> per-edge non-negative weights in the edge type's order)
    draws each edge in proportion to its weight (a bool one is DGL's mask: False never drawn). ``num_threads``
    defaults to the CPU kernels' count. Calls from several threads take turns in the compiled hops."""

    def __init__(
        self,
        graph: HeteroGraph,
        fanouts: Any,
        replace: bool = False,
        weights: Mapping[EdgeType, Any] | None = None,
        num_threads: int | None = None,
    ) -> None:
        if not isinstance(graph, HeteroGraph):
            raise TypeError(f"graph must be a featgraph HeteroGraph, got {type(graph).__name__}")
        if graph.device.type != "cpu":
            raise ValueError(f"graph is on {graph.device}; the neighbour sampler runs on the CPU")
        if not isinstance(replace, bool):
            raise TypeError(f"replace must be a bool, got {replace!r}")
        self.graph = graph
        self.fanouts = checked_typed_fanouts(fanouts, graph.edge_types)
        self.num_hops = len(next(iter(self.fanouts.values()))) if self.fanouts else 0
        self.replace = replace
        self.num_threads = None if num_threads is None else toolchain.checked_threads(num_threads, "num_threads")
        self._csr = {et: graph.relation(et).csr() for et in graph.edge_types}
        self._weights: dict[EdgeType, kernel.WeightTables] = {}
        for edge_type, weight in (weights or {}).items():
            csr = self._csr[graph.edge_type(edge_type)]
            checked = _checked_weight(weight, graph.num_edges_of(edge_type))
            tables = kernel.weight_tables(csr.indptr, row_scaled(checked[csr.edge_ids], csr.indptr), replace, 1)
            self._weights[graph.edge_type(edge_type)] = tables
        self._local, self._lock = self._scratch()

    def _scratch(self) -> tuple[dict[str, torch.Tensor], threading.Lock]:
        """Per node type the batch's map (all unclaimed), and the lock the compiled hops take turns under."""
        counts = self.graph.num_nodes_dict
        return {t: torch.full((n,), kernel.UNCLAIMED, dtype=torch.int64) for t, n in counts.items()}, threading.Lock()

    def __getstate__(self) -> dict:
        """The sampler without its maps and lock: a copy in another process (a loader's worker) makes its own,
        rather than sharing the maps another process writes."""
        return {k: v for k, v in self.__dict__.items() if k not in ("_local", "_lock")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._local, self._lock = self._scratch()

    def _threads(self) -> int:
        return self.num_threads if self.num_threads is not None else toolchain.num_threads()

    @torch.compiler.disable  # data-dependent sizes: a compiled step runs it eagerly
    def sample(self, input_type: str, seeds: Any, seed: int | None = None) -> HeteroMiniBatch:
        """The typed mini-batch of ``seeds`` (distinct ids of node type ``input_type``)."""
        return self.sample_types({input_type: seeds}, seed, input_type)

    @torch.compiler.disable
    def sample_types(
        self, seeds: Mapping[str, Any], seed: int | None = None, input_type: str | None = None
    ) -> HeteroMiniBatch:
        """The typed mini-batch of seeds of several node types (``seeds``: node type -> distinct ids, as a link
        batch's endpoints of two types); each type's seeds lead its ``n_id``. ``input_type`` names the type
        whose seeds count as the batch's ``batch_size`` (None: all seeds)."""
        checked = self._checked_seeds(seeds)
        seed = _checked_seed(seed)
        with self._lock:
            return self._sample(checked, seed, input_type)

    def _checked_seeds(self, seeds: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        """Each node type's seeds as distinct int64 ids of that type (possibly empty); an unknown type named."""
        checked = {}
        for node_type, ids in seeds.items():
            self.graph.node_type_id(node_type)  # names an unknown type
            owner = f"node type {node_type!r}"
            checked[node_type] = checked_seeds(ids, self.graph.num_nodes_dict[node_type], owner, allow_empty=True)
        return checked

    @torch.compiler.disable
    def sample_blocks(
        self, seeds: Mapping[str, Any], seed: int | None = None, exclude_edges: Mapping[Any, Any] | None = None
    ) -> HeteroBlocks:
        """DGL's typed blocks of ``seeds`` (node type -> distinct ids; at least one seed in all): one
        ``HeteroBlock`` per hop, every vertex of a block's sources expanded again by the next hop.
        ``exclude_edges``: edge type (or relation name) -> ids within the type that no hop draws, as DGL's
        ``exclude_edges`` (a vertex draws among its other in-edges of the type)."""
        frontier = {t: torch.zeros(0, dtype=torch.int64) for t in self.graph.node_types}
        given = self._checked_seeds(seeds)
        if given and not sum(ids.numel() for ids in given.values()):
            raise ValueError("seeds: every node type's seeds are empty; a mini-batch needs at least one seed")
        if not given:
            raise ValueError("seeds: expected a dict of node type -> seed ids, got an empty dict")
        frontier.update(given)
        seed = _checked_seed(seed)
        excluded = self._excluded(exclude_edges)
        blocks = []
        with self._lock:
            for hop in range(self.num_hops):
                block = self._block(frontier, seed, hop, excluded)
                blocks.append(block)
                frontier = block.n_id
        return HeteroBlocks(blocks[::-1], given)

    def _excluded(self, exclude_edges: Mapping[Any, Any] | None) -> dict[EdgeType, torch.Tensor]:
        """Per edge type the sorted CSR positions no hop draws (``exclude_edges`` as ``sample_blocks`` takes it)."""
        if exclude_edges is None:
            return {}
        if not isinstance(exclude_edges, Mapping):
            raise TypeError(
                f"exclude_edges: a typed graph's edges are a dict edge type -> ids, got {type(exclude_edges).__name__}"
            )
        excluded = {}
        for key, ids in exclude_edges.items():
            edge_type = self.graph.edge_type(key)
            relation = self.graph.relation(edge_type)
            positions = excluded_positions(self._csr[edge_type], relation, ids, self._threads())
            if positions is not None:
                excluded[edge_type] = positions
        return excluded

    def _block(
        self, destinations: dict[str, torch.Tensor], seed: int, hop: int, excluded: dict[EdgeType, torch.Tensor]
    ) -> HeteroBlock:
        """Hop ``hop``'s block over ``destinations`` (per node type): each type's map holds its destinations
        first, every relation draws into it (leaving out its ``excluded`` CSR positions), then every map is left
        unclaimed again."""
        graph, threads, relations = self.graph, self._threads(), len(self.graph.edge_types)
        n_id = {t: [ids] for t, ids in destinations.items()}
        counts = {t: ids.numel() for t, ids in destinations.items()}
        drawn: dict[EdgeType, kernel.TypedHop] = {}
        try:
            for node_type, ids in destinations.items():
                self._local[node_type][ids] = torch.arange(ids.numel())
            for r, edge_type in enumerate(graph.edge_types):
                src_type, _, dst_type = edge_type
                targets, fanout = destinations[dst_type], self.fanouts[edge_type][hop]
                if targets.numel() == 0 or fanout == 0:
                    continue
                hop_draws = kernel.sample_typed_hop(
                    self._csr[edge_type], targets, fanout, self.replace, self._weights.get(edge_type),
                    self._local[src_type], counts[src_type], 0, seed, hop * relations + r, threads,
                    excluded.get(edge_type),
                )  # fmt: skip
                drawn[edge_type] = hop_draws
                if hop_draws.new_nodes.numel():
                    n_id[src_type].append(hop_draws.new_nodes)
                    counts[src_type] += hop_draws.new_nodes.numel()
        finally:
            for node_type, parts in n_id.items():
                for part in parts:
                    self._local[node_type][part] = kernel.UNCLAIMED
        sources = {t: torch.cat(parts) if len(parts) > 1 else parts[0] for t, parts in n_id.items()}
        block_graphs, e_id = {}, {}
        for edge_type in graph.edge_types:
            src_type, _, dst_type = edge_type
            num_src, num_dst = counts[src_type], destinations[dst_type].numel()
            hop_draws = drawn.get(edge_type)
            if hop_draws is None:
                indptr, edge_index = torch.zeros(num_dst + 1, dtype=torch.int64), torch.zeros(2, 0, dtype=torch.int64)
                e_id[edge_type] = edge_index[0]
            else:
                indptr, edge_index, e_id[edge_type] = hop_draws.indptr, hop_draws.edge_index, hop_draws.edge_ids
            # the CSR in the kernels' index type, made here (a loader's background thread); the CSC on first use
            block_graph = Graph.from_csr(indptr, edge_index[0], num_src, check=False, edge_index=edge_index)
            block_graph.csr(block_graph.index_dtype)
            block_graphs[edge_type] = block_graph
        return HeteroBlock(block_graphs, sources, {t: ids.numel() for t, ids in destinations.items()}, e_id)

    def _sample(self, seeds: dict[str, torch.Tensor], seed: int, input_type: str | None) -> HeteroMiniBatch:
        graph, threads, relations = self.graph, self._threads(), len(self.graph.edge_types)
        n_id: dict[str, list[torch.Tensor]] = {t: [] for t in graph.node_types}
        counts = {t: 0 for t in graph.node_types}
        per_hop_nodes = {t: [0] for t in graph.node_types}
        edges: dict[EdgeType, list[torch.Tensor]] = {et: [] for et in graph.edge_types}
        e_ids: dict[EdgeType, list[torch.Tensor]] = {et: [] for et in graph.edge_types}
        per_hop_edges: dict[EdgeType, list[int]] = {et: [] for et in graph.edge_types}
        for node_type, ids in seeds.items():
            self._local[node_type][ids] = torch.arange(ids.numel())
            n_id[node_type].append(ids)
            counts[node_type] = per_hop_nodes[node_type][0] = ids.numel()
        frontier = {t: (ids[0] if ids else None, 0) for t, ids in n_id.items()}  # new vertices, first batch id
        try:
            for hop in range(self.num_hops):
                reached = dict(counts)
                for r, edge_type in enumerate(graph.edge_types):
                    src_type, _, dst_type = edge_type
                    targets, start = frontier[dst_type]
                    fanout = self.fanouts[edge_type][hop]
                    if targets is None or targets.numel() == 0 or fanout == 0:
                        per_hop_edges[edge_type].append(0)
                        continue
                    drawn = kernel.sample_typed_hop(
                        self._csr[edge_type], targets, fanout, self.replace, self._weights.get(edge_type),
                        self._local[src_type], counts[src_type], start, seed, hop * relations + r, threads,
                    )  # fmt: skip
                    if drawn.new_nodes.numel():
                        n_id[src_type].append(drawn.new_nodes)
                        counts[src_type] += drawn.new_nodes.numel()
                    edges[edge_type].append(drawn.edge_index)
                    e_ids[edge_type].append(drawn.edge_ids)
                    per_hop_edges[edge_type].append(drawn.edge_ids.numel())
                for node_type in graph.node_types:
                    per_hop_nodes[node_type].append(counts[node_type] - reached[node_type])
                frontier = {
                    t: (torch.cat(n_id[t])[reached[t] :] if counts[t] > reached[t] else None, reached[t])
                    for t in graph.node_types
                }
            nodes = {t: torch.cat(parts) if parts else torch.zeros(0, dtype=torch.int64) for t, parts in n_id.items()}
        finally:
            for node_type, parts in n_id.items():  # leave every map as found, all unclaimed
                for part in parts:
                    self._local[node_type][part] = kernel.UNCLAIMED
        empty = torch.zeros(2, 0, dtype=torch.int64)
        return HeteroMiniBatch(
            n_id=nodes,
            edge_index={et: torch.cat(parts, dim=1) if parts else empty for et, parts in edges.items()},
            e_id={et: torch.cat(parts) if parts else empty[0] for et, parts in e_ids.items()},
            num_sampled_nodes=per_hop_nodes,
            num_sampled_edges=per_hop_edges,
            input_type=input_type,
            batch_size=seeds[input_type].numel() if input_type else sum(ids.numel() for ids in seeds.values()),
        )
