"""``HGTConv`` (Hu et al.): PyG's heterogeneous graph transformer layer, its forward over all node and edge types
at once on featgraph's grouped products, SDDMM, edge softmax and SpMM instead of PyG's loops over the types."""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
import torch_geometric.nn

from ..graph import Graph, HeteroGraph
from ..graph.conversion import same_values
from ..ops import edge_softmax, gsddmm, gspmm, segment_mm
from ..ops.relational import Pairs, plan
from .pyg_layer import FusedLayer

_DTYPES = (torch.float32, torch.float64)
EdgeType = tuple[str, str, str]
_REMEMBERED = 8
# (metadata's edge types, node counts, the call's edge types, device) -> the typed graph of the last such call
_typed_graphs: OrderedDict[tuple, HeteroGraph] = OrderedDict()


class HGTConv(FusedLayer, torch_geometric.nn.HGTConv):
    """PyG's ``HGTConv`` (constructor, parameters, state dict, lazy ``in_channels=-1``, output dict), its forward
    as one typed graph.

    The node types' features are stacked in the node order of a ``HeteroGraph`` over every edge type of the
    metadata (those missing from ``edge_index_dict`` empty), remembered while the edges are the same, for every
    layer of the same metadata. K, Q and V come from one grouped product over the node types' row segments (a
    product per node type where their widths differ); ``k_rel`` (scaled by ``p_rel / sqrt(dim)``) and ``v_rel``
    transform each (edge type, source) pair once per head, in one grouped product; the logits are one SDDMM
    between the pairs and the destinations' queries, the softmax runs over each destination's in-edges of all
    edge types, and one SpMM sums the pairs' values, all three on a graph with each edge once per head, so that
    every head's rows stay contiguous (no transposes). Then PyG's output path: gelu, ``out_lin`` (one grouped
    product) and the skip gate where a node type's input width is ``out_channels``. As PyG's, the output holds
    the node types of ``x_dict`` that the metadata makes a destination (without in-edges in this call too).
    PyG's own forward runs lazy parameters not yet initialised, sparse adjacencies, edge types outside the
    metadata or naming a node type without features, no edge types at all, edge types in another order than
    the metadata's (PyG's ``k_rel`` and ``v_rel`` take their rows as sorted by edge type and give each type
    another's weights: its result, not this layer's, is kept), other than float32/float64 features, hooks on
    the layer's modules.
    """

    def forward(
        self, x_dict: Mapping[str, torch.Tensor], edge_index_dict: Mapping[EdgeType, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        """As PyG: each destination node type's (n, out_channels) output."""
        reason = self._blocker(x_dict, edge_index_dict)
        if reason is not None:
            return self.fallback(reason, x_dict, edge_index_dict)
        node_types = [t for t in self.kqv_lin.lins if t in x_dict]
        xs = [x_dict[t] for t in node_types]
        lengths = [x.shape[0] for x in xs]
        hg = self._typed_graph(dict(zip(node_types, lengths, strict=True)), edge_index_dict)
        channels, heads = self.out_channels, self.heads
        dim = channels // heads
        stacked = xs if len({x.shape[1] for x in xs}) > 1 else torch.cat(xs)
        lins = [self.kqv_lin.lins[t] for t in node_types]
        # each node type's K, Q and V weights and biases, (3, channels, ...): K and V in one product, Q in another
        weights = [lin.weight.view(3, channels, -1) for lin in lins]
        biases = [lin.bias.view(3, channels) for lin in lins]
        kv = _typed_linear(
            stacked, lengths, [w[[0, 2]].flatten(0, 1) for w in weights], [b[[0, 2]].flatten() for b in biases]
        )
        q = _typed_linear(stacked, lengths, [w[1] for w in weights], [b[1] for b in biases])
        sources = plan(hg.graph, hg.etype, len(self.edge_types)).sources
        gather, attend = _head_graphs(hg, sources, heads)
        blocks = self._relation_transform(gspmm(gather, "copy_lhs", "sum", kv.view(-1, dim), None), sources.lengths)
        keys, values = blocks.split(heads * sources.count)
        alpha = edge_softmax(attend, gsddmm(attend, "dot", keys, q.view(-1, dim), "u", "v"))
        out = gspmm(attend, "mul", "sum", values, alpha).view(-1, channels)
        lins = [self.out_lin.lins[t] for t in node_types]
        out = _typed_linear(F.gelu(out), lengths, [lin.weight for lin in lins], [lin.bias for lin in lins])
        result = {}
        for node_type, part in zip(node_types, out.split(lengths), strict=True):
            if node_type not in self.dst_node_types:
                continue
            if part.shape[-1] == x_dict[node_type].shape[-1]:
                gate = self.skip[node_type].sigmoid()
                part = gate * part + (1 - gate) * x_dict[node_type]
            result[node_type] = part
        return result

    def _blocker(self, x_dict: Any, edge_index_dict: Any) -> str | None:
        """Why the fused path cannot take this call (else None)."""
        if not isinstance(x_dict, Mapping) or not isinstance(edge_index_dict, Mapping):
            return "x_dict or edge_index_dict is not a dict"
        if not edge_index_dict:
            return "no edge types"
        for edge_type, edges in edge_index_dict.items():
            if edge_type not in self.edge_types_map:
                return f"edge type {edge_type!r} is not in the metadata"
            if not isinstance(edges, torch.Tensor) or edges.layout != torch.strided:
                return "an adjacency other than an edge_index tensor"
            if any(t not in x_dict or t not in self.kqv_lin.lins for t in (edge_type[0], edge_type[-1])):
                return f"edge type {edge_type!r} names a node type without features"
        ids = [self.edge_types_map[et] for et in edge_index_dict]
        if ids != sorted(ids):
            return "edge types in another order than the metadata's (PyG's k_rel and v_rel then mix them up)"
        xs = [x_dict[t] for t in self.kqv_lin.lins if t in x_dict]
        reason = self.fused_blocker(tuple(xs), next(iter(edge_index_dict.values())))
        if reason is not None:
            return reason
        if {x.dtype for x in xs} != {self.k_rel.weight.dtype} or xs[0].dtype not in _DTYPES:
            return f"features of dtype {sorted({str(x.dtype) for x in xs})} with {self.k_rel.weight.dtype} weights"
        if any(m._forward_hooks or m._forward_pre_hooks for m in self.modules() if m is not self):
            return "hooks on the layer's modules"
        return None

    def _typed_graph(self, counts: dict[str, int], edge_index_dict: Mapping[EdgeType, torch.Tensor]) -> HeteroGraph:
        """The typed graph of every metadata edge type (edge type ``r`` is ``self.edge_types[r]``, empty where the
        call has none) over the node types with features (``counts`` rows each, in that order; other node types
        of the metadata's edge types, with none, after them): the one remembered while the edges are the same."""
        device = next(iter(edge_index_dict.values())).device
        key = (tuple(self.edge_types), tuple(counts.items()), tuple(edge_index_dict), device)
        kept = _typed_graphs.get(key)
        if kept is not None and all(_holds(edges, kept.relation(et).coo()) for et, edges in edge_index_dict.items()):
            _typed_graphs.move_to_end(key)
            return kept
        empty = torch.zeros(2, 0, dtype=torch.int64, device=device)
        edges = {et: edge_index_dict.get(et, empty) for et in self.edge_types}
        others = {t: 0 for et in self.edge_types for t in (et[0], et[-1]) if t not in counts}
        try:
            typed = HeteroGraph(edges, {**counts, **others})
        except (TypeError, ValueError) as error:
            raise type(error)(f"edge_index_dict: {error}") from None
        _typed_graphs[key] = typed
        if len(_typed_graphs) > _REMEMBERED:
            _typed_graphs.popitem(last=False)
        return typed

    def _relation_transform(self, blocks: torch.Tensor, lengths: list[int]) -> torch.Tensor:
        """Block ``j * P + p`` of the (edge type ``r``, source) pairs' K (``j < heads``) and V heads (``blocks``,
        (2 * heads * P, dim), the pairs sorted by edge type) times ``k_rel``'s weight ``j * R + r`` (times
        ``p_rel[r, j] / sqrt(dim)``) or ``v_rel``'s ``(j - heads) * R + r``: one grouped product over the
        (K or V, head, edge type) segments."""
        p_rel = torch.cat([self.p_rel["__".join(et)] for et in self.edge_types])  # (R, heads)
        scale = p_rel.t().reshape(-1, 1, 1) / math.sqrt(blocks.shape[1])
        weight = torch.cat([self.k_rel.weight * scale, self.v_rel.weight])  # (2 * heads * R, dim, dim)
        return segment_mm(blocks, weight, torch.tensor(lengths * (2 * self.heads)))


def _head_graphs(hg: HeteroGraph, sources: Pairs, heads: int) -> tuple[Graph, Graph]:
    """The graphs that keep every head's rows contiguous, built once per typed graph and head count: ``gather``
    from each node's K and V heads (block ``u * 2 * heads + j`` of a (N, 2 * heads, dim) tensor) to the pairs'
    (block ``j * P + p``), and ``attend``, each edge once per head, from head ``h`` of its source pair (block
    ``h * P + p``) to head ``h`` of its destination (block ``v * heads + h`` of a (N, heads, dim) tensor), so
    that its softmax is one per destination and head."""
    key = ("hgt-heads", heads)
    kept = hg.graph._cache.get(key)
    if kept is not None:
        return kept
    count, device = sources.count, hg.device
    blocks = torch.arange(2 * heads, device=device).unsqueeze(1)
    pairs = torch.arange(count, device=device)
    gather = Graph(
        (sources.vertex * 2 * heads + blocks).flatten(), (blocks * count + pairs).flatten(),
        (hg.num_nodes * 2 * heads, 2 * heads * count),
    )  # fmt: skip
    src, dst = sources.graph.coo()
    head = torch.arange(heads, device=device).unsqueeze(1)
    attend = Graph(
        (head * count + src).flatten(), (dst * heads + head).flatten(), (heads * count, hg.num_nodes * heads)
    )
    hg.graph._cache[key] = (gather, attend)
    return gather, attend


def _holds(edges: torch.Tensor, local: tuple[torch.Tensor, torch.Tensor]) -> bool:
    """Whether an edge_index holds these (src, dst) ids."""
    return same_values(edges[0], local[0]) and same_values(edges[1], local[1])


def _typed_linear(
    x: torch.Tensor | list[torch.Tensor], lengths: list[int], weights: list[torch.Tensor], biases: list[torch.Tensor]
) -> torch.Tensor:
    """Each node type's rows times its (out, in) weight plus its bias, stacked in node-type order: ``x`` the
    stacked rows (``lengths`` per node type) for one grouped product, or a tensor per node type where their
    widths differ (a product each)."""
    counts = torch.tensor(lengths, device=biases[0].device)  # repeat_interleave takes its counts where its input is
    bias = torch.repeat_interleave(torch.stack(biases), counts, dim=0, output_size=sum(lengths))
    if isinstance(x, list):
        return torch.cat([part @ weight.t() for part, weight in zip(x, weights, strict=True)]) + bias
    return segment_mm(x, torch.stack([weight.t() for weight in weights]), torch.tensor(lengths)) + bias
