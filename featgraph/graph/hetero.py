"""``HeteroGraph``: a typed graph (node types, and edge types ``(src_type, relation, dst_type)``) as one
homogeneous ``Graph`` over all nodes, its edges sorted by edge type.

Node type ``t``'s local id ``i`` is the global id ``node_offsets[t] + i``; edge type ``r``'s edges are the
global edges ``edge_offsets[r]:edge_offsets[r + 1]``, in the order the input gave them. ``etype`` (per edge)
and ``ntype`` (per node) carry the types, so every template and op reads the typed graph unchanged, and a
UDF may index a weight by the edge's type (``W[etype[e]]``). ``relation(edge_type)`` is one edge type's
bipartite view in local ids. Built from an ``edge_index_dict`` and ``num_nodes_dict`` (PyG), from PyG's
``HeteroData``, from DGL's ``{(src_type, rel, dst_type): (src_ids, dst_ids)}`` dicts, or from a homogeneous
``edge_index`` with an edge type per edge (as PyG's ``RGCNConv`` takes it). PyG and DGL are never imported:
their objects are read by their attributes.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any

import torch

from . import interop
from .graph import Graph

EdgeType = tuple[str, str, str]


def _as_tensor(values: Any) -> torch.Tensor:
    """``values`` as a tensor; an empty list or array (``[]``, which torch reads as float32) as int64 ids, as DGL
    reads it."""
    tensor = torch.as_tensor(values)
    if not isinstance(values, torch.Tensor) and tensor.numel() == 0:
        return tensor.to(torch.int64)
    return tensor


def _ids(values: Any, what: str) -> torch.Tensor:
    """A 1-D int64 tensor of ids (not the caller's tensor: a fresh copy or a view never written)."""
    tensor = _as_tensor(values)
    if tensor.dtype == torch.bool or tensor.is_floating_point() or tensor.is_complex():
        raise TypeError(f"{what}: expected integer ids, got dtype {tensor.dtype}")
    if tensor.dim() != 1:
        raise ValueError(f"{what}: expected a 1-D tensor of ids, got shape {tuple(tensor.shape)}")
    return tensor.to(torch.int64)


def _count(value: Any, what: str) -> int:
    """A count given as a Python or NumPy integer or a 0-d integer tensor (not a bool)."""
    integer_tensor = (
        isinstance(value, torch.Tensor)
        and value.dim() == 0
        and not (value.is_floating_point() or value.is_complex() or value.dtype == torch.bool)
    )
    if isinstance(value, bool) or not (isinstance(value, numbers.Integral) or integer_tensor):
        raise TypeError(f"{what}: expected a non-negative int, got {value!r}")
    if int(value) < 0:
        raise ValueError(f"{what}: expected a non-negative int, got {int(value)}")
    return int(value)


def _edge_type(key: Any, what: str) -> EdgeType:
    if not (isinstance(key, tuple) and len(key) == 3 and all(isinstance(k, str) for k in key)):
        raise TypeError(f"{what}: edge types are (src_type, relation, dst_type) string triples, got {key!r}")
    return key


def canonical_edge_type(edge_types: tuple[EdgeType, ...], edge_type: EdgeType | str) -> EdgeType:
    """The canonical ``(src_type, relation, dst_type)`` among ``edge_types`` of ``edge_type``, which may be a
    relation name alone where one edge type has it."""
    if isinstance(edge_type, str):
        found = [et for et in edge_types if et[1] == edge_type]
        if len(found) != 1:
            what = "no edge type" if not found else f"{len(found)} edge types ({found})"
            raise KeyError(f"edge_type: {what} with the relation {edge_type!r}")
        return found[0]
    if edge_type not in edge_types:
        raise KeyError(f"edge_type: unknown edge type {edge_type!r} (edge types: {list(edge_types)})")
    return edge_type


class HeteroGraph:
    """A typed graph over one homogeneous ``Graph`` (``graph``) whose edges are sorted by edge type.

    ``edges`` maps each edge type ``(src_type, relation, dst_type)`` to its edges in local ids: a (2, E_r)
    ``edge_index`` (PyG) or a pair ``(src_ids, dst_ids)`` (DGL). ``num_nodes_dict`` gives each node type's
    count (node types without edges too); where it is None, each type's count is its largest id + 1.
    Node types keep ``num_nodes_dict``'s order (else their order of appearance), edge types ``edges``'
    order. Empty edge types, isolated nodes, duplicate edges and self loops are kept as given.
    """

    def __init__(self, edges: Mapping[Any, Any], num_nodes_dict: Mapping[str, Any] | None = None) -> None:
        if not isinstance(edges, Mapping):
            raise TypeError(f"edges: expected a dict of edge type -> edges, got {type(edges).__name__}")
        if num_nodes_dict is not None and not isinstance(num_nodes_dict, Mapping):
            raise TypeError(f"num_nodes_dict: expected a dict of node type -> count, got {type(num_nodes_dict)}")
        pairs: dict[EdgeType, tuple[torch.Tensor, torch.Tensor]] = {}
        for key, value in edges.items():
            edge_type = _edge_type(key, "edges")
            pairs[edge_type] = self._pair(value, f"edges[{edge_type!r}]")
        devices = {t.device for pair in pairs.values() for t in pair}
        if len(devices) > 1:
            raise ValueError(f"edges: all edge types' ids must be on one device, got {sorted(map(str, devices))}")
        device = devices.pop() if devices else torch.device("cpu")
        counts: dict[str, int] = {}
        if num_nodes_dict is not None:
            for name, value in num_nodes_dict.items():
                if not isinstance(name, str):
                    raise TypeError(f"num_nodes_dict: node types are strings, got {name!r}")
                counts[name] = _count(value, f"num_nodes_dict[{name!r}]")
        for (src_type, rel, dst_type), (src, dst) in pairs.items():
            for role, node_type, ids in (("source", src_type, src), ("destination", dst_type, dst)):
                if num_nodes_dict is not None and node_type not in counts:
                    raise ValueError(
                        f"edges: edge type {(src_type, rel, dst_type)!r} names the {role} node type {node_type!r}, "
                        f"which num_nodes_dict does not have (node types: {list(counts)})"
                    )
                if num_nodes_dict is None:
                    largest = int(ids.max()) + 1 if ids.numel() else 0
                    counts[node_type] = max(counts.get(node_type, 0), largest)
        self.node_types: tuple[str, ...] = tuple(counts)
        self.edge_types: tuple[EdgeType, ...] = tuple(pairs)
        self.num_nodes_dict: dict[str, int] = dict(counts)
        sizes = torch.tensor([counts[t] for t in self.node_types], dtype=torch.int64)
        self.node_offsets = torch.cat([sizes.new_zeros(1), sizes.cumsum(0)]).to(device)
        self._node_offset = {t: int(o) for t, o in zip(self.node_types, self.node_offsets.tolist(), strict=False)}
        global_src, global_dst = [], []
        for edge_type, (src, dst) in pairs.items():
            src_type, _, dst_type = edge_type
            for role, node_type, ids in (("source", src_type, src), ("destination", dst_type, dst)):
                if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= counts[node_type]):
                    bad = int(ids.min()) if int(ids.min()) < 0 else int(ids.max())
                    raise ValueError(
                        f"edges[{edge_type!r}]: {role} id {bad} out of range for node type {node_type!r} "
                        f"of {counts[node_type]} nodes"
                    )
            global_src.append(src + self._node_offset[src_type])
            global_dst.append(dst + self._node_offset[dst_type])
        edge_sizes = torch.tensor([src.numel() for src, _ in pairs.values()], dtype=torch.int64)
        self.edge_offsets = torch.cat([edge_sizes.new_zeros(1), edge_sizes.cumsum(0)]).to(device)
        empty = torch.zeros(0, dtype=torch.int64, device=device)
        src_all = torch.cat(global_src) if global_src else empty
        dst_all = torch.cat(global_dst) if global_dst else empty
        self.num_nodes = int(sizes.sum())
        self.graph = Graph(src_all, dst_all, self.num_nodes)
        self.etype = torch.repeat_interleave(torch.arange(len(pairs), device=device), edge_sizes.to(device))
        self.ntype = torch.repeat_interleave(torch.arange(len(counts), device=device), sizes.to(device))
        self.perm = torch.arange(src_all.numel(), device=device)
        self._relations: dict[EdgeType, Graph] = {}

    @staticmethod
    def _pair(value: Any, what: str) -> tuple[torch.Tensor, torch.Tensor]:
        """(src, dst) ids from a (2, E) edge_index or a (src, dst) pair."""
        if isinstance(value, (tuple, list)):
            if len(value) != 2:
                raise ValueError(f"{what}: expected a (src_ids, dst_ids) pair, got {len(value)} items")
            src, dst = _ids(value[0], f"{what} src_ids"), _ids(value[1], f"{what} dst_ids")
        else:
            index = _as_tensor(value)
            if index.dim() != 2 or index.shape[0] != 2:
                raise ValueError(f"{what}: expected an edge_index of shape (2, E), got {tuple(index.shape)}")
            src, dst = _ids(index[0], what), _ids(index[1], what)
        if src.shape != dst.shape:
            raise ValueError(f"{what}: src_ids and dst_ids differ in length ({src.numel()} and {dst.numel()})")
        if src.device != dst.device:
            raise ValueError(f"{what}: src_ids on {src.device} and dst_ids on {dst.device}")
        return src, dst

    # ---- constructors -------------------------------------------------------------------------
    @classmethod
    def from_pyg(cls, data: Any) -> HeteroGraph:
        """From PyG's ``HeteroData``: each edge type's ``edge_index``, or its sparse ``adj_t`` (``A[dst, src]``, as
        PyG's ``ToSparseTensor`` writes it) or ``adj`` (``A[src, dst]``), the first of them PyG's sampler reads, its
        edges in the stored order; and ``num_nodes_dict`` (node and edge type order kept)."""
        if not all(hasattr(data, name) for name in ("node_types", "edge_types", "metadata")):
            raise TypeError(f"data: expected a PyG HeteroData, got {type(data).__name__}")
        counts = {}
        for node_type in data.node_types:
            count = data[node_type].num_nodes
            if count is None:
                raise ValueError(f"data: node type {node_type!r} has no num_nodes and no features to count")
            counts[node_type] = count
        edges = {}
        for edge_type in data.edge_types:
            if interop.pyg_edge_key(data[edge_type]) is None:
                continue
            what = f"data[{edge_type!r}]"
            src, dst, _, sizes = interop.pyg_edges(data[edge_type], what)
            expected = tuple(counts.get(t) for t in (edge_type[0], edge_type[2]))
            if sizes is not None and sizes != expected:
                key = interop.pyg_edge_key(data[edge_type])
                shape = sizes[::-1] if key == "adj_t" else sizes
                raise ValueError(
                    f"{what}.{key}: shape {shape} does not match the node types' counts "
                    f"({'destinations x sources' if key == 'adj_t' else 'sources x destinations'}: "
                    f"{expected[::-1] if key == 'adj_t' else expected})"
                )
            edges[edge_type] = (src, dst)
        return cls(edges, counts)

    @classmethod
    def from_dgl(cls, data_dict: Mapping[Any, Any], num_nodes_dict: Mapping[str, Any] | None = None) -> HeteroGraph:
        """From DGL's ``heterograph`` arguments, ``{(src_type, rel, dst_type): (src_ids, dst_ids)}`` and the
        node counts (DGL infers a missing count as the largest id + 1, as here), or from a DGL graph."""
        if hasattr(data_dict, "canonical_etypes") and hasattr(data_dict, "num_nodes"):
            graph = data_dict
            edges = {et: graph.edges(etype=et, order="eid") for et in graph.canonical_etypes}
            return cls(edges, {t: graph.num_nodes(t) for t in graph.ntypes})
        return cls(data_dict, num_nodes_dict)

    @classmethod
    def from_typed_edges(
        cls,
        edge_index: Any,
        edge_type: Any,
        num_nodes: int,
        num_relations: int | None = None,
    ) -> HeteroGraph:
        """From one homogeneous ``edge_index`` (2, E) of ``num_nodes`` nodes with a relation id per edge (PyG's
        ``RGCNConv`` input): one node type ``"node"``, edge types ``("node", str(r), "node")`` for
        ``r < num_relations`` (default: the largest id + 1). The edges are sorted by relation, stably;
        ``perm[k]`` is the input edge at sorted position ``k``."""
        index = torch.as_tensor(edge_index)
        if index.dim() != 2 or index.shape[0] != 2:
            raise ValueError(f"edge_index: expected shape (2, E), got {tuple(index.shape)}")
        types = _ids(edge_type, "edge_type").to(index.device)
        if types.numel() != index.shape[1]:
            raise ValueError(f"edge_type: expected {index.shape[1]} entries (one per edge), got {types.numel()}")
        largest = int(types.max()) + 1 if types.numel() else 0
        count = largest if num_relations is None else _count(num_relations, "num_relations")
        if types.numel() and (int(types.min()) < 0 or largest > count):
            raise ValueError(f"edge_type: ids must lie in [0, {count}), got [{int(types.min())}, {largest - 1}]")
        perm = torch.sort(types, stable=True).indices
        sorted_index = index[:, perm]
        sizes = torch.bincount(types, minlength=count).tolist()
        parts = torch.split(sorted_index, sizes, dim=1)
        typed = {("node", str(r), "node"): part for r, part in enumerate(parts)}
        hg = cls(typed, {"node": _count(num_nodes, "num_nodes")})
        hg.perm = perm
        return hg

    # ---- structure ----------------------------------------------------------------------------
    @property
    def num_edges(self) -> int:
        """All edge types' edges."""
        return self.graph.num_edges

    @property
    def num_relations(self) -> int:
        """How many edge types."""
        return len(self.edge_types)

    @property
    def device(self) -> torch.device:
        """Where the edges live."""
        return self.graph.device

    def __repr__(self) -> str:
        return (
            f"HeteroGraph(num_nodes={self.num_nodes_dict}, num_edges="
            f"{ {et: self.num_edges_of(et) for et in self.edge_types} })"
        )

    def edge_type(self, edge_type: EdgeType | str) -> EdgeType:
        """The canonical ``(src_type, relation, dst_type)`` of ``edge_type`` (``canonical_edge_type``)."""
        return canonical_edge_type(self.edge_types, edge_type)

    def relation_id(self, edge_type: EdgeType | str) -> int:
        """The edge type's id: its index in ``edge_types`` and its value in ``etype``."""
        return self.edge_types.index(self.edge_type(edge_type))

    def node_type_id(self, node_type: str) -> int:
        """The node type's id: its index in ``node_types`` and its value in ``ntype``."""
        if node_type not in self._node_offset:
            raise KeyError(f"node_type: unknown node type {node_type!r} (node types: {list(self.node_types)})")
        return self.node_types.index(node_type)

    def node_offset(self, node_type: str) -> int:
        """Global id of ``node_type``'s local node 0."""
        return int(self.node_offsets[self.node_type_id(node_type)])

    def num_edges_of(self, edge_type: EdgeType | str) -> int:
        """How many edges the edge type has."""
        r = self.relation_id(edge_type)
        return int(self.edge_offsets[r + 1] - self.edge_offsets[r])

    def edge_slice(self, edge_type: EdgeType | str) -> slice:
        """The edge type's edges among ``graph``'s (sorted) edges."""
        r = self.relation_id(edge_type)
        return slice(int(self.edge_offsets[r]), int(self.edge_offsets[r + 1]))

    def relation(self, edge_type: EdgeType | str) -> Graph:
        """The edge type's edges as a ``Graph`` in local ids: bipartite (source type's count, destination
        type's count) where the two differ; built once."""
        key = self.edge_type(edge_type)
        if key not in self._relations:
            src_type, _, dst_type = key
            src, dst = self.graph.coo()
            part = self.edge_slice(key)
            sizes = (self.num_nodes_dict[src_type], self.num_nodes_dict[dst_type])
            self._relations[key] = Graph(
                src[part] - self._node_offset[src_type], dst[part] - self._node_offset[dst_type], sizes
            )
        return self._relations[key]

    def to_edge_index_dict(self) -> dict[EdgeType, torch.Tensor]:
        """Each edge type's (2, E_r) ``edge_index`` in local ids, in the input's edge order."""
        return {et: torch.stack(self.relation(et).coo()) for et in self.edge_types}

    # ---- features -----------------------------------------------------------------------------
    def stack(self, features: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """One (num_nodes, ...) tensor from a feature tensor per node type (rows in global id order)."""
        if not isinstance(features, Mapping):
            raise TypeError(f"features: expected a dict of node type -> tensor, got {type(features).__name__}")
        unknown = [t for t in features if t not in self._node_offset]
        if unknown:
            raise KeyError(f"features: unknown node type(s) {unknown} (node types: {list(self.node_types)})")
        missing = [t for t in self.node_types if t not in features]
        if missing:
            raise KeyError(f"features: no tensor for node type(s) {missing}; every node type needs one")
        parts = []
        for node_type in self.node_types:
            x = features[node_type]
            if not isinstance(x, torch.Tensor):
                raise TypeError(f"features[{node_type!r}]: expected a tensor, got {type(x).__name__}")
            if x.dim() < 1 or x.shape[0] != self.num_nodes_dict[node_type]:
                raise ValueError(
                    f"features[{node_type!r}]: expected {self.num_nodes_dict[node_type]} rows, got shape "
                    f"{tuple(x.shape)}"
                )
            parts.append(x)
        shapes = {tuple(x.shape[1:]) for x in parts}
        if len(shapes) > 1:
            raise ValueError(f"features: node types' feature shapes differ ({sorted(shapes)}); project them first")
        return torch.cat(parts)

    def split(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """A (num_nodes, ...) tensor as one view per node type (``stack``'s inverse)."""
        if not isinstance(x, torch.Tensor) or x.dim() < 1 or x.shape[0] != self.num_nodes:
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"x: expected a tensor of {self.num_nodes} rows (all node types), got {shape}")
        parts = torch.split(x, [self.num_nodes_dict[t] for t in self.node_types])
        return dict(zip(self.node_types, parts, strict=True))

    def edge_split(self, values: torch.Tensor) -> dict[EdgeType, torch.Tensor]:
        """Per-edge values (rows in ``graph``'s sorted edge order) as one view per edge type."""
        if not isinstance(values, torch.Tensor) or values.dim() < 1 or values.shape[0] != self.num_edges:
            shape = tuple(values.shape) if isinstance(values, torch.Tensor) else type(values).__name__
            raise ValueError(f"values: expected a tensor of {self.num_edges} rows (all edges), got {shape}")
        sizes = (self.edge_offsets[1:] - self.edge_offsets[:-1]).tolist()
        return dict(zip(self.edge_types, torch.split(values, sizes), strict=True))

    def to_homogeneous(
        self, features: Mapping[str, torch.Tensor] | None = None
    ) -> tuple[Graph, torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """(graph, ntype, etype, features stacked or None): the homogeneous view, as DGL's ``to_homogeneous``
        and PyG's ``HeteroData.to_homogeneous`` give it."""
        return self.graph, self.ntype, self.etype, None if features is None else self.stack(features)


def with_reverse_edges(edges: Mapping[EdgeType, torch.Tensor]) -> dict[EdgeType, torch.Tensor]:
    """Every edge type's (2, E) ``edge_index`` and its reverse, ``(dst, "rev_" + rel, src)``, as PyG's
    ``ToUndirected`` adds them to a typed graph (so every node type receives messages)."""
    out = dict(edges)
    for (src_type, rel, dst_type), index in edges.items():
        out[(dst_type, f"rev_{rel}", src_type)] = index.flip(0)
    return out
