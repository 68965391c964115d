"""The sum over relations of GraphSAGE- or GraphConv-style layers into one node type, as PyG's ``HeteroConv``
(``aggr="sum"``) and ``to_hetero`` models end each layer, with one dense product for all the relations.

Per relation r such a layer gives ``lin_r(aggr_r x_src_r) + root_r(x_dst)``. Summed over the relations that is
``[aggr_1 | ... | aggr_R | x_dst] @ [W_1 | ... | W_R | sum_r Root_r]^T + sum_r b_r``: one product whose inner
size is the relations' widths together, the root products of relations that read the same destination rows
merged into one, and no per-relation (rows x out) outputs to add up. A relation whose weight belongs before its
aggregation (``linear_first``) is aggregated at the output's width and enters as the product's addend.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from ..graph import Graph
from ..ops import gspmm
from .pyg_layer import linear_first

LINEAR_AGGREGATIONS = ("sum", "mean")  # the aggregations a weight commutes with


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
    addend: torch.Tensor | None = None
    for term in terms:
        weight = term.lin.weight
        if term.reduce in LINEAR_AGGREGATIONS and linear_first(term.graph, weight.shape[1], weight.shape[0]):
            aggregated = gspmm(term.graph, "copy_lhs", term.reduce, F.linear(term.x_src, weight), None)
            addend = aggregated if addend is None else addend + aggregated
        else:
            inputs.append(gspmm(term.graph, "copy_lhs", term.reduce, term.x_src, None))
            weights.append(weight)
        if term.root is not None and term.x_dst is not None:
            x_dst, summed = roots.get(id(term.x_dst), (term.x_dst, None))
            roots[id(term.x_dst)] = (x_dst, term.root.weight if summed is None else summed + term.root.weight)
    for x_dst, summed in roots.values():
        inputs.append(x_dst)
        weights.append(summed)
    bias = _sum([b for b in biases if b is not None])
    base = addend if bias is None else (bias if addend is None else addend + bias)
    if not inputs:
        return base
    stacked, weight = _cat(inputs), _cat(weights)
    if base is None:
        return torch.mm(stacked, weight.t())
    return torch.addmm(base, stacked, weight.t())


def sum_of_relations(convs: Sequence[torch.nn.Module], calls: Sequence[tuple[Any, Any]]) -> torch.Tensor:
    """``sum_i convs[i](*calls[i])`` for layers into the same destination rows: those that give a
    ``relation_term`` for their call are summed by ``relation_sum``, the others run their own forward."""
    if len(convs) != len(calls):
        raise ValueError(f"calls: expected one (x, edge_index) per conv ({len(convs)}), got {len(calls)}")
    terms, outputs = [], []
    for conv, (x, edge_index) in zip(convs, calls, strict=True):
        term = conv.relation_term(x, edge_index) if hasattr(conv, "relation_term") else None
        if isinstance(term, RelationTerm):
            terms.append(term)
        else:
            outputs.append(conv(x, edge_index))
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
