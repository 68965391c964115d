"""``HeteroGraphConv``: DGL's wrapper of one module per relation, on featgraph's typed graph or on DGL's graph; the
outputs into a node type combined as DGL combines them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from ..graph.hetero import EdgeType, HeteroGraph
from ..graph.interop import is_dgl_graph
from ..sampling.hetero import HeteroBlock


def _relations(g: HeteroGraph | HeteroBlock | Any) -> tuple[list[tuple[EdgeType, Any]], dict[str, int] | None]:
    """Each edge type of ``g`` with the graph its module is given (DGL's relation subgraph on a DGL graph, else
    featgraph's relation graph), and on a block each destination type's count (None on a graph)."""
    if is_dgl_graph(g):
        block_dst = {t: g.num_dst_nodes(t) for t in g.dsttypes} if g.is_block else None
        return [(edge_type, g[edge_type]) for edge_type in g.canonical_etypes], block_dst
    graph = g if isinstance(g, (HeteroGraph, HeteroBlock)) else HeteroGraph.from_dgl(g)
    block_dst = {t: graph.num_dst_nodes(t) for t in graph.n_id} if isinstance(graph, HeteroBlock) else None
    return [(edge_type, graph.relation(edge_type)) for edge_type in graph.edge_types], block_dst


AGGREGATES: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {  # over the stacked outputs, as DGL's
    "sum": lambda stacked: stacked.sum(0),
    "max": lambda stacked: stacked.max(0).values,
    "min": lambda stacked: stacked.min(0).values,
    "mean": lambda stacked: stacked.mean(0),
}


class HeteroGraphConv(nn.Module):
    """DGL's ``HeteroGraphConv(mods, aggregate="sum")``: ``mods`` maps a relation name or a canonical edge type
    ``(src, rel, dst)`` to a module, called as DGL calls it, ``mod(graph, (x_src, x_dst), *args, **kwargs)``,
    with the relation's ``featgraph.Graph`` (local ids; bipartite between two node types) or, on a DGL graph or
    block, DGL's relation subgraph ``g[src, rel, dst]``, so DGL's own modules run inside too. ``aggregate``:
    "sum", "max", "min", "mean", "stack" (the outputs along a new dimension 1) or a callable
    ``(outputs, destination type) -> tensor``. The modules sit in ``mods`` (a ``ModuleDict`` keyed by
    ``str(key)``), as DGL's, so a DGL state dict of the same modules loads; a module with
    ``set_allow_zero_in_degree`` is told to allow vertices without in-edges, as DGL tells it."""

    def __init__(self, mods: Mapping[Any, nn.Module], aggregate: str | Callable = "sum") -> None:
        super().__init__()
        if not isinstance(mods, Mapping) or not mods:
            raise ValueError("mods: expected a non-empty dict of relation (or edge type) -> module")
        for key, module in mods.items():
            if not isinstance(module, nn.Module):
                raise TypeError(f"mods[{key!r}]: expected a torch.nn.Module, got {type(module).__name__}")
        if not callable(aggregate) and aggregate not in (*AGGREGATES, "stack"):
            raise ValueError(f"aggregate must be one of {(*AGGREGATES, 'stack')} or a callable, got {aggregate!r}")
        self.mod_dict = dict(mods)
        self.mods = nn.ModuleDict({str(key): module for key, module in mods.items()})
        for module in self.mods.values():
            allow = getattr(module, "set_allow_zero_in_degree", None)
            if callable(allow):
                allow(True)
        self.aggregate = aggregate

    def module_of(self, edge_type: EdgeType) -> nn.Module:
        """The module of ``edge_type``: by its canonical type, else by its relation name."""
        module = self.mod_dict.get(edge_type, self.mod_dict.get(edge_type[1]))
        if module is None:
            raise KeyError(f"mods: no module for edge type {edge_type!r} (by its edge type or its relation name)")
        return module

    def forward(
        self,
        g: HeteroGraph | Any,
        inputs: Mapping[str, torch.Tensor] | tuple[Mapping[str, torch.Tensor], Mapping[str, torch.Tensor]],
        mod_args: Mapping[Any, tuple] | None = None,
        mod_kwargs: Mapping[Any, dict] | None = None,
    ) -> dict[str, torch.Tensor]:
        """Per destination type, its relations' outputs combined; ``g`` a ``HeteroGraph``, a typed block
        (``HeteroBlock``), a DGL graph or block, or DGL-style dicts; ``inputs`` a dict node type -> features, or a
        pair (sources' dict, destinations' dict); on a block a dict is the sources' and each type's destinations
        are its first rows. As DGL, a relation whose source type has no input (or, with a pair or a block, whose
        destination type has none) is skipped; ``mod_args`` / ``mod_kwargs`` hold each relation's extra
        arguments by relation name."""
        relations, block_dst = _relations(g)
        paired = isinstance(inputs, tuple) or block_dst is not None
        if isinstance(inputs, tuple):
            src_inputs, dst_inputs = inputs
        elif block_dst is not None:  # a block's destinations: each type's sources' prefix, as DGL's
            src_inputs = inputs
            dst_inputs = {t: x[: block_dst[t]] for t, x in inputs.items() if t in block_dst}
        else:
            src_inputs, dst_inputs = inputs, inputs
        outputs: dict[str, list[torch.Tensor]] = {}
        for edge_type, relation in relations:
            src_type, rel, dst_type = edge_type
            if src_type not in src_inputs or (paired and dst_type not in dst_inputs):
                continue
            if dst_type not in dst_inputs:
                raise KeyError(f"inputs: no features of node type {dst_type!r}, the destinations of {edge_type!r}")
            args = (mod_args or {}).get(rel, ())
            kwargs = (mod_kwargs or {}).get(rel, {})
            out = self.module_of(edge_type)(relation, (src_inputs[src_type], dst_inputs[dst_type]), *args, **kwargs)
            outputs.setdefault(dst_type, []).append(out)
        return {dst_type: self._combined(values, dst_type) for dst_type, values in outputs.items()}

    def _combined(self, values: list[torch.Tensor], dst_type: str) -> torch.Tensor:
        if callable(self.aggregate):
            return self.aggregate(values, dst_type)
        if self.aggregate == "stack":
            return torch.stack(values, dim=1)
        return AGGREGATES[self.aggregate](torch.stack(values, dim=0))
