"""Temporal neighbour sampling (PyG's ``time_attr``): each seed samples its own subgraph (PyG's disjoint layout),
and from a seed with time ``t`` a hop draws an in-edge only if its source's time (node-level times) or its own
time (edge-level times) is at most ``t``, so no subgraph sees the future of its seed.

All seeds of a batch are sampled together: each hop lists the in-edges of every (subgraph, vertex) pair on the
frontier from the CSR, keeps those the seed's time allows, and keeps up to the fan-out of them per pair, at
random ("uniform") or the latest ones ("last"); vertices are relabelled per subgraph through a sorted key of
(subgraph, vertex).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ..graph import Graph
from .neighbor import DisjointBatch, checked_fanouts

STRATEGIES = ("uniform", "last")


def checked_times(values: Any, count: int, name: str) -> torch.Tensor:
    """``values`` as a CPU vector of ``count`` real times (``name`` for errors)."""
    tensor = torch.as_tensor(values)
    if tensor.dtype == torch.bool or tensor.is_complex():
        raise TypeError(f"{name} must hold real times, got dtype {tensor.dtype}")
    if tensor.shape != (count,):
        raise ValueError(f"{name} must hold one time per entry, shape ({count},), got {tuple(tensor.shape)}")
    tensor = tensor.detach().cpu()
    if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
        raise ValueError(f"{name} holds non-finite values (nan or inf)")
    return tensor


class TemporalSampler:
    """Samples ``graph`` (one vertex set, on the CPU) with ``fanouts`` (-1: all) under the time of each seed:
    ``node_time`` (one per vertex) or ``edge_time`` (one per edge, user order), exactly one of them;
    ``strategy`` "uniform" (a random subset of the allowed in-edges) or "last" (the latest ones). Each
    vertex's in-edges are listed in time order (ties in the user's order), as PyG sorts them for pyg-lib, so
    vertices first reached in one hop are numbered in that order. ``relation`` (one id per edge, user order,
    from 0) samples a typed graph's homogeneous view: ``fanouts[h]`` is then a list with one fan-out per
    relation, drawn separately for each (vertex, relation)."""

    def __init__(
        self,
        graph: Graph,
        fanouts: Sequence[Any],
        node_time: Any = None,
        edge_time: Any = None,
        strategy: str = "uniform",
        relation: torch.Tensor | None = None,
    ) -> None:
        if (node_time is None) == (edge_time is None):
            raise ValueError("TemporalSampler takes node_time or edge_time, exactly one of them")
        if strategy not in STRATEGIES:
            raise ValueError(f"temporal_strategy must be one of {STRATEGIES}, got {strategy!r}")
        self.graph = graph
        self.strategy = strategy
        csr = graph.csr()
        if node_time is not None:
            self.node_time = checked_times(node_time, graph.num_nodes, "node_time")
            when = self.node_time[csr.indices]
        else:
            self.node_time = None
            when = checked_times(edge_time, graph.num_edges, "edge_time")[csr.edge_ids]
        rows = torch.repeat_interleave(torch.arange(csr.indptr.numel() - 1), csr.indptr.diff())
        order = torch.sort(when, stable=True).indices
        order = order[torch.sort(rows[order], stable=True).indices]  # each row's in-edges in time order
        self._indptr, self._indices, self._edge_ids = csr.indptr, csr.indices[order], csr.edge_ids[order]
        self.edge_time = None if self.node_time is not None else when[order]
        if relation is None:
            self.fanouts = torch.tensor(checked_fanouts(fanouts), dtype=torch.int64).view(-1, 1)
            self._relation = torch.zeros(graph.num_edges, dtype=torch.int64)
        else:
            self._relation = torch.as_tensor(relation, dtype=torch.int64)[self._edge_ids]
            hops = [checked_fanouts(hop, "fanouts[h]") for hop in fanouts]
            width = int(self._relation.max()) + 1 if self._relation.numel() else 1
            if any(len(hop) != width for hop in hops):
                raise ValueError(f"fanouts: each hop needs one fan-out per relation ({width})")
            self.fanouts = torch.tensor(hops, dtype=torch.int64).view(len(hops), width)

    def seed_times(self, seeds: torch.Tensor) -> torch.Tensor:
        """The seeds' own times (node-level times only: edge-level ones need the seeds' times given)."""
        if self.node_time is None:
            raise ValueError("input_time is required with edge-level times: a seed vertex has no time of its own")
        return self.node_time[seeds]

    def sample(self, seeds: Any, seed_time: Any, seed: int) -> DisjointBatch:
        """A subgraph per seed (repeats allowed) under its time ``seed_time``; ``seed`` fixes the draws."""
        seeds = torch.as_tensor(seeds)
        if seeds.dim() != 1 or seeds.is_floating_point() or seeds.dtype == torch.bool:
            raise ValueError(f"seeds: expected a 1-D tensor of vertex ids, got {seeds.dtype} {tuple(seeds.shape)}")
        seeds = seeds.to(torch.int64)
        if seeds.numel() and (int(seeds.min()) < 0 or int(seeds.max()) >= self.graph.num_nodes):
            raise ValueError(f"seeds holds a vertex id out of range for a graph of {self.graph.num_nodes} vertices")
        times = checked_times(seed_time, seeds.numel(), "seed_time")
        generator = torch.Generator().manual_seed(seed)
        num_nodes = self.graph.num_nodes
        count = seeds.numel()
        subgraph, vertex = torch.arange(count), seeds.clone()  # every batch vertex, in order of appearance
        keys, ids = _sorted_keys(subgraph * num_nodes + vertex)
        frontier = torch.arange(count)
        edges_src, edges_dst, edge_ids = [], [], []
        for fanout in self.fanouts:
            group, src, eid, when = self._allowed(vertex[frontier], times[subgraph[frontier]])
            group, src, eid = self._chosen(group, src, eid, when, fanout, generator)
            owner = subgraph[frontier][group]
            found, known = _lookup(keys, ids, owner * num_nodes + src)
            new_keys, first = torch.unique(owner[~found] * num_nodes + src[~found], return_inverse=True)
            rank = _first_appearance(first, new_keys.numel())  # new vertices numbered as they first appear
            src_ids = known.clone()
            src_ids[~found] = vertex.numel() + rank[first]
            edges_src.append(src_ids)
            edges_dst.append(frontier[group])
            edge_ids.append(self._edge_ids[eid])
            appended = torch.empty_like(new_keys)
            appended[rank] = new_keys
            frontier = vertex.numel() + torch.arange(appended.numel())
            subgraph = torch.cat([subgraph, appended // num_nodes])
            vertex = torch.cat([vertex, appended % num_nodes])
            keys, ids = _sorted_keys(subgraph * num_nodes + vertex)
        # the layout of ``NeighborSampler.sample_disjoint``: seeds, then each subgraph's vertices, subgraph by subgraph
        rest = count + torch.sort(subgraph[count:], stable=True).indices
        placed = torch.cat([torch.arange(count), rest])
        position = torch.empty_like(placed)
        position[placed] = torch.arange(placed.numel())
        empty = torch.zeros(0, dtype=torch.int64)
        src, dst, e_id = (torch.cat([empty, *parts]) for parts in (edges_src, edges_dst, edge_ids))
        by_subgraph = torch.sort(subgraph[dst], stable=True).indices
        edge_index = torch.stack([position[src], position[dst]])[:, by_subgraph]
        return DisjointBatch(edge_index, vertex[placed], e_id[by_subgraph], subgraph[placed])

    def _allowed(
        self, frontier: torch.Tensor, limit: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The in-edges of each frontier vertex whose time is at most its subgraph's: (frontier position, source,
        CSR position, time)."""
        indptr, indices = self._indptr, self._indices
        start, degree = indptr[frontier], indptr[frontier + 1] - indptr[frontier]
        group = torch.repeat_interleave(torch.arange(frontier.numel()), degree)
        offset = torch.arange(group.numel()) - torch.repeat_interleave(degree.cumsum(0) - degree, degree)
        position = start[group] + offset
        src = indices[position]
        when = self.node_time[src] if self.node_time is not None else self.edge_time[position]
        keep = when <= limit[group].to(torch.promote_types(when.dtype, limit.dtype))
        return group[keep], src[keep], position[keep], when[keep]

    def _chosen(
        self,
        group: torch.Tensor,
        src: torch.Tensor,
        eid: torch.Tensor,
        when: torch.Tensor,
        fanouts: torch.Tensor,
        generator: torch.Generator,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Up to the relation's fan-out (``fanouts[relation]``, -1: all) of each group's edges of that relation,
        grouped, each group in time order: random ones or the latest ones."""
        if group.numel() == 0 or bool((fanouts < 0).all()):
            return group, src, eid
        if self.strategy == "uniform":
            order = torch.sort(torch.rand(group.numel(), generator=generator)).indices
        else:  # the latest first, ties in the listed order
            order = torch.sort(when.to(torch.float64), descending=True, stable=True).indices
        relation = self._relation[eid]
        key = group * fanouts.numel() + relation
        order = order[torch.sort(key[order], stable=True).indices]  # grouped, each (group, relation) in that order
        grouped = key[order]
        rank = torch.arange(grouped.numel()) - torch.searchsorted(grouped, grouped)
        limit = fanouts[relation[order]]
        chosen = torch.sort(order[(limit < 0) | (rank < limit)]).values  # back to the listed (time) order
        return group[chosen], src[chosen], eid[chosen]


def _sorted_keys(keys: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(keys sorted, the position of each in the input)."""
    return torch.sort(keys)


def _lookup(keys: torch.Tensor, ids: torch.Tensor, wanted: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Whether each wanted key is among the sorted ``keys``, and its id where it is."""
    at = torch.searchsorted(keys, wanted).clamp(max=max(keys.numel() - 1, 0))
    found = keys[at] == wanted if keys.numel() else torch.zeros_like(wanted, dtype=torch.bool)
    return found, torch.where(found, ids[at], -1)


def _first_appearance(inverse: torch.Tensor, count: int) -> torch.Tensor:
    """Unique values' ranks by their first occurrence (``inverse`` from ``torch.unique``)."""
    first = torch.full((count,), inverse.numel(), dtype=torch.int64)
    first.scatter_reduce_(0, inverse, torch.arange(inverse.numel()), "amin")
    return torch.argsort(torch.argsort(first))
