"""``HeteroNeighborLoader``: PyG's ``NeighborLoader`` on a ``HeteroData``, on featgraph's typed sampler
(``sampling.hetero``). PyG's own samples typed graphs only through pyg-lib, which does not install on every
torch; this one needs nothing but featgraph's compiled sampler.

Each batch is laid out as PyG's: a ``HeteroData`` holding, per node type, every per-node value sliced by the
type's sampled ``n_id`` (the input type's ``batch_size`` seeds first) with ``num_sampled_nodes`` per hop; per
edge type, ``edge_index`` in the two node types' batch ids, every per-edge value sliced by ``e_id`` and
``num_sampled_edges`` per hop; ``input_id`` and ``batch_size`` on the input type. A ``to_hetero`` or
``HeteroConv`` model trains on it unchanged: ``model(batch.x_dict, batch.edge_index_dict)``.
"""

from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass
from typing import Any

import torch

from ..graph.hetero import EdgeType, HeteroGraph
from ..sampling.hetero import HeteroMiniBatch, HeteroNeighborSampler
from .base import EpochLoader, checked_workers, gathered
from .source import (
    StoreColumn,
    checked_batching_flags,
    checked_flag,
    checked_input_nodes,
    checked_subgraph_type,
    is_mask,
    is_store_pair,
)


def pyg_hetero_data() -> Any:
    """An empty PyG ``HeteroData`` (a store pair's batches; PyG is there wherever its stores are)."""
    from torch_geometric.data import HeteroData

    return HeteroData()


def is_hetero_data(data: Any) -> bool:
    """A PyG ``HeteroData`` (or any object laid out like one), recognised without importing PyG."""
    return all(hasattr(data, name) for name in ("node_types", "edge_types", "edge_index_dict", "node_items"))


def is_typed(data: Any) -> bool:
    """What the typed loader serves: a ``HeteroData``, or a store pair whose graph store holds edge types
    (every edge under one)."""
    if is_hetero_data(data):
        return True
    if not is_store_pair(data):
        return False
    edge_types = [attr.edge_type for attr in data[1].get_all_edge_attrs()]
    return bool(edge_types) and None not in edge_types


@dataclass(frozen=True)
class TypedSource:
    """The typed graph and the values a batch slices per node type (by ``n_id``) and edge type (by ``e_id``);
    ``template``: the ``HeteroData`` a batch is a copy of (its other values kept), or None for a store pair's
    batches, fresh ``HeteroData`` that also name each type's ``num_nodes`` (as PyG's)."""

    graph: HeteroGraph
    node_attrs: dict[str, dict[str, Any]]
    edge_attrs: dict[EdgeType, dict[str, Any]]
    template: Any


def _from_hetero_data(data: Any) -> TypedSource:
    graph = HeteroGraph.from_pyg(data)
    nodes = {
        t: {k: v for k, v in data[t].items() if k != "num_nodes" and data[t].is_node_attr(k)} for t in graph.node_types
    }
    edges = {
        et: {k: v for k, v in data[et].items() if k != "edge_index" and data[et].is_edge_attr(k)}
        for et in graph.edge_types
    }
    return TypedSource(graph, nodes, edges, data)


def _from_typed_stores(feature_store: Any, graph_store: Any) -> TypedSource:
    """The typed graph from the graph store's edge types (each as COO in its stored order: its ids the edges'
    ids) and counts (the edge types' sizes, else the feature store's rows); one ``StoreColumn`` per feature."""
    attrs = {attr.edge_type: attr for attr in graph_store.get_all_edge_attrs()}
    rows, cols, _ = graph_store.coo()
    counts: dict[str, int] = {}
    for (src_type, _, dst_type), attr in attrs.items():
        if attr.size is not None:
            for node_type, size in zip((src_type, dst_type), attr.size, strict=True):
                counts[node_type] = max(counts.get(node_type, 0), int(size))
    columns: dict[str, dict[str, Any]] = {}
    for tensor_attr in feature_store.get_all_tensor_attrs():
        columns.setdefault(tensor_attr.group_name, {})[tensor_attr.attr_name] = StoreColumn(feature_store, tensor_attr)
        if tensor_attr.group_name not in counts:
            counts[tensor_attr.group_name] = int(feature_store.get_tensor_size(tensor_attr)[0])
    edges = {et: (rows[et].cpu().long(), cols[et].cpu().long()) for et in attrs}
    graph = HeteroGraph(edges, counts)
    nodes = {t: columns.get(t, {}) for t in graph.node_types}
    return TypedSource(graph, nodes, {et: {} for et in graph.edge_types}, None)


def both_ways(edge_index: dict[EdgeType, torch.Tensor]) -> tuple[dict[EdgeType, torch.Tensor], set[EdgeType]]:
    """PyG's bidirectional typed batch (``HeteroSamplerOutput.to_bidirectional``): the edge types merged
    with their reverses' reversed edges, and which types were merged."""
    out, merged = dict(edge_index), set()
    by_ends: dict[tuple[str, str], list[EdgeType]] = {}
    for key in edge_index:
        by_ends.setdefault((key[0], key[2]), []).append(key)
    for edge_type in [key for key in edge_index if not key[1].startswith("rev_")]:
        src_type, rel, dst_type = edge_type
        reverse = (dst_type, f"rev_{rel}", src_type)
        if reverse not in edge_index:
            candidates = by_ends.get((dst_type, src_type), [])
            if src_type == dst_type or len(candidates) != 1:
                if src_type != dst_type:
                    warnings.warn(f"subgraph_type: edge type {edge_type} has no reverse edge type", stacklevel=4)
                    continue
                candidates = [edge_type]
            reverse = candidates[0]
        both = torch.cat([edge_index[edge_type], edge_index[reverse].flip(0)], dim=1)
        ends = torch.unique(both.flip(0), dim=1)  # each pair once, sorted by destination then source
        out[edge_type] = ends.flip(0)
        merged.add(edge_type)
        if reverse[1] == f"rev_{rel}":
            out[reverse] = ends
            merged.add(reverse)
    return out, merged


def _input(input_nodes: Any, node_types: tuple[str, ...]) -> tuple[str, Any]:
    """(node type, ids or mask or None) from PyG's ``input_nodes``: a node type, or a (node type, ids) pair."""
    if isinstance(input_nodes, str):
        input_nodes = (input_nodes, None)
    if not (isinstance(input_nodes, (tuple, list)) and len(input_nodes) == 2 and isinstance(input_nodes[0], str)):
        raise TypeError(
            "input_nodes: a HeteroData's seeds are a node type or a (node type, ids or mask) pair, got "
            f"{type(input_nodes).__name__}"
        )
    if input_nodes[0] not in node_types:
        raise ValueError(f"input_nodes: unknown node type {input_nodes[0]!r} (node types: {list(node_types)})")
    return input_nodes[0], input_nodes[1]


class HeteroNeighborLoader(EpochLoader[Any]):
    """Mini-batches of one node type's vertices of a PyG ``HeteroData`` (or of PyG's ``(FeatureStore,
    GraphStore)`` pair whose graph store holds edge types: features read per batch), with ``num_neighbors`` sampled
    in-neighbours per vertex, hop and edge type: one list for every edge type or a dict keyed by edge type
    (-1: all). ``input_nodes``: a node type (all its vertices) or ``(node_type, ids or boolean mask)``;
    ``weight_attr`` names a per-edge value every edge type holds, to draw neighbours in proportion to.
    ``batch_size``, ``shuffle``, ``replace``, ``seed``, ``num_workers``, ``prefetch``, ``drop_last`` and
    ``pin_memory`` as in ``NeighborLoader``. ``subgraph_type="bidirectional"``: as PyG, each edge type's
    sampled edges merged with its reverse type's reversed (``rev_`` + relation, else the one edge type
    between the two node types the other way; a relation within one node type without a reverse type with
    its own reversed), each pair once, sorted by destination; merged types carry no ``e_id`` or per-edge
    values, and no batch carries per-hop counts. PyG's ``is_sorted`` and ``filter_per_worker`` change nothing.
    The typed graph and each relation's CSR are built once, here.
    """

    def __init__(
        self,
        data: Any,
        num_neighbors: Any = (15, 10),
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
        subgraph_type: Any = "directional",
        is_sorted: bool = False,
        filter_per_worker: bool | None = None,
    ) -> None:
        self.bidirectional = checked_subgraph_type(subgraph_type)
        checked_batching_flags(is_sorted, filter_per_worker)
        if not is_typed(data):
            raise TypeError(f"data: expected a PyG HeteroData or a typed store pair, got {type(data).__name__}")
        if input_nodes is None:
            raise ValueError("input_nodes: a HeteroData needs the seeds' node type, e.g. ('paper', train_idx)")
        self.source = _from_hetero_data(data) if is_hetero_data(data) else _from_typed_stores(*data)
        self.graph = self.source.graph
        self.input_type, ids = _input(input_nodes, self.graph.node_types)
        self.input_nodes = checked_input_nodes(ids, self.graph.num_nodes_dict[self.input_type])
        self.input_id_is_vertex = is_mask(ids)
        super().__init__(self.input_nodes, batch_size, shuffle, seed, prefetch, drop_last, pin_memory)
        weights = None
        if weight_attr is not None:
            edge_attrs = self.source.edge_attrs
            lacking = [et for et in self.graph.edge_types if weight_attr not in edge_attrs[et]]
            if lacking:
                raise ValueError(f"weight_attr {weight_attr!r}: edge type(s) {lacking} have no such per-edge value")
            weights = {et: edge_attrs[et][weight_attr] for et in self.graph.edge_types}
        self.sampler = HeteroNeighborSampler(
            self.graph,
            {tuple(key): value for key, value in num_neighbors.items()}
            if isinstance(num_neighbors, dict)
            else num_neighbors,
            replace=checked_flag(replace, "replace"),
            weights=weights,
            num_threads=checked_workers(num_workers),
        )

    def __repr__(self) -> str:
        return "NeighborLoader()"  # PyG's class serves typed graphs under that name

    def _batch(self, positions: torch.Tensor, seed: int) -> Any:
        sampled = self.sampler.sample(self.input_type, self.input_nodes[positions], seed)
        return self._make(positions, sampled)

    def _make(self, positions: torch.Tensor, sampled: HeteroMiniBatch) -> Any:
        template = self.source.template
        # PyG's copy: fresh stores sharing the values, which are replaced below
        out = pyg_hetero_data() if template is None else copy.copy(template)
        for node_type in self.graph.node_types:
            n_id = sampled.n_id[node_type]
            if template is None or "num_nodes" in template[node_type]:
                out[node_type].num_nodes = n_id.numel()
            for key, value in self.source.node_attrs[node_type].items():
                out[node_type][key] = gathered(value, n_id)
            out[node_type].n_id = n_id
            if not self.bidirectional:
                out[node_type].num_sampled_nodes = sampled.num_sampled_nodes[node_type]
        edge_index, merged = sampled.edge_index, set()
        if self.bidirectional:
            edge_index, merged = both_ways(edge_index)
        for edge_type in self.graph.edge_types:
            e_id = sampled.e_id[edge_type]
            device = self.graph.device if template is None else template[edge_type].edge_index.device
            out[edge_type].edge_index = edge_index[edge_type].to(device)
            for key, value in self.source.edge_attrs[edge_type].items():
                out[edge_type][key] = None if edge_type in merged else gathered(value, e_id)
            if edge_type not in merged:
                out[edge_type].e_id = e_id
            if not self.bidirectional:
                out[edge_type].num_sampled_edges = sampled.num_sampled_edges[edge_type]
        out[self.input_type].input_id = self.inputs[positions] if self.input_id_is_vertex else positions
        out[self.input_type].batch_size = sampled.batch_size
        return out
