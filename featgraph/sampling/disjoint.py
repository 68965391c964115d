"""Disjoint neighbour sampling (PyG's ``disjoint=True``): each seed samples its own subgraph, and temporal
sampling (PyG's ``time_attr``), always disjoint: from a seed with time ``t`` a hop draws an in-edge only if its
source's time (node-level times) or its own time (edge-level times) is at most ``t``, so no subgraph sees the
future of its seed.

All seeds of a batch are sampled together: each hop lists the in-edges of every (subgraph, vertex) pair on the
frontier from the CSR, keeps those the seed's time allows (and those of positive weight), and draws up to the
fan-out of them per pair: without replacement at random ("uniform", weighted by exponential races) or the latest
ones ("last"), or with replacement; vertices are relabelled per subgraph through a sorted key of (subgraph,
vertex).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import torch

from ..graph import Graph
from .neighbor import _checked_weight, checked_fanouts

STRATEGIES = ("uniform", "last")


class DisjointBatch(NamedTuple):
    """PyG's disjoint layout: one subgraph per seed, a vertex in as many subgraphs as reach it. ``n_id``: the
    seeds first, in the order given (repeats kept), then each subgraph's other vertices, subgraph by
    subgraph; ``batch``: each vertex's subgraph (its seed's position); ``edge_index`` in those batch ids,
    each subgraph's sampled edges once (PyG's flat form within it); ``e_id`` the global edge ids."""

    edge_index: torch.Tensor
    n_id: torch.Tensor
    e_id: torch.Tensor
    batch: torch.Tensor


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


class DisjointSampler:
    """Samples a subgraph per seed of ``graph`` (one vertex set, on the CPU) with ``fanouts`` (-1: all).
    ``node_time`` (one per vertex) or ``edge_time`` (one per edge, user order), at most one of them: each seed
    samples under its time; ``strategy`` "uniform" (a random subset of the allowed in-edges) or "last" (the
    latest ones). Each vertex's in-edges are listed in time order (ties in the user's order), as PyG sorts
    them for pyg-lib, so vertices first reached in one hop are numbered in that order. Without times:
    ``weight`` (one non-negative value per edge, user order) draws in proportion to it, never a zero-weight
    edge; ``replace`` draws with replacement. ``relation`` (one id per edge, user order, from 0) samples a typed
    graph's homogeneous view: ``fanouts[h]`` is then a list with one fan-out per relation, drawn separately
    for each (vertex, relation)."""

    def __init__(
        self,
        graph: Graph,
        fanouts: Sequence[Any],
        node_time: Any = None,
        edge_time: Any = None,
        strategy: str = "uniform",
        relation: torch.Tensor | None = None,
        weight: Any = None,
        replace: bool = False,
    ) -> None:
        if node_time is not None and edge_time is not None:
            raise ValueError("DisjointSampler takes node_time or edge_time, not both")
        timed = node_time is not None or edge_time is not None
        if timed and (weight is not None or replace):
            raise ValueError("weight and replace draw without times: temporal sampling draws uniformly, once each")
        if strategy not in STRATEGIES:
            raise ValueError(f"temporal_strategy must be one of {STRATEGIES}, got {strategy!r}")
        if not isinstance(replace, bool):
            raise TypeError(f"replace must be a bool, got {replace!r}")
        self.graph, self.strategy, self.replace = graph, strategy, replace
        csr = graph.csr()
        self.node_time = None if node_time is None else checked_times(node_time, graph.num_nodes, "node_time")
        if self.node_time is not None:
            when = self.node_time[csr.indices]
        elif edge_time is not None:
            when = checked_times(edge_time, graph.num_edges, "edge_time")[csr.edge_ids]
        else:
            when = torch.zeros(graph.num_edges, dtype=torch.int64)
        rows = torch.repeat_interleave(torch.arange(csr.indptr.numel() - 1), csr.indptr.diff())
        order = torch.sort(when, stable=True).indices
        order = order[torch.sort(rows[order], stable=True).indices]  # each row's in-edges in time order
        self._indptr, self._indices, self._edge_ids = csr.indptr, csr.indices[order], csr.edge_ids[order]
        self._time = when[order] if timed else None  # per listed edge: its source's or its own time
        self._weight = None if weight is None else _checked_weight(weight, graph.num_edges)[self._edge_ids]
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

    def sample(self, seeds: Any, seed_time: Any = None, seed: int = 0) -> DisjointBatch:
        """A subgraph per seed (repeats allowed), under its time ``seed_time`` where the sampler has times;
        ``seed`` fixes the draws."""
        seeds = torch.as_tensor(seeds)
        if seeds.dim() != 1 or seeds.is_floating_point() or seeds.dtype == torch.bool:
            raise ValueError(f"seeds: expected a 1-D tensor of vertex ids, got {seeds.dtype} {tuple(seeds.shape)}")
        seeds = seeds.to(torch.int64)
        if seeds.numel() and (int(seeds.min()) < 0 or int(seeds.max()) >= self.graph.num_nodes):
            raise ValueError(f"seeds holds a vertex id out of range for a graph of {self.graph.num_nodes} vertices")
        if (seed_time is None) != (self._time is None):
            raise ValueError("seed_time: one time per seed with a timed sampler, none without")
        times = torch.zeros(seeds.numel(), dtype=torch.int64) if seed_time is None else seed_time
        times = checked_times(times, seeds.numel(), "seed_time")
        generator = torch.Generator().manual_seed(seed)
        num_nodes = self.graph.num_nodes
        count = seeds.numel()
        subgraph, vertex = torch.arange(count), seeds.clone()  # every batch vertex, in order of appearance
        keys, ids = torch.sort(subgraph * num_nodes + vertex)  # ids: each key's vertex
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
            keys, ids = torch.sort(subgraph * num_nodes + vertex)  # ids: each key's vertex
        # PyG's disjoint layout: the seeds, then each subgraph's other vertices, subgraph by subgraph
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
        """The in-edges of each frontier vertex that its subgraph may draw (time at most its seed's, positive
        weight): (frontier position, source, listed position, time)."""
        indptr, indices = self._indptr, self._indices
        start, degree = indptr[frontier], indptr[frontier + 1] - indptr[frontier]
        group = torch.repeat_interleave(torch.arange(frontier.numel()), degree)
        offset = torch.arange(group.numel()) - torch.repeat_interleave(degree.cumsum(0) - degree, degree)
        position = start[group] + offset
        src = indices[position]
        if self._time is not None:
            when = self._time[position]
            keep = when <= limit[group].to(torch.promote_types(when.dtype, limit.dtype))
        else:
            when = torch.zeros_like(position)
            keep = (
                self._weight[position] > 0 if self._weight is not None else torch.ones_like(position, dtype=torch.bool)
            )
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
        grouped, each group in the listed (time) order: random ones (by weight, with or without replacement) or
        the latest ones."""
        if group.numel() == 0 or bool((fanouts < 0).all()):
            return group, src, eid
        relation = self._relation[eid]
        key = group * fanouts.numel() + relation
        if self.replace:
            chosen = self._drawn_with_replacement(key, eid, fanouts[relation], generator)
            return group[chosen], src[chosen], eid[chosen]
        if self.strategy == "last":  # the latest first, ties in the listed order
            order = torch.sort(when.to(torch.float64), descending=True, stable=True).indices
        else:  # a random order; by weight, the exponential races of Efraimidis and Spirakis
            race = torch.rand(group.numel(), generator=generator, dtype=torch.float64)
            if self._weight is not None:
                race = -torch.log1p(-race) / self._weight[eid]
            order = torch.sort(race).indices
        order = order[torch.sort(key[order], stable=True).indices]  # grouped, each (group, relation) in that order
        grouped = key[order]
        rank = torch.arange(grouped.numel()) - torch.searchsorted(grouped, grouped)
        limit = fanouts[relation[order]]
        chosen = torch.sort(order[(limit < 0) | (rank < limit)]).values  # back to the listed (time) order
        return group[chosen], src[chosen], eid[chosen]

    def _drawn_with_replacement(
        self, key: torch.Tensor, eid: torch.Tensor, limit: torch.Tensor, generator: torch.Generator
    ) -> torch.Tensor:
        """Positions drawn with replacement: ``limit`` draws per key's run of (grouped, listed) edges, uniform or
        by weight; every edge of a run whose limit is -1."""
        starts = torch.searchsorted(key, torch.unique_consecutive(key))  # the candidates come grouped by key
        sizes = torch.diff(starts, append=torch.tensor([key.numel()]))
        counts = limit[starts]
        every = counts < 0
        draws = torch.where(every, 0, counts)
        run = torch.repeat_interleave(torch.arange(starts.numel()), draws)
        u = torch.rand(run.numel(), generator=generator, dtype=torch.float64)
        if self._weight is None:
            picked = starts[run] + (u * sizes[run]).long().clamp(max=sizes[run] - 1)
        else:
            cumulative = torch.cumsum(self._weight[eid], 0)
            before = torch.where(starts > 0, cumulative[(starts - 1).clamp(min=0)], 0.0)
            total = cumulative[starts + sizes - 1] - before
            target = before[run] + u * total[run]
            picked = torch.searchsorted(cumulative, target, right=True).clamp(max=(starts + sizes - 1)[run])
            picked = torch.maximum(picked, starts[run])
        kept = torch.repeat_interleave(every, sizes)
        return torch.sort(torch.cat([torch.nonzero(kept).flatten(), picked])).values


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
