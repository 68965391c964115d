"""``NeighborLoader``: PyG's loader of the same name, on featgraph's compiled sampler.

Each batch is laid out as PyG's: a ``Data`` (or, without PyG, a ``Batch`` with the same attribute names)
over the sampled vertices ``n_id`` (the ``batch_size`` seeds first) with every per-vertex tensor sliced by
``n_id``, one ``edge_index`` in local ids holding each sampled vertex's in-edges once, every per-edge tensor
sliced by ``e_id``, and ``input_id``, ``num_sampled_nodes``, ``num_sampled_edges`` per hop. An unchanged
PyG model trains on it: ``model(batch.x, batch.edge_index)[:batch.batch_size]``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

import torch

from ..sampling import MiniBatch
from ..sampling.disjoint import DisjointBatch, checked_times
from .base import SeedLoader, gathered
from .hetero_loader import HeteroNeighborLoader, is_typed
from .source import (
    LoaderSource,
    checked_batching_flags,
    checked_input_nodes,
    checked_subgraph_type,
    is_mask,
    loader_source,
    sliced_adjacency,
)


class Batch:
    """A mini-batch when PyG is not installed: PyG ``Data``'s attribute names (``x``, ``y``,
    ``edge_index``, ``n_id``, ``e_id``, ``batch_size``, ...), item access and ``to(device)``."""

    def __init__(self, **attrs: Any) -> None:
        self.__dict__.update(attrs)

    def keys(self) -> list[str]:
        """The names of the batch's attributes, as PyG's ``Data.keys()``."""
        return list(self.__dict__)

    def __getitem__(self, key: str) -> Any:
        return self.__dict__[key]

    def __contains__(self, key: str) -> bool:
        return key in self.__dict__

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Batch:
        """A batch whose tensors are on ``device`` (other values shared)."""
        return self._mapped(lambda t: t.to(device, non_blocking=non_blocking))

    def pin_memory(self) -> Batch:
        """A batch whose tensors are in page-locked memory, for non-blocking copies to a GPU."""
        return self._mapped(torch.Tensor.pin_memory)

    def _mapped(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> Batch:
        return Batch(**{k: fn(v) if isinstance(v, torch.Tensor) else v for k, v in self.__dict__.items()})

    def __repr__(self) -> str:
        parts = [
            f"{key}={list(value.shape)}" if isinstance(value, torch.Tensor) else f"{key}={value!r}"
            for key, value in self.__dict__.items()
        ]
        return f"Batch({', '.join(parts)})"


@cache
def pyg_data_class() -> type | None:
    """PyG's ``Data`` where PyG is installed, else None: featgraph itself needs no PyG."""
    try:
        from torch_geometric.data import Data
    except ImportError:
        return None
    return Data


class NeighborLoader(SeedLoader[Any]):
    """Mini-batches of ``data``'s vertices with sampled ``num_neighbors[h]`` in-neighbours per vertex at
    hop ``h`` (-1: all), PyG's ``NeighborLoader`` interface and batch layout.

    ``data``: a PyG ``Data``, a featgraph ``Dataset``, or a featgraph ``Graph`` with ``x`` and ``y`` given
    here. A ``Data`` holding its edges as a sparse ``adj_t`` (PyG's ``ToSparseTensor``: torch COO, CSR or CSC, or
    a ``SparseTensor``) or ``adj`` samples those, and its batches carry, as PyG's, the sampled ``adj_t`` (``adj``)
    of the same kind, its values sliced by ``e_id``, and no ``edge_index`` unless the data holds one too.
    ``input_nodes``: seed vertex ids or a boolean mask (None: every vertex), each seed once per epoch
    (a batch's ``input_id``: its seeds' positions in the ids, or with a mask their vertex ids, as PyG),
    ``batch_size`` per batch (the last one smaller unless ``drop_last``), shuffled each epoch when
    ``shuffle``. ``weight_attr`` names a per-edge tensor to draw neighbours in proportion to. ``seed``,
    ``num_workers``, ``prefetch`` and ``pin_memory`` as in ``SeedLoader``, ``worker_processes`` as in
    ``EpochLoader`` (batches made in that many spawned processes). ``subgraph_type``: "directional"
    (the sampled edges) or "bidirectional" (each also reversed, per-hop counts dropped, as PyG); ``is_sorted``
    and ``filter_per_worker`` are PyG's and change nothing here. ``disjoint``: each seed its own subgraph
    (``sampling.DisjointSampler``: every seed's subgraph drawn at once), a ``batch`` vector naming each vertex's.
    ``time_attr`` names a per-vertex or per-edge tensor of times: each seed then samples its own subgraph
    (disjoint, as PyG) of in-edges whose source (per-vertex times) or own time (per-edge) is at most the seed's
    time: ``input_time`` (one per input node) or else the seed's own per-vertex time; ``temporal_strategy``
    "uniform" or "last" (the latest in-edges); the batch's ``seed_time`` holds the seeds' times.
    The full graph and its CSR are built once, here. A PyG ``HeteroData`` gets a ``HeteroNeighborLoader``, as
    PyG's class serves both.
    """

    def __new__(cls, data: Any = None, *args: Any, **kwargs: Any) -> Any:
        if is_typed(data):
            return HeteroNeighborLoader(data, *args, **kwargs)
        return super().__new__(cls)

    def __init__(
        self,
        data: Any,
        num_neighbors: Sequence[int] = (15, 10),
        *,
        batch_size: int = 1,
        shuffle: bool = False,
        input_nodes: Any = None,
        replace: bool = False,
        seed: int | None = None,
        num_workers: int = 0,
        prefetch: int = 2,
        drop_last: bool = False,
        weight_attr: str | None = None,
        pin_memory: bool = False,
        x: Any = None,
        y: Any = None,
        subgraph_type: Any = "directional",
        is_sorted: bool = False,
        filter_per_worker: bool | None = None,
        disjoint: bool = False,
        time_attr: str | None = None,
        input_time: Any = None,
        temporal_strategy: str = "uniform",
        worker_processes: int = 0,
    ) -> None:
        self.bidirectional = checked_subgraph_type(subgraph_type)
        checked_batching_flags(is_sorted, filter_per_worker)
        source = loader_source(data, x, y)
        inputs = checked_input_nodes(input_nodes, source.graph.num_nodes)
        super().__init__(
            source, num_neighbors, "num_neighbors", batch_size, shuffle, inputs, replace, seed, num_workers,
            prefetch, drop_last, weight_attr, pin_memory=pin_memory, time_attr=time_attr,
            temporal_strategy=temporal_strategy, disjoint=disjoint, worker_processes=worker_processes,
        )  # fmt: skip
        self.input_time = None
        if input_time is not None:
            if time_attr is None:
                raise ValueError(
                    "input_time is given without time_attr: it sets the seeds' times for temporal sampling"
                )
            self.input_time = checked_times(input_time, inputs.numel(), "input_time")
        self.batch_class = pyg_data_class() or Batch
        self.input_id_is_vertex = is_mask(input_nodes)

    def _batch(self, positions: torch.Tensor, seed: int) -> Any:
        seeds = self.inputs[positions]
        if self.disjoint_sampler is None:
            return self._make(positions, self.sampler.sample(seeds, seed))
        if self.time_attr is None:
            return self._make(positions, self.disjoint_sampler.sample(seeds, None, seed))
        # temporal sampling, always disjoint as PyG's: each seed's subgraph under its own time
        sampler = self.disjoint_sampler
        times = sampler.seed_times(seeds) if self.input_time is None else self.input_time[positions]
        return self._make(positions, sampler.sample(seeds, times, seed), seed_time=times)

    def _make(self, positions: torch.Tensor, batch: MiniBatch | DisjointBatch, **extra: Any) -> Any:
        attrs = flat_attrs(self.source, batch, self.bidirectional)
        input_id = self.inputs[positions] if self.input_id_is_vertex else positions
        attrs.update(batch_size=positions.numel(), input_id=input_id, **extra)
        return self.batch_class(**attrs)


def flat_attrs(source: LoaderSource, batch: MiniBatch | DisjointBatch, bidirectional: bool = False) -> dict[str, Any]:
    """PyG's flat layout of a sampled ``batch``: ``edge_index`` in local ids, ``n_id``, ``e_id``, ``num_nodes``,
    the per-hop counts, the source's per-vertex and per-edge tensors gathered and its graph-level values; a
    disjoint batch brings each vertex's subgraph (``batch``) instead of the per-hop counts.
    ``bidirectional`` (PyG's ``subgraph_type="bidirectional"``): every sampled edge also reversed, each pair
    once, and no per-hop counts, which no longer describe the edges (PyG drops them too)."""
    attrs: dict[str, Any] = dict(source.graph_attrs)
    if isinstance(batch, DisjointBatch):
        n_id, e_id, edge_index = batch.n_id, batch.e_id, batch.edge_index
        attrs["batch"] = batch.batch
    else:
        flat = batch.to_edge_index()
        n_id, e_id, edge_index = flat.n_id, flat.e_id, flat.edge_index
    if bidirectional:
        edge_index, e_id = both_ways(edge_index, e_id, n_id.numel())
    elif not isinstance(batch, DisjointBatch):
        # vertices reached at each hop (seeds first) and the edges into each hop's vertices: the flat edges run
        # hop by hop, each hop's grouped by destination, so their destinations ascend
        num_sampled_nodes = [batch.batch_size] + [
            block.graph.num_src_nodes - block.graph.num_dst_nodes for block in reversed(batch.blocks)
        ]
        reached = torch.tensor(num_sampled_nodes).cumsum(0)  # vertices reached by the end of each hop
        edge_ends = torch.searchsorted(edge_index[1], reached)
        num_sampled_edges = torch.diff(edge_ends, prepend=torch.zeros(1, dtype=torch.int64))[:-1]
        attrs.update(num_sampled_nodes=num_sampled_nodes, num_sampled_edges=num_sampled_edges.tolist())
    attrs.update({key: gathered(value, n_id) for key, value in source.node_attrs.items()})
    attrs.update({key: gathered(value, e_id) for key, value in source.edge_attrs.items()})
    attrs.update(edge_index=edge_index, n_id=n_id, e_id=e_id, num_nodes=n_id.numel())
    for key, matrix in source.sparse_edges.items():  # PyG's batch of a Data holding adj_t: the sampled adj_t
        attrs[key] = sliced_adjacency(matrix, key, edge_index, e_id, n_id.numel(), n_id.numel())
    if not source.edge_index:
        del attrs["edge_index"]
    return attrs


def both_ways(edge_index: torch.Tensor, e_id: torch.Tensor, num_nodes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``edge_index`` with each edge also reversed, each (source, destination) pair once, sorted by destination
    then source (PyG's coalesce by column); a pair keeps the id of its first occurrence, the sampled edge's
    before a reversed one's."""
    both = torch.cat([edge_index, edge_index.flip(0)], dim=1)
    ids = torch.cat([e_id, e_id])
    pairs, inverse = torch.unique(both[1] * num_nodes + both[0], return_inverse=True)
    positions = torch.arange(inverse.numel())
    first = torch.full((pairs.numel(),), inverse.numel()).scatter_reduce(0, inverse, positions, "amin")
    return torch.stack([pairs % num_nodes, pairs // num_nodes]), ids[first]
