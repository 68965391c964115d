"""featgraph's versions of DGL's heterograph kernel entry points, each with DGL's signature.

``gspmm_hetero``, ``gsddmm_hetero`` and ``edge_softmax_hetero`` take a graph index of several edge types and
their operands one per node type or one per edge type (None where a type has none), and give one result per
node type (gspmm) or per edge type. Each relation runs featgraph's kernel on its own graph
(``graphs.relation_graphs``, built once per index); gspmm's results into one node type are then reduced
across its relations as DGL's kernel reduces them: sum adds them, max/min keep the first relation's winner
(its gradient goes to that relation's winning edge) with -inf/inf at vertices no relation reaches. The softmax
spans every relation that shares a destination (``norm_by="src"``: a source) through one graph over all the
edges (``graphs.merged_graph``). Refusals and fallback are ``kernels.routing``'s.

DGL's own heterograph kernels fail where a relation has no edges (an error, or zeros or unset memory when the
first relation is empty); featgraph serves those graphs with each relation's own result, nothing from an
empty one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from .. import ops
from ..graph import Graph
from . import graphs
from .kernels import Refused, check_sddmm, check_spmm, floating, identity_rows, served_operands, target_rows


def _operand_lists(
    op: str, lhs_len: int, lhs_and_rhs: Sequence[Any], lhs_types: int, rhs_types: int
) -> tuple[Sequence[Any], Sequence[Any]]:
    """DGL's flat ``lhs_and_rhs`` tuple split at ``lhs_len`` into its two per-type lists, refused unless each
    operand ``op`` reads has one entry per type (DGL fills the unread one with Nones of its own count)."""
    lhs, rhs = lhs_and_rhs[:lhs_len], lhs_and_rhs[lhs_len:]
    for name, given, types, read in (
        ("lhs", lhs, lhs_types, op != "copy_rhs"),
        ("rhs", rhs, rhs_types, op != "copy_lhs"),
    ):
        if read and len(given) != types:
            raise Refused(f"{len(given)} {name} operands, expected {types}")
    return lhs, rhs


def _column(x: Any) -> Any:
    """A 1-D operand as one feature per row, ``(n, 1)``; DGL squeezes the results back (``_squeezed``)."""
    return x.unsqueeze(-1) if isinstance(x, torch.Tensor) and x.dim() == 1 else x


def _squeezed(results: Sequence[torch.Tensor], reads: tuple[bool, bool], used: Sequence[Any]) -> tuple:
    """DGL's rule for 1-D operands: every result loses its last dimension where, of the two operands, each is
    unread (``reads``) or 1-D in some relation (``used``: the (lhs, rhs) pairs the relations read)."""
    one_d = [any(isinstance(pair[i], torch.Tensor) and pair[i].dim() == 1 for pair in used) for i in (0, 1)]
    if all(one or not read for one, read in zip(one_d, reads, strict=True)):
        return tuple(result.squeeze(-1) for result in results)
    return tuple(results)


def _type_of(gidx: Any, etype: int, target: str) -> int:
    """The index into an operand list on ``target`` for edge type ``etype``: its source or destination node
    type (u, v) or the edge type itself (e)."""
    if target == "e":
        return etype
    src_type, dst_type = gidx.metagraph.find_edge(etype)
    return src_type if target == "u" else dst_type


def _across(results: list[tuple[Graph, torch.Tensor]], reduce_op: str) -> torch.Tensor:
    """The results of the relations into one node type reduced across them as DGL's kernel does."""
    shapes = {tuple(out.shape) for _, out in results}
    if len(shapes) > 1:
        raise Refused(f"relations into one node type give shapes {sorted(shapes)}")
    outs = [out for _, out in results]
    if reduce_op == "sum":
        return torch.stack(outs).sum(0) if len(outs) > 1 else outs[0]
    if any(g.num_edges for g, _ in results):  # else nothing reaches the type: 0 everywhere, as DGL's gspmm
        outs = [identity_rows(out, g.in_degrees() == 0, reduce_op) for g, out in results]
    if len(outs) == 1:
        return outs[0]
    stacked = torch.stack(outs)  # max/min over dim 0 keep the first winner, as DGL's kernel
    return (stacked.max(0) if reduce_op == "max" else stacked.min(0)).values


def gspmm_hetero(gidx: Any, op: str, reduce_op: str, lhs_len: int, *lhs_and_rhs: Any) -> tuple[torch.Tensor, ...]:
    """``dgl.backend.gspmm_hetero``: lhs per node type, rhs per edge type; featgraph's ``gspmm`` per relation,
    reduced across the relations into each node type (an empty tensor for a type no relation reaches)."""
    check_spmm(op, reduce_op)
    relations = graphs.relation_graphs(gidx)
    num_ntypes = gidx.number_of_ntypes()
    lhs_all, rhs_all = _operand_lists(op, lhs_len, lhs_and_rhs, num_ntypes, len(relations))
    into: dict[int, list[tuple[Graph, torch.Tensor]]] = {}
    used = []
    for etype, g in enumerate(relations):
        src_type, dst_type = gidx.metagraph.find_edge(etype)
        pair = (None if op == "copy_rhs" else lhs_all[src_type], None if op == "copy_lhs" else rhs_all[etype])
        lhs, rhs = served_operands(op, *map(_column, pair), g, g.num_src_nodes, g.num_edges)
        into.setdefault(dst_type, []).append((g, ops.gspmm(g, op, reduce_op, lhs, rhs)))
        used.append(pair)
    results = [_across(into[ntype], reduce_op) if ntype in into else torch.tensor([]) for ntype in range(num_ntypes)]
    return _squeezed(results, (op != "copy_rhs", op != "copy_lhs"), used)


def gsddmm_hetero(
    gidx: Any, op: str, lhs_len: int, lhs_target: str = "u", rhs_target: str = "v", *lhs_and_rhs: Any
) -> tuple[torch.Tensor, ...]:
    """``dgl.backend.gsddmm_hetero``: operands per node type (targets u, v) or per edge type (e); featgraph's
    ``gsddmm`` per relation, one result per edge type."""
    check_sddmm(op, lhs_target, rhs_target)
    relations = graphs.relation_graphs(gidx)
    types = {"u": gidx.number_of_ntypes(), "v": gidx.number_of_ntypes(), "e": len(relations)}
    lhs_all, rhs_all = _operand_lists(op, lhs_len, lhs_and_rhs, types[lhs_target], types[rhs_target])
    results, used = [], []
    for etype, g in enumerate(relations):
        pair = (
            None if op == "copy_rhs" else lhs_all[_type_of(gidx, etype, lhs_target)],
            None if op == "copy_lhs" else rhs_all[_type_of(gidx, etype, rhs_target)],
        )
        rows = (target_rows(g, lhs_target), target_rows(g, rhs_target))
        lhs, rhs = served_operands(op, *map(_column, pair), g, *rows)
        results.append(ops.gsddmm(g, op, lhs, rhs, lhs_target, rhs_target))
        used.append(pair)
    return _squeezed(results, (op != "copy_rhs", op != "copy_lhs"), used)


def edge_softmax_hetero(gidx: Any, eids: Any, norm_by: str, *logits: Any) -> tuple[torch.Tensor, ...]:
    """``dgl.backend.edge_softmax_hetero``: logits per edge type; one featgraph ``edge_softmax`` over all the
    edges (``graphs.merged_graph``), so the softmax at a vertex spans every relation into it (out of it, for
    ``norm_by="src"``) and, as DGL's, every logits tensor gets a gradient."""
    from dgl.base import is_all

    if not is_all(eids):
        raise Refused("an eids subset")
    if norm_by not in ("dst", "src"):
        raise Refused(f"norm_by {norm_by!r}")
    relations = graphs.relation_graphs(gidx)
    if len(logits) != len(relations):
        raise Refused(f"{len(logits)} logits for {len(relations)} edge types")
    scores = [floating("logits", x) for x in logits]
    for g, x in zip(relations, scores, strict=True):
        if x.device != g.device:
            raise Refused(f"logits on {x.device}, graph on {g.device}")
        if x.shape[0] != g.num_edges:
            raise Refused(f"logits have {x.shape[0]} rows, expected {g.num_edges}")
    if len({(x.shape[1:], x.dtype) for x in scores}) > 1:
        raise Refused("logits of different shapes or dtypes")
    softmax = ops.edge_softmax(graphs.merged_graph(gidx, norm_by), torch.cat(scores))
    return tuple(softmax.split([x.shape[0] for x in scores]))


SERVERS: dict[str, Callable[..., Any]] = {
    "gspmm_hetero": gspmm_hetero,
    "gsddmm_hetero": gsddmm_hetero,
    "edge_softmax_hetero": edge_softmax_hetero,
}
