"""``HeteroConv``: PyG's wrapper of one layer per edge type, the relations into a node type summed in one
dense product where their layers allow (``relation_sum``)."""

from __future__ import annotations

from typing import Any

import torch
import torch_geometric.nn

from .relation_sum import RelationTerm, relation_part, sum_of_relation_parts

SUMMED = ("sum", "mean")  # the aggregations over relations the fused sum serves (mean: the sum over R)


class HeteroConv(torch_geometric.nn.HeteroConv):
    """PyG's ``HeteroConv`` (constructor, parameters, every call it takes). With ``aggr="sum"`` or ``"mean"`` and
    a call ``(x_dict, edge_index_dict)``, the relations into each node type whose layers are featgraph's
    ``SAGEConv`` or ``GraphConv`` (``accelerate`` makes them so) share one product of their weights; other
    layers, aggregations and calls run as PyG runs them."""

    def forward(self, *args_dict: Any, **kwargs_dict: Any) -> dict[str, torch.Tensor]:
        if self.aggr not in SUMMED or len(args_dict) != 2 or kwargs_dict:
            return super().forward(*args_dict, **kwargs_dict)
        calls: list[tuple[str, torch.nn.Module, list[Any]]] = []
        for edge_type, conv in self.convs.items():
            args = edge_type_args(edge_type, args_dict)
            if args is None:
                continue
            if len(args) != 2:  # a value dict without this edge type's node types: PyG passes fewer arguments
                return super().forward(*args_dict)
            calls.append((edge_type[2], conv, args))
        groups: dict[str, list[RelationTerm | torch.Tensor]] = {}
        for dst, conv, args in calls:  # PyG's call order: lazy layers draw their weights in it
            groups.setdefault(dst, []).append(relation_part(conv, args[0], args[1]))
        out = {dst: sum_of_relation_parts(parts) for dst, parts in groups.items()}
        if self.aggr == "mean":
            out = {dst: value / len(groups[dst]) for dst, value in out.items()}
        return out


def edge_type_args(edge_type: tuple[str, str, str], args_dict: tuple[dict, ...]) -> list[Any] | None:
    """The positional arguments PyG's ``HeteroConv`` gives the layer of ``edge_type``, or None where no
    argument is the edge type's own (PyG then skips the layer)."""
    src, _, dst = edge_type
    args, own = [], False
    for value_dict in args_dict:
        if edge_type in value_dict:
            own = True
            args.append(value_dict[edge_type])
        elif src == dst and src in value_dict:
            args.append(value_dict[src])
        elif src in value_dict or dst in value_dict:
            args.append((value_dict.get(src, None), value_dict.get(dst, None)))
    return args if own else None
