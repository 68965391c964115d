"""``BlockLoader``: mini-batches as one bipartite block per layer, DGL's ``DataLoader`` shape.

A batch unpacks as ``input_nodes, seeds, blocks``: ``blocks[0]`` is the input layer's block, whose sources
are ``input_nodes``; each block's destinations are the next block's sources, a prefix of its own, so each
layer computes only the rows the next layer reads, and the last block's destinations are the seeds. A model
runs ``for block, layer in zip(blocks, layers): h = layer((h, h[:block.graph.num_dst_nodes]), block.graph)``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import torch

from ..sampling import Block, MiniBatch
from .base import SeedLoader, gathered
from .source import checked_idtype, checked_input_nodes, graph_counts, loader_source


class MovableBatch:
    """``to`` and ``pin_memory`` for the frozen dataclass batches of blocks: every field moved, a tensor by
    itself, a dict or list item by item, a graph or block (anything with ``to`` and ``pin_memory``) by its own
    methods; other values (None, a numpy array's rows) as they are."""

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Any:
        """The batch on ``device``: ids, features, labels and each graph or block (as PyG's ``Data.to``)."""
        return self._moved(lambda t: t.to(device, non_blocking=non_blocking), lambda g: g.to(device, non_blocking))

    def pin_memory(self) -> Any:
        """The batch in page-locked memory, so ``to("cuda", non_blocking=True)`` overlaps its copies."""
        return self._moved(torch.Tensor.pin_memory, lambda g: g.pin_memory())

    def _moved(self, move: Callable[[torch.Tensor], torch.Tensor], move_graph: Callable[[Any], Any]) -> Any:
        def each(value: Any) -> Any:
            if isinstance(value, torch.Tensor):
                return move(value)
            if hasattr(value, "pin_memory"):  # a graph, a block, a typed pair graph (a dict with its own moves)
                return move_graph(value)
            if isinstance(value, dict):
                return {key: each(item) for key, item in value.items()}
            if isinstance(value, list):
                return [each(item) for item in value]
            return value

        return replace(self, **{f.name: each(getattr(self, f.name)) for f in fields(self)})


@dataclass(frozen=True)
class BlockBatch(MovableBatch):
    """``input_nodes`` (global ids of the first block's sources), ``seeds`` and ``blocks`` (input layer
    first); ``x`` holds ``x[input_nodes]`` and ``y`` ``y[seeds]`` when the loader has them, else None.
    Unpacks as DGL's ``(input_nodes, seeds, blocks)``; ``input_id``: the seeds' positions in the loader's
    ``input_nodes``."""

    input_nodes: torch.Tensor
    seeds: torch.Tensor
    blocks: list[Block]
    input_id: torch.Tensor
    x: torch.Tensor | None = None
    y: torch.Tensor | None = None

    def __iter__(self) -> Iterator[Any]:
        return iter((self.input_nodes, self.seeds, self.blocks))

    @property
    def batch_size(self) -> int:
        return self.seeds.numel()


class BlockLoader(SeedLoader[BlockBatch]):
    """Mini-batches of ``graph_or_data``'s vertices as per-layer blocks, ``fanouts[h]`` in-neighbours drawn
    per vertex at hop ``h`` from the seeds (-1: all; ``blocks[-1 - h]`` is hop ``h``'s block).

    ``graph_or_data``: a featgraph ``Graph`` (with ``x``/``y`` given here if the batches should carry them),
    a featgraph ``Dataset`` or a PyG ``Data``. ``self_loops=True`` has the background thread also build each
    block's graph with self loops, which GATConv and other layers adding self loops run on, so the training
    step builds none. DGL's options: ``idtype`` (``torch.int32``: the batches' ids, ``input_nodes``, ``seeds`` and
    the blocks', are int32, as DGL's of an int32 graph), ``use_ddp`` (this rank's share of the seeds, as
    ``EpochLoader`` says), ``edge_attrs`` (per-edge tensors by name, given with a ``Graph``, for ``weight_attr``
    to name; a bool one is a sampling mask: edges marked False are never drawn). The other arguments are
    ``NeighborLoader``'s.
    """

    def __init__(
        self,
        graph_or_data: Any,
        fanouts: Sequence[int],
        batch_size: int = 1024,
        *,
        shuffle: bool = True,
        input_nodes: Any = None,
        replace: bool = False,
        seed: int | None = None,
        num_workers: int = 0,
        prefetch: int = 2,
        drop_last: bool = False,
        weight_attr: str | None = None,
        pin_memory: bool = False,
        self_loops: bool = False,
        x: Any = None,
        y: Any = None,
        worker_processes: int = 0,
        idtype: torch.dtype = torch.int64,
        use_ddp: bool = False,
        edge_attrs: Mapping[str, Any] | None = None,
    ) -> None:
        source = loader_source(graph_or_data, x, y, edge_attrs)
        self.idtype = checked_idtype(idtype, graph_counts(source.graph))
        super().__init__(
            source, fanouts, "fanouts", batch_size, shuffle, checked_input_nodes(input_nodes, source.graph.num_nodes),
            replace, seed, num_workers, prefetch, drop_last, weight_attr, self_loops, pin_memory=pin_memory,
            worker_processes=worker_processes, use_ddp=use_ddp,
        )  # fmt: skip

    def _make(self, positions: torch.Tensor, batch: MiniBatch) -> BlockBatch:
        attrs = self.source.node_attrs
        x, y = attrs.get("x"), attrs.get("y")
        return BlockBatch(
            batch.input_nodes.to(self.idtype),
            batch.seeds.to(self.idtype),
            [block.astype(self.idtype) for block in batch.blocks],
            positions,
            None if x is None else gathered(x, batch.input_nodes),
            None if y is None else gathered(y, batch.seeds),
        )
