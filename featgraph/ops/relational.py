"""``relational_aggregate``: R-GCN's relational message passing, ``out[v] = sum over in-edges e = (u -> v) of
c_e * (x[u] @ W[etype[e]])``, with ``c_e`` the edge's weight (1 if none), divided by ``|N_r(v)|`` (the
destination's in-edges of that relation) for ``reduce="mean"``. No per-edge message or weight exists in any
of its three ways, which give the same result and take the same gradients (``x`` and ``W``):

- ``"transform_first"``: per relation ``r``, ``x[u] @ W_r`` once per source ``u`` with an out-edge of type
  ``r`` (one ``segment_mm`` over the (relation, source) pairs, sorted by relation), then one SpMM whose
  edges read their pair's row: ``Q * in * out + E * out`` multiply-adds for Q pairs.
- ``"aggregate_first"``: per relation the sum (mean) of ``x`` over ``N_r(v)`` (one SpMM into the
  (relation, destination) pairs), then ``W_r`` (one ``segment_mm``) and a sum per destination:
  ``E * in + P * in * out`` for P pairs.
- ``"fused"``: one SpMM whose UDF reads the weight through the edge's type, ``W[ET[e], k, j]``, a
  data-dependent subscript checked against W's extent on each call: ``E * in * out`` multiply-adds and no
  pair structure. Its ``x`` gradient is the kernel's own (derived from the UDF); the weight gradient, a
  scatter into ``W[ET[e]]`` that the derivation does not express, runs as ``aggregate_first``'s.

``"auto"`` takes the cheaper of the first two by those counts (as ``nn.pyg_layer.linear_first`` does for one
weight). The pair structures are built once per graph and edge types, kept on the graph.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

import torch

from .. import te
from ..graph import Graph, HeteroGraph
from ..graph.conversion import same_values
from ..graph.graph import GraphRef
from ..operator import operator
from ..templates.gradients import placeholder_gradients
from ..templates.kernel import Kernel, cached_kernel, shared_op
from ..tuning import spmm
from . import binary
from .checks import check_graph, check_tensor
from .grouped_mm import segment_products, segment_weight_gradient
from .gspmm import gspmm
from .udfs import TORCH_TO_TE

STRATEGIES = ("auto", "transform_first", "aggregate_first", "fused")
REDUCES = ("sum", "mean")


@dataclass
class Pairs:
    """The distinct (relation, vertex) pairs of one side of the edges, sorted by relation then vertex: each
    pair's vertex, each relation's pair count, the graph between the pairs and the other side's vertices
    (edge ``e`` of the input is edge ``e`` here), each edge's pair, and the graph from each pair to its vertex
    (summing rows per vertex as one parallel SpMM, where ``index_add_`` runs serially)."""

    vertex: torch.Tensor
    lengths: list[int]
    graph: Graph
    of_edge: torch.Tensor
    to_vertex: Graph

    @property
    def count(self) -> int:
        return self.vertex.numel()


@dataclass
class Plan:
    """What a relational aggregation over one graph and edge types reads: the edge types it was built for
    (the cache key's check), the source pairs (transform first), the destination pairs (aggregate first)."""

    etype: torch.Tensor
    sources: Pairs
    destinations: Pairs
    shares: dict[torch.dtype, torch.Tensor] = field(default_factory=dict)  # mean's 1 / |N_r(v)| per edge

    @cached_property
    def between(self) -> Graph:
        """The graph from each edge's source pair to its destination pair (edge ``e`` is edge ``e`` here): a
        per-edge term read from rows of both sides' pairs is one SDDMM, and a softmax over its destinations'
        in-edges is one per (relation, destination)."""
        return Graph(self.sources.of_edge, self.destinations.of_edge, (self.sources.count, self.destinations.count))


def _pairs(vertex: torch.Tensor, etype: torch.Tensor, count: int, relations: int, other: torch.Tensor,
           other_count: int, to_pairs: bool) -> Pairs:  # fmt: skip
    """``vertex``'s (relation, vertex) pairs; their graph runs pair -> other vertex, or other vertex -> pair
    (``to_pairs``)."""
    keys, of_edge = torch.unique(etype * count + vertex, return_inverse=True)
    lengths = torch.bincount(keys // max(count, 1), minlength=relations).tolist() if keys.numel() else [0] * relations
    pairs = keys.numel()
    graph = Graph(other, of_edge, (other_count, pairs)) if to_pairs else Graph(of_edge, other, (pairs, other_count))
    vertex = keys % max(count, 1)
    to_vertex = Graph(torch.arange(pairs, device=keys.device), vertex, (pairs, count))
    return Pairs(vertex, lengths, graph, of_edge, to_vertex)


def plan(g: Graph, etype: torch.Tensor, relations: int) -> Plan:
    """The pair structures of ``g`` with these edge types, built once and kept on ``g`` (rebuilt where the edge
    types differ from the kept plan's)."""
    key = ("relational-plan", relations)
    kept = g._cache.get(key)
    if kept is not None and same_values(kept.etype, etype):
        return kept
    src, dst = g.coo()
    built = Plan(
        etype.clone(),
        _pairs(src, etype, g.num_src_nodes, relations, dst, g.num_dst_nodes, to_pairs=False),
        _pairs(dst, etype, g.num_dst_nodes, relations, src, g.num_src_nodes, to_pairs=True),
    )
    g._cache[key] = built
    return built


def costs(g: Graph | GraphRef, pairs: Plan, weight: torch.Tensor) -> dict[str, int]:
    """Multiply-adds of each way (forward; the backward's are in proportion): a row's product costs a
    relation's weight elements (a block-diagonal weight's blocks only; the fused way multiplies full
    matrices), an SpMM the edges times its rows' width."""
    edges, per_row = g.num_edges or 0, math.prod(weight.shape[1:])  # no relation: still a relation's size
    return {
        "transform_first": pairs.sources.count * per_row + edges * out_channels(weight),
        "aggregate_first": edges * in_channels(weight) + pairs.destinations.count * per_row,
        "fused": edges * in_channels(weight) * out_channels(weight),
    }


def choose(g: Graph, pairs: Plan, weight: torch.Tensor, strategy: str) -> str:
    """``strategy``, or for ``"auto"`` the cheaper of transform-first and aggregate-first."""
    if strategy != "auto":
        return strategy
    cost = costs(g, pairs, weight)
    return min(("transform_first", "aggregate_first"), key=cost.__getitem__)


def _coefficients(
    pairs: Plan, edge_weight: torch.Tensor | None, reduce: str, dtype: torch.dtype
) -> torch.Tensor | None:
    """``c_e``: the edge's weight, divided by its destination's in-edges of its relation for ``mean``."""
    if reduce == "sum":
        return edge_weight
    share = pairs.shares.get(dtype)
    if share is None:
        share = pairs.destinations.graph.in_degrees().to(dtype).reciprocal()[pairs.destinations.of_edge]
        pairs.shares[dtype] = share
    return share if edge_weight is None else share * edge_weight


def _blocks(weight: torch.Tensor) -> int | None:
    """A block-diagonal weight's block count (None: full matrices)."""
    return weight.shape[1] if weight.dim() == 4 else None


def out_channels(weight: torch.Tensor) -> int:
    """The output width: a full weight's columns, a block-diagonal one's blocks times their columns."""
    return weight.shape[1] * weight.shape[3] if weight.dim() == 4 else weight.shape[2]


def in_channels(weight: torch.Tensor) -> int:
    """The input width: a full weight's rows, a block-diagonal one's blocks times their rows."""
    return weight.shape[1] * weight.shape[2] if weight.dim() == 4 else weight.shape[1]


def block_diagonal(weight: torch.Tensor) -> torch.Tensor:
    """(relations, in, out) matrices: a 4-D (relations, blocks, i, o) weight's blocks on their diagonals."""
    if weight.dim() == 3:
        return weight
    relations, blocks, rows, cols = weight.shape
    eye = torch.eye(blocks, dtype=weight.dtype, device=weight.device)
    return torch.einsum("rbio,bc->rbico", weight, eye).reshape(relations, blocks * rows, blocks * cols)


def _spmm_op(weight: torch.Tensor | None) -> str:
    return "copy_lhs" if weight is None else "mul"


def _fused_kernel(g: Graph, x: torch.Tensor, weight: torch.Tensor, weighted: bool) -> Kernel:
    """The SpMM reading ``W[ET[e], k, j]``: one kernel per graph, shapes, dtype and weighting."""
    relations, rows, cols = weight.shape  # block-diagonal weights arrive as full matrices
    dtype = TORCH_TO_TE[x.dtype]
    key = ("relational-fused", relations, rows, cols, dtype, weighted)

    def build() -> Kernel:
        X = te.placeholder((None, rows), dtype=dtype, name="X")
        W = te.placeholder((relations, rows, cols), dtype=dtype, name="W")
        ET = te.placeholder((None,), dtype="int64", name="ET")
        C = te.placeholder((None, 1), dtype=dtype, name="C")

        def udf(src, dst, eid):
            k = te.reduce_axis((0, rows), name="k")
            if weighted:
                return te.compute((cols,), lambda j: te.sum(X[src, k] * W[ET[eid], k, j], axis=k) * C[eid, 0])
            return te.compute((cols,), lambda j: te.sum(X[src, k] * W[ET[eid], k, j], axis=k))

        return spmm(g, shared_op(key, udf), "sum")

    return cached_kernel(g, key, build)


def _fused_inputs(x, weight, etype, coefficient) -> dict[str, torch.Tensor]:
    inputs = {"X": x, "W": weight.contiguous(), "ET": etype}
    if coefficient is not None:
        inputs["C"] = coefficient.unsqueeze(1)
    return inputs


def _fake(ref: GraphRef, x, weight, etype, edge_weight, relations: int, reduce: str, strategy: str) -> torch.Tensor:
    return x.new_empty((ref.num_dst_nodes, out_channels(weight)))


def _gradient(g: Graph, x, weight, etype, edge_weight, relations: int, reduce: str, strategy: str, *, outputs, grads,
              wants) -> list[torch.Tensor | None]:  # fmt: skip
    """The gradients of (x, weight) by the way the forward took."""
    (grad,) = grads
    pairs = plan(g, etype, relations)
    way = choose(g, pairs, weight, strategy)
    coefficient = _coefficients(pairs, edge_weight, reduce, x.dtype)
    grad_x = grad_w = None
    if way == "transform_first":
        sources = pairs.sources
        rows = x.new_empty(()).expand(sources.count, out_channels(weight))  # shape only
        grad_rows = _lhs_gradient(sources.graph, _spmm_op(coefficient), "sum", rows, coefficient, grad)
        if wants[0]:
            grad_pairs = segment_products(grad_rows, weight.transpose(-1, -2), sources.lengths)
            grad_x = gspmm(sources.to_vertex, "copy_lhs", "sum", grad_pairs, None)
        if wants[1]:
            grad_w = segment_weight_gradient(
                x, grad_rows, sources.lengths, relations, _blocks(weight), a_rows=sources.vertex
            )
        return [grad_x, grad_w, None, None]
    destinations = pairs.destinations
    if wants[1]:
        summed = gspmm(destinations.graph, _spmm_op(edge_weight), reduce, x, edge_weight)
        grad_w = segment_weight_gradient(
            summed, grad, destinations.lengths, relations, _blocks(weight), grad_rows=destinations.vertex
        )
    if wants[0] and way == "fused":
        full = block_diagonal(weight)
        kernel = _fused_kernel(g, x, full, coefficient is not None)
        inputs = _fused_inputs(x, full, etype, coefficient)
        grad_x = placeholder_gradients(kernel, inputs, grad, None, None, ["X"])["X"]
    elif wants[0]:
        grad_summed = segment_products(grad, weight.transpose(-1, -2), destinations.lengths, destinations.vertex)
        grad_x = _lhs_gradient(destinations.graph, _spmm_op(edge_weight), reduce, x, edge_weight, grad_summed)
    return [grad_x, grad_w, None, None]


def _lhs_gradient(g: Graph, op: str, reduce: str, lhs: torch.Tensor, rhs, grad: torch.Tensor) -> torch.Tensor:
    """The gradient in ``lhs`` of ``gspmm(g, op, reduce, lhs, rhs)`` given its output's ``grad``: the op's kernel's
    own gradient (``lhs`` may stand in by its shape alone: the gradient does not read it)."""
    kernel, tensors = binary.kernel(g, "v", op, "u", "e", lhs, rhs, reduce)
    return binary.kernel_gradients(kernel, tensors, grad, None, lhs, rhs, [True, False])[0]


@operator("relational_aggregate", _fake, _gradient)
def _relational_aggregate(
    g: Graph,
    x: torch.Tensor,
    weight: torch.Tensor,
    etype: torch.Tensor,
    edge_weight: torch.Tensor | None,
    relations: int,
    reduce: str,
    strategy: str,
) -> torch.Tensor:
    """``relational_aggregate`` with its arguments checked, but for the values of ``etype``: checked here, where
    they are known (compiled code traces the call without them)."""
    if etype.numel() and (int(etype.min()) < 0 or int(etype.max()) >= relations):
        raise IndexError(f"etype: relation ids must lie in [0, {relations}) (weight's first dimension), got "
                         f"[{int(etype.min())}, {int(etype.max())}]")  # fmt: skip
    pairs = plan(g, etype, relations)
    way = choose(g, pairs, weight, strategy)
    coefficient = _coefficients(pairs, edge_weight, reduce, x.dtype)
    if way == "transform_first":
        sources = pairs.sources
        rows = segment_products(x, weight, sources.lengths, sources.vertex)
        return gspmm(sources.graph, _spmm_op(coefficient), "sum", rows, coefficient)
    if way == "fused":
        full = block_diagonal(weight)
        kernel = _fused_kernel(g, x, full, coefficient is not None)
        return kernel.evaluate(_fused_inputs(x, full, etype, coefficient), want_arg=False)[0]
    destinations = pairs.destinations
    summed = gspmm(destinations.graph, _spmm_op(edge_weight), reduce, x, edge_weight)
    transformed = segment_products(summed, weight, destinations.lengths)
    return gspmm(destinations.to_vertex, "copy_lhs", "sum", transformed, None)


def relational_aggregate(
    g: Graph | HeteroGraph,
    x: torch.Tensor,
    weight: torch.Tensor,
    etype: torch.Tensor | None = None,
    reduce: str = "sum",
    edge_weight: torch.Tensor | None = None,
    strategy: str = "auto",
) -> torch.Tensor:
    """``out[v] = sum over in-edges e = (u -> v) of c_e * (x[u] @ weight[etype[e]])`` (see the module).

    ``g``: a ``Graph`` (bipartite too) with ``etype``, one relation id per edge in ``g``'s edge order, or a
    ``HeteroGraph`` (its own ``etype``; ``x`` then holds all node types' rows, ``hg.stack``). ``weight``:
    (relations, in, out), or block-diagonal (relations, blocks, in / blocks, out / blocks) as R-GCN's
    ``num_blocks`` (each relation's matrix has these blocks on its diagonal and zeros elsewhere; only the
    blocks are multiplied, except by the fused way, which multiplies the full matrices). ``reduce``: ``"sum"``
    or ``"mean"`` (R-GCN's: each relation's messages averaged over the destination's in-edges of that
    relation). ``edge_weight``: a constant factor per edge (no gradient).
    ``strategy``: ``"auto"``, ``"transform_first"``, ``"aggregate_first"`` or ``"fused"``. Differentiable in
    ``x`` and ``weight``.
    """
    if isinstance(g, HeteroGraph):
        if etype is not None:
            raise ValueError("etype: a HeteroGraph carries its own edge types; pass etype only with a Graph")
        g, etype = g.graph, g.etype
    check_graph(g)
    if reduce not in REDUCES:
        raise ValueError(f"reduce must be one of {REDUCES}, got {reduce!r}")
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
    check_tensor("x", x, dims=2, rows=g.num_src_nodes, rows_are="the graph's source nodes", device=g.device)
    check_tensor("weight", weight, min_dims=3, like=x)
    if weight.dim() > 4 or in_channels(weight) != x.shape[1]:
        raise ValueError(f"weight: x has {x.shape[1]} columns, so weight must be (relations, {x.shape[1]}, out) or "
                         f"block-diagonal (relations, blocks, {x.shape[1]} / blocks, out / blocks), got "
                         f"{tuple(weight.shape)}")  # fmt: skip
    if etype is None:
        raise ValueError("etype: a Graph needs its edges' relation ids (one per edge)")
    integer = isinstance(etype, torch.Tensor) and not etype.is_floating_point() and etype.dtype != torch.bool
    if not integer or etype.dim() != 1:
        raise TypeError(f"etype: expected a 1-D integer tensor, got {getattr(etype, 'dtype', type(etype).__name__)}")
    edges = g.num_edges
    if edges is not None and etype.numel() != edges:
        raise ValueError(f"etype: expected {edges} entries (one per edge), got {etype.numel()}")
    relations = weight.shape[0]
    if edge_weight is not None:
        check_tensor("edge_weight", edge_weight, dims=1, rows=etype.numel(), rows_are="one per edge", like=x)
        if edge_weight.requires_grad:
            raise ValueError("edge_weight: relational_aggregate takes constant edge weights; this one requires grad")
    return _relational_aggregate(g, x, weight, etype.to(device=g.device, dtype=torch.int64).contiguous(),
                                 edge_weight, relations, reduce, strategy)  # fmt: skip
