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
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from ..graph import interop
from ..graph.hetero import EdgeType, HeteroGraph
from ..sampling.disjoint import DisjointSampler, checked_times
from ..sampling.hetero import HeteroMiniBatch, HeteroNeighborSampler
from .base import EpochLoader, checked_workers, gathered
from .source import (
    StoreColumn,
    checked_batching_flags,
    checked_edge_attrs,
    checked_flag,
    checked_input_nodes,
    checked_subgraph_type,
    checked_temporal_options,
    is_mask,
    is_store_pair,
    native_rows,
    sliced_adjacency,
)


def pyg_hetero_data() -> Any:
    """An empty PyG ``HeteroData`` (a store pair's batches; PyG is there wherever its stores are)."""
    from torch_geometric.data import HeteroData

    return HeteroData()


def is_hetero_data(data: Any) -> bool:
    """A PyG ``HeteroData`` (or any object laid out like one), recognised without importing PyG."""
    return all(hasattr(data, name) for name in ("node_types", "edge_types", "node_items", "edge_items", "metadata"))


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
    sparse_edges: dict[EdgeType, dict[str, Any]] = field(default_factory=dict)  # adj_t or adj, sliced per batch


def _from_hetero_data(data: Any) -> TypedSource:
    graph = HeteroGraph.from_pyg(data)
    nodes = {
        t: {k: native_rows(v) for k, v in data[t].items() if k != "num_nodes" and data[t].is_node_attr(k)}
        for t in graph.node_types
    }
    edges = {
        et: {
            k: native_rows(v)
            for k, v in data[et].items()
            if k not in interop.PYG_EDGE_KEYS and data[et].is_edge_attr(k)
        }
        for et in graph.edge_types
    }
    sparse = {et: {k: data[et][k] for k in ("adj", "adj_t") if data[et].get(k) is not None} for et in graph.edge_types}
    return TypedSource(graph, nodes, edges, data, sparse)


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


def typed_input(input_nodes: Any, node_types: tuple[str, ...]) -> tuple[str, Any]:
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


def typed_source(data: Any, edge_attrs: Mapping[Any, Mapping[str, Any]] | None = None) -> TypedSource:
    """The ``TypedSource`` of a ``HeteroData``, of a typed store pair or of a featgraph ``HeteroGraph`` (on the
    CPU); ``edge_attrs`` (edge type -> name -> one value per edge of the type, for ``weight_attr`` to name) go
    with a ``HeteroGraph`` only, the others carry their own."""
    if isinstance(data, HeteroGraph):
        edges: dict[EdgeType, dict[str, Any]] = {et: {} for et in data.edge_types}
        if edge_attrs is not None and not isinstance(edge_attrs, Mapping):
            raise TypeError(f"edge_attrs must be a dict edge type -> {{name: per-edge tensor}}, got {edge_attrs!r}")
        for key, attrs in (edge_attrs or {}).items():
            edge_type = data.edge_type(key)
            for name, value in checked_edge_attrs(attrs, f"edge_attrs[{key!r}]").items():
                rows = len(value)
                if rows != data.num_edges_of(edge_type):
                    raise ValueError(
                        f"edge_attrs[{key!r}][{name!r}] must have one row per edge of the type "
                        f"({data.num_edges_of(edge_type)}), got {rows}"
                    )
                edges[edge_type][name] = value
        return TypedSource(data, {t: {} for t in data.node_types}, edges, None)
    if edge_attrs is not None:
        raise TypeError(
            f"edge_attrs are passed only with a featgraph HeteroGraph; a {type(data).__name__} brings its own"
        )
    if not is_typed(data):
        raise TypeError(
            f"data: expected a PyG HeteroData, a typed store pair or a featgraph HeteroGraph, got {type(data).__name__}"
        )
    return _from_hetero_data(data) if is_hetero_data(data) else _from_typed_stores(*data)


def typed_rows(source: TypedSource, name: str, ids: dict[str, torch.Tensor]) -> dict[str, Any]:
    """Per node type of ``ids`` that has a per-vertex value ``name``, that value's rows at the type's ids."""
    attrs = source.node_attrs
    return {t: gathered(attrs[t][name], rows) for t, rows in ids.items() if name in attrs[t]}


def edge_weights(source: TypedSource, weight_attr: str | None) -> dict[EdgeType, Any] | None:
    """Per edge type the per-edge values named ``weight_attr`` (every edge type must have them), or None."""
    if weight_attr is None:
        return None
    edge_attrs = source.edge_attrs
    lacking = [et for et in source.graph.edge_types if weight_attr not in edge_attrs[et]]
    if lacking:
        raise ValueError(f"weight_attr {weight_attr!r}: edge type(s) {lacking} have no such per-edge value")
    return {et: edge_attrs[et][weight_attr] for et in source.graph.edge_types}


def typed_sampler(
    source: TypedSource, num_neighbors: Any, replace: Any, weights: dict[EdgeType, Any] | None, num_workers: Any
) -> HeteroNeighborSampler:
    """The typed sampler of ``source``'s graph (``num_neighbors``: one per-hop list or a dict per edge type)."""
    return HeteroNeighborSampler(
        source.graph,
        {tuple(k): v for k, v in num_neighbors.items()} if isinstance(num_neighbors, dict) else num_neighbors,
        replace=checked_flag(replace, "replace"),
        weights=weights,
        num_threads=checked_workers(num_workers),
    )


class TypedLoader(EpochLoader[Any]):
    """What the typed loaders share: the source and its typed sampler, built once; PyG's typed batch of a sample
    (``_layout``) and, for temporal or disjoint sampling, of one subgraph per seed (``_disjoint_layout``). The
    subclasses say what their inputs are and what a batch adds (``_batch``)."""

    def __init__(
        self,
        source: TypedSource,
        num_neighbors: Any,
        inputs: torch.Tensor,
        batch_size: int,
        shuffle: bool,
        replace: bool,
        seed: int | None,
        num_workers: int,
        prefetch: int,
        drop_last: bool,
        weight_attr: str | None,
        pin_memory: bool,
        subgraph_type: Any,
        is_sorted: bool,
        filter_per_worker: bool | None,
        time_attr: str | None,
        temporal_strategy: str,
        disjoint: bool = False,
        worker_processes: int = 0,
    ) -> None:
        self.bidirectional = checked_subgraph_type(subgraph_type)
        checked_batching_flags(is_sorted, filter_per_worker)
        self.source, self.graph = source, source.graph
        super().__init__(inputs, batch_size, shuffle, seed, prefetch, drop_last, pin_memory, worker_processes)
        weights = edge_weights(source, weight_attr)
        self.sampler = typed_sampler(source, num_neighbors, replace, weights, num_workers)
        checked_temporal_options(time_attr, temporal_strategy, replace, weight_attr)
        self.time_attr = time_attr
        self.disjoint_sampler = None  # PyG's disjoint batches, temporal ones always
        if time_attr is not None or checked_flag(disjoint, "disjoint"):
            if self.bidirectional:
                raise ValueError("subgraph_type='bidirectional' is given with time_attr or disjoint: not supported")
            self.disjoint_sampler = self._disjoint_sampler(time_attr, temporal_strategy, weights, replace)

    def _disjoint_sampler(self, time_attr: Any, strategy: str, weights: dict | None, replace: bool) -> DisjointSampler:
        """The ``DisjointSampler`` of the typed graph's homogeneous view, under the per-vertex or per-edge values
        named ``time_attr`` where it is given (a type without them is never later than a seed), else by
        ``weights`` (per edge type) and ``replace``."""
        graph, source = self.graph, self.source
        level: dict[str, torch.Tensor] = {}
        if time_attr is not None and not isinstance(time_attr, str):
            raise TypeError(f"time_attr must name per-vertex or per-edge times, got {time_attr!r}")
        if time_attr is not None:
            node_level = [t for t in graph.node_types if time_attr in source.node_attrs[t]]
            edge_level = [et for et in graph.edge_types if time_attr in source.edge_attrs[et]]
            if bool(node_level) == bool(edge_level):
                held = "both per-vertex and per-edge values" if node_level else "no per-vertex or per-edge values"
                raise ValueError(f"time_attr {time_attr!r} names {held} of the data")
            if node_level:
                parts = {t: _all_rows(source.node_attrs[t][time_attr], graph.num_nodes_dict[t]) for t in node_level}
                level = {"node_time": _filled(parts, [(t, graph.num_nodes_dict[t]) for t in graph.node_types])}
            else:
                parts = {et: _all_rows(source.edge_attrs[et][time_attr], graph.num_edges_of(et)) for et in edge_level}
                level = {"edge_time": _filled(parts, [(et, graph.num_edges_of(et)) for et in graph.edge_types])}
        weight = None if weights is None else torch.cat([torch.as_tensor(weights[et]) for et in graph.edge_types])
        fanouts = [[self.sampler.fanouts[et][hop] for et in graph.edge_types] for hop in range(self.sampler.num_hops)]
        return DisjointSampler(
            graph.graph, fanouts, strategy=strategy, relation=graph.etype, weight=weight, replace=replace, **level
        )

    def _layout(self, sampled: HeteroMiniBatch) -> Any:
        """PyG's typed batch of ``sampled``: per node type its values sliced by ``n_id`` with the per-hop
        counts, per edge type ``edge_index`` with its values sliced by ``e_id`` (merged with the reverse
        type's under ``bidirectional``)."""
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
            self._put_edges(out, edge_type, edge_index[edge_type], None if edge_type in merged else e_id)
            for key, value in self.source.edge_attrs[edge_type].items():
                out[edge_type][key] = None if edge_type in merged else gathered(value, e_id)
            if edge_type not in merged:
                out[edge_type].e_id = e_id
            if not self.bidirectional:
                out[edge_type].num_sampled_edges = sampled.num_sampled_edges[edge_type]
        return out

    def _put_edges(self, out: Any, edge_type: EdgeType, edge_index: torch.Tensor, e_id: torch.Tensor | None) -> None:
        """A batch's edges of ``edge_type`` (``edge_index`` in its node types' batch ids, ``e_id`` their ids or
        None where merged) as the data holds them, as PyG's: ``edge_index`` (on the data's device), and a sparse
        ``adj_t`` or ``adj`` of them (``sliced_adjacency``) where the data holds one."""
        template = self.source.template
        if template is None or "edge_index" in template[edge_type]:
            device = self.graph.device if template is None else template[edge_type].edge_index.device
            out[edge_type].edge_index = edge_index.to(device)
        src_type, _, dst_type = edge_type
        sizes = out[src_type].n_id.numel(), out[dst_type].n_id.numel()
        for key, matrix in self.source.sparse_edges.get(edge_type, {}).items():
            out[edge_type][key] = sliced_adjacency(matrix, key, edge_index, e_id, *sizes)

    def _disjoint_layout(self, seeds: torch.Tensor, times: torch.Tensor | None, seed: int) -> tuple[Any, torch.Tensor]:
        """PyG's typed disjoint batch of ``seeds`` (global ids, each its own subgraph, under its time where the
        sampler has times): per node
        type ``n_id`` and ``batch`` (each vertex's seed), per edge type ``edge_index`` and ``e_id``; and each
        seed's position among its type's batch vertices."""
        graph, template = self.graph, self.source.template
        sampled = self.disjoint_sampler.sample(seeds, times, seed)
        node_type = graph.ntype[sampled.n_id]
        local = torch.empty_like(sampled.n_id)  # each batch vertex's id among its type's batch vertices
        out = pyg_hetero_data() if template is None else copy.copy(template)
        for t, name in enumerate(graph.node_types):
            mine = torch.nonzero(node_type == t).flatten()
            local[mine] = torch.arange(mine.numel())
            n_id = sampled.n_id[mine] - graph.node_offset(name)
            if template is None or "num_nodes" in template[name]:
                out[name].num_nodes = n_id.numel()
            for key, value in self.source.node_attrs[name].items():
                out[name][key] = gathered(value, n_id)
            out[name].n_id, out[name].batch = n_id, sampled.batch[mine]
        relation = graph.etype[sampled.e_id]
        for r, edge_type in enumerate(graph.edge_types):
            mine = torch.nonzero(relation == r).flatten()
            e_id = sampled.e_id[mine] - int(graph.edge_offsets[r])
            self._put_edges(out, edge_type, local[sampled.edge_index[:, mine]], e_id)
            for key, value in self.source.edge_attrs[edge_type].items():
                out[edge_type][key] = gathered(value, e_id)
            out[edge_type].e_id = e_id
        return out, local[: seeds.numel()]


class HeteroNeighborLoader(TypedLoader):
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
    ``time_attr``, ``input_time`` and ``temporal_strategy``: temporal sampling as ``NeighborLoader``'s, each
    edge type with its own fan-out; ``disjoint``: a subgraph per seed. An edge type held as a sparse ``adj_t``
    (PyG's ``ToSparseTensor``) or ``adj`` is sampled from it, its batch store carrying the sampled ``adj_t``
    (``adj``) as PyG's, and no ``edge_index`` unless the data holds one too. The typed graph and each relation's
    CSR are built once, here.
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
        time_attr: str | None = None,
        input_time: Any = None,
        temporal_strategy: str = "uniform",
        disjoint: bool = False,
        worker_processes: int = 0,
    ) -> None:
        source = typed_source(data)
        if input_nodes is None:
            raise ValueError("input_nodes: a HeteroData needs the seeds' node type, e.g. ('paper', train_idx)")
        self.input_type, ids = typed_input(input_nodes, source.graph.node_types)
        self.input_nodes = checked_input_nodes(ids, source.graph.num_nodes_dict[self.input_type])
        self.input_id_is_vertex = is_mask(ids)
        super().__init__(
            source, num_neighbors, self.input_nodes, batch_size, shuffle, replace, seed, num_workers, prefetch,
            drop_last, weight_attr, pin_memory, subgraph_type, is_sorted, filter_per_worker, time_attr,
            temporal_strategy, disjoint, worker_processes,
        )  # fmt: skip
        self.input_time = None
        if input_time is not None:
            if time_attr is None:
                raise ValueError("input_time is given without time_attr to sample by")
            self.input_time = checked_times(input_time, self.input_nodes.numel(), "input_time")

    def __repr__(self) -> str:
        return "NeighborLoader()"  # PyG's class serves typed graphs under that name

    def _batch(self, positions: torch.Tensor, seed: int) -> Any:
        seeds = self.inputs[positions]
        if self.disjoint_sampler is None:
            out = self._layout(self.sampler.sample(self.input_type, seeds, seed))
        else:  # temporal (always disjoint, as PyG) or disjoint
            first = self.graph.node_offset(self.input_type)
            times = None
            if self.input_time is not None:
                times = self.input_time[positions]
            elif self.time_attr is not None:
                times = self.disjoint_sampler.seed_times(seeds + first)
            out, _ = self._disjoint_layout(seeds + first, times, seed)
            if times is not None:
                out[self.input_type].seed_time = times
        out[self.input_type].input_id = self.inputs[positions] if self.input_id_is_vertex else positions
        out[self.input_type].batch_size = positions.numel()
        return out


def _all_rows(values: Any, count: int) -> torch.Tensor:
    """Every row of a per-vertex or per-edge value (a feature store's column read whole) as a CPU tensor."""
    return torch.as_tensor(gathered(values, torch.arange(count))).detach().cpu()


def _filled(parts: dict[Any, torch.Tensor], sizes: list[tuple[Any, int]]) -> torch.Tensor:
    """The types' values one after another (``sizes``: each type and its count, in order), the lowest value of
    their dtype where a type has none (never later than a seed)."""
    dtypes = [p.dtype for p in parts.values()]
    dtype = dtypes[0]
    for other in dtypes[1:]:
        dtype = torch.promote_types(dtype, other)
    low = torch.finfo(dtype).min if dtype.is_floating_point else torch.iinfo(dtype).min
    return torch.cat([parts[t].to(dtype) if t in parts else torch.full((n,), low, dtype=dtype) for t, n in sizes])
