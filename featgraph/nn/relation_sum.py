"""The sum over relations of GraphSAGE- or GraphConv-style layers into one node type, as PyG's ``HeteroConv``
(``aggr="sum"``) and ``to_hetero`` models end each layer, with one typed aggregation and one dense product.

Per relation r such a layer gives ``lin_r(aggr_r x_src_r) + root_r(x_dst)``. Relations whose aggregation is a
sum or a mean and whose sources have one width are R-GCN's relational aggregation, ``sum_r W_r aggr_r``: one
``ops.relational_aggregate`` call over the relations' edges as one graph (the distinct source tensors stacked,
each edge carrying its relation's index) where the relations are sparse (their (relation, destination) pairs
with edges at most half of relations x destinations), which picks transform-first or aggregate-first by multiply-add
counts over the (relation, vertex) pairs that have edges, so a relation's product reads only its sources or
destinations that have edges of it. That graph is built once per set of relation graphs (two layers of a model
share it). The root products of relations that read the same destination rows are merged into one weight,
and what is left (the roots, relations aggregated by max, one relation alone) is one dense product
``[aggr_a | ... | x_dst] @ [W_a | ... | sum_r Root_r]^T`` with the relational sum and the biases as its
addend (a lone relation whose weight belongs before its aggregation, ``linear_first``, joins the addend).
Under ``torch.compile``, whose traced graphs carry no formats, every relation keeps its own SpMM.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from ..graph import Graph
from ..ops import gspmm, relational_aggregate
from ..ops.relational import plan
from .pyg_layer import linear_first

LINEAR_AGGREGATIONS = ("sum", "mean")  # the aggregations a weight commutes with
# above this share of (relation, destination) pairs with edges, the relations' aggregations go side by side
# into the one dense product: on mag-like (four relations into papers, most papers reached by each) that is
# 0.93x the relational aggregation's time, on graphs of 10-90 sparse relations 1.5x-6x slower
# (``featgraph bench hetero --layer heteroconv``)
DENSE_PAIRS = 0.5


@dataclass
class RelationTerm:
    """One relation's ``lin(reduce_{u -> v} x_src[u]) + root(x_dst[v])`` (``root`` None: no root term)."""

    reduce: str
    x_src: torch.Tensor
    graph: Graph
    lin: torch.nn.Module  # ``weight`` (out x in) and ``bias`` (or None), as torch's and PyG's Linear
    x_dst: torch.Tensor | None = None
    root: torch.nn.Module | None = None


def relation_sum(terms: Sequence[RelationTerm]) -> torch.Tensor:
    """The sum of the terms' outputs (every term has the same destination rows and output width)."""
    if not terms:
        raise ValueError("terms: expected at least one relation")
    inputs: list[torch.Tensor] = []
    weights: list[torch.Tensor] = []
    roots: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # id(x_dst) -> (x_dst, summed root weight)
    biases = [t.lin.bias for t in terms] + [t.root.bias for t in terms if t.root is not None]
    addends: list[torch.Tensor] = []
    singles: list[RelationTerm] = []
    for group in _relational_groups(terms):
        relational = _relational(group) if len(group) > 1 else None
        if relational is None:
            singles.extend(group)
        else:
            addends.append(relational)
    for term in singles:
        weight = term.lin.weight
        if term.reduce in LINEAR_AGGREGATIONS and linear_first(term.graph, weight.shape[1], weight.shape[0]):
            addends.append(gspmm(term.graph, "copy_lhs", term.reduce, F.linear(term.x_src, weight), None))
        else:
            inputs.append(gspmm(term.graph, "copy_lhs", term.reduce, term.x_src, None))
            weights.append(weight)
    for term in terms:
        if term.root is not None and term.x_dst is not None:
            x_dst, summed = roots.get(id(term.x_dst), (term.x_dst, None))
            roots[id(term.x_dst)] = (x_dst, term.root.weight if summed is None else summed + term.root.weight)
    for x_dst, summed in roots.values():
        inputs.append(x_dst)
        weights.append(summed)
    base = _sum(addends + [b for b in biases if b is not None])
    if not inputs:
        return base
    stacked, weight = _cat(inputs), _cat(weights)
    if base is None:
        return torch.mm(stacked, weight.t())
    return torch.addmm(base, stacked, weight.t())


def _relational_groups(terms: Sequence[RelationTerm]) -> list[list[RelationTerm]]:
    """The terms one relational aggregation serves together (a sum or a mean, one source width, dtype and
    device, graphs with formats); every other term alone (each alone under ``torch.compile``)."""
    if torch.compiler.is_compiling() or not all(isinstance(term.graph, Graph) for term in terms):
        return [[term] for term in terms]
    groups: dict[Any, list[RelationTerm]] = {}
    for k, term in enumerate(terms):
        x = term.x_src
        linear = term.reduce in LINEAR_AGGREGATIONS and x.dim() == 2
        key = (term.reduce, x.shape[1], x.dtype, x.device) if linear else k
        groups.setdefault(key, []).append(term)
    return list(groups.values())


def _relational(group: list[RelationTerm]) -> torch.Tensor | None:
    """``sum_k lin_k.weight @ reduce_k(x_src_k)`` (no biases) of the group's relations, as one
    ``relational_aggregate`` over their edges stacked; None where the relations are dense (``stacked_relations``)."""
    sources: dict[int, torch.Tensor] = {}
    for term in group:
        sources.setdefault(id(term.x_src), term.x_src)
    slots = [list(sources).index(id(term.x_src)) for term in group]
    stacked = stacked_relations([term.graph for term in group], slots, [x.shape[0] for x in sources.values()])
    if stacked is None:
        return None
    graph, etype = stacked
    x = torch.cat(list(sources.values())) if len(sources) > 1 else group[0].x_src
    weight = torch.stack([term.lin.weight.t() for term in group])  # (relations, in, out)
    return relational_aggregate(graph, x, weight, etype, group[0].reduce)


# (relation graphs' ids, source slots, source rows) -> (weak references to the graphs, their stacked graph and
# edge relations, or None where they are dense)
_STACKED: OrderedDict[tuple, tuple[tuple[weakref.ref, ...], tuple[Graph, torch.Tensor] | None]] = OrderedDict()
_STACKED_KEPT = 16  # a two-layer model on a typed batch reads one per destination type


def stacked_relations(
    graphs: list[Graph], slots: list[int], source_rows: list[int]
) -> tuple[Graph, torch.Tensor] | None:
    """The relations ``graphs`` (same destinations) as one graph and each edge's relation index: relation
    ``k``'s edge ``u -> v`` becomes ``offset[slots[k]] + u -> v``, where source tensor ``j`` (``source_rows[j]``
    rows) starts at ``offset[j]``. None where the relations are dense: their (relation, destination) pairs with
    edges are more than ``DENSE_PAIRS`` of relations x destinations, whose products the one dense product does
    without gathering pairs. Decided and built once while the relation graphs live (so are the stacked graph's
    formats and relational plan); a dense group keeps only its verdict."""
    key = (tuple(map(id, graphs)), tuple(slots), tuple(source_rows))
    entry = _STACKED.get(key)
    if entry is not None and all(ref() is g for ref, g in zip(entry[0], graphs, strict=True)):
        _STACKED.move_to_end(key)
        return entry[1]
    offsets = [0]
    for size in source_rows:
        offsets.append(offsets[-1] + size)
    ends = [g.coo() for g in graphs]
    src = torch.cat([s + offsets[slot] for (s, _), slot in zip(ends, slots, strict=True)])
    dst = torch.cat([d for _, d in ends])
    sizes = torch.tensor([g.num_edges for g in graphs], device=src.device)
    etype = torch.repeat_interleave(torch.arange(len(graphs), device=src.device), sizes)
    stacked = Graph(src, dst, (offsets[-1], graphs[0].num_dst_nodes))
    pairs = plan(stacked, etype, len(graphs)).destinations.count
    result = (stacked, etype) if pairs <= DENSE_PAIRS * len(graphs) * stacked.num_dst_nodes else None
    for stale in [k for k, (refs, _) in _STACKED.items() if any(ref() is None for ref in refs)]:
        del _STACKED[stale]
    _STACKED[key] = (tuple(weakref.ref(g) for g in graphs), result)
    if len(_STACKED) > _STACKED_KEPT:
        _STACKED.popitem(last=False)
    return result


def sum_of_relations(convs: Sequence[torch.nn.Module], calls: Sequence[tuple[Any, Any]]) -> torch.Tensor:
    """``sum_i convs[i](*calls[i])`` for layers into the same destination rows: those that give a
    ``relation_term`` for their call are summed by ``relation_sum``, the others run their own forward."""
    if len(convs) != len(calls):
        raise ValueError(f"calls: expected one (x, edge_index) per conv ({len(convs)}), got {len(calls)}")
    if not convs:
        raise ValueError("convs: expected at least one layer")
    return sum_of_relation_parts(
        [relation_part(conv, x, edge_index) for conv, (x, edge_index) in zip(convs, calls, strict=True)]
    )


def relation_part(conv: torch.nn.Module, x: Any, edge_index: Any) -> RelationTerm | torch.Tensor:
    """``conv(x, edge_index)`` as one part of a sum over relations: its ``relation_term``, or where it gives
    none its output. A layer that runs its forward runs it here, so a caller that takes the parts in its own
    call order keeps that order for what the forward does once (lazy parameters draw their weights)."""
    term = conv.relation_term(x, edge_index) if hasattr(conv, "relation_term") else None
    return term if isinstance(term, RelationTerm) else conv(x, edge_index)


def sum_of_relation_parts(parts: Sequence[RelationTerm | torch.Tensor]) -> torch.Tensor:
    """The sum of ``relation_part`` results into the same destination rows: the relation terms by one
    ``relation_sum``, plus the layers' own outputs."""
    if not parts:
        raise ValueError("parts: expected at least one relation")
    terms = [part for part in parts if isinstance(part, RelationTerm)]
    outputs = [part for part in parts if not isinstance(part, RelationTerm)]
    if terms:
        outputs.insert(0, relation_sum(terms))
    return _sum(outputs)


def _sum(tensors: list[torch.Tensor]) -> torch.Tensor | None:
    total = None
    for t in tensors:
        total = t if total is None else total + t
    return total


def _cat(tensors: list[torch.Tensor]) -> torch.Tensor:
    return tensors[0] if len(tensors) == 1 else torch.cat(tensors, dim=1)
