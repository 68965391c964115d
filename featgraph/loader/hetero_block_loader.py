"""``HeteroBlockLoader``: mini-batches of a typed graph as one typed block per layer, DGL's ``DataLoader`` with
``NeighborSampler`` on a heterogeneous graph.

A batch unpacks as ``input_nodes, output_nodes, blocks``, each of the first two a dict node type -> global
(type-local) ids: ``blocks[0]`` reads the rows of ``input_nodes`` per node type, each block's destinations
(per node type a prefix of its sources) are the next block's sources, the last block's destinations are the
seeds. A DGL-style model runs
``for block, layer in zip(blocks, layers): h = layer(block, h)`` with ``featgraph.nn.HeteroGraphConv``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from ..sampling.hetero import HeteroBlock
from .base import EpochLoader
from .block_loader import MovableBatch
from .hetero_loader import edge_weights, typed_input, typed_rows, typed_sampler, typed_source
from .source import checked_idtype, checked_input_nodes, graph_counts


@dataclass(frozen=True)
class HeteroBlockBatch(MovableBatch):
    """``input_nodes`` and ``seeds`` (per node type), ``blocks`` (input layer first), ``input_id`` (the seeds'
    positions among the loader's inputs, in the order the seeds' types were given); ``x``: per node type that
    has a per-vertex ``x``, its ``input_nodes`` rows; ``y``: per seed type with a per-vertex ``y``, its seeds'
    rows. Unpacks as DGL's ``(input_nodes, output_nodes, blocks)``."""

    input_nodes: dict[str, torch.Tensor]
    seeds: dict[str, torch.Tensor]
    blocks: list[HeteroBlock]
    input_id: torch.Tensor
    x: dict[str, torch.Tensor]
    y: dict[str, torch.Tensor]

    def __iter__(self) -> Iterator[Any]:
        return iter((self.input_nodes, self.seeds, self.blocks))

    @property
    def batch_size(self) -> int:
        return self.input_id.numel()


class HeteroBlockLoader(EpochLoader[HeteroBlockBatch]):
    """Mini-batches of a typed graph's vertices as typed blocks: ``data`` a PyG ``HeteroData``, a typed
    ``(FeatureStore, GraphStore)`` pair or a featgraph ``HeteroGraph``; ``fanouts`` one per-hop list for every
    edge type or a dict of them per edge type, hop 0 from the seeds (``blocks[-1 - h]`` is hop ``h``'s block;
    -1: every in-edge). ``input_nodes``: DGL's dict node type -> ids (or boolean mask), or PyG's node type or
    ``(node type, ids)``; the batches cut the seeds of every given type, in that order. ``weight_attr`` names a
    per-edge value every edge type holds, to draw in proportion to. ``batch_size``, ``shuffle``, ``replace``,
    ``seed``, ``num_workers``, ``prefetch``, ``drop_last``, ``pin_memory``, ``idtype`` and ``use_ddp`` as in
    ``BlockLoader``; ``edge_attrs`` (edge type -> per-edge tensors by name, given with a ``HeteroGraph``) for
    ``weight_attr`` to name (a bool one is a sampling mask).
    """

    def __init__(
        self,
        data: Any,
        fanouts: Any,
        batch_size: int = 1024,
        *,
        input_nodes: Any,
        shuffle: bool = True,
        replace: bool = False,
        seed: int | None = None,
        num_workers: int = 0,
        prefetch: int = 2,
        drop_last: bool = False,
        weight_attr: str | None = None,
        pin_memory: bool = False,
        worker_processes: int = 0,
        idtype: torch.dtype = torch.int64,
        use_ddp: bool = False,
        edge_attrs: Mapping[Any, Mapping[str, Any]] | None = None,
    ) -> None:
        self.source = source = typed_source(data, edge_attrs)
        graph = source.graph
        self.idtype = checked_idtype(idtype, graph_counts(graph.graph))
        if graph.device.type != "cpu":
            raise ValueError(f"data: the typed graph is on {graph.device}; the sampler runs on the CPU")
        if not isinstance(input_nodes, Mapping):
            input_nodes = dict([typed_input(input_nodes, graph.node_types)])
        if not input_nodes:
            raise ValueError("input_nodes: expected at least one node type's seeds")
        self.input_types: tuple[str, ...] = tuple(input_nodes)
        parts = []
        for node_type, ids in input_nodes.items():
            typed_input((node_type, ids), graph.node_types)  # names an unknown type
            local = checked_input_nodes(ids, graph.num_nodes_dict[node_type])
            parts.append(local + graph.node_offset(node_type))
        super().__init__(
            torch.cat(parts), batch_size, shuffle, seed, prefetch, drop_last, pin_memory, worker_processes, use_ddp
        )
        self.sampler = typed_sampler(source, fanouts, replace, edge_weights(source, weight_attr), num_workers)
        self.graph = graph

    def _batch(self, positions: torch.Tensor, seed: int) -> HeteroBlockBatch:
        graph = self.graph
        chosen = self.inputs[positions]
        types = graph.ntype[chosen]
        seeds, order = {}, []
        for node_type in self.input_types:
            mine = types == graph.node_type_id(node_type)
            seeds[node_type] = chosen[mine] - graph.node_offset(node_type)
            order.append(positions[mine])
        sampled = self.sampler.sample_blocks(seeds, seed)
        x = typed_rows(self.source, "x", sampled.input_nodes)
        y = typed_rows(self.source, "y", sampled.seeds)
        return HeteroBlockBatch(
            typed_ids(sampled.input_nodes, self.idtype),
            typed_ids(sampled.seeds, self.idtype),
            [block.astype(self.idtype) for block in sampled.blocks],
            torch.cat(order),
            x,
            y,
        )


def typed_ids(ids: dict[Any, torch.Tensor], idtype: torch.dtype) -> dict[Any, torch.Tensor]:
    """Each type's ids of ``idtype``."""
    return {t: part.to(idtype) for t, part in ids.items()}
