"""What a loader samples from, and the checks of the arguments every loader shares.

A loader takes a PyG ``Data`` (``edge_index`` or a sparse ``adj_t`` or ``adj``, and any per-vertex, per-edge
and graph-level values), PyG's ``(FeatureStore, GraphStore)`` pair (features read per batch from the store), a
featgraph ``Dataset`` (its graph, features as ``x``, labels as ``y``) or a featgraph ``Graph`` with ``x``/``y``
given alongside. Each
becomes one ``LoaderSource``: the full ``Graph``, built once, and the values a batch slices by its vertex ids
(``n_id``) and edge ids (``e_id``).
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..datasets import Dataset
from ..graph import Graph, interop
from ..sampling.neighbor import SEED_LIMIT


@dataclass(frozen=True)
class LoaderSource:
    """The full ``graph`` (one vertex set, on the CPU), tensors with one row per vertex (``node_attrs``, e.g.
    ``x``, ``y``, masks) and per edge in the graph's edge order (``edge_attrs``, e.g. ``edge_weight``,
    ``edge_attr``), and graph-level values every batch carries unchanged (``graph_attrs``)."""

    graph: Graph
    node_attrs: dict[str, Any]  # tensors, or numpy arrays and lists a PyG Data holds per vertex
    edge_attrs: dict[str, Any]
    graph_attrs: dict[str, Any]
    sparse_edges: dict[str, Any] = field(default_factory=dict)  # a PyG Data's adj_t or adj, sliced per batch
    edge_index: bool = True  # whether a batch carries edge_index (a Data holding only adj_t: no, as PyG's)


@dataclass(frozen=True)
class StoreColumn:
    """One attribute of a PyG ``FeatureStore`` (its ``attr``: group, name), read row by row: a batch asks the
    store for its own rows only (``get_tensor`` with an index), so features kept outside memory stay there."""

    store: Any
    attr: Any

    def rows(self, index: torch.Tensor) -> torch.Tensor:
        return self.store.get_tensor(self.attr.group_name, self.attr.attr_name, index=index)


class ForeignOrderColumn(StoreColumn):
    """A NumPy array in the other byte order (e.g. a ``">f4"`` memmap on a little-endian machine), which torch
    cannot read: a batch reads only its own rows and converts those to native byte order; the array itself is
    never copied whole."""

    def __init__(self, array: np.ndarray) -> None:
        super().__init__(array, None)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.store.shape)

    def rows(self, index: torch.Tensor) -> torch.Tensor:
        picked = self.store[index.cpu().numpy()]
        return torch.from_numpy(np.ascontiguousarray(picked, dtype=picked.dtype.newbyteorder("=")))


def native_rows(value: Any) -> Any:
    """``value``, or a ``ForeignOrderColumn`` where it is a NumPy array in the other byte order."""
    if isinstance(value, np.ndarray) and not value.dtype.isnative:
        return ForeignOrderColumn(value)
    return value


def is_store_pair(data: Any) -> bool:
    """PyG's remote-backend pair ``(FeatureStore, GraphStore)``, recognised by its methods."""
    return (
        isinstance(data, (tuple, list))
        and len(data) == 2
        and all(hasattr(data[0], name) for name in ("get_tensor", "get_all_tensor_attrs"))
        and all(hasattr(data[1], name) for name in ("get_all_edge_attrs", "coo"))
    )


def _from_stores(feature_store: Any, graph_store: Any) -> LoaderSource:
    """The graph from the graph store's one edge type (as COO, its ids the edges' ids) and a ``StoreColumn``
    per feature-store attribute: nothing but the edges is read here."""
    edge_attrs = graph_store.get_all_edge_attrs()
    if len(edge_attrs) != 1:
        raise ValueError(
            f"data: the graph store holds {len(edge_attrs)} edge types; NeighborLoader on stores takes exactly one"
        )
    (attr,) = edge_attrs
    src, dst, _ = graph_store.coo()  # COO in the stored order (PyG permutes only into CSR or CSC)
    if isinstance(src, dict):  # keyed by the edge type where it has one
        src, dst = next(iter(src.values())), next(iter(dst.values()))
    count = max(attr.size) if attr.size is not None else int(torch.cat([src, dst]).max()) + 1 if src.numel() else 0
    columns = {
        tensor_attr.attr_name: StoreColumn(feature_store, tensor_attr)
        for tensor_attr in feature_store.get_all_tensor_attrs()
        if tensor_attr.group_name is None
    }
    return LoaderSource(Graph(src.cpu().long(), dst.cpu().long(), count), columns, {}, {})


def _is_pyg_data(data: Any) -> bool:
    """A PyG ``Data`` (or any object laid out like one), recognised without importing PyG."""
    return all(hasattr(data, name) for name in ("edge_index", "is_node_attr", "is_edge_attr", "items"))


def _from_pyg(data: Any) -> LoaderSource:
    if interop.pyg_edge_key(data) is None:  # vertices alone: a batch holds its seeds (PyG samples such a Data too)
        if data.num_nodes is None:
            raise ValueError("data has neither edge_index nor num_nodes, nor a sparse adj_t or adj: no graph to sample")
        empty = torch.zeros(0, dtype=torch.int64)
        graph = Graph(empty, empty, data.num_nodes)
    else:  # the sampler runs on the CPU; per-vertex and per-edge data stay where they are, gathered there
        edges = interop.from_pyg(data)
        graph = Graph(**{k: v.cpu() if isinstance(v, torch.Tensor) else v for k, v in edges.items()})
    node_attrs, edge_attrs, graph_attrs, sparse_edges = {}, {}, {}, {}
    for key, value in data.items():
        if key in ("adj", "adj_t") and value is not None:
            sparse_edges[key] = value
        if key in (*interop.PYG_EDGE_KEYS, "num_nodes"):
            continue
        if key in ("x", "y") and isinstance(value, (torch.Tensor, np.ndarray)) and value.ndim > 0:
            node_attrs[key] = value  # checked against the vertex count below, never taken for a graph-level value
        elif data.is_node_attr(key):
            node_attrs[key] = value
        elif data.is_edge_attr(key):
            edge_attrs[key] = value
        else:
            graph_attrs[key] = value
    with_edge_index = data.edge_index is not None or not sparse_edges  # vertices alone: an empty edge_index
    return LoaderSource(graph, node_attrs, edge_attrs, graph_attrs, sparse_edges, with_edge_index)


def _stored_values(matrix: Any) -> torch.Tensor | None:
    """A sparse matrix's values in its stored order (views: nothing copied)."""
    if interop.is_torch_sparse_tensor(matrix):
        return matrix.storage.value()
    return matrix._values() if matrix.layout == torch.sparse_coo else matrix.values()


def sliced_adjacency(
    matrix: Any, key: str, edge_index: torch.Tensor, e_id: torch.Tensor | None, num_src: int, num_dst: int
) -> Any:
    """A batch's ``adj_t`` (``adj``) where the data holds its edges as one: the batch's edges (``edge_index`` in
    batch ids, ``e_id`` their stored positions) as a sparse matrix of ``matrix``'s kind and layout, ``(num_dst,
    num_src)`` (``(num_src, num_dst)``), holding ``matrix``'s values at ``e_id`` (ones where ``e_id`` is None:
    merged edges, as PyG's). Its entries are sorted (row-major; column-major for CSC); a duplicate edge stays."""
    values = _stored_values(matrix)
    if values is not None:
        ones = torch.ones(edge_index.shape[1], dtype=values.dtype, device=values.device)
        values = ones if e_id is None else values[e_id.to(values.device)]
    device = values.device if values is not None else edge_index.device
    src, dst = edge_index.to(device)
    row, col, size = (dst, src, (num_dst, num_src)) if key == "adj_t" else (src, dst, (num_src, num_dst))
    if interop.is_torch_sparse_tensor(matrix):  # torch_sparse's SparseTensor sorts its entries itself
        return type(matrix)(row=row, col=col, value=values, sparse_sizes=size)
    by_column = matrix.layout == torch.sparse_csc
    major, minor, count = (col, row, size[1]) if by_column else (row, col, size[0])
    order = torch.argsort(major * max(size[1 - by_column], 1) + minor, stable=True)
    major, minor, values = major[order], minor[order], values[order]
    if matrix.layout == torch.sparse_coo:
        keys = major * max(size[1], 1) + minor
        unique = keys.numel() < 2 or bool((keys.diff() != 0).all())
        return torch.sparse_coo_tensor(torch.stack([row[order], col[order]]), values, size, is_coalesced=unique)
    indptr = torch.zeros(count + 1, dtype=torch.int64, device=device)
    indptr[1:] = torch.bincount(major, minlength=count).cumsum(0)
    build = torch.sparse_csc_tensor if by_column else torch.sparse_csr_tensor
    return build(indptr, minor, values, size)


def _tensors(**tensors: Any) -> dict[str, torch.Tensor]:
    """The given tensors (None left out) as torch tensors; a NumPy array in the other byte order is kept, to be read
    row by row (``native_rows``)."""
    return {
        key: value if isinstance(value, np.ndarray) and not value.dtype.isnative else torch.as_tensor(value)
        for key, value in tensors.items()
        if value is not None
    }


def loader_source(
    data: Any, x: Any | None = None, y: Any | None = None, edge_attrs: Mapping[str, Any] | None = None
) -> LoaderSource:
    """``data`` (a PyG ``Data``, PyG's ``(FeatureStore, GraphStore)`` pair, a featgraph ``Dataset`` or ``Graph``)
    as a ``LoaderSource``; ``x`` and ``y`` (one row per vertex) and ``edge_attrs`` (name -> one row per edge, in
    the graph's edge order, for ``weight_attr`` to name) go with a ``Graph`` only, the others carry their own."""
    if isinstance(data, Graph):
        edges = _tensors(edge_weight=data.edge_weight) | _tensors(**checked_edge_attrs(edge_attrs, "edge_attrs"))
        source = LoaderSource(data, _tensors(x=x, y=y), edges, {})
    elif x is not None or y is not None or edge_attrs is not None:
        raise TypeError(
            f"x and y are passed only with a featgraph Graph, edge_attrs too; a {type(data).__name__} brings its own"
        )
    elif isinstance(data, Dataset):
        return loader_source(data.graph, data.features, data.labels)
    elif _is_pyg_data(data):
        source = _from_pyg(data)
    elif is_store_pair(data):
        return _from_stores(*data)  # a store's columns are read per batch, their sizes never
    else:
        raise TypeError(
            "data must be a PyG Data, a (FeatureStore, GraphStore) pair, a featgraph Dataset or a featgraph Graph, "
            f"got {type(data).__name__}"
        )
    graph = source.graph
    if graph.is_bipartite:
        raise ValueError(
            f"the graph is bipartite ({graph.num_src_nodes} sources, {graph.num_dst_nodes} destinations); "
            "loaders sample graphs with one vertex set"
        )
    per_vertex, per_edge = ("vertex", source.node_attrs, graph.num_nodes), ("edge", source.edge_attrs, graph.num_edges)
    for kind, attrs, rows in (per_vertex, per_edge):
        for key, value in attrs.items():
            shape = tuple(value.shape) if hasattr(value, "shape") else (len(value),)
            if len(shape) == 0 or shape[0] != rows:
                raise ValueError(f"{key} must have one row per {kind} ({rows}), got shape {shape}")
    return dataclasses.replace(
        source,
        node_attrs={key: native_rows(value) for key, value in source.node_attrs.items()},
        edge_attrs={key: native_rows(value) for key, value in source.edge_attrs.items()},
    )


def checked_edge_attrs(edge_attrs: Any, name: str) -> dict[str, Any]:
    """``edge_attrs`` as a dict of per-edge values by name (None: none); the rows are checked by the caller."""
    if edge_attrs is None:
        return {}
    if not isinstance(edge_attrs, Mapping) or not all(isinstance(key, str) for key in edge_attrs):
        raise TypeError(f"{name} must be a dict name -> per-edge tensor, got {edge_attrs!r}")
    return dict(edge_attrs)


ID_TYPES = (torch.int32, torch.int64)


def checked_idtype(idtype: Any, counts: Mapping[str, int]) -> torch.dtype:
    """DGL's ``idtype``, the type of a batch's ids (``torch.int32`` or ``torch.int64``); ``counts`` (what -> how
    many, e.g. vertices and edges) must fit it."""
    if idtype not in ID_TYPES:
        raise ValueError(f"idtype must be torch.int32 or torch.int64, got {idtype!r}")
    for what, count in counts.items():
        if count > torch.iinfo(idtype).max:
            raise ValueError(f"idtype {idtype}: the graph has {count} {what}, more than its ids can name")
    return idtype


def graph_counts(graph: Graph) -> dict[str, int]:
    """The vertices and edges of ``graph`` (a typed graph's ``graph``: all types together), for
    ``checked_idtype``."""
    return {"vertices": graph.num_nodes, "edges": graph.num_edges}


def checked_count(value: Any, name: str, smallest: int) -> int:
    """``value`` as an int of at least ``smallest``, or an error naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < smallest:
        raise ValueError(f"{name} must be an int >= {smallest}, got {value!r}")
    return int(value)


def checked_flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got {value!r}")
    return value


SUBGRAPH_TYPES = ("directional", "bidirectional")


def checked_temporal_options(time_attr: Any, temporal_strategy: str, replace: Any, weight_attr: Any) -> None:
    """The options temporal sampling refuses: a strategy without ``time_attr`` to sample by, and ``replace`` or
    ``weight_attr`` with it (it draws uniformly, without replacement)."""
    if time_attr is None and temporal_strategy != "uniform":
        raise ValueError(f"temporal_strategy is given ({temporal_strategy!r}) without time_attr to sample by")
    if time_attr is not None:
        for name, given in (("replace", replace is True), ("weight_attr", weight_attr is not None)):
            if given:
                raise ValueError(
                    f"{name} is given with time_attr: temporal sampling draws uniformly, without replacement"
                )


def checked_subgraph_type(subgraph_type: Any) -> bool:
    """PyG's ``subgraph_type`` (a string or its ``SubgraphType``): whether it asks for "bidirectional"
    batches (every sampled edge also reversed); "induced" is refused by name."""
    value = getattr(subgraph_type, "value", subgraph_type)
    if value not in SUBGRAPH_TYPES:
        raise ValueError(
            f"subgraph_type must be 'directional' or 'bidirectional', got {subgraph_type!r}"
            + (" (the induced subgraph is not supported)" if value == "induced" else "")
        )
    return value == "bidirectional"


def checked_batching_flags(is_sorted: Any, filter_per_worker: Any) -> None:
    """PyG's ``is_sorted`` and ``filter_per_worker``: they change only how PyG builds a batch (whether to sort
    the edges, which process slices the values), never the batch, so they are checked and accepted."""
    checked_flag(is_sorted, "is_sorted")
    if filter_per_worker is not None:
        checked_flag(filter_per_worker, "filter_per_worker")


def checked_seed(seed: Any) -> int | None:
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= seed < SEED_LIMIT:
        raise ValueError(f"seed must be an int from 0 to 2**63 - 1 or None, got {seed!r}")
    return int(seed)


def is_mask(input_nodes: Any) -> bool:
    """Whether ``input_nodes`` is a boolean mask: PyG's batches then name each seed by its vertex id
    (``input_id``), where a list of ids gives positions in that list."""
    return isinstance(input_nodes, torch.Tensor) and input_nodes.dtype == torch.bool


def checked_input_nodes(input_nodes: Any, num_nodes: int) -> torch.Tensor:
    """The seed vertices of an epoch as a fresh int64 CPU vector of distinct ids: ``input_nodes`` is a vector
    of vertex ids, a boolean mask over the vertices, or None for every vertex."""
    if input_nodes is None:
        if num_nodes == 0:
            raise ValueError("the graph has no vertices: there is nothing to sample")
        return torch.arange(num_nodes)
    nodes = torch.as_tensor(input_nodes)
    if nodes.dim() != 1:
        raise ValueError(f"input_nodes must be 1-D (vertex ids or a boolean mask), got shape {tuple(nodes.shape)}")
    if nodes.dtype == torch.bool:
        if nodes.numel() != num_nodes:
            raise ValueError(
                f"input_nodes is a boolean mask of {nodes.numel()} entries, but the graph has {num_nodes} vertices"
            )
        nodes = nodes.cpu().nonzero().flatten()
        if nodes.numel() == 0:
            raise ValueError("input_nodes is a boolean mask that selects no vertex")
    if nodes.numel() == 0:  # before the dtype: torch.as_tensor([]) is float32
        raise ValueError("input_nodes is empty: an epoch needs at least one seed vertex")
    if nodes.is_floating_point() or nodes.is_complex():
        raise TypeError(f"input_nodes must hold integer vertex ids or be a boolean mask, got dtype {nodes.dtype}")
    nodes = nodes.to(device="cpu", dtype=torch.int64, copy=True)
    low, high = int(nodes.min()), int(nodes.max())
    if low < 0 or high >= num_nodes:
        raise ValueError(
            f"input_nodes holds vertex id {low if low < 0 else high}, out of range for a graph of {num_nodes} vertices"
        )
    if torch.unique(nodes).numel() != nodes.numel():
        raise ValueError("input_nodes holds a vertex more than once: each seed is sampled once per epoch")
    return nodes
